"""Random small stateful models through ``simulate`` on every backend, against stock
modeci-mdf's own loop (one subprocess without mdf_loops for all of them).

The models are those the type inference is checked on (``probe_graphs.py``): chains of
one to three nodes of counters, time derivatives, conditions, whole-number float
results, weighted edges, ports with defaults, lists and values wrapped in
``numpy.exp``, ``and`` and ``or``. An edge into a port with a ``default_value`` does not
order its nodes in modeci-mdf, so stock's answer there changes from one process to the
next; the oracle runs each model with those defaults removed (the order the time loop
runs: docs/timeloops.md), and the time loop runs the model as drawn.

Each backend either refuses a model with an :class:`~mdf_loops.MdfLoopsError` or gives
stock's numbers: exactly on ``python`` (dtypes too) and ``scheduler`` (which records
float64 where stock makes a whole-number float an int), within 1e-9 on
``onnxruntime``. Enough of them must run for the comparison to mean something.
"""

from __future__ import annotations

import copy
import logging

import numpy as np
import pytest
from conftest import needs_input_port_fields
from modeci_mdf.mdf import Model
from probe_graphs import random_array_graphs, random_scalar_graphs
from stock_batch import StockJob, output_refs, stock_batch

import mdf_loops

pytestmark = needs_input_port_fields  # the models' ports have default values

DT, STEPS = 0.1, 6


def _models() -> dict[str, Model]:
    graphs = [*random_scalar_graphs(20261127, 24), *random_array_graphs(20261128, 24)]
    return {where: Model(id=graph.id, graphs=[graph]) for where, graph in graphs}


def _sender_first(model: Model) -> Model:
    """``model`` without the default values of the ports an edge feeds."""
    model = copy.deepcopy(model)
    graph = model.graphs[0]
    fed = {(e.receiver, e.receiver_port) for e in graph.edges}
    for node in graph.nodes:
        for port in node.input_ports:
            if (node.id, port.id) in fed:
                port.default_value = None
    return model


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[Model, dict]]:
    """Each random model and stock's traces of it (or ``{"__error__": ...}``)."""
    models = _models()
    jobs = {w: StockJob(_sender_first(m), DT, STEPS, output_refs(m)) for w, m in models.items()}
    stock = stock_batch(jobs, tmp_path_factory.mktemp("random_models"))
    return {w: (models[w], stock[w]) for w in models}


#: the least share of the models stock runs that each backend must run (not refuse)
RUN_AT_LEAST = {"python": 0.8, "scheduler": 0.8, "onnxruntime": 0.3}


@pytest.mark.parametrize("backend", sorted(RUN_AT_LEAST))
def test_random_models_equal_stock_or_are_refused(backend, runs, caplog):
    caplog.set_level(logging.ERROR)  # the WARNINGs of unordered edges are expected here
    ran = compared = 0
    for where, (model, stock) in runs.items():
        if "__error__" in stock:
            continue
        compared += 1
        refs = output_refs(model)
        try:
            traces = mdf_loops.simulate(copy.deepcopy(model), dt=DT, steps=STEPS, record=refs,
                                        backend=backend)
        except mdf_loops.MdfLoopsError:
            continue  # refused, by name
        ran += 1
        for ref in refs:
            ours, theirs = traces[ref], stock[ref]
            assert ours.shape == theirs.shape, (where, ref, ours.shape, theirs.shape)
            if backend == "onnxruntime":
                np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-300,
                                           err_msg=f"{where} {ref}")
                continue
            if backend == "python":
                assert ours.dtype == theirs.dtype, (where, ref, ours.dtype, theirs.dtype)
            np.testing.assert_array_equal(ours, theirs, err_msg=f"{where} {ref} on {backend}")
    assert compared >= 40
    assert ran >= RUN_AT_LEAST[backend] * compared, (backend, ran, compared)

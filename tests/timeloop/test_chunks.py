"""mdf_loops/timeloop/chunks.py: a long onnxruntime simulation in chunks of steps.

Oracles: a numpy loop of the same equations (FitzHugh-Nagumo), and stock modeci-mdf's
loop in a subprocess without mdf_loops (a model with an input series and a node
condition); the chunked run also equals the one-call run.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_input_port_fields
from modeci_mdf.mdf import (
    Condition,
    ConditionSet,
    Graph,
    InputPort,
    Model,
    Node,
    OutputPort,
    Parameter,
)
from stock_batch import StockJob, stock_run

import mdf_loops
from mdf_loops.timeloop import chunks

pytestmark = needs_input_port_fields  # time loops build ports with default_value/reduce

ROOT = Path(__file__).resolve().parents[2]
FN = ROOT / "examples" / "timeloops" / "fitzhugh_nagumo.json"
ES = "TimeScale.ENVIRONMENT_SEQUENCE"


def fhn_numpy(steps: int, dt: float) -> np.ndarray:
    v, w, vs = -1.0, 1.0, np.empty(steps)
    for k in range(steps):
        if k:
            v = v + (v - v**3 / 3 - w + 0.5) * dt
            w = w + ((v + 0.7 - 0.8 * w) / 12.5) * dt
        vs[k] = v
    return vs


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(chunks, "CHUNK", 7)


def test_chunks_equal_one_call_and_numpy_and_report_progress(small_chunks):
    loop = mdf_loops.to_time_loop(FN, dt=0.05, steps=30, record=["fn.V"])
    before = json.dumps(loop.to_dict(), sort_keys=True, default=str)
    seen = []
    chunked = mdf_loops.simulate(loop, backend="onnxruntime", progress=lambda *a: seen.append(a))
    assert seen == [(0, 30), (7, 30), (14, 30), (21, 30), (28, 30)]
    np.testing.assert_allclose(chunked["fn.V"], fhn_numpy(30, 0.05), rtol=1e-9, atol=0)
    np.testing.assert_array_equal(chunked.time, np.arange(30) * 0.05)
    chunks.CHUNK = 1 << 15
    whole = mdf_loops.simulate(loop, backend="onnxruntime")
    np.testing.assert_array_equal(chunked["fn.V"], whole["fn.V"])
    assert json.dumps(loop.to_dict(), sort_keys=True, default=str) == before  # not changed


def test_a_value_that_blows_up_in_a_later_chunk_is_named_with_its_step(small_chunks, caplog):
    loop = mdf_loops.to_time_loop(FN, dt=2.5, steps=20, record=["fn.V"])
    with caplog.at_level(logging.WARNING, logger="mdf_loops.timeloop"):
        traces = mdf_loops.simulate(loop, backend="onnxruntime")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "node 'fn' port 'V' becomes infinite at step 7" in warnings[0]
    assert np.isinf(traces["fn.V"][7]) and np.isfinite(traces["fn.V"][6])


def _series_model() -> Model:
    """A counter, and a leaky integrator of an input series stepped every second pass."""
    counter = Node(id="A")
    counter.parameters.append(Parameter(id="count", value="count + 1", default_initial_value=0))
    counter.output_ports.append(OutputPort(id="count_out", value="count"))
    leaky = Node(id="L")
    leaky.input_ports.append(InputPort(id="drive"))
    leaky.parameters.append(
        Parameter(id="x", default_initial_value=0.0, time_derivative="-x + drive")
    )
    leaky.output_ports.append(OutputPort(id="x_out", value="x"))
    conditions = ConditionSet(
        node_specific={"L": Condition("EveryNPasses", n=2, time_scale=ES)},
        termination={"environment_state_update": Condition("AfterNPasses", n=1)},
    )
    graph = Graph(id="driven", nodes=[counter, leaky], conditions=conditions)
    return Model(id="driven", graphs=[graph])


def test_a_driven_model_with_a_node_condition_equals_stock(small_chunks, tmp_path):
    path = tmp_path / "driven.json"
    _series_model().to_json_file(str(path))
    steps, dt, record = 40, 0.1, ["A.count", "L.x"]
    drive = np.sin(np.arange(steps) * 0.3)
    stock = stock_run(StockJob(path, dt, steps, record), tmp_path, {"drive": drive})
    loop = mdf_loops.to_time_loop(path, dt=dt, steps=steps, record=record, inputs={"drive": drive})
    assert chunks.chunked_variant(loop) is not None
    traces = mdf_loops.simulate(loop, backend="onnxruntime")
    for ref in record:
        np.testing.assert_allclose(traces[ref], stock[ref], rtol=1e-9, atol=0, err_msg=ref)
    assert traces["A.count"].dtype == np.int64


def test_a_loop_that_can_end_early_runs_as_one_call(small_chunks):
    counters = ROOT / "examples" / "timeloops" / "counters.json"
    loop = mdf_loops.to_time_loop(counters, dt=1.0, steps=40, record=["B.total"])
    assert chunks.chunked_variant(loop) is None  # ended by AfterNCalls('B', 15)
    seen = []
    traces = mdf_loops.simulate(loop, backend="onnxruntime", progress=lambda *a: seen.append(a))
    assert seen == [] and traces.steps == len(mdf_loops.simulate(loop, backend="python").time)


def test_short_runs_do_not_build_the_variant(monkeypatch):
    def refuse(model):
        raise AssertionError("a run of at most CHUNK steps built the chunked variant")

    monkeypatch.setattr(chunks, "chunked_variant", refuse)
    loop = mdf_loops.to_time_loop(FN, dt=0.05, steps=50, record=["fn.V"])
    traces = mdf_loops.simulate(loop, backend="onnxruntime")
    np.testing.assert_allclose(traces["fn.V"], fhn_numpy(50, 0.05), rtol=1e-9, atol=0)

"""The array proof of a model that is not trusted, on the form of modeci-mdf's network
models (ModECI/MDF's ``RNN/IAF_net2.json``: list-valued parameters, array states with
conditions, a ``MatMul`` of spikes): a numeric array of a known shape, met by numbers and
arrays of known shapes, runs its operators inline, its size checked once before the loop.

Each model runs on the python backend as a file from disk does (not trusted) and is
checked against stock modeci-mdf's loop in a subprocess, or a numpy loop here; a carried
array of another shape, or a size limit the arrays exceed, runs every operator guarded.
"""

from __future__ import annotations

import ast

import numpy as np
import pytest
from conftest import needs_input_port_fields
from modeci_mdf.mdf import (
    Edge,
    Graph,
    InputPort,
    Model,
    Node,
    OutputPort,
    Parameter,
    ParameterCondition,
)
from stock_batch import every_output_on_stock, output_refs

import mdf_loops
from mdf_loops.backends.python.compiled import time_loop_source
from mdf_loops.backends.python.untrusted import float_kinds, guarded_time_loop
from mdf_loops.errors import SizeLimitError
from mdf_loops.ops.common import limits
from mdf_loops.safety.proven_kinds import ArrayKind

pytestmark = needs_input_port_fields

DT, STEPS, N = 0.01, 60, 4


def _condition(cid: str, test: str, value: str) -> ParameterCondition:
    return ParameterCondition(id=cid, test=test, value=value)


def iaf_network() -> Model:
    """IAF_net2's form, four cells: a stepped input, integrate-and-fire cells whose
    spikes a weight matrix carries to a synaptic current."""
    source = Node(id="input", parameters=[
        Parameter(id="time", default_initial_value=0, time_derivative="1"),
        Parameter(id="start", value=[0.1, 0.2, 0.3, 0.4]),
        Parameter(id="amplitude", value=15),
        Parameter(id="level", value=0, conditions=[
            _condition("on", "time > start", "amplitude"),
            _condition("off", "time > start + 0.2", "amplitude*0")])],
        output_ports=[OutputPort(id="current", value="level")])
    cells = Node(id="cells", input_ports=[InputPort(id="I", shape=(N,))], parameters=[
        Parameter(id="v0", value=[-70] * N), Parameter(id="erev", value=[-70] * N),
        Parameter(id="tau", value=10.0), Parameter(id="thresh", value=[-69.5] * N),
        Parameter(id="spiking", default_initial_value="0", conditions=[
            _condition("is", "v >= thresh", "1"), _condition("not", "v < thresh", "0")]),
        Parameter(id="v", default_initial_value="v0",
                  time_derivative="-1 * (v-erev)/tau + I",
                  conditions=[_condition("reset", "v > thresh", "erev")])],
        output_ports=[OutputPort(id="v_out", value="v"),
                      OutputPort(id="spikes", value="spiking")])
    weights = (np.arange(N * N, dtype=float).reshape(N, N) / 10).tolist()
    synapse = Node(id="synapse", input_ports=[InputPort(id="spike_in", shape=(N,))], parameters=[
        Parameter(id="weights", value=weights),
        Parameter(id="weighted", function="MatMul", args={"A": "weights", "B": "spike_in"}),
        Parameter(id="syn_i", default_initial_value="0", time_derivative="-1 * syn_i",
                  conditions=[_condition("spike", "spike_in > 0", "weighted")])],
        output_ports=[OutputPort(id="current", value="syn_i")])
    edges = [Edge(id="drive", sender="input", sender_port="current", receiver="cells",
                  receiver_port="I"),
             Edge(id="spike", sender="cells", sender_port="spikes", receiver="synapse",
                  receiver_port="spike_in")]
    return Model(id="iaf_arrays", graphs=[Graph(id="iaf_arrays_graph",
                                                nodes=[source, cells, synapse], edges=edges)])


def leaky_cells(n: int = 3) -> Model:
    """Leaky integrators of list-valued parameters: v' = (I - v) / tau."""
    node = Node(id="leaky", parameters=[
        Parameter(id="I", value=[1.0 + k for k in range(n)]),
        Parameter(id="tau", value=[0.5 * (k + 1) for k in range(n)]),
        Parameter(id="v", default_initial_value=[0.0] * n, time_derivative="(I - v) / tau")],
        output_ports=[OutputPort(id="v_out", value="v")])
    return Model(id="leaky", graphs=[Graph(id="leaky_graph", nodes=[node])])


def _numpy_leaky(n: int, steps: int) -> np.ndarray:
    """The oracle: stock's loop for :func:`leaky_cells` written in numpy (the first step
    gives v its initial value, then Euler steps)."""
    current, tau = 1.0 + np.arange(n), 0.5 * (np.arange(n) + 1)
    v, trace = np.zeros(n), []
    for k in range(steps):
        if k:
            v = v + ((current - v) / tau) * DT
        trace.append(v)
    return np.array(trace)


MODELS = {"iaf_network": iaf_network, "leaky_cells": leaky_cells}


@pytest.fixture(scope="module")
def stock(tmp_path_factory):
    return every_output_on_stock(MODELS, DT, STEPS, tmp_path_factory.mktemp("array_proof"))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_an_array_model_not_trusted_equals_stock(name, stock):
    model = MODELS[name]()
    traces = mdf_loops.simulate(model, dt=DT, steps=STEPS, record=output_refs(model),
                                backend="python")
    for ref in output_refs(model):
        np.testing.assert_array_equal(traces[ref], stock[name][ref], err_msg=ref)


def test_the_leaky_cells_equal_a_numpy_loop():
    traces = mdf_loops.simulate(leaky_cells(), dt=DT, steps=STEPS, record=["leaky.v_out"],
                                backend="python")
    np.testing.assert_array_equal(traces["leaky.v_out"], _numpy_leaky(3, STEPS))


def test_the_proof_assumes_the_carried_arrays_of_their_initial_shapes():
    model = iaf_network()
    code = time_loop_source(mdf_loops.to_time_loop(model, dt=DT, steps=STEPS,
                                                   record=output_refs(model)))
    _, carried = float_kinds(code.tree, code.n_carried, code.initial_shapes)
    named = {code.initial[k].removeprefix("init__"): kind for k, kind in carried.items()}
    assert named["cells__v"] == ArrayKind((N,))
    assert named["synapse__syn_i"] == ArrayKind((N,))  # through the MatMul of the spikes
    assert named["input__time"] == "number"  # 0, then floats


def _leaky_loop(n: int):
    code = time_loop_source(mdf_loops.to_time_loop(leaky_cells(n), dt=DT, steps=STEPS,
                                                   record=["leaky.v_out"]))
    return code, guarded_time_loop(code)


def test_a_carried_array_of_another_shape_runs_guarded_and_right():
    code, loop = _leaky_loop(3)  # proven for arrays of 3
    assert code.initial_shapes == ((3,),)
    # five cells' values given to the loop made for three: the constants have three
    # elements, so numpy cannot broadcast the five, and the guarded copy says so
    with pytest.raises(ValueError, match="broadcast"):
        loop.run(1, 5, True, np.zeros(5), *loop.new_scans(5))
    # a carried array of the shape, but of integers: proven (a numeric array) and right
    _, carried, _ = loop.run(1, 4, True, np.zeros(3, dtype=np.int64), *loop.new_scans(4))
    np.testing.assert_array_equal(carried[0], _numpy_leaky(3, 4)[-1])


def test_proven_arrays_over_the_size_limit_are_refused_as_when_guarded():
    # five values that decay, no constant array: every operator of the step is proven
    node = Node(id="decay", parameters=[
        Parameter(id="v", default_initial_value=[1.0] * 5, time_derivative="-v")],
        output_ports=[OutputPort(id="v_out", value="v")])
    model = Model(id="decay", graphs=[Graph(id="decay_graph", nodes=[node])])
    code = time_loop_source(mdf_loops.to_time_loop(model, dt=DT, steps=STEPS,
                                                   record=["decay.v_out"]))
    loop = guarded_time_loop(code)
    _, carried, _ = loop.run(1, 3, True, np.ones(5), *loop.new_scans(3))
    np.testing.assert_array_equal(carried[0], np.ones(5) * (1 - DT) * (1 - DT))
    with limits(max_elements=4), pytest.raises(SizeLimitError, match="max_elements"):
        loop.run(1, 3, True, np.ones(5), *loop.new_scans(3))


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("numpy.array([-1.5, True, 2])", ArrayKind((3,))),
        ("numpy.array([[1, -2, 3], [4, 5, 6]])", ArrayKind((2, 3))),
        ("numpy.array([[1, 2], [3, 4]]) @ numpy.array([1, 2])", ArrayKind((2,))),
        ("numpy.array([1, 2]) @ numpy.array([[1, 2, 3], [4, 5, 6]])", ArrayKind((3,))),
        ("numpy.array([1, 2]) * 0.5 - numpy.array([[1], [2], [3]])", ArrayKind((3, 2))),
        ("-numpy.array([1.0, 2.0]) < 3", ArrayKind((2,))),
        ("_where(numpy.array([1, 2]) > 1, 0.5, numpy.array([[1], [2]]))", ArrayKind((2, 2))),
        ("numpy.array([[1, 2], [3]])", None),  # ragged: numpy refuses it
        ("numpy.array([2 ** 63])", None),  # no int64
        ("numpy.array([9223372036854775808])", None),
        ("numpy.array(['a', 'b'])", None),
        ("numpy.array([1, 2]) + numpy.array([1, 2, 3])", None),  # no broadcast
        ("numpy.array([1, 2]) @ numpy.array([1, 2])", None),  # a 0-d array
        ("numpy.array([1, 2]) ** 2", None),  # a power: guarded
        ("numpy.array([1, 2]) + (1 < 2)", None),  # a bool beside: guarded
    ],
)
def test_the_kinds_of_array_expressions(expression, expected):
    tree = ast.parse(f"def time_loop(start, stop, cond):\n    x = {expression}\n")
    kinds, _ = float_kinds(tree, 0)
    value = tree.body[0].body[0].value  # type: ignore[attr-defined]
    assert kinds[id(value)] == expected
    if expected is not None:  # the oracle: numpy's own shape
        scope = {"numpy": np, "_where": np.where}
        assert np.shape(eval(expression, scope)) == expected.shape  # noqa: S307

"""Iterations of all loops of a run together, counted inside onnxruntime
(mdf_loops/backends/onnxruntime/totals.py): the same count as the scheduler's, and a
Loop of 10^6 iterations in a Scan of 10^5 steps stopped at max_total_iterations."""

from __future__ import annotations

import time

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as oh

import mdf_loops
from mdf_loops.errors import IterationLimitError


def _value(name: str, element: int, shape=()):
    return oh.make_tensor_value_info(name, element, list(shape) if shape is not None else None)


def _loop_in_scan(until: bool) -> mdf_loops.Model:
    """A Scan over ``xs`` whose every step runs a Loop of ``n`` iterations adding one to
    its state; with ``until``, the Loop also stops once the state reaches ``stop``."""
    nodes = [oh.make_node("Add", ["acc_in", "one"], ["acc_out"])]
    if until:
        nodes.append(oh.make_node("Less", ["acc_out", "stop"], ["c_out"]))
    else:
        nodes.append(oh.make_node("Identity", ["c_in"], ["c_out"]))
    loop_body = oh.make_graph(
        nodes, "loop_body",
        [_value("i", T.INT64), _value("c_in", T.BOOL), _value("acc_in", T.DOUBLE)],
        [_value("c_out", T.BOOL), _value("acc_out", T.DOUBLE)],
        initializer=[oh.make_tensor("one", T.DOUBLE, [], [1.0])])
    scan_body = oh.make_graph(
        [oh.make_node("Loop", ["n", "go", "zero"], ["count"], body=loop_body),
         oh.make_node("Add", ["s_in", "count"], ["s_out"]),
         oh.make_node("Identity", ["count"], ["y"])],
        "scan_body", [_value("s_in", T.DOUBLE), _value("x", T.DOUBLE)],
        [_value("s_out", T.DOUBLE), _value("y", T.DOUBLE)],
        initializer=[oh.make_tensor("zero", T.DOUBLE, [], [0.0]),
                     oh.make_tensor("go", T.BOOL, [], [True])])
    graph = oh.make_graph(
        [oh.make_node("Scan", ["s0", "xs"], ["s", "ys"], body=scan_body, num_scan_inputs=1)],
        "g", [_value("s0", T.DOUBLE), _value("xs", T.DOUBLE, [None]), _value("n", T.INT64),
              _value("stop", T.DOUBLE)],
        [_value("s", T.DOUBLE), _value("ys", T.DOUBLE, [None])])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    return mdf_loops.onnx_to_mdf(model)


def _inputs(steps: int, trips: int, stop: float = 1e300) -> dict:
    return {"s0": np.float64(0), "xs": np.zeros(steps), "n": np.int64(trips),
            "stop": np.float64(stop)}


@pytest.mark.parametrize("until", [False, True])
def test_the_total_is_the_scheduler_s_to_the_iteration(until):
    model = _loop_in_scan(until)
    # 6 steps of (1 + 5 inner iterations, or 1 + 3 with the condition): 36 or 24 in all
    inputs = _inputs(6, 5, stop=3.0)
    need = 6 * (1 + (3 if until else 5))
    expected = 6.0 * (3 if until else 5)  # numpy's count of what the loops add
    for backend in ("scheduler", "onnxruntime"):
        out = mdf_loops.run(model, inputs, backend=backend, max_total_iterations=need)
        assert float(out["s"]) == expected
        with pytest.raises(IterationLimitError, match="max_total_iterations"):
            mdf_loops.run(model, inputs, backend=backend, max_total_iterations=need - 1)


def test_a_million_iterations_in_each_of_a_hundred_thousand_steps_stop_at_the_total():
    model = _loop_in_scan(False)
    started = time.monotonic()
    with pytest.raises(IterationLimitError) as info:  # 10^11 iterations if unchecked
        with mdf_loops.safety.limits(max_total_iterations=10_000):
            mdf_loops.run(model, _inputs(10**5, 10**6), backend="onnxruntime")
    message = str(info.value)
    assert "node 'Scan_0'" in message and "max_total_iterations=10000" in message, message
    assert "onnxruntime backend" in message
    assert time.monotonic() - started < 60  # the Scan's own 10^5 steps, nothing more


def test_trusted_runs_are_not_counted():
    model = _loop_in_scan(False)
    with mdf_loops.safety.limits(max_total_iterations=10):
        out = mdf_loops.run(model, _inputs(3, 4), backend="onnxruntime", trusted=True)
    assert float(out["s"]) == 12.0

"""A limit passed inside a loop body on onnxruntime names which limit, which node and at
which iteration (mdf_loops/backends/onnxruntime/limit_codes.py, guard.py)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as oh

import mdf_loops
from mdf_loops.errors import IterationLimitError, SizeLimitError


def _value(name, element, shape=()):
    return oh.make_tensor_value_info(name, element, None if shape is None else list(shape))


def _doubling_in_a_loop() -> mdf_loops.Model:
    """An outer Loop of 3 trips whose body runs an inner Loop of ``n`` trips that doubles a
    carried vector each iteration (Concat of itself)."""
    inner = oh.make_graph(
        [oh.make_node("Concat", ["v_in", "v_in"], ["v_out"], axis=0),
         oh.make_node("Identity", ["c_in"], ["c_out"])],
        "inner_body", [_value("j", T.INT64), _value("c_in", T.BOOL),
                       _value("v_in", T.DOUBLE, [None])],
        [_value("c_out", T.BOOL), _value("v_out", T.DOUBLE, [None])])
    outer = oh.make_graph(
        [oh.make_node("Loop", ["n", "", "start"], ["grown"], body=inner, name="doubling"),
         oh.make_node("ReduceSum", ["grown"], ["total"], keepdims=0),
         oh.make_node("Add", ["s_in", "total"], ["s_out"]),
         oh.make_node("Identity", ["c_in"], ["c_out"])],
        "outer_body", [_value("i", T.INT64), _value("c_in", T.BOOL), _value("s_in", T.DOUBLE)],
        [_value("c_out", T.BOOL), _value("s_out", T.DOUBLE)])
    graph = oh.make_graph(
        [oh.make_node("Loop", ["trips", "", "s0"], ["s"], body=outer, name="trials")],
        "g", [_value("trips", T.INT64), _value("s0", T.DOUBLE), _value("n", T.INT64),
              _value("start", T.DOUBLE, [None])],
        [_value("s", T.DOUBLE)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    return mdf_loops.onnx_to_mdf(model)


def _inputs(n: int) -> dict:
    return {"trips": np.int64(3), "s0": np.float64(0), "n": np.int64(n),
            "start": np.ones(1)}


def test_a_value_grown_past_max_elements_in_a_body_names_the_node_and_iteration():
    model = _doubling_in_a_loop()
    # within the limits: 3 trials of 2**5 ones each (numpy's count); run first with the
    # default limits, so that onnxruntime's capped arena (memory.py, made once per process)
    # is not the one that stops the growth below
    out = mdf_loops.run(model, _inputs(5), backend="onnxruntime")
    assert float(out["s"]) == 3 * 2**5
    # numpy: the vector has 2**(j + 1) elements after iteration j: past 1000 at j = 9
    passed = next(j for j in range(64) if 2 ** (j + 1) > 1000)
    with pytest.raises(SizeLimitError) as info:
        mdf_loops.run(model, _inputs(40), backend="onnxruntime", max_elements=1000)
    assert str(info.value).startswith(
        f"node 'trials' > node 'doubling', iteration {passed}: a carried value grew past "
        "max_elements=1000 (onnxruntime backend)"), str(info.value)


def test_an_inner_loop_past_max_iterations_names_it_and_the_limit():
    model = _doubling_in_a_loop()
    with pytest.raises(IterationLimitError) as info:
        mdf_loops.run(model, _inputs(8), backend="onnxruntime", max_iterations=5)
    assert str(info.value).startswith(
        "node 'trials' > node 'doubling' asked for more than 5 iterations, the limit "
        "(max_iterations) (onnxruntime backend)"), str(info.value)

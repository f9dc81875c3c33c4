"""A Loop stops when its body's condition output is false, in every mode and on every path.

onnxscript compiles ``for i in range(n): ...; if big: break`` into ``Loop(n, "", ...)``
whose body returns ``Not(big)``; onnxruntime stops at the break, and so must mdf-loops
(docs/semantics.md, "The body's condition stops the loop in every mode").
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from onnx import helper as oh

import mdf_loops
from conftest import BOOL, FLOAT, INT64, assert_same, body_graph, onnx_model, ort_run, value_info


def _break_model():
    """``x = x0; for i in range(n): x = x + i; ys.append(x); if sum(x) > limit: break``."""
    body = body_graph(
        [oh.make_node("Cast", ["i"], ["i_float"], to=FLOAT),
         oh.make_node("Add", ["x", "i_float"], ["x_next"]),
         oh.make_node("ReduceSum", ["x_next"], ["total"], keepdims=0),
         oh.make_node("Greater", ["total", "limit"], ["big"]),
         oh.make_node("Not", ["big"], ["cond_out"]),
         oh.make_node("Identity", ["x_next"], ["y"])],
        [value_info("i", INT64, []), value_info("cond_in", BOOL, []), value_info("x", FLOAT, [2])],
        [value_info("cond_out", BOOL, []), value_info("x_next", FLOAT, [2]),
         value_info("y", FLOAT, [2])],
        name="break_body")
    node = oh.make_node("Loop", ["n", "", "x0"], ["x_final", "ys"], body=body, name="for_break")
    return onnx_model(
        [node],
        [value_info("n", INT64, []), value_info("x0", FLOAT, [2]), value_info("limit", FLOAT, [])],
        [value_info("x_final", FLOAT, [2]), value_info("ys", FLOAT, [None, 2])],
        opset=18)


def _expected(n, x0, limit):
    x, ys = x0.copy(), []
    for i in range(int(n)):
        x = x + np.float32(i)
        ys.append(x)
        if x.sum() > limit:
            break
    return {"x_final": x, "ys": np.array(ys, np.float32).reshape(-1, 2)}


FEEDS = {"n": np.array(50, np.int64), "x0": np.array([0.5, -1.0], np.float32),
         "limit": np.array(20.0, np.float32)}


def _check(results):
    expected = _expected(FEEDS["n"], FEEDS["x0"], FEEDS["limit"])
    assert 0 < len(expected["ys"]) < int(FEEDS["n"])  # the break happens: the oracle differs
    for name, value in expected.items():
        assert_same(results[name], value)


def test_onnxruntime_on_the_original_stops_at_the_break():
    _check(ort_run(_break_model(), FEEDS))


def test_scheduler_stops_at_the_break():
    _check(mdf_loops.run(mdf_loops.onnx_to_mdf(_break_model()), FEEDS, backend="scheduler"))


@pytest.mark.parametrize("trusted", [False, True], ids=["guarded", "trusted"])
def test_onnxruntime_backend_stops_at_the_break(trusted):
    model = mdf_loops.onnx_to_mdf(_break_model())
    _check(mdf_loops.run(model, FEEDS, backend="onnxruntime", trusted=trusted))


def test_auto_runs_on_onnxruntime_and_stops_at_the_break(caplog):
    model = mdf_loops.onnx_to_mdf(_break_model())
    with caplog.at_level(logging.INFO, logger="mdf_loops"):
        results = mdf_loops.run(model, FEEDS, backend="auto")
    assert "runs on the scheduler" not in caplog.text  # auto did not fall back
    _check(results)


def test_export_keeps_the_break():
    exported = mdf_loops.mdf_to_onnx(mdf_loops.onnx_to_mdf(_break_model()))
    _check(ort_run(exported, FEEDS))


def test_a_huge_trip_count_with_an_early_break_runs_within_the_limits():
    """The trip count only bounds the loop: asking for 10**12 iterations that break after a
    few is no limit violation, on the scheduler as in the guarded onnxruntime backend."""
    model = mdf_loops.onnx_to_mdf(_break_model())
    feeds = {**FEEDS, "n": np.array(10**12, np.int64)}
    for backend in ("scheduler", "onnxruntime"):
        results = mdf_loops.run(model, feeds, backend=backend, max_iterations=100)
        for name, value in _expected(50, FEEDS["x0"], FEEDS["limit"]).items():
            assert_same(results[name], value)


@pytest.mark.parametrize("backend", ["scheduler", "onnxruntime"])
def test_a_loop_that_does_not_break_still_hits_the_iteration_limit(backend):
    model = mdf_loops.onnx_to_mdf(_break_model())
    feeds = {**FEEDS, "n": np.array(10**12, np.int64), "limit": np.array(1e30, np.float32)}
    with pytest.raises(mdf_loops.errors.IterationLimitError, match="max_iterations"):
        mdf_loops.run(model, feeds, backend=backend, max_iterations=30)

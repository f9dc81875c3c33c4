"""JaxModel.runner (mdf_loops/backends/jax/compiled.py): a run for one form of inputs, which
falls back to JaxModel.run where it must. Oracles: numpy loops written here."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper as oh

jax = pytest.importorskip("jax")

import mdf_loops  # noqa: E402
from mdf_loops.backends.jax import compile as jax_compile  # noqa: E402
from mdf_loops.workloads import elman_rnn  # noqa: E402
from conftest import BOOL, FLOAT, INT64, body_graph, onnx_model, value_info  # noqa: E402


def _counting_loop():
    """x <- x + 1 while x + 1 < limit, every x recorded (a scan output of unknown length)."""
    body = body_graph(
        [oh.make_node("Add", ["x_in", "one"], ["x_out"]),
         oh.make_node("Less", ["x_out", "limit"], ["go_on"]),
         oh.make_node("Identity", ["x_out"], ["x_seen"])],
        [value_info("i", INT64, []), value_info("c", BOOL, []), value_info("x_in", FLOAT, [])],
        [value_info("go_on", BOOL, []), value_info("x_out", FLOAT, []),
         value_info("x_seen", FLOAT, [])])
    one = oh.make_node("Constant", [], ["one"], value_float=1.0)
    loop = oh.make_node("Loop", ["", "go", "x0"], ["x_final", "xs"], body=body)
    return onnx_model(
        [one, loop],
        [value_info("go", BOOL, []), value_info("x0", FLOAT, []), value_info("limit", FLOAT, [])],
        [value_info("x_final", FLOAT, []), value_info("xs", FLOAT, ["n"])])


def _inputs(limit):
    return {"go": np.array(True), "x0": np.array(0.0, np.float32),
            "limit": np.array(limit, np.float32)}


def test_a_loop_that_fills_its_buffer_grows_it_and_the_runner_still_answers():
    model = mdf_loops.onnx_to_mdf(_counting_loop())
    lowered = jax_compile(model, _inputs(3.0), limits=mdf_loops.safety.Limits())
    lowered.buffer_rows = 4
    run = lowered.runner(_inputs(3.0))
    for limit in (3.0, 30.0, 300.0, 30.0):  # 30 and 300 iterations: past 4 rows, then 32
        outputs = run(_inputs(limit))
        np.testing.assert_array_equal(outputs["xs"], np.arange(1, limit + 1, dtype=np.float32))
        assert outputs["x_final"] == np.float32(limit)
    assert lowered.buffer_rows == 2048  # 4 -> 32 (30 iterations) -> 256 -> 2048 (300)


def test_inputs_that_need_converting_or_constants_take_run():
    work = elman_rnn(5, 3, 4)
    model = mdf_loops.onnx_to_mdf(work.model)
    lowered = jax_compile(model, work.inputs)
    as_float64 = {name: value.astype(np.float64) for name, value in work.inputs.items()}
    assert lowered.runner(as_float64) == lowered.run
    assert lowered.runner({**work.inputs, "other": np.ones(2)}) == lowered.run
    run = lowered.runner(work.inputs)
    assert run != lowered.run
    for got, want in zip(run(work.inputs).values(), work.numpy_loop(work.inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    lowered.level = 2  # every input a constant: compiled again per value
    assert lowered.runner(work.inputs) == lowered.run


def test_a_loop_past_its_limit_raises_through_the_runner():
    model = mdf_loops.onnx_to_mdf(_counting_loop())
    lowered = jax_compile(model, _inputs(3.0), limits=mdf_loops.safety.Limits(max_iterations=10))
    run = lowered.runner(_inputs(3.0))
    assert run(_inputs(3.0))["x_final"] == np.float32(3.0)
    with pytest.raises(mdf_loops.errors.IterationLimitError, match="max_iterations=10"):
        run(_inputs(50.0))

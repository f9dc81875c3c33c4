"""JaxModel.runner (mdf_loops/backends/jax/compiled.py): a run for one form of inputs, which
falls back to JaxModel.run where it must, and run()'s runner around it (replayed calls: the
declared precision, outputs rebuilt, JAX's errors as ours). Oracles: numpy written here."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto
from onnx import helper as oh

jax = pytest.importorskip("jax")

import mdf_loops  # noqa: E402
from mdf_loops.backends.jax import compile as jax_compile  # noqa: E402
from mdf_loops.backends.jax import compiled  # noqa: E402
from mdf_loops.backends.jax.values import NeedsStatic  # noqa: E402
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


def _running_sum(elem_type):
    """s <- s + x over the rows of xs; every s recorded."""
    body = body_graph(
        [oh.make_node("Add", ["s", "x"], ["s_out"]), oh.make_node("Identity", ["s_out"], ["y"])],
        [value_info("s", elem_type, [2]), value_info("x", elem_type, [2])],
        [value_info("s_out", elem_type, [2]), value_info("y", elem_type, [2])])
    scan = oh.make_node("Scan", ["s0", "xs"], ["s_last", "ys"], body=body, num_scan_inputs=1)
    return onnx_model(
        [scan], [value_info("s0", elem_type, [2]), value_info("xs", elem_type, [4, 2])],
        [value_info("s_last", elem_type, [2]), value_info("ys", elem_type, [4, 2])])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_repeated_runs_replay_in_the_declared_precision(dtype):
    """A float64 model replays with JAX's 64-bit types on (float64 out, float64 sums)."""
    elem = {np.float32: FLOAT, np.float64: TensorProto.DOUBLE}[dtype]
    model = mdf_loops.onnx_to_mdf(_running_sum(elem))
    rng = np.random.default_rng(0)
    for _ in range(3):  # the first call plans, the others replay the plan
        s0 = rng.standard_normal(2).astype(dtype)
        xs = (rng.standard_normal((4, 2)) * 1e-9 + 1.0).astype(dtype)
        outputs = mdf_loops.run(model, {"s0": s0, "xs": xs}, backend="jax")
        sums = s0 + np.cumsum(xs, axis=0)
        assert outputs["ys"].dtype == dtype and outputs["s_last"].dtype == dtype
        tolerance = 1e-15 if dtype == np.float64 else 1e-6
        np.testing.assert_allclose(outputs["ys"], sums, rtol=tolerance)
        np.testing.assert_allclose(outputs["s_last"], sums[-1], rtol=tolerance)


def test_repeated_runs_rebuild_sequence_outputs():
    """Outputs that are not plain arrays (an ONNX sequence here) are rebuilt on each replay."""
    one = oh.make_node("Constant", [], ["one"], value_float=1.0)
    add = oh.make_node("Add", ["x", "one"], ["y"])
    pack = oh.make_node("SequenceConstruct", ["x", "y"], ["both"])
    both = oh.make_tensor_sequence_value_info("both", FLOAT, [3])
    model = mdf_loops.onnx_to_mdf(
        onnx_model([one, add, pack], [value_info("x", FLOAT, [3])], [value_info("y", FLOAT, [3]), both]))
    for k in range(3):
        x = np.arange(3, dtype=np.float32) * k
        outputs = mdf_loops.run(model, {"x": x}, backend="jax")
        assert isinstance(outputs["both"], list) and len(outputs["both"]) == 2
        np.testing.assert_array_equal(outputs["both"][0], x)
        np.testing.assert_array_equal(outputs["both"][1], x + 1)
        np.testing.assert_array_equal(outputs["y"], x + 1)


def _failing(error):
    def run(inputs):
        raise error
    return run


def _replaying(error):
    """run()'s runner of a compiled model whose compiled function raises ``error``."""
    work = elman_rnn(3, 2, 2)
    lowered = jax_compile(mdf_loops.onnx_to_mdf(work.model), work.inputs)
    runner = compiled.jax_runner(lowered, work.inputs)
    runner(work.inputs)  # compiles
    runner(work.inputs)  # finds the compiled function and holds it
    assert runner.held is not None
    runner.held = (_failing(error), *runner.held[1:])
    return lambda: runner(work.inputs)


def _through_user_outputs(error):
    return lambda: compiled._user_outputs(_failing(error), "graph 'main' (jax backend)", {})


@pytest.mark.parametrize("call", [_replaying, _through_user_outputs])
def test_errors_of_jax_on_a_run_name_the_graph(call):
    with pytest.raises(mdf_loops.errors.EvaluationError,
                       match=r"graph '\w+' \(jax backend\): RuntimeError: XLA ran out"):
        call(RuntimeError("XLA ran out"))()
    with pytest.raises(mdf_loops.errors.CompileError, match=r"graph '\w+' .*node 'n': a shape"):
        call(NeedsStatic("node 'n'", "a shape"))()
    ours = mdf_loops.errors.IterationLimitError("a Loop passed max_iterations=3")
    with pytest.raises(mdf_loops.errors.IterationLimitError) as info:
        call(ours)()
    assert info.value is ours  # mdf-loops errors pass as they are

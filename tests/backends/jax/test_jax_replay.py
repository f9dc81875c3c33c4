"""mdf_loops/backends/jax/replay.py: what run(backend="jax") replays, a lowered model's run
for one form of inputs: in the declared precision, with outputs that are not plain arrays
rebuilt, and JAX's errors turned into mdf-loops errors naming the graph. Oracles: numpy
written here."""

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
from conftest import FLOAT, body_graph, onnx_model, value_info  # noqa: E402


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
    graph_outputs = [value_info("y", FLOAT, [3]), both]
    graph = onnx_model([one, add, pack], [value_info("x", FLOAT, [3])], graph_outputs)
    model = mdf_loops.onnx_to_mdf(graph)
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

"""The limits of an untrusted model on the jax backend: every operator sized while tracing
(mdf_loops/backends/jax/interpreter.py, the scheduler's size plan), and the iterations of
all loops counted inside the traced program (mdf_loops/backends/jax/totals.py), to the
scheduler's count."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper as oh

pytest.importorskip("jax")

import mdf_loops  # noqa: E402
from conftest import body_graph, child_peak, onnx_model, value_info  # noqa: E402
from limit_models import (  # noqa: E402
    DOUBLE,
    HOSTILE,
    doubling_loop,
    growing_scan_output,
    loop_in_scan,
    one_operator,
    passes_at_the_count_and_fails_below,
    scan_in_while,
    totals_inputs,
)
from mdf_loops.errors import DepthLimitError, IterationLimitError, SizeLimitError  # noqa: E402

@pytest.mark.parametrize("stop", [False, True], ids=["trips", "condition"])
@pytest.mark.parametrize("constant_trips", [False, True], ids=["input", "constant"])
def test_the_total_is_the_scheduler_s_to_the_iteration(stop, constant_trips):
    model = loop_in_scan(stop, constant_trips)
    trips = 4 if constant_trips else 5
    inner = 3 if stop else trips  # the condition stops each Loop at 3
    need = 6 * (1 + inner)  # 6 Scan steps, each 1 + the Loop's iterations
    results = passes_at_the_count_and_fails_below(
        model, totals_inputs(6, 5, stop=3.0), need, ("scheduler", "jax"))
    assert float(results["jax"]["s"]) == float(results["scheduler"]["s"]) == 6.0 * inner


def test_a_loop_counted_at_once_inside_a_loop_stopped_at_run_time():
    model = scan_in_while()
    xs = np.ones(5)
    inputs = {"go": np.bool_(True), "a0": np.float64(0), "xs": xs, "limit": np.float64(12)}
    need = 3 * (1 + 5)  # 3 iterations of the Loop (sums 5, 10, 15), each a Scan of 5 steps
    results = passes_at_the_count_and_fails_below(model, inputs, need, ("scheduler", "jax"))
    assert float(results["jax"]["a"]) == float(results["scheduler"]["a"]) == 15.0


def test_the_error_names_the_loop_and_the_iteration_that_passed_the_limit():
    model = loop_in_scan(False)
    with pytest.raises(IterationLimitError) as info:  # 10^11 iterations if unchecked
        with mdf_loops.safety.limits(max_total_iterations=10_000):
            mdf_loops.run(model, totals_inputs(10**5, 10**6), backend="jax")
    message = str(info.value)
    # the Scan's step 0 counts 1, so its Loop's iteration 9999 is the 10,001st
    assert message.startswith("node 'Loop_0' (Loop) (jax backend): Loop stopped at iteration "
                              "9999: the loops of this run have run 10000 iterations"), message
    assert "max_total_iterations" in message


def test_max_total_iterations_is_taken_by_run():
    model = loop_in_scan(False)
    with pytest.raises(IterationLimitError, match="run 29 iterations together"):
        mdf_loops.run(model, totals_inputs(6, 4), backend="jax", max_total_iterations=29)
    assert float(mdf_loops.run(model, totals_inputs(6, 4), backend="jax",
                               max_total_iterations=30)["s"]) == 24.0


def test_a_constant_trip_count_in_a_scan_is_counted_to_the_iteration():
    model = loop_in_scan(False, constant_trips=True)  # steps of 1 + 4 iterations
    with pytest.raises(IterationLimitError, match="node 'Loop_0' .* at iteration 1: .* 17 "):
        mdf_loops.run(model, totals_inputs(10**5, 0), backend="jax", max_total_iterations=17)


def test_a_scan_of_a_length_known_while_tracing_is_counted_at_once():
    body = body_graph([oh.make_node("Add", ["a_in", "x"], ["a_out"])],
                      [value_info("a_in", DOUBLE, []), value_info("x", DOUBLE, [])],
                      [value_info("a_out", DOUBLE, [])])
    model = mdf_loops.onnx_to_mdf(onnx_model(
        [oh.make_node("Scan", ["a0", "xs"], ["a"], body=body, num_scan_inputs=1)],
        [value_info("a0", DOUBLE, []), value_info("xs", DOUBLE, [None])],
        [value_info("a", DOUBLE, [])]))
    inputs = {"a0": np.float64(0), "xs": np.ones(10**5)}
    with pytest.raises(IterationLimitError, match="node 'Scan_0' .* at iteration 17: "):
        mdf_loops.run(model, inputs, backend="jax", max_total_iterations=17)
    inputs["xs"] = np.ones(500)
    results = passes_at_the_count_and_fails_below(model, inputs, 500, ("scheduler", "jax"))
    assert float(results["jax"]["a"]) == float(results["scheduler"]["a"]) == 500.0


def test_nesting_deeper_than_max_depth_is_refused_while_tracing():
    model = loop_in_scan(False)  # a Loop's body in a Scan's body: 2 deep
    for backend in ("scheduler", "jax"):
        assert float(mdf_loops.run(model, totals_inputs(3, 2), backend=backend,
                                   max_depth=2)["s"]) == 6.0
        with pytest.raises(DepthLimitError, match="nested 2 deep; the limit is 1"):
            mdf_loops.run(model, totals_inputs(3, 2), backend=backend, max_depth=1)


def test_trusted_runs_are_not_counted():
    model = loop_in_scan(False)
    with mdf_loops.safety.limits(max_total_iterations=10):
        out = mdf_loops.run(model, totals_inputs(3, 4), backend="jax", trusted=True)
    assert float(out["s"]) == 12.0


def test_gradients_and_batches_count_the_same_total():
    model = loop_in_scan(True)
    inputs = totals_inputs(6, 5, stop=3.0)
    with mdf_loops.safety.limits(max_total_iterations=24):
        value, grads = mdf_loops.value_and_grad(model, "s", ["s0"], inputs)
        batch = mdf_loops.run_batch(model, inputs, {"s0": [0.0, 1.0, 2.0]})
    assert float(value) == 18.0 and float(grads["s0"]) == 1.0  # s = s0 + 6 * 3
    np.testing.assert_array_equal(batch["s"], [18.0, 19.0, 20.0])
    with mdf_loops.safety.limits(max_total_iterations=23):
        with pytest.raises(IterationLimitError, match="max_total_iterations"):
            mdf_loops.grad(model, "s", ["s0"], inputs)
        with pytest.raises(IterationLimitError, match="max_total_iterations"):
            mdf_loops.run_batch(model, inputs, {"s0": [0.0, 1.0]})


# ---------------------------------------------------------------- operator sizes


@pytest.mark.parametrize("op", sorted(HOSTILE))
def test_within_the_limit_it_gives_onnxruntime_s_values(op):
    node, types, feeds = HOSTILE[op]
    model = one_operator(node, types)
    small = {k: (np.minimum(v, 3) if v.dtype == np.int64 else v[..., :3] if v.ndim == 2
                 and v.shape[0] == 1 else v[:3]) for k, v in feeds.items()}
    expected = mdf_loops.run(model, small, backend="onnxruntime")["y"]
    np.testing.assert_array_equal(mdf_loops.run(model, small, backend="jax")["y"], expected)


def test_a_carried_value_that_doubles_each_iteration_stops_at_the_limit():
    model = doubling_loop()
    feeds = {"n": np.int64(40), "x0": np.ones(1, np.float32)}  # 2^40 elements at the end
    with pytest.raises(SizeLimitError, match="onnx::Concat has 1024 elements"):
        mdf_loops.run(model, feeds, backend="jax", max_elements=1000)
    small = {"n": np.int64(5), "x0": np.ones(1, np.float32)}
    np.testing.assert_array_equal(mdf_loops.run(model, small, backend="jax")["x"],
                                  mdf_loops.run(model, small, backend="onnxruntime")["x"])


def test_a_scan_s_stacked_outputs_are_sized_while_tracing():
    body = body_graph([oh.make_node("Add", ["s_in", "x"], ["s_out"]),
                       oh.make_node("Identity", ["row"], ["y"])],
                      [value_info("s_in", DOUBLE, []), value_info("x", DOUBLE, [])],
                      [value_info("s_out", DOUBLE, []), value_info("y", shape=[100])])
    model = mdf_loops.onnx_to_mdf(onnx_model(
        [oh.make_node("Scan", ["s0", "xs"], ["s", "ys"], body=body, num_scan_inputs=1)],
        [value_info("s0", DOUBLE, []), value_info("xs", DOUBLE, [None]),
         value_info("row", shape=[100])],
        [value_info("s", DOUBLE, []), value_info("ys", shape=[None, 100])]))
    row = np.arange(100, dtype=np.float32)
    inputs = {"s0": np.float64(0), "xs": np.ones(11), "row": row}
    with pytest.raises(SizeLimitError, match=r"^node 'Scan_0' \(Scan\) \(jax backend\): scan "
                                             r"output 0 \(stacked\) has 1100 elements"):
        mdf_loops.run(model, inputs, backend="jax", max_elements=1000)
    inputs["xs"] = np.ones(10)  # 1000 elements: within the limit, as on the scheduler
    out = mdf_loops.run(model, inputs, backend="jax", max_elements=1000)
    expected = mdf_loops.run(model, inputs, backend="scheduler", max_elements=1000)
    np.testing.assert_array_equal(out["ys"], expected["ys"])


def test_a_while_loop_s_buffer_holds_no_more_than_the_limit():
    model = growing_scan_output()  # a 100-element row each iteration, n iterations
    row = np.arange(100, dtype=np.float32)
    for backend in ("scheduler", "jax"):
        out = mdf_loops.run(model, {"n": np.int64(10), "row": row}, backend=backend,
                            max_elements=1000)
        np.testing.assert_array_equal(out["ys"], np.tile(row, (10, 1)))
        with pytest.raises(SizeLimitError, match="max_elements"):
            mdf_loops.run(model, {"n": np.int64(11), "row": row}, backend=backend,
                          max_elements=1000)


def test_a_hostile_operator_stops_with_a_small_peak_in_a_child():
    code = ("import numpy as np, mdf_loops, onnx\n"
            "model = mdf_loops.onnx_to_mdf(onnx.load(sys.argv[1]))\n"
            "mdf_loops.run(model, {'s': np.array([50000, 50000])}, backend='jax')")
    node, types, _ = HOSTILE["ConstantOfShape"]
    proto = onnx_model([node], types, [value_info("y", shape=None)])
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.onnx"
        path.write_bytes(proto.SerializeToString())
        result, peak = child_peak(code, str(path), limit_mb=8000)
    assert result.startswith("SizeLimitError"), result
    assert peak < 1000, peak  # 10 GB asked for; JAX and the libraries alone


@pytest.mark.parametrize("mode", ["run", "grad"])
def test_counting_and_sizing_add_nothing_to_a_model_whose_loops_hold_no_loops(mode):
    import jax

    from mdf_loops.backends.jax.compiled import compile
    from mdf_loops.backends.jax.precision import x64
    from mdf_loops.workloads import elman_rnn

    work = elman_rnn(50)
    model = mdf_loops.onnx_to_mdf(work.model)
    programs = []
    for limits in (None, mdf_loops.safety.Limits()):  # trusted, then not trusted
        lowered = compile(model, work.inputs, limits=limits)
        static, dynamic = lowered.split(lowered.feed(work.inputs))
        with x64():
            traced = jax.make_jaxpr(lambda v: lowered.function(static, mode=mode)(v))(dynamic)
        programs.append(str(traced))
    assert programs[0] == programs[1]

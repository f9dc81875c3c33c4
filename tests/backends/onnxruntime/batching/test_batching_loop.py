"""The batched ``Loop`` (mdf_loops/backends/onnxruntime/batching/loop.py): settings that
stop at different iterations, stacked outputs cut to each setting's length, a condition
every setting shares, nested loops, the drift-diffusion example against numpy, and the
loops it refuses.

Oracles: one onnxruntime run per setting of the unbatched model, and numpy loops.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from ddm_oracle import DDM, ddm_numpy
from onnx import TensorProto, helper
from test_batching_rules import SIZE, double, model_of, session

from mdf_loops.backends.onnxruntime.batching import NotBatchable, batch_model
from mdf_loops.backends.onnxruntime.compiled import compile_model
from mdf_loops.model.interface import load_model
from mdf_loops.onnx.ort_safe import make_safe

BOOL, INT = TensorProto.BOOL, TensorProto.INT64


def scalar(name: str, kind: int = TensorProto.DOUBLE) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, kind, [])


def const(name: str, value, kind: int = TensorProto.DOUBLE):
    return helper.make_node("Constant", [], [name], value=helper.make_tensor("v", kind, [], [value]))


def counting_loop(trip: int = 50) -> onnx.ModelProto:
    """x goes up by ``step`` from ``start`` while it is below ``limit``; n counts the steps;
    the trace stacks every x."""
    body = helper.make_graph(
        [
            helper.make_node("Add", ["x", "step"], ["x2"]),
            helper.make_node("Less", ["x2", "limit"], ["go"]),
            const("one", 1.0),
            helper.make_node("Add", ["n", "one"], ["n2"]),
            helper.make_node("Identity", ["x2"], ["seen"]),
        ],
        "count",
        [scalar("i", INT), scalar("c", BOOL), scalar("x"), scalar("n")],
        [scalar("go", BOOL), scalar("x2"), scalar("n2"), scalar("seen")],
    )
    nodes = [
        const("trip", trip, INT),
        const("true", True, BOOL),
        const("zero", 0.0),
        helper.make_node(
            "Loop", ["trip", "true", "start", "zero"], ["x_end", "n_end", "trace"], body=body
        ),
    ]
    inputs = [scalar("start"), scalar("step"), scalar("limit")]
    outputs = [scalar("x_end"), scalar("n_end"), double("trace", ["T"])]
    return model_of(nodes, inputs, outputs)


def run_alone(model, feeds: list[dict]) -> list[dict]:
    names = [o.name for o in model.graph.output]
    alone = session(model)
    return [dict(zip(names, alone.run(None, feed))) for feed in feeds]


def run_batched(model, batched: dict, shared: dict):
    result = batch_model(model, list(batched), SIZE)
    onnx.checker.check_model(result.model)
    names = [o.name for o in result.model.graph.output]
    got = dict(zip(names, session(result.model).run(None, {**shared, **batched})))
    return result, got


def setting_values(result, got, name: str, s: int):
    form = result.outputs[name]
    value = got[name][s] if form.batched else got[name]
    return value if form.lengths is None else value[: got[form.lengths][s]]


def test_settings_that_stop_at_different_iterations_keep_their_own_values_and_traces():
    model = counting_loop()
    step = np.array([0.5, 1.0, 0.25, 2.0])
    limit = np.array([3.0, 3.0, 2.0, 100.0])  # the last runs the whole trip count
    start = np.array(0.0)
    result, got = run_batched(model, {"step": step, "limit": limit}, {"start": start})
    feeds = [{"start": start, "step": step[s, None][0, ...], "limit": limit[s, None][0, ...]} for s in range(SIZE)]
    for s, alone in enumerate(run_alone(model, feeds)):
        x, trace = 0.0, []  # numpy: the loop as written
        for _ in range(50):
            x += step[s]
            trace.append(x)
            if not x < limit[s]:
                break
        assert len(alone["trace"]) == len(trace)
        for name, expected in (("x_end", x), ("n_end", len(trace)), ("trace", trace)):
            np.testing.assert_array_equal(setting_values(result, got, name, s), alone[name])
            np.testing.assert_array_equal(alone[name], expected)
    assert result.outputs["trace"].lengths is not None


def test_a_shared_condition_keeps_unbatched_values_shared_and_transposes_traces():
    body = helper.make_graph(
        [
            helper.make_node("Mul", ["h", "w"], ["h2"]),
            helper.make_node("Add", ["k", "w0"], ["k2"]),
            helper.make_node("Identity", ["c"], ["c2"]),
        ],
        "decay",
        [scalar("i", INT), scalar("c", BOOL), double("h", [2]), scalar("k")],
        [scalar("c2", BOOL), double("h2", [2]), scalar("k2"), double("h2", [2])],
    )
    nodes = [
        const("w0", 1.0),
        helper.make_node("Loop", ["trip", "", "h0", "w0"], ["h_end", "k_end", "hs"], body=body),
    ]
    trip = helper.make_tensor_value_info("trip", INT, [])
    model = model_of(
        nodes,
        [trip, double("h0", [2]), scalar("w")],
        [double("h_end", [2]), scalar("k_end"), double("hs", ["T", 2])],
    )
    w = np.array([0.5, -1.0, 2.0, 0.0])
    h0 = np.array([1.0, 3.0])
    result, got = run_batched(model, {"w": w}, {"trip": np.array(5), "h0": h0})
    assert not result.outputs["k_end"].batched and result.outputs["hs"].lengths is None
    assert got["hs"].shape == (SIZE, 5, 2)
    for s in range(SIZE):
        np.testing.assert_array_equal(got["h_end"][s], h0 * w[s] ** 5)
        np.testing.assert_array_equal(got["hs"][s], [h0 * w[s] ** t for t in range(1, 6)])
    assert got["k_end"] == 6.0


def test_a_stopping_loop_nested_in_a_shared_one():
    inner = helper.make_graph(
        [
            helper.make_node("Add", ["y", "step"], ["y2"]),
            helper.make_node("Less", ["y2", "limit"], ["go"]),
        ],
        "inner",
        [scalar("j", INT), scalar("c2", BOOL), scalar("y")],
        [scalar("go", BOOL), scalar("y2")],
    )
    outer = helper.make_graph(
        [
            const("ten", 10, INT),
            const("zero", 0.0),
            helper.make_node("Loop", ["ten", "", "zero"], ["y_end"], body=inner),
            helper.make_node("Add", ["acc", "y_end"], ["acc2"]),
            helper.make_node("Identity", ["c"], ["c3"]),
        ],
        "outer",
        [scalar("i", INT), scalar("c", BOOL), scalar("acc")],
        [scalar("c3", BOOL), scalar("acc2")],
    )
    nodes = [
        const("three", 3, INT),
        const("start", 0.0),
        helper.make_node("Loop", ["three", "", "start"], ["total"], body=outer),
    ]
    model = model_of(nodes, [scalar("step"), scalar("limit")], [scalar("total")])
    step, limit = np.array([0.5, 1.0, 0.3, 2.0]), np.array([2.0, 3.5, 100.0, 1.0])
    result, got = run_batched(model, {"step": step, "limit": limit}, {})
    feeds = [{"step": step[s, None][0, ...], "limit": limit[s, None][0, ...]} for s in range(SIZE)]
    for s, alone in enumerate(run_alone(model, feeds)):
        np.testing.assert_array_equal(got["total"][s], alone["total"])


def test_the_drift_diffusion_example_batched_equals_each_setting_and_numpy():
    model = load_model(DDM)
    compiled = compile_model(model, {"noise": np.zeros(200)})
    exported = make_safe(compiled.onnx_model)
    noise = np.random.default_rng(3).standard_normal((SIZE, 200))
    noise[0] = -0.1  # cancels the drift: runs all 200 steps without deciding
    result, got = run_batched(exported, {"noise": noise}, {})
    alone = run_alone(exported, [{"noise": n} for n in noise])
    for s in range(SIZE):
        for name in ("ddm.trace", "ddm.decision_time", "decide.choice"):
            value = setting_values(result, got, name, s)
            np.testing.assert_array_equal(value, alone[s][name])  # exactly
            assert value.dtype == alone[s][name].dtype
        trace, time, choice = ddm_numpy(noise[s])
        np.testing.assert_allclose(alone[s]["ddm.trace"], trace, rtol=1e-12)
        np.testing.assert_allclose(alone[s]["ddm.decision_time"], time, rtol=1e-12)
        assert alone[s]["decide.choice"] == choice
    assert len(setting_values(result, got, "ddm.trace", 0)) == 200


def test_a_batched_trip_count_refuses():
    model = counting_loop()
    model.graph.node.pop(0)
    model.graph.input.append(helper.make_tensor_value_info("trip", INT, []))
    with pytest.raises(NotBatchable, match="trip count differs between settings"):
        batch_model(model, ["trip"], SIZE)


def test_a_ragged_trace_used_inside_the_model_refuses():
    model = counting_loop()
    model.graph.node.append(helper.make_node("ReduceSum", ["trace"], ["total"], name="sum_it"))
    model.graph.output.append(scalar("total"))
    with pytest.raises(NotBatchable, match="'sum_it'.*length differs between settings"):
        batch_model(model, ["limit"], SIZE)


def test_an_if_on_a_batched_condition_refuses():
    branch = helper.make_graph([const("b", 1.0)], "branch", [], [scalar("b")])
    nodes = [
        helper.make_node("Less", ["a", "a"], ["c"]),
        helper.make_node("If", ["c"], ["r"], then_branch=branch, else_branch=branch, name="pick"),
    ]
    model = model_of(nodes, [scalar("a")], [scalar("r")])
    with pytest.raises(NotBatchable, match="node 'pick' \\(If\\)"):
        batch_model(model, ["a"], SIZE)

"""onnx::Loop (mdf_loops/ops/loop.py) against onnxruntime and numpy loops written here."""

from __future__ import annotations

import numpy as np
import pytest
from modeci_mdf.utils import load_mdf
from onnx import helper as oh

import mdf_loops
from conftest import (
    BOOL,
    FLOAT,
    INT64,
    assert_same,
    body_graph,
    expression_node,
    loop_node,
    mdf_body,
    mdf_model,
    onnx_model,
    ort_run,
    run_imported,
    run_mdf,
    value_info,
)

# ------------------------------------------------ the five trip-count / condition modes


def _counting_body():
    """x' = x + i (the iteration counter); cond' = sum(x') < limit (read from the top level);
    scan outputs x' * x' and i."""
    return body_graph(
        [
            oh.make_node("Cast", ["i"], ["i_float"], to=FLOAT),
            oh.make_node("Add", ["x", "i_float"], ["x_next"]),
            oh.make_node("ReduceSum", ["x_next"], ["total"], keepdims=0),
            oh.make_node("Less", ["total", "limit"], ["cond_out"]),
            oh.make_node("Mul", ["x_next", "x_next"], ["square"]),
            oh.make_node("Identity", ["i"], ["counter"]),
        ],
        [value_info("i", INT64, []), value_info("cond_in", BOOL, []), value_info("x", FLOAT, [2])],
        [value_info("cond_out", BOOL, []), value_info("x_next", FLOAT, [2]),
         value_info("square", FLOAT, [2]), value_info("counter", INT64, [])],
    )


def _counting_model(with_trip_count: bool, with_condition: bool):
    inputs = [value_info("x0", FLOAT, [2]), value_info("limit", FLOAT, [])]
    if with_trip_count:
        inputs.append(value_info("M", INT64, []))
    if with_condition:
        inputs.append(value_info("cond", BOOL, []))
    node = oh.make_node(
        "Loop", ["M" if with_trip_count else "", "cond" if with_condition else "", "x0"],
        ["x_final", "squares", "counters"], body=_counting_body(),
    )
    outputs = [value_info("x_final", FLOAT, None), value_info("squares", FLOAT, None),
               value_info("counters", INT64, None)]
    return onnx_model([node], inputs, outputs)


def _counting_numpy(x0, limit, trip_count, condition):
    """The spec's table, written out: ``trip_count``/``condition`` None when absent; the
    body's condition stops the loop in every mode, as in onnxruntime (docs/semantics.md)."""
    x, squares, counters = x0, [], []
    keep_going = True if condition is None else bool(condition)
    i = 0
    while (trip_count is None or i < trip_count) and keep_going:
        x = x + np.float32(i)
        cond_out = x.sum() < limit
        squares.append(x * x)
        counters.append(i)
        keep_going = bool(cond_out)
        i += 1
    return {
        "x_final": x,
        "squares": np.array(squares, np.float32).reshape(-1, 2),
        "counters": np.array(counters, np.int64),
    }


# (trip count, condition): None = input left empty
LOOP_MODES = {
    "for_trip_count_only": (5, None),
    "while_condition_only": (None, True),
    "do_while_true_condition": (None, True),
    "trip_count_and_condition_stops_on_condition": (30, True),
    "trip_count_and_condition_stops_on_count": (3, True),
    "for_stops_on_false_body_condition": (12, None),
    "zero_trip_count": (0, None),
    "zero_trip_count_with_condition": (0, True),
    "false_condition_zero_iterations": (None, False),
    "false_condition_with_trip_count": (5, False),
}


@pytest.mark.parametrize("mode", sorted(LOOP_MODES))
def test_loop_modes(mode):
    trip_count, condition = LOOP_MODES[mode]
    model = _counting_model(trip_count is not None, condition is not None)
    feeds = {"x0": np.array([0.5, -1.0], np.float32), "limit": np.array(20.0, np.float32)}
    if trip_count is not None:
        feeds["M"] = np.array(trip_count, np.int64)
    if condition is not None:
        feeds["cond"] = np.array(condition)

    results = run_imported(model, feeds)
    expected = _counting_numpy(feeds["x0"], feeds["limit"], trip_count, condition)
    for name in ("x_final", "squares", "counters"):
        assert_same(results[name], expected[name])
    expected_ort = ort_run(model, feeds)
    for name in ("x_final", "squares", "counters"):
        assert_same(results[name], expected_ort[name])


def test_loop_modes_run_the_expected_number_of_iterations():
    """The oracle itself: the modes above really differ (guards the parametrization)."""
    x0, limit = np.array([0.5, -1.0], np.float32), np.float32(20.0)
    counts = {mode: len(_counting_numpy(x0, limit, *LOOP_MODES[mode])["counters"])
              for mode in LOOP_MODES}
    assert counts["for_trip_count_only"] == 5
    assert 0 < counts["for_stops_on_false_body_condition"] < 12  # the body's condition stops it
    assert counts["while_condition_only"] == counts["trip_count_and_condition_stops_on_condition"]
    assert 3 < counts["while_condition_only"] < 30
    assert counts["trip_count_and_condition_stops_on_count"] == 3
    assert counts["zero_trip_count"] == counts["false_condition_zero_iterations"] == 0


def test_do_while_with_constant_true_condition():
    """Mode ("", 1): the condition input is a constant true in the graph."""
    node = oh.make_node("Loop", ["", "true", "x0"], ["x_final", "squares", "counters"],
                        body=_counting_body())
    model = onnx_model(
        [node], [value_info("x0", FLOAT, [2]), value_info("limit", FLOAT, [])],
        [value_info("x_final", FLOAT, None), value_info("squares", FLOAT, None),
         value_info("counters", INT64, None)],
        initializers=[oh.make_tensor("true", BOOL, [], [True])],
    )
    feeds = {"x0": np.array([3.0, 2.0], np.float32), "limit": np.array(1.0, np.float32)}
    results = run_imported(model, feeds)
    expected = _counting_numpy(feeds["x0"], feeds["limit"], None, True)
    assert len(expected["counters"]) == 1  # runs once although the condition is false after it
    for name, value in expected.items():
        assert_same(results[name], value)


def test_loop_without_end_stops_at_the_iteration_limit():
    model = _counting_model(False, False)
    # the body's condition stays true: only the iteration limit stops the loop
    feeds = {"x0": np.zeros(2, np.float32), "limit": np.array(1e30, np.float32)}
    with pytest.raises(mdf_loops.errors.IterationLimitError) as info:
        run_imported(model, feeds, max_iterations=25)
    message = str(info.value)
    assert "Loop_0" in message
    assert "iteration 25" in message  # iterations 0..24 ran
    assert "max_iterations" in message  # says how to raise the limit


def test_iteration_limit_set_with_limits_context():
    model = mdf_loops.onnx_to_mdf(_counting_model(True, False))
    feeds = {"x0": np.zeros(2, np.float32), "limit": np.array(1e30, np.float32),
             "M": np.array(30, np.int64)}
    with mdf_loops.safety.limits(max_iterations=29):
        with pytest.raises(mdf_loops.errors.IterationLimitError, match="29"):
            run_mdf(model, feeds)
    with mdf_loops.safety.limits(max_iterations=30):  # exactly enough
        results = run_mdf(model, feeds)
    assert results["counters"].shape == (30,)


# ------------------------------------------------ loop-carried sequences and optionals

SEQ_FLOAT = oh.make_sequence_type_proto(oh.make_tensor_type_proto(FLOAT, None))
OPT_FLOAT = oh.make_optional_type_proto(oh.make_tensor_type_proto(FLOAT, [1]))


def _sequence_optional_model():
    """Carries a sequence (one element appended per iteration) and an optional
    (empty at first; then i, then the running sum); the If reads body values."""
    then_branch = body_graph(
        [oh.make_node("OptionalGetElement", ["opt"], ["held"]),
         oh.make_node("Add", ["held", "element"], ["summed"]),
         oh.make_node("Optional", ["summed"], ["opt_then"])],
        [], [oh.make_value_info("opt_then", OPT_FLOAT)], name="then_branch",
    )
    else_branch = body_graph(
        [oh.make_node("Optional", ["element"], ["opt_else"])],
        [], [oh.make_value_info("opt_else", OPT_FLOAT)], name="else_branch",
    )
    body = body_graph(
        [
            oh.make_node("Cast", ["i"], ["i_float"], to=FLOAT),
            oh.make_node("Reshape", ["i_float", "shape_1"], ["element"]),
            oh.make_node("SequenceInsert", ["seq", "element"], ["seq_next"]),
            oh.make_node("OptionalHasElement", ["opt"], ["has_value"]),
            oh.make_node("If", ["has_value"], ["opt_next"],
                         then_branch=then_branch, else_branch=else_branch),
            oh.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        [value_info("i", INT64, []), value_info("cond_in", BOOL, []),
         oh.make_value_info("seq", SEQ_FLOAT), oh.make_value_info("opt", OPT_FLOAT)],
        [value_info("cond_out", BOOL, []), oh.make_value_info("seq_next", SEQ_FLOAT),
         oh.make_value_info("opt_next", OPT_FLOAT)],
    )
    nodes = [
        oh.make_node("SequenceEmpty", [], ["seq0"], dtype=FLOAT),
        oh.make_node("Optional", [], ["opt0"], type=oh.make_tensor_type_proto(FLOAT, [1])),
        oh.make_node("Loop", ["M", "", "seq0", "opt0"], ["seq_final", "opt_final"], body=body),
    ]
    return onnx_model(
        nodes, [value_info("M", INT64, [])],
        [oh.make_value_info("seq_final", SEQ_FLOAT), oh.make_value_info("opt_final", OPT_FLOAT)],
        initializers=[oh.make_tensor("shape_1", INT64, [1], [1])], opset=18,
    )


@pytest.mark.parametrize("trips", [4, 1, 0])
def test_loop_carries_sequence_and_optional(trips):
    model = _sequence_optional_model()
    results = run_imported(model, {"M": np.array(trips, np.int64)})
    expected_seq = [np.array([float(i)], np.float32) for i in range(trips)]
    expected_opt = None if trips == 0 else np.array([sum(range(trips))], np.float32)
    assert_same(results["seq_final"], expected_seq)
    assert_same(results["opt_final"], expected_opt)
    expected_ort = ort_run(model, {"M": np.array(trips, np.int64)})
    assert_same(results["seq_final"], list(expected_ort["seq_final"]))
    assert_same(results["opt_final"], expected_ort["opt_final"])


def test_loop_carried_tensor_may_change_shape():
    """Loop (unlike Scan) lets a loop-carried value grow: concatenate i each iteration."""
    body = body_graph(
        [oh.make_node("Reshape", ["i", "shape_1"], ["i_vector"]),
         oh.make_node("Concat", ["acc", "i_vector"], ["acc_next"], axis=0),
         oh.make_node("Identity", ["cond_in"], ["cond_out"])],
        [value_info("i", INT64, []), value_info("cond_in", BOOL, []), value_info("acc", INT64, None)],
        [value_info("cond_out", BOOL, []), value_info("acc_next", INT64, None)],
    )
    model = onnx_model(
        [oh.make_node("Loop", ["M", "", "acc0"], ["acc_final"], body=body)],
        [value_info("M", INT64, []), value_info("acc0", INT64, [None])],
        [value_info("acc_final", INT64, None)],
        initializers=[oh.make_tensor("shape_1", INT64, [1], [1])],
    )
    feeds = {"M": np.array(5, np.int64), "acc0": np.array([-1], np.int64)}
    results = run_imported(model, feeds)
    assert_same(results["acc_final"], np.array([-1, 0, 1, 2, 3, 4], np.int64))
    assert_same(results["acc_final"], ort_run(model, feeds)["acc_final"])


# ------------------------------------------------ nesting, If in the body, outer-scope reads


def _nested_model():
    """An outer Loop over i whose body runs an inner Loop over j and an If on i's parity.

    The inner body reads ``w`` from the top-level graph and ``i_float`` from the outer
    body; the If branches read ``acc_next`` (outer body) and ``w`` (top level).
    """
    inner = body_graph(
        [
            oh.make_node("Cast", ["j"], ["j_float"], to=FLOAT),
            oh.make_node("Mul", ["w", "j_float"], ["wj"]),
            oh.make_node("Add", ["inner_acc", "wj"], ["partial"]),
            oh.make_node("Add", ["partial", "i_float"], ["inner_acc_next"]),
            oh.make_node("Identity", ["inner_cond"], ["inner_cond_out"]),
        ],
        [value_info("j", INT64, []), value_info("inner_cond", BOOL, []),
         value_info("inner_acc", FLOAT, [2])],
        [value_info("inner_cond_out", BOOL, []), value_info("inner_acc_next", FLOAT, [2])],
        name="inner",
    )
    then_branch = body_graph([oh.make_node("Mul", ["acc_next", "w"], ["scaled"])], [],
                             [value_info("scaled", FLOAT, [2])], name="then_branch")
    else_branch = body_graph([oh.make_node("Neg", ["acc_next"], ["negated"])], [],
                             [value_info("negated", FLOAT, [2])], name="else_branch")
    outer = body_graph(
        [
            oh.make_node("Cast", ["i"], ["i_float"], to=FLOAT),
            oh.make_node("Loop", ["N", "", "acc"], ["acc_next"], body=inner),
            oh.make_node("Mod", ["i", "two"], ["parity"]),
            oh.make_node("Equal", ["parity", "zero"], ["even"]),
            oh.make_node("If", ["even"], ["z"], then_branch=then_branch, else_branch=else_branch),
            oh.make_node("Identity", ["cond"], ["cond_out"]),
        ],
        [value_info("i", INT64, []), value_info("cond", BOOL, []), value_info("acc", FLOAT, [2])],
        [value_info("cond_out", BOOL, []), value_info("acc_next", FLOAT, [2]),
         value_info("z", FLOAT, [2])],
        name="outer",
    )
    return onnx_model(
        [oh.make_node("Loop", ["M", "", "acc0"], ["acc_final", "zs"], body=outer)],
        [value_info("M", INT64, []), value_info("N", INT64, []), value_info("acc0", FLOAT, [2]),
         value_info("w", FLOAT, [2])],
        [value_info("acc_final", FLOAT, None), value_info("zs", FLOAT, None)],
        initializers=[oh.make_tensor("two", INT64, [], [2]), oh.make_tensor("zero", INT64, [], [0])],
    )


def _nested_numpy(M, N, acc, w):
    zs = []
    for i in range(M):
        for j in range(N):
            acc = acc + w * np.float32(j) + np.float32(i)
        zs.append(acc * w if i % 2 == 0 else -acc)
    return {"acc_final": acc, "zs": np.array(zs, np.float32).reshape(-1, 2)}


@pytest.mark.parametrize("M,N", [(4, 3), (3, 0), (0, 2)])
def test_nested_loops_with_if_and_outer_scope_reads(M, N, rng):
    model = _nested_model()
    feeds = {"M": np.array(M, np.int64), "N": np.array(N, np.int64),
             "acc0": rng.standard_normal(2).astype(np.float32),
             "w": rng.standard_normal(2).astype(np.float32)}
    results = run_imported(model, feeds)
    expected = _nested_numpy(M, N, feeds["acc0"], feeds["w"])
    for name, value in expected.items():
        assert_same(results[name], value)
    if M > 0:  # onnxruntime cannot tell the shape of scan outputs of a loop that never runs
        for name, value in ort_run(model, feeds).items():
            assert_same(results[name], value)


def test_nested_outer_scope_reads_are_explicit_in_mdf():
    """The convention: each level lists what it reads, and the loop node carries it."""
    graph = mdf_loops.onnx_to_mdf(_nested_model()).graphs[0]
    (loop,) = [n for n in graph.nodes if n.get_parameter("body") is not None]
    outer = mdf_loops.model.body_graph(loop.get_parameter("body").value)
    outer_signature = mdf_loops.model.body_signature(outer)
    assert {"N", "w"} <= set(outer_signature.outer_scope_inputs)
    assert {"N", "w"} <= {p.id for p in loop.input_ports}
    (inner_loop,) = [n for n in outer.nodes if n.get_parameter("body") is not None
                     and n.get_parameter("then_branch") is None]
    inner = mdf_loops.model.body_graph(inner_loop.get_parameter("body").value)
    assert set(mdf_loops.model.body_signature(inner).outer_scope_inputs) == {"w", "i_float"}
    assert {"w", "i_float"} <= {p.id for p in inner_loop.input_ports}


# ------------------------------------------------ Loop written in MDF with value expressions


def _authored_loop_model():
    """Doubling with a counter until a bound: formal inputs (iteration, condition, value)
    named so that alphabetical order would bind them wrongly."""
    step = expression_node(
        "step", ["n_iter", "keep", "b_value"],
        {"go": "grown < bound", "grown_out": "grown", "trace": "grown * 10 + n_iter"},
        {"grown": "b_value * 2 + n_iter", "bound": 100.0},
    )
    body = mdf_body("doubling", [step], ["n_iter", "keep", "b_value"],
                    ["step.go", "step.grown_out", "step.trace"])
    looper = loop_node("looper", "Loop", {"M": "max_trips", "cond": "start", "v_initial": "[v0]"},
                       {"body": body}, ["max_trips", "start", "v0"], 2, output_ids=["v_final", "trace"])
    return mdf_model(looper)


def _authored_loop_numpy(max_trips, start, v0):
    v, trace, i, keep = v0, [], 0, start
    while i < max_trips and keep:
        v = v * 2 + i
        trace.append(v * 10 + i)
        keep = v < 100.0
        i += 1
    return v, np.array(trace)


@pytest.mark.parametrize("form", ["in_memory", "json", "yaml"])
@pytest.mark.parametrize("max_trips,start", [(20, True), (3, True), (20, False)])
def test_authored_loop(form, max_trips, start, tmp_path):
    model = _authored_loop_model()
    if form != "in_memory":
        path = tmp_path / f"loop.{form}"
        (model.to_json_file if form == "json" else model.to_yaml_file)(str(path))
        model = load_mdf(str(path))
    inputs = {"max_trips": np.array(max_trips), "start": np.array(start), "v0": np.array(1.5)}
    results = run_mdf(model, inputs)
    v, trace = _authored_loop_numpy(max_trips, start, 1.5)
    np.testing.assert_allclose(results["looper.v_final"], v)
    np.testing.assert_allclose(results["looper.trace"], trace)
    assert results["looper.trace"].shape == trace.shape

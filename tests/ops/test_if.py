"""onnx::If (mdf_loops/ops/if_.py) against onnxruntime and numpy written here."""

from __future__ import annotations

import numpy as np
import pytest
from modeci_mdf.utils import load_mdf
from onnx import helper as oh

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


def _if_model():
    """Two outputs; the branches read top-level inputs and give different shapes."""
    then_branch = body_graph(
        [oh.make_node("Add", ["a", "b"], ["sum"]), oh.make_node("ReduceMax", ["a"], ["peak"], keepdims=0)],
        [], [value_info("sum", FLOAT, None), value_info("peak", FLOAT, None)], name="then_branch",
    )
    else_branch = body_graph(
        [oh.make_node("Concat", ["a", "b"], ["joined"], axis=0),
         oh.make_node("ReduceMin", ["b"], ["low"], keepdims=0)],
        [], [value_info("joined", FLOAT, None), value_info("low", FLOAT, None)], name="else_branch",
    )
    return onnx_model(
        [oh.make_node("If", ["flag"], ["first", "second"],
                      then_branch=then_branch, else_branch=else_branch)],
        [value_info("flag", BOOL, []), value_info("a", FLOAT, [3]), value_info("b", FLOAT, [3])],
        [value_info("first", FLOAT, None), value_info("second", FLOAT, None)],
    )


@pytest.mark.parametrize("flag", [True, False])
def test_if_picks_a_branch(flag, rng):
    model = _if_model()
    feeds = {"flag": np.array(flag), "a": rng.standard_normal(3).astype(np.float32),
             "b": rng.standard_normal(3).astype(np.float32)}
    results = run_imported(model, feeds)
    a, b = feeds["a"], feeds["b"]
    if flag:
        expected = {"first": a + b, "second": np.float32(a.max())}
    else:
        expected = {"first": np.concatenate([a, b]), "second": np.float32(b.min())}
    for name, value in expected.items():
        assert_same(results[name], np.asarray(value))
    for name, value in ort_run(model, feeds).items():
        assert_same(results[name], value)


def test_if_inside_loop_body(rng):
    """Each iteration adds x when i is even and subtracts it when i is odd."""
    then_branch = body_graph([oh.make_node("Add", ["acc", "x"], ["added"])], [],
                             [value_info("added", FLOAT, [2])], name="then_branch")
    else_branch = body_graph([oh.make_node("Sub", ["acc", "x"], ["subtracted"])], [],
                             [value_info("subtracted", FLOAT, [2])], name="else_branch")
    body = body_graph(
        [
            oh.make_node("Mod", ["i", "two"], ["parity"]),
            oh.make_node("Equal", ["parity", "zero"], ["even"]),
            oh.make_node("If", ["even"], ["acc_next"], then_branch=then_branch, else_branch=else_branch),
            oh.make_node("Identity", ["cond"], ["cond_out"]),
            oh.make_node("Identity", ["even"], ["even_out"]),
        ],
        [value_info("i", INT64, []), value_info("cond", BOOL, []), value_info("acc", FLOAT, [2])],
        [value_info("cond_out", BOOL, []), value_info("acc_next", FLOAT, [2]),
         value_info("even_out", BOOL, [])],
    )
    model = onnx_model(
        [oh.make_node("Loop", ["M", "", "acc0"], ["acc_final", "evens"], body=body)],
        [value_info("M", INT64, []), value_info("acc0", FLOAT, [2]), value_info("x", FLOAT, [2])],
        [value_info("acc_final", FLOAT, None), value_info("evens", BOOL, None)],
        initializers=[oh.make_tensor("two", INT64, [], [2]), oh.make_tensor("zero", INT64, [], [0])],
    )
    feeds = {"M": np.array(5, np.int64), "acc0": rng.standard_normal(2).astype(np.float32),
             "x": rng.standard_normal(2).astype(np.float32)}
    acc = feeds["acc0"]
    for i in range(5):
        acc = acc + feeds["x"] if i % 2 == 0 else acc - feeds["x"]
    results = run_imported(model, feeds)
    assert_same(results["acc_final"], acc)
    assert_same(results["evens"], np.array([True, False, True, False, True]))
    for name, value in ort_run(model, feeds).items():
        assert_same(results[name], value)


def test_loop_inside_if_branch(rng):
    """A branch that runs a Loop reading the top-level input ``x``."""
    body = body_graph(
        [oh.make_node("Mul", ["v", "x"], ["v_next"]), oh.make_node("Identity", ["c"], ["c_out"])],
        [value_info("i", INT64, []), value_info("c", BOOL, []), value_info("v", FLOAT, [2])],
        [value_info("c_out", BOOL, []), value_info("v_next", FLOAT, [2])], name="power_body",
    )
    then_branch = body_graph([oh.make_node("Loop", ["M", "", "x"], ["power"], body=body)], [],
                             [value_info("power", FLOAT, [2])], name="then_branch")
    else_branch = body_graph([oh.make_node("Identity", ["x"], ["same"])], [],
                             [value_info("same", FLOAT, [2])], name="else_branch")
    model = onnx_model(
        [oh.make_node("If", ["flag"], ["y"], then_branch=then_branch, else_branch=else_branch)],
        [value_info("flag", BOOL, []), value_info("M", INT64, []), value_info("x", FLOAT, [2])],
        [value_info("y", FLOAT, None)],
    )
    x = rng.uniform(0.5, 1.5, 2).astype(np.float32)
    for flag in (True, False):
        feeds = {"flag": np.array(flag), "M": np.array(3, np.int64), "x": x}
        results = run_imported(model, feeds)
        assert_same(results["y"], x ** 4 if flag else x)
        assert_same(results["y"], ort_run(model, feeds)["y"])


# ------------------------------------------------ If written in MDF with value expressions


def _authored_if_model():
    """Branches read the If node's ports ``u`` and ``v`` (outer-scope inputs)."""
    then_node = expression_node("pick", ["u", "v"], {"out": "u * 2 - v"})
    else_node = expression_node("pick", ["u", "v"], {"out": "v * 3 - u"})
    then_branch = mdf_body("then_graph", [then_node], [], ["pick.out"], outer_scope_inputs=["v", "u"])
    else_branch = mdf_body("else_graph", [else_node], [], ["pick.out"], outer_scope_inputs=["u", "v"])
    choose = loop_node("choose", "If", {"cond": "flag"},
                       {"then_branch": then_branch, "else_branch": else_branch},
                       ["flag", "u", "v"], 1, output_ids=["result"])
    return mdf_model(choose)


@pytest.mark.parametrize("form", ["in_memory", "json", "yaml"])
@pytest.mark.parametrize("flag", [True, False])
def test_authored_if(form, flag, tmp_path):
    model = _authored_if_model()
    if form != "in_memory":
        path = tmp_path / f"if.{form}"
        (model.to_json_file if form == "json" else model.to_yaml_file)(str(path))
        model = load_mdf(str(path))
    u, v = np.array([1.0, 2.0]), np.array([5.0, -1.0])
    results = run_mdf(model, {"flag": np.array(flag), "u": u, "v": v})
    np.testing.assert_allclose(results["choose.result"], u * 2 - v if flag else v * 3 - u)

"""Every error case of a loop node: one MdfLoopsError subclass naming the node (and iteration)."""

from __future__ import annotations

import numpy as np
import pytest
from modeci_mdf.mdf import Graph
from onnx import helper as oh

import mdf_loops
from conftest import (
    BOOL,
    FLOAT,
    INT64,
    body_graph,
    expression_node,
    loop_node,
    mdf_body,
    mdf_model,
    onnx_model,
    run_imported,
    run_mdf,
    value_info,
)


def _scan(body, inputs=("s0", "xs"), n_outputs=2, **attributes):
    args = {"initial_state_and_scan_inputs": "[" + ", ".join(inputs) + "]"}
    attributes.setdefault("num_scan_inputs", 1)
    return mdf_model(loop_node("my_scan", "Scan", args, {"body": body}, list(inputs), n_outputs,
                               attributes))


def _accumulate_body(formal_inputs=("s", "x"), formal_outputs=("step.s_next", "step.s_next")):
    step = expression_node("step", ["s", "x"], {"s_next": "s + x"})
    return mdf_body("accumulate", [step], formal_inputs, formal_outputs)


def _raises(error_type, model, inputs, *fragments, **run_kwargs):
    with pytest.raises(error_type) as info:
        run_mdf(model, inputs, **run_kwargs)
    assert isinstance(info.value, mdf_loops.MdfLoopsError)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


# ------------------------------------------------ Scan


def test_scan_state_changing_shape_names_node_and_iteration():
    step = expression_node("step", ["s", "x"], {"s_next": "s if x < 2 else numpy.append(s, x)"})
    body = mdf_body("grow", [step], ["s", "x"], ["step.s_next"])
    _raises(mdf_loops.LoopError, _scan(body, n_outputs=1), {"s0": np.zeros(1), "xs": np.arange(5.0)},
            "my_scan", "iteration 2", "shape")


def test_imported_scan_state_changing_shape():
    body = body_graph([oh.make_node("Concat", ["s", "x"], ["s_next"], axis=0)],
                      [value_info("s", FLOAT, None), value_info("x", FLOAT, [1])],
                      [value_info("s_next", FLOAT, None)])
    model = onnx_model([oh.make_node("Scan", ["s0", "xs"], ["s_final"], name="growing_scan",
                                     body=body, num_scan_inputs=1)],
                       [value_info("s0", FLOAT, [1]), value_info("xs", FLOAT, [3, 1])],
                       [value_info("s_final", FLOAT, None)])
    with pytest.raises(mdf_loops.LoopError, match=r"growing_scan.*iteration 0"):
        run_imported(model, {"s0": np.zeros(1, np.float32), "xs": np.ones((3, 1), np.float32)})


def test_scan_body_with_too_many_formal_inputs():
    step = expression_node("step", ["s", "x", "extra"], {"s_next": "s + x + extra"})
    body = mdf_body("b", [step], ["s", "x", "extra"], ["step.s_next"])
    _raises(mdf_loops.LoopError, _scan(body, n_outputs=1), {"s0": 0.0, "xs": np.arange(3.0)},
            "my_scan", "3 formal inputs", "passes 2")


def test_imported_scan_body_with_wrong_number_of_inputs():
    body = body_graph([oh.make_node("Add", ["s", "x"], ["s_next"])],
                      [value_info("s", FLOAT, []), value_info("x", FLOAT, []),
                       value_info("unused", FLOAT, [])],
                      [value_info("s_next", FLOAT, [])])
    model = onnx_model([oh.make_node("Scan", ["s0", "xs"], ["s_final"], name="bad_scan",
                                     body=body, num_scan_inputs=1)],
                       [value_info("s0", FLOAT, []), value_info("xs", FLOAT, [3])],
                       [value_info("s_final", FLOAT, None)])
    with pytest.raises(mdf_loops.LoopError, match="bad_scan"):
        run_imported(model, {"s0": np.zeros((), np.float32), "xs": np.ones(3, np.float32)})


def test_scan_body_with_fewer_outputs_than_states():
    step = expression_node("step", ["s", "t", "x"], {"s_next": "s + x"})
    body = mdf_body("b", [step], ["s", "t", "x"], ["step.s_next"])
    _raises(mdf_loops.LoopError, _scan(body, inputs=("s0", "t0", "xs"), n_outputs=2),
            {"s0": 0.0, "t0": 0.0, "xs": np.arange(3.0)}, "my_scan", "1 outputs", "2 states")


def test_scan_inputs_of_different_lengths():
    step = expression_node("step", ["s", "x", "y"], {"s_next": "s + x * y"})
    body = mdf_body("b", [step], ["s", "x", "y"], ["step.s_next"])
    model = _scan(body, inputs=("s0", "xs", "ys"), n_outputs=1, num_scan_inputs=2)
    _raises(mdf_loops.LoopError, model, {"s0": 0.0, "xs": np.arange(3.0), "ys": np.arange(4.0)},
            "my_scan", "input 0: 3", "input 1: 4")


@pytest.mark.parametrize("attribute,axes,fragment", [
    ("scan_input_axes", [2], "scan_input_axes[0] = 2"),
    ("scan_input_axes", [-3], "scan_input_axes[0] = -3"),
    ("scan_output_axes", [2], "scan_output_axes[0] = 2"),
    ("scan_output_axes", [-3], "scan_output_axes[0] = -3"),
])
def test_scan_axis_out_of_range(attribute, axes, fragment):
    model = _scan(_accumulate_body(), **{attribute: axes})
    _raises(mdf_loops.LoopError, model, {"s0": np.zeros(2), "xs": np.ones((3, 2))},
            "my_scan", fragment, "out of range")


def test_scan_attribute_list_of_wrong_length():
    model = _scan(_accumulate_body(), scan_input_directions=[0, 1])
    _raises(mdf_loops.LoopError, model, {"s0": np.zeros(2), "xs": np.ones((3, 2))},
            "my_scan", "scan_input_directions")


# ------------------------------------------------ bodies that break the convention


def test_body_port_not_bound():
    step = expression_node("step", ["s", "x", "ghost"], {"s_next": "s + x + ghost"})
    body = mdf_body("haunted", [step], ["s", "x"], ["step.s_next"])
    _raises(mdf_loops.ModelError, _scan(body, n_outputs=1), {"s0": 0.0, "xs": np.arange(3.0)},
            "my_scan", "step.ghost")


def test_body_reads_outer_value_the_node_does_not_carry():
    step = expression_node("step", ["s", "x", "w"], {"s_next": "s + x * w"})
    body = mdf_body("b", [step], ["s", "x"], ["step.s_next"], outer_scope_inputs=["w"])
    _raises(mdf_loops.ModelError, _scan(body, n_outputs=1), {"s0": 0.0, "xs": np.arange(3.0)},
            "my_scan", "'w'")


def test_body_without_signature():
    bare = Graph(id="bare", nodes=[expression_node("step", ["s", "x"], {"s_next": "s + x"})])
    _raises(mdf_loops.ModelError, _scan(bare, n_outputs=1), {"s0": 0.0, "xs": np.arange(3.0)},
            "my_scan", "formal_inputs")


def test_error_inside_body_names_node_iteration_and_body_node():
    step = expression_node("step", ["s", "x"], {"s_next": "s + numpy.ones(2)[int(x)]"})
    body = mdf_body("b", [step], ["s", "x"], ["step.s_next"])
    _raises(mdf_loops.EvaluationError, _scan(body, n_outputs=1),
            {"s0": np.zeros(1), "xs": np.arange(5.0)}, "my_scan", "iteration 2", "step")


# ------------------------------------------------ Loop and If


def _loop(body, args, inputs, n_outputs):
    return mdf_model(loop_node("my_loop", "Loop", args, {"body": body}, inputs, n_outputs))


def test_loop_body_with_wrong_number_of_inputs():
    step = expression_node("step", ["i", "v"], {"c_out": "True", "v_out": "v"})
    body = mdf_body("b", [step], ["i", "v"], ["step.c_out", "step.v_out"])
    model = _loop(body, {"M": "M", "v_initial": "[v0]"}, ["M", "v0"], 1)
    _raises(mdf_loops.LoopError, model, {"M": np.array(5), "v0": np.zeros(1)},
            "my_loop", "2 formal inputs")


def test_loop_body_with_too_few_outputs():
    step = expression_node("step", ["i", "c", "v", "w"], {"c_out": "c", "v_out": "v"})
    body = mdf_body("b", [step], ["i", "c", "v", "w"], ["step.c_out", "step.v_out"])
    model = _loop(body, {"M": "M", "v_initial": "[v0, w0]"}, ["M", "v0", "w0"], 2)
    _raises(mdf_loops.LoopError, model, {"M": np.array(5), "v0": np.zeros(1), "w0": np.zeros(1)},
            "my_loop", "2 outputs")


def test_loop_scan_output_changing_shape():
    step = expression_node("step", ["i", "c", "v"],
                           {"c_out": "c", "v_out": "v", "y": "numpy.ones(int(i) // 3 + 1)"})
    body = mdf_body("b", [step], ["i", "c", "v"], ["step.c_out", "step.v_out", "step.y"])
    model = _loop(body, {"M": "M", "v_initial": "[v0]"}, ["M", "v0"], 2)
    _raises(mdf_loops.LoopError, model, {"M": np.array(5), "v0": np.zeros(1)},
            "my_loop", "iteration 3", "scan output 0")


def test_loop_condition_not_a_scalar():
    step = expression_node("step", ["i", "c", "v"],
                           {"c_out": "numpy.array([True, True])", "v_out": "v"})
    body = mdf_body("b", [step], ["i", "c", "v"], ["step.c_out", "step.v_out"])
    model = _loop(body, {"M": "M", "cond": "c0", "v_initial": "[v0]"}, ["M", "c0", "v0"], 1)
    _raises(mdf_loops.LoopError, model,
            {"M": np.array(5), "c0": np.array(True), "v0": np.zeros(1)},
            "my_loop", "iteration 0", "one boolean")


@pytest.mark.parametrize("how", ["run_argument", "limits_context"])
def test_loop_without_end_hits_the_iteration_limit(how):
    # the body's condition stays true: only the iteration limit stops the loop
    step = expression_node("step", ["i", "c", "v"], {"c_out": "True", "v_out": "v + 1"})
    body = mdf_body("b", [step], ["i", "c", "v"], ["step.c_out", "step.v_out"])
    model = _loop(body, {"v_initial": "[v0]"}, ["v0"], 1)
    if how == "run_argument":
        message = _raises(mdf_loops.IterationLimitError, model, {"v0": np.zeros(1)},
                          "my_loop", "50", max_iterations=50)
    else:
        with mdf_loops.limits(max_iterations=50):
            message = _raises(mdf_loops.IterationLimitError, model, {"v0": np.zeros(1)},
                              "my_loop", "50")
    assert "max_iterations" in message  # how to raise the limit


def test_imported_infinite_loop_hits_the_iteration_limit():
    body = body_graph(
        [oh.make_node("Add", ["v", "one"], ["v_next"]), oh.make_node("Identity", ["c"], ["c_out"])],
        [value_info("i", INT64, []), value_info("c", BOOL, []), value_info("v", FLOAT, [])],
        [value_info("c_out", BOOL, []), value_info("v_next", FLOAT, [])],
    )
    model = onnx_model([oh.make_node("Loop", ["", "", "v0"], ["v_final"], name="forever", body=body)],
                       [value_info("v0", FLOAT, [])], [value_info("v_final", FLOAT, None)],
                       initializers=[oh.make_tensor("one", FLOAT, [], [1.0])])
    with pytest.raises(mdf_loops.IterationLimitError, match=r"forever.*max_iterations"):
        run_imported(model, {"v0": np.zeros((), np.float32)}, max_iterations=20)


def test_if_condition_not_a_scalar():
    pick = expression_node("pick", ["u"], {"out": "u"})
    branch = mdf_body("branch", [pick], [], ["pick.out"], outer_scope_inputs=["u"])
    model = mdf_model(loop_node("my_if", "If", {"cond": "flag"},
                                {"then_branch": branch, "else_branch": branch}, ["flag", "u"], 1))
    _raises(mdf_loops.LoopError, model, {"flag": np.array([True, False]), "u": np.zeros(1)},
            "my_if", "one boolean")


# ------------------------------------------------ quiet execution


def test_nothing_is_printed_per_iteration(capfd):
    step = expression_node("step", ["s", "x"], {"s_next": "s * 0.5 + x"})
    body = mdf_body("b", [step], ["s", "x"], ["step.s_next", "step.s_next"])
    xs = np.ones(2000)
    results = run_mdf(_scan(body), {"s0": 0.0, "xs": xs})
    captured = capfd.readouterr()
    assert captured.out == ""
    assert captured.err == ""
    assert results["my_scan.out1"].shape == (2000,)
    np.testing.assert_allclose(results["my_scan.out0"], 2.0 * (1 - 0.5 ** 2000))


def test_imported_scan_prints_nothing(capfd):
    """The same for a body of ONNX operators (the engine's onnx_ops path)."""
    body = body_graph([oh.make_node("Add", ["s", "x"], ["s_next"]),
                       oh.make_node("Identity", ["s_next"], ["y"])],
                      [value_info("s", FLOAT, []), value_info("x", FLOAT, [])],
                      [value_info("s_next", FLOAT, []), value_info("y", FLOAT, [])])
    model = onnx_model([oh.make_node("Scan", ["s0", "xs"], ["s_final", "ys"], body=body,
                                     num_scan_inputs=1)],
                       [value_info("s0", FLOAT, []), value_info("xs", FLOAT, ["T"])],
                       [value_info("s_final", FLOAT, None), value_info("ys", FLOAT, None)])
    results = run_imported(model, {"s0": np.zeros((), np.float32), "xs": np.ones(300, np.float32)})
    captured = capfd.readouterr()
    assert captured.out == ""
    assert captured.err == ""
    np.testing.assert_array_equal(results["ys"], np.arange(1, 301, dtype=np.float32))

"""onnx::Scan (mdf_loops/ops/scan.py) against onnxruntime and numpy loops written here."""

from __future__ import annotations

import numpy as np
import pytest
from modeci_mdf.utils import load_mdf
from onnx import helper as oh

import mdf_loops
from mdf_loops.errors import CompileError
from conftest import (
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

# ------------------------------------------------ two states, two scan inputs, every attribute


def _two_state_body():
    """States s1 [2], s2 scalar; scan elements x [2], y scalar.

    s1' = s1 + x, s2' = s2 * y; scan outputs o1 = x - s1 (the old state), o2 = s2'.
    """
    return body_graph(
        [
            oh.make_node("Add", ["s1", "x"], ["s1_next"]),
            oh.make_node("Mul", ["s2", "y"], ["s2_next"]),
            oh.make_node("Sub", ["x", "s1"], ["o1"]),
            oh.make_node("Identity", ["s2_next"], ["o2"]),
        ],
        [value_info("s1", FLOAT, [2]), value_info("s2", FLOAT, []),
         value_info("x", FLOAT, [2]), value_info("y", FLOAT, [])],
        [value_info("s1_next", FLOAT, [2]), value_info("s2_next", FLOAT, []),
         value_info("o1", FLOAT, [2]), value_info("o2", FLOAT, [])],
    )


def _two_state_model(attributes: dict, x_shape, y_shape):
    node = oh.make_node("Scan", ["s1_0", "s2_0", "X", "Y"], ["S1", "S2", "O1", "O2"],
                        body=_two_state_body(), num_scan_inputs=2, **attributes)
    return onnx_model(
        [node],
        [value_info("s1_0", FLOAT, [2]), value_info("s2_0", FLOAT, []),
         value_info("X", FLOAT, x_shape), value_info("Y", FLOAT, y_shape)],
        [value_info(name, FLOAT, None) for name in ("S1", "S2", "O1", "O2")],
    )


def _two_state_numpy(s1, s2, X, Y, in_axes, in_dirs, out_axes, out_dirs):
    xs = np.moveaxis(X, in_axes[0], 0)
    ys = np.moveaxis(Y, in_axes[1], 0)
    if in_dirs[0]:
        xs = xs[::-1]
    if in_dirs[1]:
        ys = ys[::-1]
    o1, o2 = [], []
    for x, y in zip(xs, ys):
        o1.append(x - s1)
        s1, s2 = s1 + x, s2 * y
        o2.append(s2)
    stacked = []
    for k, acc in enumerate((o1, o2)):
        out = np.stack(acc) if acc else np.zeros((0,) + np.shape(s1 if k == 0 else s2), np.float32)
        if out_dirs[k]:
            out = out[::-1]
        stacked.append(np.moveaxis(out, 0, out_axes[k]))
    return {"S1": s1, "S2": s2, "O1": stacked[0], "O2": stacked[1]}


SCAN_CONFIGS = {
    "defaults": {},
    "input_axes": {"scan_input_axes": [1, 0]},
    "negative_axes": {"scan_input_axes": [-1, -1], "scan_output_axes": [-1, 0]},
    "negative_axes_2": {"scan_input_axes": [-2, 0], "scan_output_axes": [1, -1]},
    "backward_input": {"scan_input_directions": [1, 0]},
    "backward_output": {"scan_output_directions": [0, 1]},
    "all_backward": {"scan_input_axes": [1, 0], "scan_input_directions": [1, 1],
                     "scan_output_axes": [-1, 0], "scan_output_directions": [1, 1]},
}


def _config_lists(attributes):
    return (
        attributes.get("scan_input_axes", [0, 0]),
        attributes.get("scan_input_directions", [0, 0]),
        attributes.get("scan_output_axes", [0, 0]),
        attributes.get("scan_output_directions", [0, 0]),
    )


def _two_state_feeds(rng, length, in_axes):
    x_shape = [2, 2]
    x_shape[in_axes[0] % 2] = length
    return {
        "s1_0": rng.standard_normal(2).astype(np.float32),
        "s2_0": np.array(0.75, np.float32),
        "X": rng.standard_normal(x_shape).astype(np.float32),
        "Y": rng.uniform(0.5, 1.5, length).astype(np.float32),
    }


@pytest.mark.parametrize("config", sorted(SCAN_CONFIGS))
def test_scan_states_inputs_axes_directions(config, rng):
    attributes = SCAN_CONFIGS[config]
    lists = _config_lists(attributes)
    feeds = _two_state_feeds(rng, 5, lists[0])
    x_shape = ["T", 2] if lists[0][0] % 2 == 0 else [2, "T"]
    model = _two_state_model(attributes, x_shape, ["T"])

    results = run_imported(model, feeds)
    expected_ort = ort_run(model, feeds)
    expected_numpy = _two_state_numpy(feeds["s1_0"], feeds["s2_0"], feeds["X"], feeds["Y"], *lists)
    assert sorted(results) == ["O1", "O2", "S1", "S2"]
    for name in results:
        assert_same(results[name], expected_ort[name])
        assert_same(results[name], expected_numpy[name])


@pytest.mark.parametrize("config", ["defaults", "negative_axes", "all_backward"])
def test_scan_zero_length_gives_empty_outputs_of_the_right_shape(config, rng):
    attributes = SCAN_CONFIGS[config]
    lists = _config_lists(attributes)
    feeds = _two_state_feeds(rng, 0, lists[0])
    model = _two_state_model(attributes, None, None)

    results = run_imported(model, feeds)
    expected = _two_state_numpy(feeds["s1_0"], feeds["s2_0"], feeds["X"], feeds["Y"], *lists)
    assert 0 in results["O1"].shape and results["O1"].ndim == 2
    assert results["O2"].shape == (0,)
    for name in results:
        assert_same(results[name], expected[name])
    assert_same(results["S1"], feeds["s1_0"])


def test_scan_scalar_elements_cumulative_sum(rng):
    body = body_graph(
        [oh.make_node("Add", ["acc", "x"], ["acc_next"]),
         oh.make_node("Identity", ["acc_next"], ["y"])],
        [value_info("acc", INT64, []), value_info("x", INT64, [])],
        [value_info("acc_next", INT64, []), value_info("y", INT64, [])],
    )
    model = onnx_model(
        [oh.make_node("Scan", ["acc0", "xs"], ["total", "partial"], body=body, num_scan_inputs=1)],
        [value_info("acc0", INT64, []), value_info("xs", INT64, ["T"])],
        [value_info("total", INT64, None), value_info("partial", INT64, None)],
    )
    xs = rng.integers(-50, 50, 12)
    feeds = {"acc0": np.array(7, np.int64), "xs": xs}
    results = run_imported(model, feeds)
    assert_same(results["partial"], 7 + np.cumsum(xs))
    assert_same(results["total"], np.array(7 + xs.sum()))
    for name, value in ort_run(model, feeds).items():
        assert_same(results[name], value)


@pytest.mark.parametrize("input_axis,output_axis", [(-1, -1), (-2, -2), (-3, 1), (1, -3), (2, 0)])
def test_scan_map_over_rank3_tensor_with_negative_axes(input_axis, output_axis, rng):
    """No state: each element (a matrix) is transposed; elements are taken along
    ``input_axis`` of a rank-3 input and stacked along ``output_axis``."""
    body = body_graph([oh.make_node("Transpose", ["x"], ["y"], perm=[1, 0])],
                      [value_info("x", FLOAT, None)], [value_info("y", FLOAT, None)])
    model = onnx_model(
        [oh.make_node("Scan", ["xs"], ["ys"], body=body, num_scan_inputs=1,
                      scan_input_axes=[input_axis], scan_output_axes=[output_axis])],
        [value_info("xs", FLOAT, [2, 3, 4])], [value_info("ys", FLOAT, None)],
    )
    xs = rng.standard_normal((2, 3, 4)).astype(np.float32)
    elements = np.moveaxis(xs, input_axis, 0)
    expected = np.moveaxis(np.stack([e.T for e in elements]), 0, output_axis)
    results = run_imported(model, {"xs": xs})
    assert_same(results["ys"], expected)
    assert_same(results["ys"], ort_run(model, {"xs": xs})["ys"])


def test_scan_body_reads_outer_scope_value(rng):
    """The body reads ``w`` from the top-level graph (an ONNX outer-scope reference)."""
    body = body_graph(
        [oh.make_node("Mul", ["x", "w"], ["xw"]), oh.make_node("Add", ["h", "xw"], ["h_next"])],
        [value_info("h", FLOAT, [2]), value_info("x", FLOAT, [2])],
        [value_info("h_next", FLOAT, [2])],
    )
    model = onnx_model(
        [oh.make_node("Scan", ["h0", "xs"], ["h_final"], body=body, num_scan_inputs=1)],
        [value_info("h0", FLOAT, [2]), value_info("xs", FLOAT, ["T", 2]), value_info("w", FLOAT, [2])],
        [value_info("h_final", FLOAT, None)],
    )
    feeds = {"h0": np.zeros(2, np.float32), "xs": rng.standard_normal((6, 2)).astype(np.float32),
             "w": np.array([2.0, -3.0], np.float32)}
    results = run_imported(model, feeds)
    assert_same(results["h_final"], (feeds["xs"] * feeds["w"]).sum(axis=0))
    assert_same(results["h_final"], ort_run(model, feeds)["h_final"])


def test_scan_inside_scan_body_reads_top_level_value(rng):
    """A row-wise inner Scan nested in a Scan body, reading ``bias`` from the top-level graph."""
    inner = body_graph(
        [oh.make_node("Add", ["acc", "e"], ["t"]), oh.make_node("Add", ["t", "bias"], ["acc_next"])],
        [value_info("acc", FLOAT, []), value_info("e", FLOAT, [])],
        [value_info("acc_next", FLOAT, [])], name="inner",
    )
    outer = body_graph(
        [oh.make_node("Scan", ["total", "row"], ["total_next"], body=inner, num_scan_inputs=1),
         oh.make_node("Identity", ["total_next"], ["seen"])],
        [value_info("total", FLOAT, []), value_info("row", FLOAT, [3])],
        [value_info("total_next", FLOAT, []), value_info("seen", FLOAT, [])], name="outer",
    )
    model = onnx_model(
        [oh.make_node("Scan", ["t0", "M"], ["T", "trace"], body=outer, num_scan_inputs=1)],
        [value_info("t0", FLOAT, []), value_info("M", FLOAT, [4, 3]), value_info("bias", FLOAT, [])],
        [value_info("T", FLOAT, None), value_info("trace", FLOAT, None)],
    )
    feeds = {"t0": np.array(1.0, np.float32), "M": rng.standard_normal((4, 3)).astype(np.float32),
             "bias": np.array(0.5, np.float32)}
    total, trace = feeds["t0"], []
    for row in feeds["M"]:
        for e in row:
            total = total + e + feeds["bias"]
        trace.append(total)
    results = run_imported(model, feeds)
    assert_same(results["T"], np.float32(total))
    assert_same(results["trace"], np.array(trace, np.float32))
    for name, value in ort_run(model, feeds).items():
        assert_same(results[name], value)


# ------------------------------------------------ opset 8: batched Scan with sequence_lens


def _opset8_model(directions, with_lengths: bool):
    body = body_graph(
        [oh.make_node("Add", ["s", "x"], ["s_next"]), oh.make_node("Mul", ["s_next", "x"], ["y"])],
        [value_info("s", FLOAT, [2]), value_info("x", FLOAT, [2])],
        [value_info("s_next", FLOAT, [2]), value_info("y", FLOAT, [2])],
    )
    attributes = {"directions": directions} if directions else {}
    node = oh.make_node("Scan", ["lens" if with_lengths else "", "s0", "X"], ["S", "Y"],
                        body=body, num_scan_inputs=1, **attributes)
    inputs = [value_info("s0", FLOAT, [3, 2]), value_info("X", FLOAT, [3, 4, 2])]
    if with_lengths:
        inputs.insert(0, value_info("lens", INT64, [3]))
    return onnx_model([node], inputs, [value_info("S", FLOAT, None), value_info("Y", FLOAT, None)],
                      opset=8)


def _opset8_numpy(lens, s0, X, backward):
    finals, outputs = [], []
    for b in range(X.shape[0]):
        s, ys = s0[b], np.zeros_like(X[b])
        steps = X[b][: lens[b]]
        order = range(len(steps) - 1, -1, -1) if backward else range(len(steps))
        for t, k in enumerate(order):
            s = s + steps[k]
            ys[t] = s * steps[k]
        finals.append(s)
        outputs.append(ys)
    return {"S": np.stack(finals), "Y": np.stack(outputs)}


@pytest.mark.parametrize("backend", ["scheduler", "torch", "jax"])
@pytest.mark.parametrize("directions", [None, [1]], ids=["forward", "backward"])
@pytest.mark.parametrize("with_lengths", [True, False], ids=["sequence_lens", "no_lens"])
def test_opset8_batched_scan(directions, with_lengths, backend, rng):
    """Every backend that runs Scan itself states opset 8 once (ops.scan.scan_per_entry)."""
    if backend != "scheduler":
        pytest.importorskip(backend)
    model = _opset8_model(directions, with_lengths)
    lens = np.array([4, 2, 3], np.int64) if with_lengths else np.array([4, 4, 4], np.int64)
    feeds = {"s0": rng.standard_normal((3, 2)).astype(np.float32),
             "X": rng.standard_normal((3, 4, 2)).astype(np.float32)}
    if with_lengths:
        feeds["lens"] = lens
    if backend == "jax" and with_lengths:  # jax's shapes are static: only full lengths
        with pytest.raises(CompileError, match="sequence_lens shorter"):
            mdf_loops.run(mdf_loops.onnx_to_mdf(model), feeds, backend="jax")
        feeds["lens"] = lens = np.array([4, 4, 4], np.int64)
    results = mdf_loops.run(mdf_loops.onnx_to_mdf(model), feeds, backend=backend)
    expected = _opset8_numpy(lens, feeds["s0"], feeds["X"], bool(directions))
    expected_ort = ort_run(model, feeds)
    for name in ("S", "Y"):
        assert_same(results[name], expected[name])
        assert_same(results[name], expected_ort[name])


# ------------------------------------------------ Scan written in MDF with value expressions


def _authored_scan_model():
    """A Scan whose body lists formal inputs and outputs in non-alphabetical order.

    State ``z_acc``, scan element ``a_x``: a reorder to alphabetical order would bind
    the element to the state and swap the two outputs.
    """
    step = expression_node(
        "step", ["z_acc", "a_x", "gain"],
        {"z_next": "z_acc * decay + a_x", "a_out": "a_x - gain * z_acc"},
        {"decay": 0.5},
    )
    body = mdf_body("step_body", [step], ["z_acc", "a_x"], ["step.z_next", "step.a_out"],
                    outer_scope_inputs=["gain"])
    scanner = loop_node(
        "scanner", "Scan", {"initial_state_and_scan_inputs": "[z0, xs]"}, {"body": body},
        ["z0", "xs"], 2, {"num_scan_inputs": 1, "gain": 3.0}, ["z_final", "trace"],
    )
    return mdf_model(scanner)


def _authored_scan_numpy(z0, xs, decay=0.5, gain=3.0):
    z, trace = z0, []
    for x in xs:
        trace.append(x - gain * z)
        z = z * decay + x
    return z, np.array(trace)


@pytest.mark.parametrize("form", ["in_memory", "json", "yaml"])
def test_authored_scan_keeps_formal_order(form, tmp_path, rng):
    model = _authored_scan_model()
    if form != "in_memory":
        path = tmp_path / f"scan.{form}"
        (model.to_json_file if form == "json" else model.to_yaml_file)(str(path))
        model = load_mdf(str(path))
        body = mdf_loops.model.body_graph(model.graphs[0].nodes[0].get_parameter("body").value)
        assert body.metadata["formal_inputs"] == ["z_acc", "a_x"]
        assert body.metadata["formal_outputs"] == ["step.z_next", "step.a_out"]
    xs = rng.standard_normal(9)
    results = run_mdf(model, {"z0": 1.25, "xs": xs})
    z, trace = _authored_scan_numpy(1.25, xs)
    np.testing.assert_allclose(results["scanner.z_final"], z)
    np.testing.assert_allclose(results["scanner.trace"], trace)
    assert results["scanner.trace"].shape == (9,)


def test_authored_scan_of_vectors_along_negative_axis_backward(rng):
    step = expression_node("step", ["h", "col"], {"h_next": "h + col", "out": "h * col"})
    body = mdf_body("b", [step], ["h", "col"], ["step.h_next", "step.out"])
    scanner = loop_node(
        "scanner", "Scan", {"initial_state_and_scan_inputs": "[h0, X]"}, {"body": body},
        ["h0", "X"], 2,
        {"num_scan_inputs": 1, "scan_input_axes": [-1], "scan_input_directions": [1],
         "scan_output_axes": [-1]},
    )
    X = rng.standard_normal((3, 5))
    h0 = rng.standard_normal(3)
    results = run_mdf(mdf_model(scanner), {"h0": h0, "X": X})
    h, outs = h0, []
    for t in range(X.shape[1] - 1, -1, -1):
        outs.append(h * X[:, t])
        h = h + X[:, t]
    np.testing.assert_allclose(results["scanner.out0"], h)
    np.testing.assert_allclose(results["scanner.out1"], np.stack(outs, axis=-1))
    assert results["scanner.out1"].shape == (3, 5)

"""Scans with non-zero axes reach onnxruntime as axis-0 Scans between Transposes.

onnxruntime dies of SIGFPE when its Scan moves an axis of an empty tensor; the
compiled mode must neither crash nor change a value.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as oh

import mdf_loops
from mdf_loops.onnx.ort_safe import make_safe, scan_axes_to_zero
from conftest import FLOAT, body_graph, onnx_model, ort_run, value_info


def _scan_model(input_axes, output_axes, x_shape, opset=17):
    """state s (scalar); scan inputs x (axis input_axes[0]); outputs: s + sum(e), and e * 2 stacked."""
    body = body_graph(
        [oh.make_node("ReduceSum", ["e"], ["total"], keepdims=0),
         oh.make_node("Add", ["s", "total"], ["s_next"]),
         oh.make_node("Add", ["e", "e"], ["twice"])],
        [value_info("s", FLOAT, []), value_info("e", FLOAT, None)],
        [value_info("s_next", FLOAT, []), value_info("twice", FLOAT, None)],
    )
    scan = oh.make_node("Scan", ["s0", "x"], ["s_final", "ys"], body=body, num_scan_inputs=1,
                        scan_input_axes=input_axes, scan_output_axes=output_axes)
    return onnx_model([scan], [value_info("s0", FLOAT, []), value_info("x", FLOAT, ["?"] * len(x_shape))],
                      [value_info("s_final", FLOAT, None), value_info("ys", FLOAT, None)], opset=opset)


def _scans(graph: onnx.GraphProto):
    for node in graph.node:
        if node.op_type == "Scan":
            yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _scans(attr.g)


@pytest.mark.parametrize("input_axis, output_axis, x_shape", [
    (1, 0, (2, 4)), (0, 1, (3, 2)), (-1, -1, (2, 5)), (2, 1, (2, 3, 4)), (1, -2, (3, 4, 2)),
])
def test_the_rewrite_computes_what_the_original_computes(input_axis, output_axis, x_shape, rng):
    model = _scan_model([input_axis], [output_axis], x_shape)
    feeds = {"s0": np.array(0.5, np.float32), "x": rng.standard_normal(x_shape).astype(np.float32)}
    rewritten = scan_axes_to_zero(model)
    onnx.checker.check_model(rewritten, full_check=True)
    assert all(set(a.ints) <= {0} for scan in _scans(rewritten.graph) for a in scan.attribute
               if a.name.endswith("_axes"))
    # Scan's definition in numpy: slices along the input axis, results stacked along the output axis
    x = feeds["x"]
    twice = 2 * np.moveaxis(x, input_axis, 0)
    expected = [feeds["s0"] + x.sum(), np.moveaxis(twice, 0, output_axis % twice.ndim)]
    for outputs in (ort_run(model, feeds), ort_run(rewritten, feeds)):
        for a, e in zip(outputs.values(), expected):
            np.testing.assert_allclose(a, e, rtol=1e-5)


def test_scans_inside_loop_bodies_are_rewritten(rng):
    inner = _scan_model([1], [1], (2, 3)).graph.node[0]
    loop_body = body_graph(
        [oh.make_node("Identity", ["cond_in"], ["cond_out"]), inner,
         oh.make_node("Identity", ["s_final"], ["acc"])],
        [value_info("i", TensorProto.INT64, []), value_info("cond_in", TensorProto.BOOL, []),
         value_info("s0", FLOAT, [])],
        [value_info("cond_out", TensorProto.BOOL, []), value_info("acc", FLOAT, []),
         value_info("ys", FLOAT, None)],
    )
    loop = oh.make_node("Loop", ["n", "", "start"], ["last", "all_ys"], body=loop_body)
    model = onnx_model([loop], [value_info("n", TensorProto.INT64, []), value_info("start", FLOAT, []),
                                value_info("x", FLOAT, [2, 3])],
                       [value_info("last", FLOAT, None), value_info("all_ys", FLOAT, None)])
    feeds = {"n": np.array(2), "start": np.array(0.0, np.float32),
             "x": rng.standard_normal((2, 3)).astype(np.float32)}
    rewritten = scan_axes_to_zero(model)
    assert [list(a.ints) for s in _scans(rewritten.graph) for a in s.attribute if a.name.endswith("_axes")] \
        == [[0], [0]]
    expected = ort_run(model, feeds)  # onnxruntime handles these axes on non-empty values
    for name, value in ort_run(rewritten, feeds).items():
        np.testing.assert_allclose(value, expected[name], rtol=1e-6)


def test_a_model_without_such_scans_is_left_as_it_is():
    model = _scan_model([0], [0], (3, 2))
    assert scan_axes_to_zero(model) is model


def test_an_unknown_rank_is_refused_with_the_value_named():
    model = _scan_model([1], [0], (2, 3))
    del model.graph.input[1].type.tensor_type.shape.dim[:]
    model.graph.input[1].type.tensor_type.ClearField("shape")
    with pytest.raises(mdf_loops.errors.ModelError, match=r"rank of scan input 0 \('x'\) .* is unknown"):
        scan_axes_to_zero(model)


_EMPTY_ELEMENTS = textwrap.dedent("""
    import numpy as np
    from onnx import TensorProto, helper as oh
    import mdf_loops
    # each iteration yields an empty (0,) value, stacked along axis 1: onnxruntime's own
    # transpose of it divides by zero
    body = oh.make_graph(
        [oh.make_node("Identity", ["s"], ["s_out"]),
         oh.make_node("Slice", ["e", "zero", "zero"], ["empty"])],
        "body", [oh.make_tensor_value_info("s", TensorProto.FLOAT, []),
                 oh.make_tensor_value_info("e", TensorProto.FLOAT, [2])],
        [oh.make_tensor_value_info("s_out", TensorProto.FLOAT, []),
         oh.make_tensor_value_info("empty", TensorProto.FLOAT, [0])],
        initializer=[oh.make_tensor("zero", TensorProto.INT64, [1], [0])])
    scan = oh.make_node("Scan", ["s0", "x"], ["s_final", "ys"], body=body, num_scan_inputs=1,
                        scan_output_axes=[1])
    graph = oh.make_graph([scan], "g", [oh.make_tensor_value_info("s0", TensorProto.FLOAT, []),
                                        oh.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 2])],
                          [oh.make_tensor_value_info("s_final", TensorProto.FLOAT, []),
                           oh.make_tensor_value_info("ys", TensorProto.FLOAT, None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    result = mdf_loops.run(mdf_loops.onnx_to_mdf(model),
                           {"s0": np.float32(1.5), "x": np.ones((3, 2), np.float32)},
                           backend="BACKEND")
    print(result["s_final"], result["ys"].shape, result["ys"].dtype)
""")


@pytest.mark.parametrize("backend", ["onnxruntime", "scheduler"])
def test_empty_elements_stacked_on_axis_1_do_not_crash_the_process(backend):
    # a subprocess: were the crash back, it would kill the test run
    done = subprocess.run([sys.executable, "-c", _EMPTY_ELEMENTS.replace("BACKEND", backend)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    # Scan's definition: 3 iterations of a (0,) element, stacked on axis 1 -> (0, 3)
    assert done.stdout.split() == ["1.5", "(0,", "3)", "float32"]


# ---------------------------------------------------------------- integer division


def _division_model(op: str, elem: int, **attrs):
    node = oh.make_node(op, ["a", "b"], ["y"], **attrs)
    return onnx_model([node], [value_info("a", elem, [None]), value_info("b", elem, [None])],
                      [value_info("y", elem, None)])


_DIVISION_CASES = [("Div", {}), ("Mod", {}), ("Mod", {"fmod": 1})]


def _numpy_division(op: str, attrs: dict, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ONNX integer Div truncates toward zero; Mod takes the divisor's sign, fmod the dividend's."""
    with np.errstate(over="ignore"):
        if op == "Div":
            quotient = np.abs(a) // np.abs(b)  # the smallest integer's abs wraps: fixed below
            quotient = np.where((a < 0) != (b < 0), -quotient, quotient)
            return np.where(b == -1, -a, quotient).astype(a.dtype)
        return np.fmod(a, b) if attrs.get("fmod") else np.mod(a, b)


@pytest.mark.parametrize("op, attrs", _DIVISION_CASES)
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_division_keeps_its_values(op, attrs, dtype):
    smallest, largest = np.iinfo(dtype).min, np.iinfo(dtype).max
    a = np.array([7, -7, 7, -7, 0, 5, smallest + 1, largest, 9, -9], dtype)
    b = np.array([2, 2, -2, -2, 3, -1, -1, -1, 1, -4], dtype)
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    model = _division_model(op, elem, **attrs)
    safe = make_safe(model)
    onnx.checker.check_model(safe, full_check=True)
    expected = _numpy_division(op, attrs, a, b)
    np.testing.assert_array_equal(ort_run(model, {"a": a, "b": b})["y"], expected)  # no trap here
    np.testing.assert_array_equal(ort_run(safe, {"a": a, "b": b})["y"], expected)


_SMALLEST_BY_MINUS_ONE = textwrap.dedent("""
    import numpy as np, onnx
    from onnx import TensorProto, helper as oh
    import mdf_loops
    node = oh.make_node("OP", ["a", "b"], ["y"])
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info("a", TensorProto.INT64, [None]),
                                        oh.make_tensor_value_info("b", TensorProto.INT64, [None])],
                          [oh.make_tensor_value_info("y", TensorProto.INT64, None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    smallest = np.iinfo(np.int64).min
    result = mdf_loops.run(mdf_loops.onnx_to_mdf(model),
                           {"a": np.array([smallest, 6]), "b": np.array([-1, 4])}, backend="onnxruntime")
    print(*result["y"])
""")


@pytest.mark.parametrize("op, expected", [("Div", [np.iinfo(np.int64).min, 1]), ("Mod", [0, 2])])
def test_the_smallest_integer_by_minus_one_does_not_crash_the_process(op, expected):
    # numpy's answers: the quotient wraps to the smallest integer; anything mod -1 is 0
    done = subprocess.run([sys.executable, "-c", _SMALLEST_BY_MINUS_ONE.replace("OP", op)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert [int(v) for v in done.stdout.split()] == expected


def test_float_division_is_left_as_it_is():
    model = _division_model("Div", TensorProto.FLOAT)
    assert [n.op_type for n in make_safe(model).graph.node] == ["Div"]

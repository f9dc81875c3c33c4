"""Scans that run zero steps, on every path: both backends, ``auto`` and the ONNX export.

The expected values are numpy loops written here (PyTensor's answers: a
zero-step scan stacks nothing, keeps the element shape, and ``result[-1]`` of a
recurrent output is its initial state).
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import mdf_loops
from mdf_loops import authoring as T
from mdf_loops.onnx.ort_safe import make_safe
from mdf_loops.onnx.zero_steps import probe_zero_steps
from mdf_loops.onnx.export import mdf_to_onnx
from conftest import make_model  # noqa: E402

BACKENDS = ("scheduler", "onnxruntime", "auto")


def _ort(model, feeds):
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {k: np.asarray(v) for k, v in feeds.items()})))


def _every_path(model, feeds, *, safe_export: bool = False) -> list[dict]:
    results = [mdf_loops.run(model, feeds, backend=b) for b in BACKENDS]
    exported = mdf_to_onnx(model, example_inputs=feeds)
    results.append(_ort(make_safe(exported) if safe_export else exported, feeds))
    return results


def _check(results: list[dict], expected: dict) -> None:
    for result in results:
        assert set(result) == set(expected)
        for name, value in expected.items():
            assert np.shape(result[name]) == value.shape, name
            np.testing.assert_allclose(result[name], value)


def _powers_oracle(A, k):
    rows, prior = [], np.ones_like(A)
    for _ in range(k):
        prior = prior * A
        rows.append(prior)
    return np.array(rows).reshape((k,) + A.shape), prior


def _power_scan(shape):
    k = T.input("k", (), "int32")
    A = T.input("A", shape, "float64")
    result, _ = T.scan(lambda prior, A: prior * A, outputs_info=T.ones_like(A),
                       non_sequences=A, n_steps=k)
    return result


@pytest.mark.parametrize("shape", [(None,), ("n",), (3,)])
@pytest.mark.parametrize("k", [0, 2])
def test_symbolic_n_steps_keeps_the_element_shape(shape, k):  # bug 1
    model = T.build_model({"r": _power_scan(shape)}, name="powers")
    A = np.array([1.0, 2.0, 3.0])
    stacked, _ = _powers_oracle(A, k)
    _check(_every_path(model, {"A": A, "k": np.int32(k)}), {"r": stacked})


@pytest.mark.parametrize("k", [0, 3])
def test_result_and_its_last_step_of_a_zero_step_scan(k):  # bug 2
    result = _power_scan((None,))
    model = T.build_model({"r": result, "last": result[-1]}, name="powers")
    A = np.array([1.0, 2.0, 3.0])
    stacked, last = _powers_oracle(A, k)
    _check(_every_path(model, {"A": A, "k": np.int32(k)}), {"r": stacked, "last": last})


def test_last_step_of_a_window_output_after_zero_steps_is_the_newest_initial_row():
    k = T.input("k", (), "int64")
    x0 = T.input("x0", (2,), "float64")
    fib, _ = T.scan(lambda a, b: a + b, outputs_info=dict(initial=x0, taps=[-2, -1]), n_steps=k)
    model = T.build_model({"fib": fib, "last": fib[-1]}, name="fib")
    for steps in (0, 4):
        window, rows = [1.0, 2.0], []
        for _ in range(steps):
            window = [window[1], window[0] + window[1]]
            rows.append(window[1])
        expected = {"fib": np.array(rows).reshape(steps), "last": np.array(window[1])}
        _check(_every_path(model, {"x0": np.array([1.0, 2.0]), "k": np.int64(steps)}), expected)


@pytest.mark.parametrize("k", [0, 2])
def test_map_like_scan_with_symbolic_n_steps_exports_a_valid_loop(k):  # bug 3
    steps = T.input("k", (), "int64")
    A = T.input("A", (3,), "float64")
    result, _ = T.scan(lambda A: A * 2, non_sequences=A, n_steps=steps)
    model = T.build_model({"r": result}, name="twice")
    A_value = np.array([1.0, -2.0, 0.5])
    expected = np.array([A_value * 2 for _ in range(k)]).reshape(k, 3)
    exported = mdf_to_onnx(model, example_inputs={"A": A_value, "k": np.int64(k)})
    loops = [n for n in exported.graph.node if n.op_type == "Loop"]
    assert loops and len(loops[0].input) >= 2  # M and the (empty) cond
    _check(_every_path(model, {"A": A_value, "k": np.int64(k)}), {"r": expected})


@pytest.mark.parametrize("length", [0, 4])
def test_zero_length_sequences(length):  # bug 4
    u = T.input("u", (None, 3), "float64")
    doubled, _ = T.map(lambda row: row * 2, sequences=u)
    sums, _ = T.scan(lambda row, acc: acc + row, sequences=u, outputs_info=T.zeros((3,)))
    model = T.build_model({"doubled": doubled, "sums": sums, "total": sums[-1]}, name="seq")
    u_value = np.arange(length * 3, dtype=np.float64).reshape(length, 3)
    expected = {"doubled": u_value * 2, "sums": np.cumsum(u_value, axis=0).reshape(length, 3),
                "total": u_value.sum(axis=0)}
    # onnxruntime itself cannot run a zero-length Scan: the export runs after make_safe
    _check(_every_path(model, {"u": u_value}, safe_export=True), expected)


def test_zero_length_sequences_run_compiled_without_falling_back(caplog):
    u = T.input("u", (None,), "float32")
    doubled, _ = T.map(lambda x: x * 2, sequences=u)
    model = T.build_model({"doubled": doubled}, name="double")
    with caplog.at_level("INFO", logger="mdf_loops"):
        out = mdf_loops.run(model, {"u": np.zeros(0, np.float32)}, backend="auto")
    assert out["doubled"].shape == (0,) and out["doubled"].dtype == np.float32
    assert "scheduler" not in caplog.text.lower()


# ---------------------------------------------------------------- the rewrite on plain ONNX


def _scan_model(axis: int) -> tuple:
    """A Scan with a sum state and a doubled output, scanning ``x`` along ``axis``."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
         helper.make_node("Mul", ["x_t", "two"], ["y_t"])], "body",
        [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [2])],
        initializer=[helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])])
    shape = ["n", 2] if axis == 0 else [2, "n"]
    graph = helper.make_graph(
        [helper.make_node("Scan", ["s0", "x"], ["s", "y"], num_scan_inputs=1, body=body,
                          scan_input_axes=[axis], scan_output_axes=[axis])], "g",
        [helper.make_tensor_value_info("s0", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("length", [0, 3])
def test_probe_rewrite_of_an_onnx_scan(axis, length):
    model = _scan_model(axis)
    rows = np.arange(length * 2, dtype=np.float32).reshape(length, 2)
    x = rows if axis == 0 else rows.T.copy()
    s0 = np.array([1.0, -1.0], np.float32)
    got = _ort(make_safe(model), {"s0": s0, "x": x})
    np.testing.assert_allclose(got["s"], s0 + rows.sum(axis=0))
    expected_y = rows * 2 if axis == 0 else (rows * 2).T
    assert got["y"].shape == expected_y.shape
    np.testing.assert_allclose(got["y"], expected_y)


def test_probe_rewrite_leaves_loops_with_static_outputs_alone():
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Identity", ["v_in"], ["v_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [2])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "v0"], ["v"], body=body)], "g",
        [helper.make_tensor_value_info("M", TensorProto.INT64, []),
         helper.make_tensor_value_info("v0", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("v", TensorProto.FLOAT, [2])])
    model = make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert probe_zero_steps(model) is model


@pytest.mark.parametrize("length", [0, 4])
def test_until_scan_over_zero_length_sequences_keeps_the_element_shape(length):
    m = T.input("m", (None, 3), "float64")
    doubled, _ = T.scan(lambda row: (row * 2, T.until(row.sum() > 5)), sequences=m)
    model = T.build_model({"doubled": doubled}, name="until_rows")
    rows = np.ones((length, 3))
    expected = []
    for row in rows:
        expected.append(row * 2)
        if row.sum() > 5:
            break
    # the raw export gives (0, 0) in onnxruntime, as any zero-trip Loop: make_safe fixes it
    _check(_every_path(model, {"m": rows}, safe_export=True),
           {"doubled": np.array(expected).reshape(-1, 3)})


def test_zero_length_scan_inside_a_loop_body():
    m = T.input("m", (None, None), "float64")

    def row_sums(row):
        partial, _ = T.scan(lambda v, acc: acc + v, sequences=row, outputs_info=T.constant(0.0))
        return partial

    inner, _ = T.map(row_sums, sequences=m)
    model = T.build_model({"inner": inner}, name="nested")
    for shape in ((2, 0), (3, 4)):
        rows = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
        expected = np.cumsum(rows, axis=1).reshape(shape)
        _check(_every_path(model, {"m": rows}, safe_export=True), {"inner": expected})


def test_scans_of_declared_positive_length_are_left_alone():
    model = _scan_model(0)
    model.graph.input[1].type.tensor_type.shape.dim[0].dim_value = 3  # x: [3, 2]
    assert probe_zero_steps(model) is model
    assert [n.op_type for n in probe_zero_steps(_scan_model(0)).graph.node][-1] == "If"

"""Tracing with mdf_loops.authoring: operators, functions, indexing and building models.

Values are checked against numpy on the same inputs; each test builds one model
with several outputs and runs it once on the scheduler backend.
"""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

import mdf_loops
from mdf_loops import authoring as A
from mdf_loops.authoring import AuthoringError


def evaluate(outputs: dict, inputs: dict | None = None) -> dict:
    model = A.build_model(outputs, name="under_test")
    return mdf_loops.run(model, inputs or {}, backend="scheduler")


def check(outputs: dict, inputs: dict, expected: dict) -> None:
    result = evaluate(outputs, inputs)
    for name, value in expected.items():
        value = np.asarray(value)
        assert result[name].dtype == value.dtype, name
        np.testing.assert_allclose(result[name], value, rtol=1e-6, err_msg=name)


X = np.array([[1.5, -2.0, 3.0], [-4.0, 5.5, -6.0]], dtype=np.float32)
N = np.array([7, -7, 9, -9], dtype=np.int64)


def test_arithmetic_follows_numpy_typing():
    x = A.input("x", (2, 3), "float32")
    n = A.input("n", (4,), "int64")
    i32 = A.input("i", (4,), "int32")
    outputs = {
        "add": x + 1, "radd": 1 + x, "sub": x - 2.5, "rsub": 2 - x, "mul": x * x,
        "div": x / 2, "rdiv": 3 / x, "pow": x ** 2, "neg": -x, "abs": abs(x),
        "numpy_scalar": np.float32(2) * x, "promoted": x[0] + n[:3],
        "int_div": n / 4, "floor_div": n // 4, "mod": n % 4, "float_mod": x % 2,
        "float_floor_div": x // 2, "mixed_ints": i32 + n, "matmul": x @ x.T,
        "rmatmul": np.ones((3, 2), np.float32) @ x,
    }
    expected = {
        "add": X + 1, "radd": 1 + X, "sub": X - 2.5, "rsub": 2 - X, "mul": X * X,
        "div": X / 2, "rdiv": 3 / X, "pow": X ** 2, "neg": -X, "abs": abs(X),
        "numpy_scalar": np.float32(2) * X, "promoted": X[0] + N[:3],
        "int_div": N / 4, "floor_div": N // 4, "mod": N % 4, "float_mod": X % 2,
        "float_floor_div": X // 2, "mixed_ints": N.astype(np.int32) + N, "matmul": X @ X.T,
        "rmatmul": np.ones((3, 2), np.float32) @ X,
    }
    check(outputs, {"x": X, "n": N, "i": N.astype(np.int32)}, expected)


def test_comparisons_and_logic():
    x = A.input("x", (2, 3), "float32")
    n = A.input("n", (4,), "int64")
    outputs = {
        "lt": x < 0, "le": x <= 1.5, "gt": x > 0, "ge": x >= 3, "eq": A.eq(n, 7),
        "neq": A.neq(n, 7), "and": (x > 0) & (x < 3), "or": (x < -5) | (x > 5),
        "xor": (x > 0) ^ (x > 2), "not": ~(x > 0), "bit_and": n & 3, "bit_or": n | 1,
        "bit_not": ~n, "land": A.logical_and(n, x[0, 0] > 0), "lnot": A.logical_not(n),
    }
    expected = {
        "lt": X < 0, "le": X <= 1.5, "gt": X > 0, "ge": X >= 3, "eq": N == 7, "neq": N != 7,
        "and": (X > 0) & (X < 3), "or": (X < -5) | (X > 5), "xor": (X > 0) ^ (X > 2),
        "not": ~(X > 0), "bit_and": N & 3, "bit_or": N | 1, "bit_not": ~N,
        "land": np.logical_and(N, True), "lnot": np.logical_not(N),
    }
    check(outputs, {"x": X, "n": N}, expected)


def test_functions():
    x = A.input("x", (2, 3), "float32")
    n = A.input("n", (4,), "int64")
    k = A.input("k", (), "int64")
    outputs = {
        "tanh": A.tanh(x), "exp": A.exp(x), "log": A.log(abs(x)), "sqrt": A.sqrt(abs(x)),
        "sigmoid": A.sigmoid(x), "sin": A.sin(x), "cos": A.cos(x), "floor": A.floor(x),
        "ceil": A.ceil(x), "sign": A.sign(n), "relu": A.relu(x), "tanh_int": A.tanh(n),
        "softmax": A.softmax(x), "dot": A.dot(x, x.T), "outer": A.outer(x[0], n),
        "maximum": A.maximum(x, 0), "minimum": A.minimum(x, 0), "clip": A.clip(x, -2, 2),
        "where": A.where(x > 0, x, 0), "switch": A.switch(n, 1.0, 0.5),
        "sum": A.sum(x), "sum0": x.sum(axis=0), "sum_keep": A.sum(x, axis=1, keepdims=True),
        "mean": x.mean(), "mean_int": A.mean(n), "max": x.max(axis=1), "min": x.min(),
        "prod": A.prod(x, axis=(0, 1)), "zeros_like": A.zeros_like(x),
        "ones_like": A.ones_like(n), "full_like": A.full_like(x, 7, "int32"),
        "zeros": A.zeros((2, 2)), "ones": A.ones((3,), "int32"), "arange": A.arange(k),
        "arange3": A.arange(1, k, 2), "arange_float": A.arange(0.0, 1.0, 0.25),
        "concatenate": A.concatenate([x, x * 2], axis=1), "stack": A.stack([n, n + 1]),
        "reshape": A.reshape(x, (3, 2)), "reshape_method": x.reshape(6),
        "transpose": A.transpose(x), "T": x.T, "squeeze": A.squeeze(x[None]),
        "expand_dims": A.expand_dims(n, 1), "cast": A.cast(x, "int64"),
        "astype": n.astype("float32"), "shape": A.shape(x), "shape_attr": x.shape,
    }
    K = 7
    expected = {
        "tanh": np.tanh(X), "exp": np.exp(X), "log": np.log(abs(X)), "sqrt": np.sqrt(abs(X)),
        "sigmoid": 1 / (1 + np.exp(-X)), "sin": np.sin(X), "cos": np.cos(X),
        "floor": np.floor(X), "ceil": np.ceil(X), "sign": np.sign(N),
        "relu": np.maximum(X, 0), "tanh_int": np.tanh(N),
        "softmax": np.exp(X) / np.exp(X).sum(axis=-1, keepdims=True), "dot": X @ X.T,
        "outer": np.outer(X[0], N), "maximum": np.maximum(X, 0), "minimum": np.minimum(X, 0),
        "clip": np.clip(X, -2, 2), "where": np.where(X > 0, X, 0).astype(np.float32),
        "switch": np.where(N != 0, 1.0, 0.5), "sum": X.sum(), "sum0": X.sum(axis=0),
        "sum_keep": X.sum(axis=1, keepdims=True), "mean": X.mean(), "mean_int": N.mean(),
        "max": X.max(axis=1), "min": X.min(), "prod": X.prod(), "zeros_like": np.zeros_like(X),
        "ones_like": np.ones_like(N), "full_like": np.full_like(X, 7, dtype=np.int32),
        "zeros": np.zeros((2, 2)), "ones": np.ones(3, np.int32), "arange": np.arange(K),
        "arange3": np.arange(1, K, 2), "arange_float": np.arange(0.0, 1.0, 0.25),
        "concatenate": np.concatenate([X, X * 2], axis=1), "stack": np.stack([N, N + 1]),
        "reshape": X.reshape(3, 2), "reshape_method": X.reshape(6), "transpose": X.T,
        "T": X.T, "squeeze": X, "expand_dims": N[:, None], "cast": X.astype(np.int64),
        "astype": N.astype(np.float32), "shape": np.array(X.shape), "shape_attr": np.array(X.shape),
    }
    check(outputs, {"x": X, "n": N, "k": np.int64(K)}, expected)


def test_indexing():
    x = A.input("x", (2, 3), "float32")
    n = A.input("n", (4,), "int64")
    j = A.input("j", (), "int32")
    idx = A.input("idx", (2,), "int64")
    outputs = {
        "int": x[1], "neg": x[-1, -2], "slice": x[:, 1:], "step": n[::2], "back": n[::-1],
        "back_part": n[2:0:-1], "none": x[None, :, None], "ellipsis": x[..., 0],
        "symbolic": n[j], "symbolic_slice": n[j:], "vector": x[:, idx], "whole": x[:],
    }
    J, IDX = 1, np.array([2, 0])
    expected = {
        "int": X[1], "neg": X[-1, -2], "slice": X[:, 1:], "step": N[::2], "back": N[::-1],
        "back_part": N[2:0:-1], "none": X[None, :, None], "ellipsis": X[..., 0],
        "symbolic": N[J], "symbolic_slice": N[J:], "vector": X[:, IDX], "whole": X,
    }
    check(outputs, {"x": X, "n": N, "j": np.int32(J), "idx": IDX}, expected)


def test_indexing_errors():
    x = A.input("x", (2, 3), "float32")
    with pytest.raises(AuthoringError, match=r"index 3 is out of bounds for axis 1 of size 3"):
        x[0, 3]
    with pytest.raises(AuthoringError, match=r"too many indices \(3\)"):
        x[0, 0, 0]
    with pytest.raises(AuthoringError, match="an index must be an integer scalar or vector"):
        x[x]
    with pytest.raises(AuthoringError, match="unsupported index"):
        x["a"]
    with pytest.raises(AuthoringError, match="slice step cannot be zero"):
        x[::0]


def test_set_and_inc_subtensor():
    x = A.input("x", (2, 3), "float32")
    i = A.input("i", (), "int32")
    outputs = {
        "point": A.set_subtensor(x[1, 2], 9), "row": A.set_subtensor(x[0], [7, 8, 9]),
        "negative_symbolic": A.set_subtensor(x[i, -1], 0),
        "column_slice": A.set_subtensor(x[:, 1:], 5), "stepped": A.set_subtensor(x[0, ::2], -1),
        "inc": A.inc_subtensor(x[:, 0], 10), "whole": A.set_subtensor(x[:], 1),
    }
    expected = {}
    for name, update in [
        ("point", lambda a: a.__setitem__((1, 2), 9)),
        ("row", lambda a: a.__setitem__(0, [7, 8, 9])),
        ("negative_symbolic", lambda a: a.__setitem__((-1, -1), 0)),
        ("column_slice", lambda a: a.__setitem__((slice(None), slice(1, None)), 5)),
        ("stepped", lambda a: a.__setitem__((0, slice(None, None, 2)), -1)),
        ("inc", lambda a: a.__setitem__((slice(None), 0), a[:, 0] + 10)),
        ("whole", lambda a: a.__setitem__(slice(None), 1)),
    ]:
        value = X.copy()
        update(value)
        expected[name] = value
    check(outputs, {"x": X, "i": np.int32(-1)}, expected)


def test_set_subtensor_needs_an_indexed_value():
    x = A.input("x", (2, 3))
    with pytest.raises(AuthoringError, match=r"set_subtensor takes the result of indexing"):
        A.set_subtensor(x, 1.0)
    with pytest.raises(AuthoringError, match=r"set_subtensor takes the result of indexing"):
        A.set_subtensor(x[None], 1.0)
    y = A.input("y", (None,))
    with pytest.raises(AuthoringError, match=r"needs constant bounds and a known size"):
        A.set_subtensor(y[1:], 0.0)


def test_tracing_errors_name_the_operation_and_the_line():
    a = A.input("a", (3,))
    b = A.input("b", (4,))
    with pytest.raises(AuthoringError, match=r"onnx::Add at test_authoring_symbolic.py:\d+: "
                                             r"onnx::Add\(float64\[3\], float64\[4\]\) is invalid"):
        a + b
    with pytest.raises(AuthoringError, match=r"onnx::Greater made at .*has no truth value"):
        if a[0] > 0:
            pass
    with pytest.raises(AuthoringError, match="must be a Python identifier"):
        A.input("not a name", ())
    with pytest.raises(AuthoringError, match="cannot use str"):
        a + "text"
    with pytest.raises(AuthoringError, match=r"needs booleans or integers"):
        a & a


def test_build_model_names_inputs_and_outputs():
    a = A.input("a", (3,))
    b = A.input("b", (3,), "float64")
    total = a + b
    total.name = "total"
    model = A.build_model([total, a * 2], name="named")
    assert model.id == "named" and model.onnx_opset_version == str(A.OPSET)
    interface = mdf_loops.model.graph_interface(model.graphs[0])
    assert list(interface.inputs) == ["a", "b"]
    assert list(interface.outputs) == ["total", "output_1"]
    ordered = A.build_model({"s": total}, inputs=[b, a, A.input("unused", ())])
    assert list(mdf_loops.model.graph_interface(ordered.graphs[0]).inputs) == ["b", "a", "unused"]
    for node in model.graphs[0].nodes:
        assert all(p.function is None or p.function.startswith("onnx::") for p in node.parameters)


def test_build_model_errors():
    a = A.input("a", (3,))
    with pytest.raises(AuthoringError, match=r"two different inputs are named 'a'"):
        A.build_model({"s": a + A.input("a", (3,))})
    with pytest.raises(AuthoringError, match=r"the outputs need inputs \['a'\]"):
        A.build_model({"s": a * 2}, inputs=[])
    with pytest.raises(AuthoringError, match=r"the input name 'a' is also an output name"):
        A.build_model({"a": a * 2})
    inside = []
    A.scan(lambda x: inside.append(x) or x, sequences=A.input("u", (None,)), name="s")
    with pytest.raises(AuthoringError, match=r"output 'x' is .* made inside the fn of scan 's'"):
        A.build_model({"x": inside[0]})


def test_authored_onnx_runs_in_onnxruntime():
    """The ONNX model behind build_model uses the opset onnxruntime runs."""
    u = A.input("u", (None,))
    acc, _ = A.scan(lambda x, prev: prev + x, sequences=u, outputs_info=np.float64(0))
    proto = A.build_onnx({"acc": acc})
    session = onnxruntime.InferenceSession(proto.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    (result,) = session.run(None, {"u": np.arange(4.0)})
    np.testing.assert_array_equal(result, np.cumsum(np.arange(4.0)))

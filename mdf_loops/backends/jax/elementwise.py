"""Elementwise ONNX operators: arithmetic, comparisons, logic, math functions, casts."""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from mdf_loops.backends.jax.registry import op
from mdf_loops.backends.jax.values import np_dtype, xp_of

_UNARY = {
    "Abs": "abs",
    "Neg": "negative",
    "Exp": "exp",
    "Log": "log",
    "Sqrt": "sqrt",
    "Tanh": "tanh",
    "Sin": "sin",
    "Cos": "cos",
    "Tan": "tan",
    "Asin": "arcsin",
    "Acos": "arccos",
    "Atan": "arctan",
    "Sinh": "sinh",
    "Cosh": "cosh",
    "Asinh": "arcsinh",
    "Acosh": "arccosh",
    "Atanh": "arctanh",
    "Floor": "floor",
    "Ceil": "ceil",
    "Sign": "sign",
    "Round": "round",
    "Not": "logical_not",
    "IsNaN": "isnan",
    "BitwiseNot": "invert",
}
_BINARY = {
    "Add": "add",
    "Sub": "subtract",
    "Mul": "multiply",
    "Equal": "equal",
    "Less": "less",
    "LessOrEqual": "less_equal",
    "Greater": "greater",
    "GreaterOrEqual": "greater_equal",
    "And": "logical_and",
    "Or": "logical_or",
    "Xor": "logical_xor",
    "BitwiseAnd": "bitwise_and",
    "BitwiseOr": "bitwise_or",
    "BitwiseXor": "bitwise_xor",
}


def _unary(name: str):
    def lower(call, x):
        xp = xp_of(x)
        return getattr(xp, name)(x)

    return lower


def _binary(name: str):
    def lower(call, a, b):
        xp = xp_of(a, b)
        return getattr(xp, name)(a, b)

    return lower


for _op, _name in _UNARY.items():
    op(_op)(_unary(_name))
for _op, _name in _BINARY.items():
    op(_op)(_binary(_name))


@op("Div")
def _div(call, a, b):
    xp = xp_of(a, b)
    if np.issubdtype(a.dtype, np.integer):  # ONNX integer division truncates towards zero
        q = xp.floor_divide(a, b)
        fix = (xp.remainder(a, b) != 0) & ((a < 0) != (b < 0))
        return (q + fix.astype(q.dtype)).astype(a.dtype)
    return xp.divide(a, b).astype(a.dtype)


@op("Mod")
def _mod(call, a, b):
    xp = xp_of(a, b)
    if call.attr("fmod", 0):
        return xp.fmod(a, b).astype(a.dtype)
    return xp.remainder(a, b).astype(a.dtype)


@op("Pow")
def _pow(call, a, b):
    xp = xp_of(a, b)
    if np.issubdtype(a.dtype, np.integer):
        return xp.power(a, b.astype(a.dtype)).astype(a.dtype)
    return xp.power(a, b.astype(a.dtype)).astype(a.dtype)


@op("Reciprocal")
def _reciprocal(call, x):
    return (xp_of(x).asarray(1, dtype=x.dtype) / x).astype(x.dtype)


@op("Relu")
def _relu(call, x):
    return xp_of(x).maximum(x, xp_of(x).zeros((), x.dtype))


@op("LeakyRelu")
def _leaky_relu(call, x):
    xp = xp_of(x)
    return xp.where(x >= 0, x, x * np.asarray(call.attr("alpha", 0.01), x.dtype))


@op("Sigmoid")
def _sigmoid(call, x):
    xp = xp_of(x)
    one = xp.asarray(1, dtype=x.dtype)
    return one / (one + xp.exp(-x))


@op("Softplus")
def _softplus(call, x):
    xp = xp_of(x)
    return xp.logaddexp(x, xp.zeros((), x.dtype)).astype(x.dtype)


@op("Erf")
def _erf(call, x):
    import jax.scipy.special as special  # numpy has no erf: the value becomes traced

    return special.erf(x)


@op("IsInf")
def _isinf(call, x):
    xp = xp_of(x)
    pos, neg = call.attr("detect_positive", 1), call.attr("detect_negative", 1)
    return (xp.isposinf(x) & bool(pos)) | (xp.isneginf(x) & bool(neg))


@op("Min", "Max", "Sum", "Mean")
def _variadic(call, *xs):
    xp = xp_of(*xs)
    kind = call.proto.op_type
    result = xs[0]
    for x in xs[1:]:
        result = {"Min": xp.minimum, "Max": xp.maximum}.get(kind, xp.add)(result, x)
    if kind == "Mean":
        result = result / np.asarray(len(xs), result.dtype)
    return result.astype(xs[0].dtype) if hasattr(result, "astype") else result


@op("Clip")
def _clip(call, x, low=None, high=None):
    xp = xp_of(x, low, high)
    if call.opset < 11:
        low, high = call.attr("min"), call.attr("max")
    if low is not None:
        x = xp.maximum(x, xp.asarray(low, dtype=x.dtype))
    if high is not None:
        x = xp.minimum(x, xp.asarray(high, dtype=x.dtype))
    return x


@op("Where")
def _where(call, c, a, b):
    return xp_of(c, a, b).where(c, a, b)


@op("Cast")
def _cast(call, x):
    return _astype(x, np_dtype(call.attr("to")))


@op("CastLike")
def _cast_like(call, x, like):
    return _astype(x, like.dtype)


def _astype(x, dtype):
    if dtype == np.bool_ and not isinstance(x, np.ndarray):
        return x != 0
    xp = xp_of(x)
    return xp.asarray(x).astype(dtype)


@op("Identity")
def _identity(call, x):
    return x


@op("Constant")
def _constant(call):
    for name, value in call.attrs.items():
        if name == "value":
            return numpy_helper.to_array(value)
        if name in ("value_float", "value_int"):
            return np.asarray(value, np.float32 if name == "value_float" else np.int64)
        if name in ("value_floats", "value_ints"):
            return np.asarray(value, np.float32 if name == "value_floats" else np.int64)
    raise ValueError(f"{call.where}: a Constant without a value attribute")

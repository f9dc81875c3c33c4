"""numpy- and Theano-style functions on symbols; each records ONNX operators.

Element types follow numpy (see :mod:`mdf_loops.authoring.symbolic`). Arguments
may be symbols, numpy arrays or Python numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mdf_loops.authoring.arithmetic import binary, promote
from mdf_loops.authoring.errors import AuthoringError
from mdf_loops.authoring.indexing import inc_subtensor, set_subtensor
from mdf_loops.authoring.symbolic import Symbol, apply, as_symbol, constant
from mdf_loops.authoring.types import onnx_elem_type

__all__ = [
    "tanh",
    "exp",
    "log",
    "sqrt",
    "abs",
    "sigmoid",
    "sin",
    "cos",
    "floor",
    "ceil",
    "sign",
    "relu",
    "softmax",
    "dot",
    "outer",
    "maximum",
    "minimum",
    "clip",
    "where",
    "switch",
    "eq",
    "neq",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_and",
    "logical_or",
    "logical_not",
    "sum",
    "mean",
    "max",
    "min",
    "prod",
    "zeros_like",
    "ones_like",
    "full_like",
    "zeros",
    "ones",
    "arange",
    "concatenate",
    "stack",
    "reshape",
    "transpose",
    "squeeze",
    "expand_dims",
    "cast",
    "shape",
    "set_subtensor",
    "inc_subtensor",
]


def _unary(op_type: str, x: Any, float_only: bool = True) -> Symbol:
    x = as_symbol(x)
    if float_only and x.dtype.kind in "iub":  # numpy: np.tanh(int) is float64
        x = cast(x, np.float64)
    return apply(op_type, [x])


def tanh(x):
    return _unary("Tanh", x)


def exp(x):
    return _unary("Exp", x)


def log(x):
    return _unary("Log", x)


def sqrt(x):
    return _unary("Sqrt", x)


def sigmoid(x):
    return _unary("Sigmoid", x)


def sin(x):
    return _unary("Sin", x)


def cos(x):
    return _unary("Cos", x)


def floor(x):
    return _unary("Floor", x)


def ceil(x):
    return _unary("Ceil", x)


def abs(x):
    return _unary("Abs", x, float_only=False)


def sign(x):
    return _unary("Sign", x, float_only=False)


def relu(x):
    return _unary("Relu", x, float_only=False)


def softmax(x: Any, axis: int = -1) -> Symbol:
    return apply("Softmax", [_float(x)], {"axis": axis})


def _float(x: Any) -> Symbol:
    x = as_symbol(x)
    return cast(x, np.float64) if x.dtype.kind in "iub" else x


def dot(a: Any, b: Any) -> Symbol:
    """Matrix product (``numpy.matmul``; the same as ``numpy.dot`` up to rank 2)."""
    return binary("MatMul", a, b)


def outer(a: Any, b: Any) -> Symbol:
    left, right = promote(a, b)
    return apply("Mul", [expand_dims(left, -1), expand_dims(right, 0)])


def maximum(a: Any, b: Any) -> Symbol:
    return binary("Max", a, b)


def minimum(a: Any, b: Any) -> Symbol:
    return binary("Min", a, b)


def clip(x: Any, low: Any, high: Any) -> Symbol:
    return minimum(maximum(x, low), high)


def where(condition: Any, a: Any, b: Any) -> Symbol:
    """``a`` where ``condition`` holds, else ``b`` (``numpy.where``)."""
    condition = as_symbol(condition)
    if condition.dtype != np.bool_:
        condition = cast(condition, np.bool_)
    left, right = promote(a, b)
    return apply("Where", [condition, left, right])


#: Theano's name for :func:`where`.
switch = where


def eq(a, b):
    return binary("Equal", a, b)


def neq(a, b):
    return apply("Not", [binary("Equal", a, b)])


def lt(a, b):
    return binary("Less", a, b)


def le(a, b):
    return binary("LessOrEqual", a, b)


def gt(a, b):
    return binary("Greater", a, b)


def ge(a, b):
    return binary("GreaterOrEqual", a, b)


def _bools(*values: Any) -> list[Symbol]:
    return [v if v.dtype == np.bool_ else cast(v, np.bool_) for v in map(as_symbol, values)]


def logical_and(a, b):
    return apply("And", _bools(a, b))


def logical_or(a, b):
    return apply("Or", _bools(a, b))


def logical_not(a):
    return apply("Not", _bools(a))


# ---------------------------------------------------------------- reductions


def _reduce(op_type: str, x: Any, axis: Any, keepdims: bool) -> Symbol:
    x = as_symbol(x)
    inputs: list[Any] = [x]
    if axis is not None:
        axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
        inputs.append(np.array(axes, np.int64))
    return apply(op_type, inputs, {"keepdims": int(keepdims)})


def sum(x, axis=None, keepdims: bool = False) -> Symbol:
    return _reduce("ReduceSum", x, axis, keepdims)


def mean(x, axis=None, keepdims: bool = False) -> Symbol:
    return _reduce("ReduceMean", _float(x), axis, keepdims)


def max(x, axis=None, keepdims: bool = False) -> Symbol:
    return _reduce("ReduceMax", x, axis, keepdims)


def min(x, axis=None, keepdims: bool = False) -> Symbol:
    return _reduce("ReduceMin", x, axis, keepdims)


def prod(x, axis=None, keepdims: bool = False) -> Symbol:
    return _reduce("ReduceProd", x, axis, keepdims)


# ---------------------------------------------------------------- making tensors


def full_like(x: Any, fill_value: Any, dtype: Any = None) -> Symbol:
    """A tensor of ``x``'s shape (and type, unless ``dtype``) filled with ``fill_value``."""
    x = as_symbol(x)
    value = np.array([fill_value], dtype=np.dtype(dtype) if dtype is not None else x.dtype)
    return apply("ConstantOfShape", [apply("Shape", [x])], {"value": value})


def zeros_like(x: Any, dtype: Any = None) -> Symbol:
    return full_like(x, 0, dtype)


def ones_like(x: Any, dtype: Any = None) -> Symbol:
    return full_like(x, 1, dtype)


def zeros(shape: Sequence[int], dtype: Any = "float64") -> Symbol:
    return constant(np.zeros(tuple(shape), dtype=dtype))


def ones(shape: Sequence[int], dtype: Any = "float64") -> Symbol:
    return constant(np.ones(tuple(shape), dtype=dtype))


def arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None) -> Symbol:
    """``numpy.arange`` as an ONNX ``Range`` node (its length may be symbolic)."""
    if stop is None:
        start, stop = 0, start
    values = [as_symbol(v) if isinstance(v, Symbol) else v for v in (start, stop, step)]
    for v in values:
        if isinstance(v, Symbol) and v.ndim != 0:
            raise AuthoringError(f"arange takes scalars, got {v.describe()}")
    bounds = promote(*values)
    if dtype is not None:
        bounds = [cast(b, dtype) for b in bounds]
    return apply("Range", bounds)


def concatenate(values: Sequence[Any], axis: int = 0) -> Symbol:
    return apply("Concat", promote(*values), {"axis": axis})


def stack(values: Sequence[Any], axis: int = 0) -> Symbol:
    return concatenate([expand_dims(v, axis) for v in promote(*values)], axis)


def reshape(x: Any, shape: Any) -> Symbol:
    if not isinstance(shape, Symbol):
        shape = np.array([shape] if isinstance(shape, (int, np.integer)) else list(shape), np.int64)
    return apply("Reshape", [as_symbol(x), shape])


def transpose(x: Any, axes: Sequence[int] | None = None) -> Symbol:
    return apply("Transpose", [as_symbol(x)], {} if axes is None else {"perm": list(axes)})


def squeeze(x: Any, axis: Any = None) -> Symbol:
    inputs: list[Any] = [as_symbol(x)]
    if axis is not None:
        inputs.append(np.array([axis] if isinstance(axis, int) else list(axis), np.int64))
    return apply("Squeeze", inputs)


def expand_dims(x: Any, axis: Any) -> Symbol:
    axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    return apply("Unsqueeze", [as_symbol(x), np.array(axes, np.int64)])


def cast(x: Any, dtype: Any) -> Symbol:
    """``x`` converted to element type ``dtype`` (a no-op when it already has it)."""
    x = as_symbol(x)
    dtype = np.dtype(dtype)
    if x.dtype == dtype:
        return x
    return apply("Cast", [x], {"to": onnx_elem_type(dtype)})


def shape(x: Any) -> Symbol:
    """The shape of ``x`` as a symbolic int64 vector."""
    return apply("Shape", [as_symbol(x)])

"""Symbolic values and the tracer that records every operation on them.

A :class:`Symbol` stands for a tensor that will exist when the model runs. Every
operation on symbols (an operator such as ``a @ b + 1``, or a function of
:mod:`mdf_loops.authoring.functions`) records one :class:`Operation` in the
*scope* being traced: the top level, or the body of a ``scan`` while its ``fn``
runs (both in :mod:`mdf_loops.authoring.operations`). Nothing is computed;
:func:`mdf_loops.authoring.build_model` later turns the recorded operations
into an MDF model.

Symbols follow numpy's typing rules (:mod:`.arithmetic`): ``x * 2`` keeps
``x``'s element type, ``float32 * int64`` is ``float64``. As in Theano, ``==``
and ``!=`` are Python's identity tests; use ``functions.eq`` / ``neq``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mdf_loops.authoring.errors import AuthoringError
from mdf_loops.authoring.operations import (  # part of this module's interface
    ROOT,
    ConstantOp,
    FormalOp,
    InputOp,
    OnnxOp,
    Operation,
    Scope,
    current_scope,
    tracing,
    user_location,
)
from mdf_loops.authoring.types import TensorType, infer_types

__all__ = [
    "Scope",
    "ROOT",
    "user_location",
    "current_scope",
    "tracing",
    "Operation",
    "OnnxOp",
    "ConstantOp",
    "InputOp",
    "FormalOp",
    "Symbol",
    "apply",
    "input",
    "constant",
    "as_symbol",
]


class Symbol:
    """A symbolic tensor: output ``index`` of operation ``op``."""

    __slots__ = ("op", "index", "type", "name", "subtensor")
    __array_ufunc__ = None  # numpy defers to our reflected operators: np.float32(2) * x

    def __init__(self, op: Operation, index: int, tensor_type: TensorType, name: str | None):
        self.op = op
        self.index = index
        self.type = tensor_type
        self.name = name
        #: (indexed symbol, normalized key) when made by ``x[key]``: for set_subtensor
        self.subtensor: tuple[Symbol, tuple] | None = None

    # -- static information
    @property
    def dtype(self) -> np.dtype:
        return self.type.dtype

    @property
    def ndim(self) -> int | None:
        return self.type.rank

    @property
    def static_shape(self) -> tuple[int | None, ...] | None:
        return self.type.shape

    @property
    def shape(self) -> Symbol:
        """The shape as a symbolic int64 vector (as in Theano)."""
        return apply("Shape", [self])

    def describe(self) -> str:
        return f"{self.op.describe()}, {self.type}"

    def __repr__(self) -> str:
        label = f"'{self.name}' " if self.name else ""
        return f"<Symbol {label}{self.type} from {self.op.describe()}>"

    def __bool__(self) -> bool:
        raise AuthoringError(
            f"{self.describe()}: a symbolic value has no truth value while tracing; "
            "use functions.where(...) for a choice, or until(...) to stop a scan"
        )

    def __len__(self) -> int:
        shape = self.type.shape
        if not shape or shape[0] is None:
            raise AuthoringError(f"{self.describe()}: len() needs a known first dimension")
        return shape[0]

    def __iter__(self):
        for k in range(len(self)):
            yield self[k]

    # -- arithmetic
    def __add__(self, other):
        return _arithmetic.binary("Add", self, other)

    def __radd__(self, other):
        return _arithmetic.binary("Add", other, self)

    def __sub__(self, other):
        return _arithmetic.binary("Sub", self, other)

    def __rsub__(self, other):
        return _arithmetic.binary("Sub", other, self)

    def __mul__(self, other):
        return _arithmetic.binary("Mul", self, other)

    def __rmul__(self, other):
        return _arithmetic.binary("Mul", other, self)

    def __truediv__(self, other):
        return _arithmetic.binary("Div", self, other, true_division=True)

    def __rtruediv__(self, other):
        return _arithmetic.binary("Div", other, self, true_division=True)

    def __pow__(self, other):
        return _arithmetic.binary("Pow", self, other)

    def __rpow__(self, other):
        return _arithmetic.binary("Pow", other, self)

    def __matmul__(self, other):
        return _arithmetic.binary("MatMul", self, other)

    def __rmatmul__(self, other):
        return _arithmetic.binary("MatMul", other, self)

    def __neg__(self):
        return apply("Neg", [self])

    def __pos__(self):
        return self

    def __abs__(self):
        return apply("Abs", [self])

    def __floordiv__(self, other):
        return _arithmetic.floor_divide(self, other)

    def __rfloordiv__(self, other):
        return _arithmetic.floor_divide(other, self)

    def __mod__(self, other):
        return _arithmetic.modulo(self, other)

    def __rmod__(self, other):
        return _arithmetic.modulo(other, self)

    # -- comparisons (== and != stay Python identity, as in Theano: use functions.eq/neq)
    def __lt__(self, other):
        return _arithmetic.binary("Less", self, other)

    def __le__(self, other):
        return _arithmetic.binary("LessOrEqual", self, other)

    def __gt__(self, other):
        return _arithmetic.binary("Greater", self, other)

    def __ge__(self, other):
        return _arithmetic.binary("GreaterOrEqual", self, other)

    __hash__ = object.__hash__

    # -- logic (booleans) and bitwise operations (integers)
    def __and__(self, other):
        return _arithmetic.logical("And", "BitwiseAnd", self, other)

    def __rand__(self, other):
        return _arithmetic.logical("And", "BitwiseAnd", other, self)

    def __or__(self, other):
        return _arithmetic.logical("Or", "BitwiseOr", self, other)

    def __ror__(self, other):
        return _arithmetic.logical("Or", "BitwiseOr", other, self)

    def __xor__(self, other):
        return _arithmetic.logical("Xor", "BitwiseXor", self, other)

    def __rxor__(self, other):
        return _arithmetic.logical("Xor", "BitwiseXor", other, self)

    def __invert__(self):
        return apply("Not" if self.dtype == np.bool_ else "BitwiseNot", [self])

    # -- indexing and common methods (as on numpy arrays / Theano variables)
    def __getitem__(self, key):
        from mdf_loops.authoring.indexing import get_item

        return get_item(self, key)

    @property
    def T(self) -> Symbol:
        return apply("Transpose", [self])

    def transpose(self, *perm: int) -> Symbol:
        return apply("Transpose", [self], {"perm": list(perm)} if perm else {})

    def astype(self, dtype) -> Symbol:
        from mdf_loops.authoring.functions import cast

        return cast(self, dtype)

    def reshape(self, *shape) -> Symbol:
        from mdf_loops.authoring.functions import reshape

        return reshape(self, shape[0] if len(shape) == 1 else shape)

    def dot(self, other) -> Symbol:
        return _arithmetic.binary("MatMul", self, other)

    def sum(self, axis=None, keepdims: bool = False) -> Symbol:
        from mdf_loops.authoring.functions import sum as sum_

        return sum_(self, axis, keepdims)

    def mean(self, axis=None, keepdims: bool = False) -> Symbol:
        from mdf_loops.authoring.functions import mean

        return mean(self, axis, keepdims)

    def max(self, axis=None, keepdims: bool = False) -> Symbol:
        from mdf_loops.authoring.functions import max as max_

        return max_(self, axis, keepdims)

    def min(self, axis=None, keepdims: bool = False) -> Symbol:
        from mdf_loops.authoring.functions import min as min_

        return min_(self, axis, keepdims)

    def prod(self, axis=None, keepdims: bool = False) -> Symbol:
        from mdf_loops.authoring.functions import prod

        return prod(self, axis, keepdims)


# ---------------------------------------------------------------- recording


def _check_visible(value: Symbol, where: str) -> None:
    scope = current_scope()
    if not scope.within(value.op.scope):
        raise AuthoringError(
            f"{where}: {value.describe()} was made inside the fn of {value.op.scope.label} "
            f"and cannot be used in {scope.label}; return it from fn instead"
        )


def apply(
    op_type: str,
    inputs: Sequence[Any],
    attributes: Mapping[str, Any] | None = None,
    n_outputs: int = 1,
    name: str | None = None,
) -> Any:
    """Record ``onnx::op_type`` on ``inputs`` (symbols, arrays or numbers; ``None`` = absent).

    Returns the output symbol, or a list of them when ``n_outputs > 1``.
    """
    attributes = dict(attributes or {})
    where = f"onnx::{op_type} at {user_location()}"
    symbols = [None if x is None else as_symbol(x) for x in inputs]
    for s in symbols:
        if s is not None:
            _check_visible(s, where)
    described = [
        None if s is None else (s.type, s.op.value if isinstance(s.op, ConstantOp) else None)
        for s in symbols
    ]
    types = infer_types(op_type, described, attributes, n_outputs, where)
    op = OnnxOp(op_type, symbols, attributes, types, name)
    return op.outputs[0] if n_outputs == 1 else list(op.outputs)


def input(name: str, shape: Sequence[int | str | None] = (), dtype: Any = "float64") -> Symbol:
    """A graph input of the model: ``shape`` entries are sizes, or None/a name when unknown."""
    if not isinstance(name, str) or not name.isidentifier():
        raise AuthoringError(f"input name {name!r} must be a Python identifier")
    dims = tuple(d if isinstance(d, int) and not isinstance(d, bool) else None for d in shape)
    names = tuple(d if isinstance(d, str) else None for d in shape)
    if any(d is not None and d < 0 for d in dims):
        raise AuthoringError(f"input '{name}': negative dimension in shape {tuple(shape)}")
    return InputOp(name, TensorType(np.dtype(dtype), dims), names).outputs[0]


def constant(value: Any, dtype: Any = None, name: str | None = None) -> Symbol:
    """A constant tensor (Python ints become int64, floats float64)."""
    array = np.array(value, dtype=dtype)
    if array.dtype == object or array.dtype.kind in "USV":
        raise AuthoringError(f"cannot make a numeric constant from {value!r}")
    return ConstantOp(array, name).outputs[0]


def as_symbol(value: Any) -> Symbol:
    """``value`` as a symbol (arrays and numbers become constants)."""
    if isinstance(value, Symbol):
        return value
    if isinstance(value, (bool, int, float, np.generic, np.ndarray, list, tuple)):
        return constant(value)
    raise AuthoringError(f"cannot use {type(value).__name__} {value!r} as a symbolic value")


# Operators of Symbol call the typing rules, which themselves record operations here.
from mdf_loops.authoring import arithmetic as _arithmetic  # noqa: E402

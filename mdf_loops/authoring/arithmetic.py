"""numpy's typing rules for operations on symbols.

Python numbers are *weak*: they take the element type of the tensor they meet
(``x * 2`` keeps ``x``'s type), except that a float meeting an integer tensor
gives float64, as in numpy 2 (NEP 50). Tensors of different element types are
promoted (``float32 * int64 -> float64``); ``/`` of integers gives float64;
``//`` and ``%`` follow Python (the remainder has the divisor's sign).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mdf_loops.authoring.errors import AuthoringError
from mdf_loops.authoring.symbolic import Symbol, apply, constant
from mdf_loops.authoring.types import onnx_elem_type
from mdf_loops.model.values import is_weak_scalar, promoted_dtype

__all__ = ["promote", "binary", "logical", "floor_divide", "modulo"]


def promote(*values: Any, true_division: bool = False) -> list[Symbol]:
    """Symbols of one element type, by numpy's rules (Python numbers are weak)."""
    for v in values:
        if not isinstance(v, (Symbol, bool, int, float, np.generic, np.ndarray, list, tuple)):
            raise AuthoringError(f"cannot use {type(v).__name__} {v!r} as a symbolic value")
    kinds = [
        v.dtype if isinstance(v, Symbol) else (v if is_weak_scalar(v) else np.asarray(v).dtype)
        for v in values
    ]
    dtype = promoted_dtype(*kinds)
    if true_division and dtype.kind in "iub":
        dtype = np.dtype(np.float64)
    out = []
    for v in values:
        if isinstance(v, Symbol):
            out.append(v if v.dtype == dtype else apply("Cast", [v], {"to": onnx_elem_type(dtype)}))
        else:
            out.append(constant(np.asarray(v, dtype=dtype)))
    return out


def binary(op_type: str, a: Any, b: Any, *, true_division: bool = False) -> Symbol:
    """Record a binary ONNX operator after promoting both operands to one element type."""
    left, right = promote(a, b, true_division=true_division)
    return apply(op_type, [left, right])


def logical(boolean_op: str, bitwise_op: str, a: Any, b: Any) -> Symbol:
    left, right = promote(a, b)
    if left.dtype == np.bool_:
        return apply(boolean_op, [left, right])
    if left.dtype.kind not in "iu":
        raise AuthoringError(f"onnx::{bitwise_op} needs booleans or integers, got {left.dtype}")
    return apply(bitwise_op, [left, right])


def floor_divide(a: Any, b: Any) -> Symbol:
    left, right = promote(a, b)
    if left.dtype.kind in "iu":  # exact: (a - a mod b) / b, mod with the divisor's sign
        remainder = apply("Mod", [left, right], {"fmod": 0})
        return apply("Div", [apply("Sub", [left, remainder]), right])
    return apply("Floor", [apply("Div", [left, right])])


def modulo(a: Any, b: Any) -> Symbol:
    """Python's ``%``: the result has the sign of the divisor."""
    left, right = promote(a, b)
    if left.dtype.kind in "iu":
        return apply("Mod", [left, right], {"fmod": 0})
    quotient = apply("Floor", [apply("Div", [left, right])])
    return apply("Sub", [left, apply("Mul", [quotient, right])])

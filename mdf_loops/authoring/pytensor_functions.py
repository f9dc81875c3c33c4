"""Tensor functions of PyTensor's namespace that numpy names differently or lacks.

``sqr``, ``alloc``, ``shape_padleft``, ``argmax``, ``cumsum``, ``cumprod``,
``and_``, ``or_``, ``flatten``, ``roll`` and ``round``, with PyTensor's
parameters and answers (``argmax``, ``cumsum``, ``cumprod`` and ``roll``
without an axis work on the flattened tensor; ``round`` rounds half to even).
Each records ONNX operators; ``cumprod``, which ONNX lacks, is a small scan.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mdf_loops.authoring.arithmetic import logical
from mdf_loops.authoring.errors import AuthoringError
from mdf_loops.authoring.functions import cast, floor, ones_like, reshape, sign
from mdf_loops.authoring.symbolic import Symbol, apply, as_symbol

__all__ = [
    "sqr",
    "alloc",
    "shape_padleft",
    "argmax",
    "cumsum",
    "cumprod",
    "and_",
    "or_",
    "flatten",
    "roll",
    "round",
]

_INT64_MAX = np.iinfo(np.int64).max


def sqr(x: Any) -> Symbol:
    """``x * x``."""
    x = as_symbol(x)
    return x * x


def _int64_vector(items: Any) -> Any:
    """A shape given as ints and/or integer scalar symbols, as an int64 vector."""
    items = list(items)
    if all(isinstance(d, (int, np.integer)) for d in items):
        return np.array(items, np.int64)
    parts = [
        apply("Unsqueeze", [cast(as_symbol(d), np.int64), np.array([0], np.int64)])
        if isinstance(d, Symbol)
        else np.array([d], np.int64)
        for d in items
    ]
    return apply("Concat", parts, {"axis": 0})


def alloc(value: Any, *shape: Any) -> Symbol:
    """``value`` broadcast to ``shape`` (ints or integer scalar symbols)."""
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = tuple(shape[0])
    return apply("Expand", [as_symbol(value), _int64_vector(shape)])


def shape_padleft(x: Any, n_ones: int = 1) -> Symbol:
    """``x`` with ``n_ones`` dimensions of size 1 added in front."""
    return apply("Unsqueeze", [as_symbol(x), np.arange(n_ones, dtype=np.int64)])


def flatten(x: Any, ndim: int = 1) -> Symbol:
    """``x`` reshaped to ``ndim`` dimensions, the last holding all the others."""
    x = as_symbol(x)
    if ndim < 1:
        raise AuthoringError(f"flatten: ndim must be 1 or more, got {ndim}")
    if ndim == 1:
        return reshape(x, [-1])
    leading = apply(
        "Slice", [apply("Shape", [x]), np.array([0], np.int64), np.array([ndim - 1], np.int64)]
    )
    return apply("Reshape", [x, apply("Concat", [leading, np.array([-1], np.int64)], {"axis": 0})])


def _along(x: Any, axis: int | None) -> tuple[Symbol, int]:
    x = as_symbol(x)
    return (flatten(x), 0) if axis is None else (x, axis)


def argmax(x: Any, axis: int | None = None, keepdims: bool = False) -> Symbol:
    """Index of the largest entry (the first of equal ones), of the flattened ``x`` by default."""
    values, along = _along(x, axis)
    return apply(
        "ArgMax", [values], {"axis": along, "keepdims": int(keepdims and axis is not None)}
    )


def cumsum(x: Any, axis: int | None = None) -> Symbol:
    """Running sums along ``axis`` (of the flattened ``x`` by default)."""
    values, along = _along(x, axis)
    if values.dtype == np.bool_:
        values = cast(values, np.int64)
    return apply("CumSum", [values, np.array(along, np.int64)])


def cumprod(x: Any, axis: int | None = None) -> Symbol:
    """Running products along ``axis`` (of the flattened ``x`` by default), as a scan."""
    from mdf_loops.authoring.scan import scan

    values, along = _along(x, axis)
    if values.dtype == np.bool_:
        values = cast(values, np.int64)
    rank = values.ndim
    if rank is None:
        raise AuthoringError(f"cumprod: the rank of {values.describe()} must be known")
    along %= max(rank, 1)
    perm = [along] + [d for d in range(rank) if d != along]
    rows = values if along == 0 else apply("Transpose", [values], {"perm": perm})
    products, _ = scan(
        lambda row, acc: acc * row, sequences=rows, outputs_info=ones_like(rows[0]), name="cumprod"
    )
    if along == 0:
        return products
    return apply("Transpose", [products], {"perm": list(np.argsort(perm))})


def and_(a: Any, b: Any) -> Symbol:
    """Bitwise and of integers, logical and of booleans."""
    return logical("And", "BitwiseAnd", a, b)


def or_(a: Any, b: Any) -> Symbol:
    """Bitwise or of integers, logical or of booleans."""
    return logical("Or", "BitwiseOr", a, b)


def roll(x: Any, shift: Any, axis: int | None = None) -> Symbol:
    """``x`` shifted by ``shift`` places along ``axis`` (of the flattened ``x`` by default)."""
    x = as_symbol(x)
    values, along = _along(x, axis)
    length = apply("Gather", [apply("Shape", [values]), np.array([along], np.int64)])
    shift = cast(as_symbol(shift), np.int64)
    # shift mod max(length, 1): an empty axis must not divide by zero
    offset = apply(
        "Mod",
        [
            apply("Unsqueeze", [shift, np.array([0], np.int64)]) if shift.ndim == 0 else shift,
            apply("Max", [length, np.array([1], np.int64)]),
        ],
    )
    split = apply("Sub", [length, offset])
    axes = np.array([along], np.int64)
    tail = apply("Slice", [values, split, np.array([_INT64_MAX], np.int64), axes])
    head = apply("Slice", [values, np.array([0], np.int64), split, axes])
    rolled = apply("Concat", [tail, head], {"axis": along})
    return rolled if axis is not None else apply("Reshape", [rolled, apply("Shape", [x])])


def round(x: Any, mode: str = "half_to_even") -> Symbol:
    """``x`` rounded to integers.

    Half to even (numpy's and PyTensor's default) or half away from zero.
    """
    x = as_symbol(x)
    if x.dtype.kind in "iub":
        return x
    if mode == "half_to_even":
        return apply("Round", [x])
    if mode == "half_away_from_zero":
        return sign(x) * floor(abs(x) + 0.5)
    raise AuthoringError(
        f"round: mode must be 'half_to_even' or 'half_away_from_zero', not {mode!r}"
    )

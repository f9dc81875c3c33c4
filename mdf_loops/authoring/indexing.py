"""Indexing of symbols (``x[i, 1:3, None]``) and writes into an indexed part (``set_subtensor``).

``x[key]`` records ONNX ``Gather`` (an integer, or an integer symbol), ``Slice``
(a slice) and ``Unsqueeze`` (``None``) nodes, and remembers ``(x, key)`` on the
result so that, as in Theano, ``set_subtensor(x[key], y)`` can rebuild ``x`` with
``y`` written there (one ``ScatterND`` node).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mdf_loops.authoring.errors import AuthoringError
from mdf_loops.authoring.symbolic import Symbol, apply, as_symbol, constant
from mdf_loops.authoring.types import onnx_elem_type

__all__ = ["get_item", "set_subtensor", "inc_subtensor"]

_INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min


def _is_int(item: Any) -> bool:
    return isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_))


def _expand_ellipsis(x: Symbol, items: tuple) -> tuple:
    consuming = sum(1 for i in items if i is not None and i is not Ellipsis)
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise AuthoringError("an index can only have a single ellipsis ('...')")
    if Ellipsis in items:
        if x.ndim is None:
            raise AuthoringError(f"{x.describe()}: '...' needs a value of known rank")
        at = items.index(Ellipsis)
        items = items[:at] + (slice(None),) * (x.ndim - consuming) + items[at + 1 :]
    elif x.ndim is not None and consuming > x.ndim:
        raise AuthoringError(f"too many indices ({consuming}) for {x.describe()} of rank {x.ndim}")
    return items


def get_item(x: Symbol, key: Any) -> Symbol:
    """``x[key]`` with numpy's basic indexing (and one integer-vector symbol per axis)."""
    items = _expand_ellipsis(x, key if isinstance(key, tuple) else (key,))
    result, axis, source_axis = x, 0, 0
    normalized: list[Any] = []
    settable = True
    for item in items:
        if item is None:
            result = apply("Unsqueeze", [result, np.array([axis], np.int64)])
            axis += 1
            settable = False
        elif isinstance(item, slice):
            if item != slice(None):
                result = _slice(result, axis, item)
            normalized.append(item)
            axis += 1
            source_axis += 1
        elif _is_int(item):
            _check_bounds(x, source_axis, int(item))
            result = apply("Gather", [result, np.array(int(item), np.int64)], {"axis": axis})
            normalized.append(int(item))
            source_axis += 1
        elif isinstance(item, Symbol):
            if item.dtype.kind not in "iu" or item.ndim not in (0, 1):
                raise AuthoringError(
                    f"an index must be an integer scalar or vector, got {item.describe()}"
                )
            result = apply("Gather", [result, item], {"axis": axis})
            normalized.append(item)
            axis += 1 if item.ndim == 1 else 0
            source_axis += 1
        else:
            raise AuthoringError(
                f"unsupported index {item!r}: use integers, integer symbols, slices, None or ..."
            )
    if result is x:
        result = apply("Identity", [x])
    if settable:
        result.subtensor = (x, tuple(normalized))
    return result


def _check_bounds(x: Symbol, axis: int, index: int) -> None:
    shape = x.static_shape
    size = shape[axis] if shape is not None and axis < len(shape) else None
    if size is not None:
        if not -size <= index < size:
            raise AuthoringError(
                f"index {index} is out of bounds for axis {axis} of size {size} ({x.describe()})"
            )


def _slice_bound(value: Any, default: int, what: str) -> Symbol:
    if value is None:
        return constant(np.array([default], np.int64))
    if _is_int(value):
        return constant(np.array([int(value)], np.int64))
    if isinstance(value, Symbol) and value.ndim == 0 and value.dtype.kind in "iu":
        as_int64 = (
            value
            if value.dtype == np.int64
            else apply("Cast", [value], {"to": onnx_elem_type(np.dtype(np.int64))})
        )
        return apply("Unsqueeze", [as_int64, np.array([0], np.int64)])
    raise AuthoringError(f"slice {what} must be an integer or an integer scalar, got {value!r}")


def _slice(x: Symbol, axis: int, item: slice) -> Symbol:
    step = 1 if item.step is None else item.step
    if _is_int(step) and step == 0:
        raise AuthoringError("slice step cannot be zero")
    backward = _is_int(step) and step < 0
    starts = _slice_bound(item.start, _INT64_MAX if backward else 0, "start")
    ends = _slice_bound(item.stop, _INT64_MIN if backward else _INT64_MAX, "stop")
    steps = _slice_bound(step, 1, "step")
    return apply("Slice", [x, starts, ends, np.array([axis], np.int64), steps])


# ---------------------------------------------------------------- writes


def set_subtensor(subtensor: Symbol, value: Any) -> Symbol:
    """The tensor ``subtensor`` was indexed from, with ``value`` written at that index.

    ``set_subtensor(x[i, j], v)`` is numpy's ``y = x.copy(); y[i, j] = v; y``;
    ``value`` is broadcast to the indexed part's shape and cast to ``x``'s type.
    """
    return _write(subtensor, value, "set_subtensor", increment=False)


def inc_subtensor(subtensor: Symbol, value: Any) -> Symbol:
    """Like :func:`set_subtensor`, adding ``value`` to what is there (``y[i, j] += v``)."""
    return _write(subtensor, value, "inc_subtensor", increment=True)


def _write(subtensor: Symbol, value: Any, what: str, increment: bool) -> Symbol:
    if not isinstance(subtensor, Symbol) or subtensor.subtensor is None:
        raise AuthoringError(
            f"{what} takes the result of indexing a symbol, e.g. {what}(x[i, j], v); "
            f"got {subtensor!r}"
        )
    x, key = subtensor.subtensor
    value = as_symbol(value)
    if value.dtype != x.dtype:
        value = apply("Cast", [value], {"to": onnx_elem_type(x.dtype)})
    if increment:
        value = apply("Add", [subtensor, value])
    updates = apply("Expand", [value, apply("Shape", [subtensor])])
    if not key:
        return updates
    return apply("ScatterND", [x, _scatter_indices(x, key), updates])


def _scatter_indices(x: Symbol, key: tuple) -> Symbol:
    """Indices of shape ``(n_1, ..., n_m, k)`` addressing every element ``x[key]`` selects."""
    columns: list[Symbol] = []  # one int64 index tensor per indexed axis
    vector_axes = [a for a, item in enumerate(key) if not _is_scalar_index(item)]
    for axis, item in enumerate(key):
        index = _index_values(x, axis, item)
        if not _is_scalar_index(item):
            position = vector_axes.index(axis)
            shape = [1] * len(vector_axes)
            shape[position] = -1
            index = apply("Reshape", [index, np.array(shape, np.int64)])
        columns.append(index)
    if vector_axes:
        sizes = [apply("Shape", [_index_values(x, a, key[a])]) for a in vector_axes]
        target = sizes[0] if len(sizes) == 1 else apply("Concat", sizes, {"axis": 0})
        columns = [apply("Expand", [c, target]) for c in columns]
    columns = [apply("Unsqueeze", [c, np.array([-1], np.int64)]) for c in columns]
    return columns[0] if len(columns) == 1 else apply("Concat", columns, {"axis": -1})


def _is_scalar_index(item: Any) -> bool:
    return _is_int(item) or (isinstance(item, Symbol) and item.ndim == 0)


def _index_values(x: Symbol, axis: int, item: Any) -> Symbol:
    """The non-negative int64 positions ``item`` selects along ``axis`` of ``x``."""
    shape = x.static_shape
    size = shape[axis] if shape is not None and axis < len(shape) else None
    if _is_int(item):
        if item >= 0 or size is not None:
            return constant(np.array(item % size if size else item, np.int64))
        return _wrap_negative(constant(np.array(item, np.int64)), x, axis)
    if isinstance(item, Symbol):
        as_int64 = (
            item
            if item.dtype == np.int64
            else apply("Cast", [item], {"to": onnx_elem_type(np.dtype(np.int64))})
        )
        return _wrap_negative(as_int64, x, axis)
    if item == slice(None):
        if size is not None:
            return constant(np.arange(size, dtype=np.int64))
        dim = apply("Gather", [apply("Shape", [x]), np.array(axis, np.int64)])
        return apply("Range", [np.array(0, np.int64), dim, np.array(1, np.int64)])
    if size is None or not all(v is None or _is_int(v) for v in (item.start, item.stop, item.step)):
        raise AuthoringError(
            f"writing through the slice {item} of axis {axis} needs constant bounds and a "
            f"known size of that axis ({x.describe()})"
        )
    return constant(np.arange(*item.indices(size), dtype=np.int64))


def _wrap_negative(index: Symbol, x: Symbol, axis: int) -> Symbol:
    dim = apply("Gather", [apply("Shape", [x]), np.array(axis, np.int64)])
    negative = apply("Less", [index, np.array(0, np.int64)])
    return apply("Where", [negative, apply("Add", [index, dim]), index])

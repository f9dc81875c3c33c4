"""ONNX sequence and optional operators: sequences are Python lists, optionals :class:`Opt`.

A sequence's length is known while tracing (it is a list), so positions into it
must be concrete.
"""

from __future__ import annotations

import numpy as np

from mdf_loops.backends.jax.registry import op
from mdf_loops.backends.jax.values import Opt, concrete, xp_of


def _position(call, position, length: int, inserting: bool = False) -> int:
    k = int(concrete(position, call.where, "the sequence position").reshape(()))
    k = k + length if k < 0 else k
    if not 0 <= k <= length - (0 if inserting else 1):
        raise IndexError(f"{call.where}: position {k} is outside a sequence of {length}")
    return k


@op("SequenceEmpty")
def _sequence_empty(call):
    return []


@op("SequenceConstruct")
def _sequence_construct(call, *xs):
    return list(xs)


@op("SequenceInsert")
def _sequence_insert(call, seq, x, position=None):
    k = len(seq) if position is None else _position(call, position, len(seq), inserting=True)
    return seq[:k] + [x] + seq[k:]


@op("SequenceErase")
def _sequence_erase(call, seq, position=None):
    k = len(seq) - 1 if position is None else _position(call, position, len(seq))
    return seq[:k] + seq[k + 1 :]


@op("SequenceAt")
def _sequence_at(call, seq, position):
    return seq[_position(call, position, len(seq))]


@op("SequenceLength")
def _sequence_length(call, seq):
    return np.asarray(len(seq), np.int64)


@op("ConcatFromSequence")
def _concat_from_sequence(call, seq):
    xp = xp_of(*seq)
    axis = call.attr("axis")
    if call.attr("new_axis", 0):
        return xp.stack(seq, axis=axis)
    return xp.concatenate(seq, axis=axis)


@op("SplitToSequence")
def _split_to_sequence(call, x, split=None):
    xp = xp_of(x)
    axis = call.attr("axis", 0)
    axis = axis + x.ndim if axis < 0 else axis
    if split is None:
        parts = [xp.take(x, k, axis=axis) for k in range(x.shape[axis])]
        if call.attr("keepdims", 1):
            parts = [xp.expand_dims(p, axis) for p in parts]
        return parts
    sizes = concrete(split, call.where, "split").reshape(-1).tolist()
    if len(sizes) == 1:
        n = int(sizes[0])
        sizes = [n] * (x.shape[axis] // n) + ([x.shape[axis] % n] if x.shape[axis] % n else [])
    return list(xp.split(x, np.cumsum(sizes)[:-1].tolist(), axis=axis))


@op("Optional")
def _optional(call, x=None):
    return Opt(x)


@op("OptionalHasElement")
def _optional_has_element(call, x=None):
    present = x is not None and not (isinstance(x, Opt) and x.value is None)
    return np.asarray(present)


@op("OptionalGetElement")
def _optional_get_element(call, x):
    if isinstance(x, Opt):
        if x.value is None:
            raise ValueError(f"{call.where}: the optional is empty")
        return x.value
    return x

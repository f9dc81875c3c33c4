"""ONNX sequences (Python lists of tensors) and optionals (:class:`Opt`) in torch."""

from __future__ import annotations

import torch

from mdf_loops.backends.torch.registry import op
from mdf_loops.backends.torch.values import Opt, ints


def _position(position, length: int, inserting: bool) -> int:
    k = ints(position)[0]
    bound = length + 1 if inserting else length
    if not -length <= k < bound:
        raise IndexError(f"position {k} is out of range for a sequence of length {length}")
    return k + length if k < 0 else k


@op("SequenceEmpty")
def _sequence_empty(call):
    return []


@op("SequenceConstruct")
def _sequence_construct(call, *xs):
    return list(xs)


@op("SequenceLength")
def _sequence_length(call, seq):
    return torch.tensor(len(seq), dtype=torch.int64)


@op("SequenceAt")
def _sequence_at(call, seq, position):
    return seq[_position(position, len(seq), False)]


@op("SequenceInsert")
def _sequence_insert(call, seq, x, position=None):
    k = len(seq) if position is None else _position(position, len(seq), True)
    return seq[:k] + [x] + seq[k:]


@op("SequenceErase")
def _sequence_erase(call, seq, position=None):
    k = len(seq) - 1 if position is None else _position(position, len(seq), False)
    return seq[:k] + seq[k + 1 :]


@op("ConcatFromSequence")
def _concat_from_sequence(call, seq):
    axis = call.attr("axis")
    if call.attr("new_axis", 0):
        return torch.stack(seq, dim=axis)
    return torch.cat(seq, dim=axis)


@op("SplitToSequence")
def _split_to_sequence(call, x, split=None):
    axis = call.attr("axis", 0) % max(x.dim(), 1)
    if split is None:
        parts = list(torch.split(x, 1, dim=axis))
        return [p.squeeze(axis) for p in parts] if call.attr("keepdims", 1) == 0 else parts
    sizes = ints(split)
    if split.dim() == 0:
        return list(torch.split(x, sizes[0], dim=axis))
    return list(torch.split(x, sizes, dim=axis))


# ---------------------------------------------------------------- optionals


@op("Optional")
def _optional(call, x=None):
    return Opt(x)


@op("OptionalHasElement")
def _optional_has_element(call, x=None):
    present = x is not None and not (isinstance(x, Opt) and x.value is None)
    return torch.tensor(present)


@op("OptionalGetElement")
def _optional_get_element(call, x):
    if not isinstance(x, Opt):
        return x  # a tensor or sequence passes as it is (opset 18)
    if x.value is None:
        raise ValueError("OptionalGetElement of an empty optional")
    return x.value

"""ONNX sequences (Python lists of tensors) and optionals (:class:`Opt`) in torch.

The operators that move values between lists and optionals are shared with the JAX
lowering (:mod:`mdf_loops.backends.containers`); here are torch's positions and
scalars, and the two that compute on tensors.
"""

from __future__ import annotations

import torch

from mdf_loops.backends.containers import register_containers
from mdf_loops.backends.torch.registry import op
from mdf_loops.backends.torch.values import ints

register_containers(
    op,
    position=lambda call, value: ints(value)[0],
    scalar=torch.tensor,  # int64 for an int, bool for a bool
)


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

"""ONNX sequence and optional operators: sequences are Python lists, optionals :class:`Opt`.

The operators that move values between lists and optionals are shared with the
torch lowering (:mod:`mdf_loops.backends.containers`); here are JAX's positions and
scalars, and the two that compute on tensors. A sequence's length is known while
tracing (it is a list), so positions into it must be concrete.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mdf_loops.backends.containers import register_containers
from mdf_loops.backends.jax.registry import op
from mdf_loops.backends.jax.values import concrete, xp_of


def _position(call, value) -> int:
    return int(concrete(value, call.where, "the sequence position").reshape(()))


def _scalar(value: int | bool) -> Any:
    return np.asarray(value, np.bool_ if isinstance(value, bool) else np.int64)


register_containers(op, position=_position, scalar=_scalar)


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

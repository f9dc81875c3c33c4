"""ONNX's ``RNN``, ``GRU`` and ``LSTM`` in torch: :mod:`mdf_loops.backends.recurrent`'s
semantics, stepped through time in a Python loop that autograd records."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mdf_loops.backends.recurrent import ArrayOps, register_recurrent
from mdf_loops.backends.torch.registry import op


def _scan(step, carry, xs):
    ys = []
    for x in xs:
        carry, y = step(carry, x)
        ys.append(y)
    if not ys:
        return carry, carry[0].new_zeros((0, *carry[0].shape))
    return carry, torch.stack(ys)


OPS = ArrayOps(
    activations={
        "tanh": torch.tanh,
        "sigmoid": torch.sigmoid,
        "relu": torch.relu,
        "softsign": F.softsign,
        "softplus": F.softplus,
    },
    stack=lambda values, axis: torch.stack(list(values), dim=axis),
    flip=lambda x: torch.flip(x, dims=(0,)),
    transpose=lambda x, perm: x.permute(*perm),
    zeros=lambda shape, like: like.new_zeros(shape),
    scan=_scan,
    backend="torch",
)

register_recurrent(op, lambda: OPS)

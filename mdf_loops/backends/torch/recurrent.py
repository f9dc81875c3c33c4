"""ONNX's ``RNN``, ``GRU`` and ``LSTM`` in torch: :mod:`mdf_loops.backends.recurrent`'s
semantics, stepped through time in a Python loop that autograd records; where torch's
own recurrent kernels compute the same (``torch.lstm``, ``torch.gru``,
``torch.rnn_tanh``/``rnn_relu``: the default activations, no peepholes, a GRU with
``linear_before_reset=1``, forward or bidirectional), those, with the gates put in
torch's order (ONNX ``LSTM`` i, o, f, c -> i, f, c, o; ``GRU`` z, r, h -> r, z, h)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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

#: torch's gate order as ONNX's gate indices, and the activations its kernel computes
_TORCH_GATES = {"LSTM": (0, 2, 3, 1), "GRU": (1, 0, 2), "RNN": (0,)}
_KERNELS: dict[tuple[str, tuple[str, ...]], Callable[..., Any]] = {
    ("LSTM", ("sigmoid", "tanh", "tanh")): torch.lstm,
    ("GRU", ("sigmoid", "tanh")): torch.gru,
    ("RNN", ("tanh",)): torch.rnn_tanh,
    ("RNN", ("relu",)): torch.rnn_relu,
}


def _fused(rec, X, W, R, B, initial_h, initial_c, P):
    """The node on torch's own kernel, or None where it computes something else."""
    kernel = _KERNELS.get((rec.kind, rec.activations[0]))
    if (
        kernel is None
        or P is not None
        or len(set(rec.activations)) != 1
        or rec.backwards not in ((False,), (False, True))
        or (rec.kind == "GRU" and not rec.linear_before_reset)
        or X.shape[int(rec.batch_first)] == 0
    ):
        return None
    if rec.batch_first:
        X = X.transpose(0, 1)
        initial_h = None if initial_h is None else initial_h.transpose(0, 1)
        initial_c = None if initial_c is None else initial_c.transpose(0, 1)
    dirs, hidden, batch = len(rec.backwards), R.shape[-1], X.shape[1]
    h0 = initial_h if initial_h is not None else X.new_zeros((dirs, batch, hidden))
    params = []
    for d in range(dirs):
        params += [_in_torch_order(rec, W[d], hidden), _in_torch_order(rec, R[d], hidden)]
        if B is not None:
            size = len(_TORCH_GATES[rec.kind]) * hidden
            params += [_in_torch_order(rec, B[d][:size], hidden)]
            params += [_in_torch_order(rec, B[d][size:], hidden)]
    options = (B is not None, 1, 0.0, False, dirs == 2, False)
    if rec.kind == "LSTM":
        c0 = initial_c if initial_c is not None else X.new_zeros((dirs, batch, hidden))
        out, *states = kernel(X, (h0, c0), params, *options)
    else:
        out, h = kernel(X, h0, params, *options)
        states = [h]
    Y = out.reshape(X.shape[0], batch, dirs, hidden).permute(0, 2, 1, 3)
    if rec.batch_first:
        return (Y.permute(2, 0, 1, 3), *(s.transpose(0, 1) for s in states))
    return (Y, *states)


def _in_torch_order(rec, weights, hidden: int):
    blocks = [weights[k * hidden : (k + 1) * hidden] for k in _TORCH_GATES[rec.kind]]
    return torch.cat(blocks) if len(blocks) > 1 else blocks[0]


register_recurrent(op, lambda: OPS, _fused)

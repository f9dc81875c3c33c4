"""ONNX's recurrent operators (``RNN``, ``GRU``, ``LSTM``) in the backends that lower node by node.

What the three compute is written once here, over an :class:`ArrayOps` (the few
array functions that differ between torch and JAX); the torch and JAX backends
each give theirs and register :func:`lower` in their operator table, the torch
one stepping through time in a Python loop (autograd records each step), the JAX
one with ``lax.scan``. The semantics are ONNX's (``onnx.reference``'s
``op_rnn.py``, ``op_gru.py``, ``op_lstm.py``): for each direction, with ``f``,
``g``, ``h`` the node's activations and ``x_t`` the step's input::

    RNN:  H = f(x_t W^T + H R^T + Wb + Rb)
    GRU:  z = f(x_t Wz^T + H Rz^T + Wbz + Rbz)        r likewise with Wr, Rr
          n = g(x_t Wh^T + (r * H) Rh^T + Rbh + Wbh)   (linear_before_reset=0)
          n = g(x_t Wh^T + r * (H Rh^T + Rbh) + Wbh)   (linear_before_reset=1)
          H = (1 - z) * n + z * H
    LSTM: i = f(x_t Wi^T + H Ri^T + Pi * C + Wbi + Rbi), f likewise, c = g(...)
          C = f * C + i * c;  o = f(x_t Wo^T + H Ro^T + Po * C + Wbo + Rbo);  H = o * h(C)

A ``reverse`` direction reads the sequence backwards and writes ``Y`` in the
sequence's order; ``layout=1`` puts the batch first in ``X``, the initial states
and the outputs. What these lowerings do not take (``sequence_lens``, ``clip``,
``input_forget``, activations with ``activation_alpha``/``beta``) is refused with a
:class:`~mdf_loops.errors.CompileError` naming the node: onnxruntime runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mdf_loops.errors import CompileError

__all__ = ["ArrayOps", "Recurrence", "lower", "register_recurrent"]

#: gates per operator: how W, R and B split
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
#: activations per direction when the node names none
DEFAULT_ACTIVATIONS = {
    "RNN": ("tanh",),
    "GRU": ("sigmoid", "tanh"),
    "LSTM": ("sigmoid", "tanh", "tanh"),
}
#: the optional input this lowering does not take, by position
_SEQUENCE_LENS = 4


@dataclass(frozen=True)
class ArrayOps:
    """The array functions a backend supplies to :func:`lower`."""

    #: ONNX activation name, lower case (``"tanh"``) -> the function
    activations: Mapping[str, Callable[[Any], Any]]
    #: ``(values, axis)`` -> the values stacked along a new ``axis``
    stack: Callable[[Sequence[Any], int], Any]
    #: a value reversed along its first axis
    flip: Callable[[Any], Any]
    #: ``(value, permutation)`` -> the value with its axes permuted
    transpose: Callable[[Any, Sequence[int]], Any]
    #: ``(shape, like)`` -> zeros of ``like``'s dtype and device
    zeros: Callable[[tuple[int, ...], Any], Any]
    #: ``(step, carry, xs)`` -> ``(carry, ys)``: ``carry, y = step(carry, x)`` for each
    #: ``x`` of ``xs`` along its first axis, the ``y`` stacked along a new first axis
    scan: Callable[[Callable, tuple, Any], tuple[tuple, Any]]
    backend: str


@dataclass(frozen=True)
class Recurrence:
    """One recurrent node's attributes as the lowering uses them."""

    kind: str  # "RNN", "GRU" or "LSTM"
    #: one entry per direction: whether it reads the sequence backwards
    backwards: tuple[bool, ...]
    #: one tuple of activation names per direction (f; f, g; or f, g, h)
    activations: tuple[tuple[str, ...], ...]
    linear_before_reset: bool
    batch_first: bool

    @classmethod
    def of(cls, call: Any, ops: ArrayOps) -> Recurrence:
        """The node's recurrence; :class:`CompileError` for what :func:`lower` does not take."""
        kind = call.proto.op_type

        def refuse(what: str) -> CompileError:
            return CompileError(
                f"{call.where}: {what} has no {ops.backend} lowering of {kind}; "
                "run the model with backend='onnxruntime'"
            )

        inputs = call.proto.input
        if len(inputs) > _SEQUENCE_LENS and inputs[_SEQUENCE_LENS]:
            raise refuse("the input sequence_lens (a length per batch entry)")
        for name in ("clip", "activation_alpha", "activation_beta"):
            if call.attr(name) is not None:
                raise refuse(f"the attribute {name}")
        if call.attr("input_forget", 0):
            raise refuse("input_forget=1 (a coupled input and forget gate)")
        direction = call.attr("direction", "forward")
        backwards = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}
        if direction not in backwards:
            raise refuse(f"direction={direction!r}")
        per_direction = len(DEFAULT_ACTIVATIONS[kind])
        names = [
            (n.decode() if isinstance(n, bytes) else n).lower()
            for n in (call.attr("activations") or DEFAULT_ACTIVATIONS[kind])
        ]
        if len(names) == per_direction:
            names = names * len(backwards[direction])
        for name in names:
            if name not in ops.activations:
                raise refuse(f"the activation {name!r} (it takes {sorted(ops.activations)})")
        if len(names) != per_direction * len(backwards[direction]):
            raise refuse(f"{len(names)} activations for direction={direction!r}")
        return cls(
            kind,
            backwards[direction],
            tuple(tuple(names[k : k + per_direction]) for k in range(0, len(names), per_direction)),
            bool(call.attr("linear_before_reset", 0)),
            bool(call.attr("layout", 0)),
        )


def register_recurrent(
    op: Callable[..., Callable],
    array_ops: Callable[[], ArrayOps],
    fused: Callable[..., tuple | None] | None = None,
) -> None:
    """Register ``RNN``, ``GRU`` and ``LSTM`` with the table decorator ``op``;
    ``array_ops()`` gives the backend's functions when a node first runs. ``fused(rec,
    X, W, R, B, initial_h, initial_c, P)`` is the backend's own kernel of the same
    semantics, or None where it has none for ``rec``; :func:`lower` runs the rest."""

    @op("RNN", "GRU", "LSTM")
    def _recurrent(call, X, W, R, B=None, _lengths=None, initial_h=None, initial_c=None, P=None):
        ops = array_ops()
        rec = Recurrence.of(call, ops)
        if fused is not None:
            result = fused(rec, X, W, R, B, initial_h, initial_c, P)
            if result is not None:
                return result
        return lower(ops, rec, X, W, R, B, initial_h, initial_c, P)


def lower(ops: ArrayOps, rec: Recurrence, X, W, R, B=None, initial_h=None, initial_c=None, P=None):
    """``(Y, Y_h)`` of an RNN or GRU node, ``(Y, Y_h, Y_c)`` of an LSTM node."""
    if rec.batch_first:
        X = ops.transpose(X, (1, 0, 2))
        initial_h = None if initial_h is None else ops.transpose(initial_h, (1, 0, 2))
        initial_c = None if initial_c is None else ops.transpose(initial_c, (1, 0, 2))
    hidden, batch = R.shape[-1], X.shape[1]
    ys, finals = [], []
    for d, backwards in enumerate(rec.backwards):
        state = [initial_h[d] if initial_h is not None else ops.zeros((batch, hidden), X)]
        if rec.kind == "LSTM":
            state.append(initial_c[d] if initial_c is not None else ops.zeros((batch, hidden), X))
        step = _step(ops, rec, d, R[d], None if B is None else B[d], None if P is None else P[d])
        xs = X @ W[d].T  # every step's input projection at once
        if B is not None:
            xs = xs + B[d][: W.shape[1]]
        carry, y = ops.scan(step, tuple(state), ops.flip(xs) if backwards else xs)
        ys.append(ops.flip(y) if backwards else y)
        finals.append(carry)
    Y = ops.stack(ys, 1)  # [sequence, directions, batch, hidden]
    outputs = [Y, ops.stack([c[0] for c in finals], 0)]
    if rec.kind == "LSTM":
        outputs.append(ops.stack([c[1] for c in finals], 0))
    if rec.batch_first:
        states = [ops.transpose(o, (1, 0, 2)) for o in outputs[1:]]
        outputs = [ops.transpose(Y, (2, 0, 1, 3)), *states]
    return tuple(outputs)


def _step(ops: ArrayOps, rec: Recurrence, d: int, R, B, P) -> Callable:
    """``(carry, projected x_t) -> (carry, H)`` of direction ``d``."""
    f, *rest = (ops.activations[name] for name in rec.activations[d])
    size = R.shape[-1]
    Rb = None if B is None else B[GATES[rec.kind] * size :]

    def gate(values, k: int):
        return values[..., k * size : (k + 1) * size]

    def recurrent(h, rows=slice(None)):
        out = h @ R[rows].T
        return out if Rb is None else out + Rb[rows]

    if rec.kind == "RNN":

        def rnn(carry, x):
            (h,) = carry
            h = f(x + recurrent(h))
            return (h,), h

        return rnn
    if rec.kind == "GRU":
        (g,) = rest

        def gru(carry, x):
            (h,) = carry
            zr = x[..., : 2 * size] + recurrent(h, slice(0, 2 * size))
            z, r = f(gate(zr, 0)), f(gate(zr, 1))
            if rec.linear_before_reset:
                n = g(gate(x, 2) + r * recurrent(h, slice(2 * size, 3 * size)))
            else:
                n = g(gate(x, 2) + recurrent(r * h, slice(2 * size, 3 * size)))
            h = (1 - z) * n + z * h
            return (h,), h

        return gru
    g, h_act = rest

    def lstm(carry, x):
        h, c = carry
        gates = x + recurrent(h)  # i, o, f, c
        i, o, forget, cell = (gate(gates, k) for k in range(4))
        if P is not None:
            i, forget = i + gate(P, 0) * c, forget + gate(P, 2) * c
        c = f(forget) * c + f(i) * g(cell)
        if P is not None:
            o = o + gate(P, 1) * c
        h = f(o) * h_act(c)
        return (h, c), h

    return lstm

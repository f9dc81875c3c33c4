"""ONNX sequences and optionals in the backends that lower a graph node by node.

In the JAX and torch lowerings a sequence is a Python list of the backend's
tensors and an optional is an :class:`~mdf_loops.backends.jax.values.Opt`, so
the operators that only take values into, out of and between lists and optionals
are written once here. A backend registers them in its
:class:`~mdf_loops.backends.optable.OperatorTable` with :func:`register_containers`,
saying how it reads a position (a tensor holding one integer) and makes a scalar
tensor; ``ConcatFromSequence`` and ``SplitToSequence`` compute on tensors and stay
in the backend's own ``sequences`` module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mdf_loops.backends.jax.values import Opt

__all__ = ["register_containers"]


def register_containers(
    op: Callable[..., Callable],
    position: Callable[[Any, Any], int],
    scalar: Callable[[int | bool], Any],
) -> None:
    """Register the list and optional operators with the table decorator ``op``.

    ``position(call, value)`` is the integer a position input holds (raising when the
    backend cannot know it); ``scalar(value)`` is the backend's 0-d tensor of a Python
    int (``int64``) or bool.
    """

    def index(call: Any, value: Any, length: int, inserting: bool = False) -> int:
        k = position(call, value)
        if not -length <= k < (length + 1 if inserting else length):
            raise IndexError(f"position {k} is outside a sequence of length {length}")
        return k + length if k < 0 else k

    @op("SequenceEmpty")
    def _sequence_empty(call):
        return []

    @op("SequenceConstruct")
    def _sequence_construct(call, *xs):
        return list(xs)

    @op("SequenceLength")
    def _sequence_length(call, seq):
        return scalar(len(seq))

    @op("SequenceAt")
    def _sequence_at(call, seq, at):
        return seq[index(call, at, len(seq))]

    @op("SequenceInsert")
    def _sequence_insert(call, seq, x, at=None):
        k = len(seq) if at is None else index(call, at, len(seq), inserting=True)
        return seq[:k] + [x] + seq[k:]

    @op("SequenceErase")
    def _sequence_erase(call, seq, at=None):
        k = len(seq) - 1 if at is None else index(call, at, len(seq))
        return seq[:k] + seq[k + 1 :]

    @op("Optional")
    def _optional(call, x=None):
        return Opt(x)

    @op("OptionalHasElement")
    def _optional_has_element(call, x=None):
        return scalar(x is not None and not (isinstance(x, Opt) and x.value is None))

    @op("OptionalGetElement")
    def _optional_get_element(call, x):
        if not isinstance(x, Opt):
            return x  # a tensor or sequence passes as it is (opset 18)
        if x.value is None:
            raise ValueError("OptionalGetElement of an empty optional")
        return x.value

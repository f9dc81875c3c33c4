"""What a proof over generated code may say of an expression, for the guard to run it inline.

:func:`~mdf_loops.safety.guarded_code.guarded_function` takes, per expression, a kind
that its caller proved: ``"float"``, ``"int"`` (bounded), ``"number"`` (a bounded int or
a float), ``"bool"``, or an :class:`ArrayKind`, a numeric array of a shape known when
the code is written. An operator on proven operands runs as its guard would run it,
without the guard: a float or a bounded number gives a number of fixed size, and
numeric arrays of known shapes give a numeric array of their broadcast shape, whose
size the caller checks against ``max_elements`` once, before the code runs
(:func:`largest_array`).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

__all__ = ["ArrayKind", "NUMBERS", "ORDERS", "Kind", "array_result", "largest_array"]

#: proven kinds of bounded numbers: a float, a bounded int, or either ("number")
NUMBERS = frozenset({"float", "int", "number"})

#: the comparisons of proven numbers that run inline (a bool, as the guard's compare
#: gives), and of proven arrays (an array of booleans); never ``is``, ``in``
ORDERS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)

#: the dtype kinds of the arrays a proof may speak of: bool, signed and unsigned
#: integers, floats (no complex numbers, no text, no objects)
NUMERIC_DTYPE_KINDS = "biuf"


@dataclass(frozen=True)
class ArrayKind:
    """A numpy array of this shape (one dimension at least) whose elements are of a
    :data:`NUMERIC_DTYPE_KINDS` dtype."""

    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def holds(self, value: object) -> bool:
        """Whether ``value`` is such an array (checked where the proof assumes it)."""
        return (
            type(value) is np.ndarray
            and value.shape == self.shape
            and value.dtype.kind in NUMERIC_DTYPE_KINDS
        )


#: what a proof may say of an expression (None: nothing)
Kind = str | ArrayKind | None


def array_result(*kinds: Kind, scalars: frozenset[str] = NUMBERS) -> ArrayKind | None:
    """The kind of an element-wise operation of operands of these kinds: an array of
    their broadcast shape where one of them at least is a proven array and the others
    are arrays or ``scalars``; None otherwise (or where the shapes do not broadcast)."""
    if not any(isinstance(kind, ArrayKind) for kind in kinds):
        return None
    shapes = []
    for kind in kinds:
        if isinstance(kind, ArrayKind):
            shapes.append(kind.shape)
        elif kind not in scalars:
            return None
    try:
        return ArrayKind(tuple(np.broadcast_shapes(*shapes)))
    except ValueError:
        return None


def largest_array(kinds: Iterable[Kind]) -> int:
    """The most elements of a proven array among ``kinds`` (0 if none)."""
    return max((kind.size for kind in kinds if isinstance(kind, ArrayKind)), default=0)

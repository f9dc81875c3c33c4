"""What a lowered model keeps of its jit-compiled functions: a bounded cache, and the key of
an objective function.

Each :class:`~mdf_loops.backends.jax.compiled.JaxModel` keeps its compiled forms (one per
input form, per gradient objective and ``wrt``, per batch form) in a
:class:`JittedFunctions`: the least recently used goes when it holds
:data:`JITTED_LIMIT`, so a program that makes new objectives forever holds a bounded
number of compiled functions.

An objective ``of`` is a name or a function. :func:`objective_key` keys a function by
what decides its traced program: its code, the objects its closure holds, its default
arguments and its module, each compared by identity (and held, so that an identity is
never reused while cached). A new lambda made on each call of a fitting loop,
``lambda out: (out["H"] * weights).sum()``, is then the same objective as long as
``weights`` is the same object; a new ``weights`` array compiles again, never
an old constant. As with ``jax.jit``, a global the function reads is taken as it was
when first compiled.
"""

from __future__ import annotations

import types
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

__all__ = ["JITTED_LIMIT", "JittedFunctions", "objective_key"]

#: compiled functions kept per lowered model
JITTED_LIMIT = 32


class JittedFunctions(OrderedDict):
    """A dict of compiled functions that keeps the :data:`JITTED_LIMIT` most recently used."""

    def __init__(self, limit: int | None = None) -> None:
        super().__init__()
        self.limit = JITTED_LIMIT if limit is None else limit

    def get(self, key: Hashable, default: Any = None) -> Any:
        try:
            value = self[key]
        except KeyError:
            return default
        self.move_to_end(key)
        return value

    def __setitem__(self, key: Hashable, value: Any) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)


class _Identities:
    """Objects compared by identity, held so that no id is reused while the key lives;
    hashed once (a key is looked up on every call)."""

    __slots__ = ("held", "ids", "_hash")

    def __init__(self, *held: Any) -> None:
        self.held = held
        self.ids = tuple(map(id, held))
        self._hash = hash(self.ids)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identities) and other.ids == self.ids

    def __hash__(self) -> int:
        return self._hash


def objective_key(of: Any) -> Hashable:
    """The cache key of an objective: a name as itself, a function by its code, closure,
    defaults and module; any other callable by identity."""
    if isinstance(of, str):
        return of
    if not isinstance(of, types.FunctionType):
        return _Identities(of)
    cells = []
    for cell in of.__closure__ or ():
        try:
            cells.append(cell.cell_contents)
        except ValueError:  # a cell not yet filled
            cells.append(cell)
    return _Identities(of.__code__, of.__defaults__, of.__kwdefaults__, of.__globals__, *cells)

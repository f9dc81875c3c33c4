"""What tracing records: the scopes operations are recorded in, and the operations.

A *scope* is the top level (:data:`ROOT`) or the body of one ``scan`` while its
``fn`` runs (nested in the scope around it); :func:`tracing` makes a scope the
current one. Each :class:`Operation` (an ONNX operator call, a constant, a graph
input, a value a loop body receives) belongs to the scope it was made in and
has :class:`~mdf_loops.authoring.symbolic.Symbol` outputs.
"""

from __future__ import annotations

import contextvars
import itertools
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

import numpy as np

from mdf_loops.authoring.types import TensorType

if TYPE_CHECKING:
    from mdf_loops.authoring.symbolic import Symbol

__all__ = [
    "Scope",
    "ROOT",
    "user_location",
    "current_scope",
    "tracing",
    "Operation",
    "OnnxOp",
    "ConstantOp",
    "InputOp",
    "FormalOp",
]


class Scope:
    """Where operations are recorded: the top level, or one ``scan`` body (nested)."""

    def __init__(self, parent: Scope | None, label: str):
        self.parent = parent
        self.label = label
        #: updates made implicitly in this scope (a random stream's next state):
        #: a scan adds those of its body to its updates; function() applies those
        #: of the top level unless told not to
        self.default_updates: dict[Symbol, Symbol] = {}

    def within(self, other: Scope) -> bool:
        """True when this scope is ``other`` or nested inside it."""
        scope: Scope | None = self
        while scope is not None:
            if scope is other:
                return True
            scope = scope.parent
        return False

    def __repr__(self) -> str:
        return f"Scope({self.label!r})"


#: The top-level scope: graph inputs and everything traced outside any ``fn``.
ROOT = Scope(None, "the top level")

_CURRENT: contextvars.ContextVar[Scope] = contextvars.ContextVar(
    "mdf_loops_authoring_scope", default=ROOT
)


def current_scope() -> Scope:
    return _CURRENT.get()


@contextmanager
def tracing(scope: Scope) -> Iterator[Scope]:
    """Record operations into ``scope`` for the duration of the block."""
    token = _CURRENT.set(scope)
    try:
        yield scope
    finally:
        _CURRENT.reset(token)


def user_location() -> str:
    """``file:line`` of the innermost caller outside this package."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("mdf_loops."):
        frame = frame.f_back
    if frame is None:
        return "?"
    return f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno}"


class Operation:
    """One recorded operation: its inputs, its output symbols and the scope it belongs to."""

    def __init__(self, inputs: Sequence[Symbol | None], scope: Scope | None = None):
        self.inputs: tuple[Symbol | None, ...] = tuple(inputs)
        self.scope = scope or current_scope()
        self.origin = user_location()
        self.outputs: list[Symbol] = []

    def _add_outputs(self, types: Sequence[TensorType], names: Sequence[str | None]) -> None:
        from mdf_loops.authoring.symbolic import Symbol  # a symbol refers to its operation

        self.outputs = [
            Symbol(self, k, t, n) for k, (t, n) in enumerate(zip(types, names, strict=True))
        ]

    def dependencies(self) -> list[Symbol]:
        """The symbols that must exist before this operation runs."""
        return [s for s in self.inputs if s is not None]

    def describe(self) -> str:
        return f"{type(self).__name__} made at {self.origin}"


class OnnxOp(Operation):
    """A call of the ONNX operator ``op_type`` with the given attributes."""

    def __init__(
        self,
        op_type: str,
        inputs,
        attributes: Mapping[str, Any],
        types: Sequence[TensorType],
        name: str | None = None,
    ):
        super().__init__(inputs)
        self.op_type = op_type
        self.attributes = dict(attributes)
        self._add_outputs(types, [name] * len(types))

    def describe(self) -> str:
        return f"the result of onnx::{self.op_type} made at {self.origin}"


class ConstantOp(Operation):
    """A constant tensor."""

    def __init__(self, value: np.ndarray, name: str | None = None):
        super().__init__(())
        self.value = value
        self._add_outputs([TensorType(value.dtype, value.shape)], [name])

    def describe(self) -> str:
        text = np.array2string(self.value, threshold=6)
        return f"constant {text} ({self.value.dtype}) made at {self.origin}"


_INPUT_SERIAL = itertools.count()


class InputOp(Operation):
    """A graph input of the authored model (always at the top level)."""

    def __init__(self, name: str, tensor_type: TensorType, dim_names: tuple[str | None, ...]):
        super().__init__((), ROOT)
        self.name = name
        self.dim_names = dim_names
        self.serial = next(_INPUT_SERIAL)  # models list their inputs in creation order
        self._add_outputs([tensor_type], [name])

    def describe(self) -> str:
        return f"input '{self.name}'"


class FormalOp(Operation):
    """A value a loop body receives at each step (a sequence slice, a past output, a state)."""

    def __init__(self, tensor_type: TensorType, role: str, name: str):
        super().__init__(())
        self.role = role
        self._add_outputs([tensor_type], [name])

    def describe(self) -> str:
        return f"{self.role} (an argument of fn)"

"""Shared values: tensors whose value lives outside the model, as PyTensor's ``shared``.

A shared value is read like any symbol; ``fn`` of a scan may update it (it
returns ``{value: new value}``), and :func:`mdf_loops.authoring.function`
writes a function's ``updates`` back after every call, so the value persists
between calls. :func:`~mdf_loops.authoring.build_model` takes the current value
as a constant; :func:`~mdf_loops.authoring.function` feeds it as an input.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from mdf_loops.authoring.errors import AuthoringError
from mdf_loops.authoring.symbolic import ROOT, Operation, Symbol
from mdf_loops.authoring.types import TensorType

__all__ = ["SharedOp", "SharedVariable", "shared"]

_SERIAL = itertools.count()


class _Storage:
    """The current value of one shared variable (copies of its operation share it)."""

    def __init__(self, value: np.ndarray):
        self.value = value


class SharedOp(Operation):
    """A shared value (always at the top level).

    Its value is read when the model is built or run.
    """

    def __init__(self, value: np.ndarray, name: str | None):
        super().__init__((), ROOT)
        self.storage = _Storage(value)
        self.serial = next(_SERIAL)
        self.dim_names = (None,) * value.ndim
        self.outputs = [SharedVariable(self, 0, TensorType(value.dtype, value.shape), name)]

    @property
    def value(self) -> np.ndarray:
        return self.storage.value

    def describe(self) -> str:
        name = self.outputs[0].name if self.outputs else None
        return f"shared value '{name}'" if name else f"a shared value made at {self.origin}"


class SharedVariable(Symbol):
    """The symbol of a shared value, with PyTensor's ``get_value`` and ``set_value``."""

    __slots__ = ()
    op: SharedOp

    def get_value(self, borrow: bool = False, return_internal_type: bool = False) -> np.ndarray:
        """A copy of the current value (the value itself with ``borrow=True``)."""
        value = self.op.storage.value
        return value if borrow else value.copy()

    def set_value(self, value: Any, borrow: bool = False) -> None:
        """Replace the value; its element type and shape must stay the same."""
        self.op.storage.value = _checked(value, self.type, self.op.describe())


def _checked(value: Any, tensor_type: TensorType, what: str) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype != tensor_type.dtype:
        if not np.can_cast(array.dtype, tensor_type.dtype, "same_kind"):
            raise AuthoringError(
                f"{what} is {tensor_type.dtype}; a {array.dtype} value would "
                f"lose information: cast it with .astype('{tensor_type.dtype}')"
            )
        array = array.astype(tensor_type.dtype)
    if array.shape != tensor_type.shape:
        raise AuthoringError(
            f"{what} has shape {tensor_type.shape}; got a value of shape "
            f"{array.shape} (a shared value keeps its shape here)"
        )
    return np.array(array, copy=True)


def shared(
    value: Any,
    name: str | None = None,
    strict: bool = False,
    allow_downcast: bool | None = None,
    **kwargs: Any,
) -> SharedVariable:
    """A shared value, as PyTensor's ``shared`` (``strict`` and ``allow_downcast`` are ignored).

    ``fn`` of a scan may update it (``return {value: new}``): the scan's updates
    dictionary then maps it to its value after the last step, and a
    :func:`~mdf_loops.authoring.function` given those updates stores that value.
    """
    if kwargs:
        raise AuthoringError(f"shared(): unknown arguments {sorted(kwargs)}")
    if name is not None and not isinstance(name, str):
        raise AuthoringError(f"shared(): name must be a string, got {name!r}")
    array = np.array(value)
    if array.dtype == object or array.dtype.kind in "USV":
        raise AuthoringError(f"shared(): cannot make a numeric value from {value!r}")
    variable = SharedOp(array, name).outputs[0]
    assert isinstance(variable, SharedVariable)
    return variable

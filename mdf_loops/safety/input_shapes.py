"""The shapes and integers of an operator's inputs as the size plans read them: a numpy
array, a torch tensor or a JAX value alike (from its shape), None for an input not given
(:mod:`~mdf_loops.safety.operator_sizes`, :mod:`~mdf_loops.safety.window_sizes`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["given", "ints", "shape", "size"]


def shape(value: Any) -> list[int]:
    """The dimensions of ``value`` (none for None)."""
    return [] if value is None else [int(d) for d in np.shape(value)]


def size(value: Any) -> int:
    """Elements of a numpy array, a torch tensor or a JAX value (from its shape)."""
    return math.prod(shape(value))


def ints(value: Any) -> list[int]:
    """The integers an input holds, flattened (a shape, axes, sizes)."""
    return [int(d) for d in np.asarray(value).reshape(-1)]


def given(inputs: list, index: int) -> Any:
    """Input ``index`` when it is given (an optional input left out reads None)."""
    return inputs[index] if len(inputs) > index and inputs[index] is not None else None

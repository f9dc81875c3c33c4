"""Checks and limits shared by the control-flow operators."""

from __future__ import annotations

import contextvars
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Iterator

import numpy as np

from ..errors import IterationLimitError, LoopError

__all__ = ["Limits", "limits", "current_limits", "IterationGuard", "normalize_axis",
           "check_same_type"]


@dataclass(frozen=True)
class Limits:
    """Bounds on the work one loop may do.

    ``max_iterations``: iterations of any single Loop or Scan execution. A Loop
    with neither trip count nor condition runs until it hits this limit.
    """

    max_iterations: int = 1_000_000


_LIMITS: contextvars.ContextVar[Limits] = contextvars.ContextVar(
    "mdf_loops_limits", default=Limits()
)


def current_limits() -> Limits:
    """The limits in force for loops evaluated now."""
    return _LIMITS.get()


@contextmanager
def limits(**changes: Any) -> Iterator[Limits]:
    """Run the block with some limits changed, e.g. ``limits(max_iterations=10**7)``."""
    new = replace(_LIMITS.get(), **changes)
    token = _LIMITS.set(new)
    try:
        yield new
    finally:
        _LIMITS.reset(token)


class IterationGuard:
    """Stops a loop that passes ``max_iterations``."""

    __slots__ = ("max_iterations",)

    def __init__(self, max_iterations: int | None = None):
        self.max_iterations = (
            current_limits().max_iterations if max_iterations is None else max_iterations
        )

    def step(self, iteration: int) -> None:
        if iteration >= self.max_iterations:
            raise IterationLimitError(
                f"stopped after {self.max_iterations} iterations (the iteration limit); "
                "if the loop is meant to run longer, raise it with "
                "mdf_loops.run(..., max_iterations=N) or `with mdf_loops.limits(max_iterations=N):`"
            )


def normalize_axis(axis: int, rank: int, name: str, what: str) -> int:
    """``axis`` in ``[0, rank)``; negative axes count from the end."""
    axis = int(axis)
    if not -rank <= axis < rank:
        raise LoopError(f"{name} = {axis} is out of range for {what} of rank {rank}")
    return axis + rank if axis < 0 else axis


def check_same_type(before: Any, after: Any, what: str, iteration: int) -> None:
    """A loop-carried tensor must keep its shape and element type."""
    if isinstance(before, np.ndarray) and isinstance(after, np.ndarray):
        if before.shape != after.shape:
            raise LoopError(
                f"{what} changed shape from {before.shape} to {after.shape} at "
                f"iteration {iteration}; a Scan state must keep its shape"
            )
        if before.dtype != after.dtype:
            raise LoopError(
                f"{what} changed element type from {before.dtype} to {after.dtype} at "
                f"iteration {iteration}"
            )

"""Checks and limits shared by the control-flow operators."""

from __future__ import annotations

import contextvars
import operator
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from mdf_loops.errors import (
    DepthLimitError,
    IterationLimitError,
    LoopError,
    SizeLimitError,
    current_location,
)

__all__ = [
    "Limits",
    "limits",
    "current_limits",
    "iteration_budget",
    "loop_scope",
    "IterationGuard",
    "element_count",
    "check_elements",
    "how_to_raise",
    "command_line",
    "running_command",
    "normalize_axis",
    "check_same_type",
]


@dataclass(frozen=True)
class Limits:
    """Bounds on the work loops may do; the defaults are far above what a reasonable model needs.

    ``max_iterations``: iterations of any single Loop or Scan execution (and steps
    of one graph's scheduler). A Loop with neither trip count nor condition runs
    until it hits this limit.
    ``max_total_iterations``: iterations of all loops of one run together, at every depth.
    ``max_depth``: how deep loop bodies (and If branches) may nest.
    ``max_elements``: elements of any single value a loop carries or produces
    (a sequence counts its members' elements together), and of any operator result.
    ``max_drawn_items``: nodes and edges of a picture (``render``), bodies at every
    depth included, counted before Graphviz is started.
    ``max_program_seconds``: wall time of an external program mdf-loops starts
    (Graphviz's ``dot``); it is killed when the time is up.
    ``max_sweep_settings``: settings of one sweep (a grid's combinations, or samples),
    counted before any is built.
    """

    max_iterations: int = 1_000_000
    max_total_iterations: int = 10_000_000
    max_depth: int = 24
    max_elements: int = 100_000_000
    max_drawn_items: int = 2_000
    max_program_seconds: int = 60
    max_sweep_settings: int = 10_000_000


#: the function that also takes a limit as a keyword argument, by limit
_KEYWORD_OF = {
    **dict.fromkeys(
        ("max_iterations", "max_total_iterations", "max_depth", "max_elements"), "mdf_loops.run"
    ),
    **dict.fromkeys(("max_drawn_items", "max_program_seconds"), "mdf_loops.render"),
}

#: the ``mdf-loops`` command running and the limits it takes as options (set by the
#: command line, :func:`command_line`), so that a message names the option the user has
_COMMAND: contextvars.ContextVar[tuple[str, frozenset[str]] | None] = contextvars.ContextVar(
    "mdf_loops_command", default=None
)


@contextmanager
def command_line(command: str, limit_options: frozenset[str]) -> Iterator[None]:
    """Inside the block, limit errors say how to raise a limit with ``mdf-loops
    <command>``'s options (``limit_options``: the limits' names it takes)."""
    token = _COMMAND.set((command, limit_options))
    try:
        yield
    finally:
        _COMMAND.reset(token)


def running_command() -> tuple[str, frozenset[str]] | None:
    """The command and limit options :func:`command_line` set, or None."""
    return _COMMAND.get()


def how_to_raise(name: str) -> str:
    """The sentence an error appends to say how to raise the limit ``name``: the option
    of the ``mdf-loops`` command running, or the Python that raises it for any call."""
    command = _COMMAND.get()
    if command is not None and name in command[1]:
        return f"raise it with `mdf-loops {command[0]} --{name.replace('_', '-')} N`"
    python = f"`with mdf_loops.safety.limits({name}=N):` around the call"
    if name in _KEYWORD_OF:
        python += f" (or {_KEYWORD_OF[name]}(..., {name}=N))"
    if command is not None:
        return f"`mdf-loops {command[0]}` has no option for it; raise it from Python with {python}"
    return f"raise it with {python}"


_LIMITS: contextvars.ContextVar[Limits] = contextvars.ContextVar(
    "mdf_loops_limits", default=Limits()
)


class _Budget:
    """Iterations left to the loops of one run."""

    __slots__ = ("used", "limit")

    def __init__(self, limit: int):
        self.used = 0
        self.limit = limit


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar(
    "mdf_loops_iteration_budget", default=None
)
_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("mdf_loops_loop_depth", default=0)


def current_limits() -> Limits:
    """The limits in force for loops evaluated now."""
    return _LIMITS.get()


@contextmanager
def limits(**changes: Any) -> Iterator[Limits]:
    """Run the block with some limits changed, e.g. ``limits(max_iterations=10**7)``."""
    for name, value in changes.items():
        try:
            changes[name] = operator.index(value)
        except TypeError:
            changes[name] = 0
        if isinstance(value, bool) or changes[name] < 1:
            raise ValueError(f"limit {name} must be a positive integer, got {value!r}")
    new = replace(_LIMITS.get(), **changes)
    token = _LIMITS.set(new)
    try:
        yield new
    finally:
        _LIMITS.reset(token)


@contextmanager
def iteration_budget() -> Iterator[None]:
    """Count the iterations of every loop in the block against ``max_total_iterations``."""
    token = _BUDGET.set(_Budget(current_limits().max_total_iterations))
    depth = _DEPTH.set(0)
    try:
        yield
    finally:
        _DEPTH.reset(depth)
        _BUDGET.reset(token)


@contextmanager
def loop_scope(kind: str) -> Iterator[int]:
    """Enter one execution of a loop (or If) ``kind``: one level deeper; yields the depth.

    Outside :func:`iteration_budget` (the stock engine used directly) the
    outermost loop starts the budget that its nested loops share.
    """
    depth = _DEPTH.get() + 1
    limit = current_limits().max_depth
    if depth > limit:
        raise DepthLimitError(
            f"{kind} bodies are nested {depth} deep; the limit is {limit} (max_depth); "
            f"if the model is meant to nest this deep, {how_to_raise('max_depth')}"
        )
    depth_token = _DEPTH.set(depth)
    budget_token = (
        _BUDGET.set(_Budget(current_limits().max_total_iterations))
        if _BUDGET.get() is None
        else None
    )
    try:
        yield depth
    finally:
        if budget_token is not None:
            _BUDGET.reset(budget_token)
        _DEPTH.reset(depth_token)


#: called as ``observer(location, iteration, total or None)`` at each iteration's start
_OBSERVER: contextvars.ContextVar[Callable[[str, int, int | None], None] | None] = (
    contextvars.ContextVar("mdf_loops_iteration_observer", default=None)
)


@contextmanager
def observe_iterations(observer: Callable[[str, int, int | None], None]) -> Iterator[None]:
    """Call ``observer(location, iteration, total)`` as each loop iteration starts.

    ``location`` names the loop (as in error messages), ``total`` is the number of
    iterations when known in advance (a Scan's length, a Loop's trip count), else
    None. For progress displays; the scheduler backend only (onnxruntime runs a
    compiled loop without calling back).
    """
    token = _OBSERVER.set(observer)
    try:
        yield
    finally:
        _OBSERVER.reset(token)


class IterationGuard:
    """Stops a loop past ``max_iterations``, or a run whose loops pass ``max_total_iterations``."""

    __slots__ = ("max_iterations", "_budget", "_kind", "_observer", "_total")

    def __init__(self, max_iterations: int | None = None, kind: str = "loop"):
        self.max_iterations = (
            current_limits().max_iterations if max_iterations is None else max_iterations
        )
        self._budget = _BUDGET.get()
        self._kind = kind
        self._observer = _OBSERVER.get()
        self._total: int | None = None

    def step(self, iteration: int) -> None:
        """Account for the start of ``iteration`` (0-based)."""
        if self._observer is not None:
            self._observer(current_location(), iteration, self._total)
        if iteration >= self.max_iterations:
            raise IterationLimitError(
                f"{self._kind} stopped at iteration {iteration}: the limit is "
                f"{self.max_iterations} iterations (max_iterations); if the loop is meant "
                f"to run longer, {how_to_raise('max_iterations')}"
            )
        budget = self._budget
        if budget is not None:
            budget.used += 1
            if budget.used > budget.limit:
                raise IterationLimitError(
                    f"{self._kind} stopped at iteration {iteration}: the loops of this run "
                    f"have run {budget.limit} iterations together, the limit "
                    f"(max_total_iterations); {how_to_raise('max_total_iterations')}"
                )

    def expect_at_most(self, count: int) -> None:
        """Tell observers the loop will run at most ``count`` iterations."""
        self._total = count

    def check_planned(self, count: int) -> None:
        """Fail now when a loop that must run ``count`` iterations would pass a limit."""
        self._total = count
        if count > self.max_iterations:
            raise IterationLimitError(
                f"{self._kind} is asked for {_count_text(count)} iterations; the limit is "
                f"{self.max_iterations} iterations (max_iterations); if the loop is meant "
                f"to run that long, {how_to_raise('max_iterations')}"
            )
        budget = self._budget
        if budget is not None and budget.used + count > budget.limit:
            raise IterationLimitError(
                f"{self._kind} is asked for {_count_text(count)} iterations, more than the "
                f"{budget.limit - budget.used} left of this run's limit of {budget.limit} "
                f"(max_total_iterations); {how_to_raise('max_total_iterations')}"
            )


def _count_text(count: int) -> str:
    """A count as a person reads it: digits, or about 1e+300 for a count of many digits."""
    return str(count) if count < 10**15 else f"about {float(count):.3g}"


def element_count(value: Any) -> int:
    """Elements of a value: an array's size (a text array's bytes, in float64-sized
    elements), a sequence's members' together (at least its length), 1 for anything else."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "US":
            return max(value.size, -(-value.nbytes // 8))
        return value.size
    if isinstance(value, list):
        return max(len(value), sum(element_count(item) for item in value))
    return 1


def check_elements(count: int, what: str, iteration: int | None = None) -> None:
    """Raise :class:`SizeLimitError` when ``what`` holds more than ``max_elements`` elements."""
    limit = _LIMITS.get().max_elements  # current_limits(), a call less: run per operation
    if count > limit:
        at = "" if iteration is None else f" at iteration {iteration}"
        raise SizeLimitError(
            f"{what} has {count} elements{at}, over the limit of {limit} (max_elements); "
            f"if the model needs values this large, {how_to_raise('max_elements')}"
        )


def normalize_axis(axis: int, rank: int, name: str, what: str) -> int:
    """``axis`` in ``[0, rank)``; negative axes count from the end."""
    axis = int(axis)
    if not -rank <= axis < rank:
        raise LoopError(f"{name} = {axis} is out of range for {what} of rank {rank}")
    return axis + rank if axis < 0 else axis


def check_same_type(
    before: Any, after: Any, what: str, iteration: int, array: Any = np.ndarray
) -> None:
    """A loop-carried tensor must keep its shape and element type (``array``: the type
    of the backend's tensors, numpy's by default; other values are not checked)."""
    if isinstance(before, array) and isinstance(after, array):
        if before.shape != after.shape:
            raise LoopError(
                f"{what} changed shape from {tuple(before.shape)} to {tuple(after.shape)} at "
                f"iteration {iteration}; a Scan state must keep its shape"
            )
        if before.dtype != after.dtype:
            raise LoopError(
                f"{what} changed element type from {before.dtype} to {after.dtype} at "
                f"iteration {iteration}"
            )

"""The exceptions mdf-loops raises, and where in a model they happened.

Every error a user can cause derives from :class:`MdfLoopsError`. Errors raised
while a model runs carry a *location*: the path from the top-level graph down
to the node (and loop iteration) that failed, e.g.
``graph 'main' > node 'rnn' > iteration 3 > node 'add'``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "MdfLoopsError",
    "ModelError",
    "EvaluationError",
    "LoopError",
    "LimitError",
    "IterationLimitError",
    "DepthLimitError",
    "SizeLimitError",
    "current_location",
    "location_frame",
]


class MdfLoopsError(Exception):
    """Base class of every error mdf-loops raises on purpose."""


class ModelError(MdfLoopsError):
    """The model breaks the loop-node convention (see docs/representation.md)."""


class EvaluationError(MdfLoopsError):
    """Evaluating a node failed; ``location`` says where."""

    def __init__(self, message: str, location: str = ""):
        self.location = location or current_location()
        self.reason = message
        super().__init__(f"{self.location}: {message}" if self.location else message)


class LoopError(EvaluationError):
    """A loop's inputs or body outputs break the operator's rules."""


class LimitError(LoopError):
    """A run hit one of its work limits (:class:`mdf_loops.Limits`).

    The message says how to raise it.
    """


class IterationLimitError(LimitError):
    """A loop (or a run's loops together) ran more iterations than the limit allows."""


class DepthLimitError(LimitError):
    """Loop bodies are nested deeper than the limit allows."""


class SizeLimitError(LimitError):
    """A loop or an operator produced a value with more elements than the limit allows."""


_FRAMES: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "mdf_loops_location", default=()
)


def current_location() -> str:
    """The path to the model element being evaluated now ('' at top level)."""
    return " > ".join(_FRAMES.get())


@contextmanager
def location_frame(frame: str) -> Iterator[None]:
    """Push ``frame`` onto the evaluation path for the duration of the block."""
    token = _FRAMES.set(_FRAMES.get() + (frame,))
    try:
        yield
    finally:
        _FRAMES.reset(token)


def push_frame(frame: str) -> contextvars.Token:
    """Low-cost form of :func:`location_frame` for hot loops; pair with :func:`pop_frame`."""
    return _FRAMES.set(_FRAMES.get() + (frame,))


def pop_frame(token: contextvars.Token) -> None:
    _FRAMES.reset(token)


def did_you_mean(name: str, known, what: str = "") -> str:
    """``"; did you mean 'x'?"`` naming the known names closest to ``name`` (difflib), or ``""``.

    Case is ignored in the comparison (``onnx::scan`` finds ``onnx::Scan``).
    """
    import difflib

    by_folded: dict[str, str] = {}
    for candidate in known:
        if isinstance(candidate, str):
            by_folded.setdefault(candidate.lower(), candidate)
    folded = str(name).lower()
    close = (
        [folded]
        if folded in by_folded
        else difflib.get_close_matches(folded, list(by_folded), n=3, cutoff=0.6)
    )
    if not close:
        return ""
    names = " or ".join(f"'{by_folded[c]}'" for c in close)
    return f"; did you mean {names}{f' ({what})' if what else ''}?"

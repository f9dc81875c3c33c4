"""Where ONNX semantics apply while modeci-mdf's engine runs: a context variable.

Outside it, the engine hooks leave the stock behaviour (stock ``onnx::``
evaluation, errors, prints, formatting, no step limit). It is set

- by the calls of ``onnx::Scan``, ``onnx::Loop`` and ``onnx::If`` (their bodies
  included),
- by ``EvaluableGraph`` for graphs marked by :mod:`mdf_loops.model.semantics`,
- by :func:`mdf_loops.run` on the scheduler backend.
"""

from __future__ import annotations

import contextvars

__all__ = ["onnx_semantics", "onnx_semantics_active", "engine_prints_logged", "prints_logged"]

_ACTIVE: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "mdf_loops_onnx_semantics", default=False
)


def onnx_semantics_active() -> bool:
    """True while the engine evaluates with ONNX semantics."""
    return _ACTIVE.get()


class onnx_semantics:  # noqa: N801 (used as a context manager, like a function)
    """Evaluate with ONNX semantics inside the ``with`` block (once per iteration: kept cheap)."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = _ACTIVE.set(True)

    def __exit__(self, *exc_info: object) -> None:
        _ACTIVE.reset(self._token)


_PRINTS_LOGGED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "mdf_loops_engine_prints_logged", default=False
)


def engine_prints_logged() -> bool:
    """True while the stock engine's prints go to the DEBUG log (ONNX semantics, or
    mdf-loops itself running the stock engine, as the time-loop probe does)."""
    return _ACTIVE.get() or _PRINTS_LOGGED.get()


class prints_logged:  # noqa: N801 (used as a context manager, like a function)
    """Send the stock engine's prints to the DEBUG log inside the ``with`` block
    (library code that runs the engine for its own purposes must not print)."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = _PRINTS_LOGGED.set(True)

    def __exit__(self, *exc_info: object) -> None:
        _PRINTS_LOGGED.reset(self._token)

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

__all__ = ["onnx_semantics", "onnx_semantics_active"]

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

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
from contextlib import contextmanager
from typing import Iterator

__all__ = ["onnx_semantics", "onnx_semantics_active"]

_ACTIVE: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "mdf_loops_onnx_semantics", default=False
)


def onnx_semantics_active() -> bool:
    """True while the engine evaluates with ONNX semantics."""
    return _ACTIVE.get()


@contextmanager
def onnx_semantics() -> Iterator[None]:
    """Evaluate with ONNX semantics inside the block."""
    token = _ACTIVE.set(True)
    try:
        yield
    finally:
        _ACTIVE.reset(token)

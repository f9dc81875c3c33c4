"""The error of the python backend: a body it does not write out."""

from __future__ import annotations

from mdf_loops.errors import ModelError

__all__ = ["NotCompilable"]


class NotCompilable(ModelError):
    """The body uses something the Python backend does not write out."""

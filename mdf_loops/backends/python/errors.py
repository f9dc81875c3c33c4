"""The error of the python backend: a body it does not write out (defined with every
other error in :mod:`mdf_loops.errors`)."""

from __future__ import annotations

from mdf_loops.errors import NotCompilable

__all__ = ["NotCompilable"]

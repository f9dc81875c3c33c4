"""Errors raised while tracing a computation or canonicalising a ``scan`` call (defined in
:mod:`mdf_loops.errors`)."""

from __future__ import annotations

from mdf_loops.errors import AuthoringError, ScanError

__all__ = ["AuthoringError", "ScanError"]

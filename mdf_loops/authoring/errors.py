"""Errors raised while tracing a computation or canonicalising a ``scan`` call."""

from __future__ import annotations

from mdf_loops.errors import MdfLoopsError

__all__ = ["AuthoringError", "ScanError"]


class AuthoringError(MdfLoopsError):
    """A traced operation is invalid (wrong types, a value used outside its scope, ...)."""


class ScanError(AuthoringError):
    """The arguments of ``scan`` (or of what ``fn`` returns) break scan's rules."""

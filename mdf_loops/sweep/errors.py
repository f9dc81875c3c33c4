"""The error a sweep raises for settings, names and files it cannot use (defined in
:mod:`mdf_loops.errors`)."""

from mdf_loops.errors import SweepError

__all__ = ["SweepError"]

"""The error a sweep raises for settings, names and files it cannot use."""

from mdf_loops.errors import MdfLoopsError

__all__ = ["SweepError"]


class SweepError(MdfLoopsError):
    """A sweep's grid, samples, outputs, output file or cluster cannot be used as given."""

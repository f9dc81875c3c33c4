"""The ``mdf-loops`` command."""

from mdf_loops.cli.commands import main

__all__ = ["main"]

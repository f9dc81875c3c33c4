"""What reaches the terminal while an ``mdf-loops`` command runs: the one place that sets
up logging and warnings for the command line.

By default a person reads only our own lines, each starting ``mdf-loops: ``:
results on stdout, and on stderr notes (``mdf-loops: wrote FILE``), warnings
(``mdf-loops: warning: <sentence>``) and errors. Lines from the libraries we use
(their loggers, their Python warnings such as numpy's ``RuntimeWarning``, the C++
logging of XLA) are held back unless ``-v`` is given:

* ``-q``: errors only;
* default: our warnings;
* ``-v``: also what mdf-loops does (INFO) and the libraries' warnings and log lines;
* ``-vv``: our debug detail; ``-vvv``: the libraries' debug output too.

Everything is restored when the command ends, so :func:`mdf_loops.cli.main` can be
called from Python without changing the caller's logging or warnings.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["terminal_output", "PREFIX"]

#: how every line of ours on stderr starts
PREFIX = "mdf-loops: "
_OWN = "mdf_loops"
_PACKAGE = str(Path(__file__).resolve().parent.parent)
#: environment settings that quiet libraries' C++ logging (read when they are imported)
_QUIET_ENVIRONMENT = {"TF_CPP_MIN_LOG_LEVEL": "2"}  # XLA (jax): errors only


class _Lines(logging.Formatter):
    """Ours: ``mdf-loops: warning: <message>`` (with the logger's name from ``-v`` on);
    a library's (shown with ``-v``): ``[<logger>] WARNING: <message>``."""

    def __init__(self, verbosity: int):
        super().__init__()
        self.verbosity = verbosity

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if record.exc_info and self.verbosity:
            message += "\n" + self.formatException(record.exc_info)
        if not _is_own(record):
            return f"[{record.name}] {record.levelname}: {message}"
        where = f"{record.name}: " if self.verbosity else ""
        return f"{PREFIX}{record.levelname.lower()}: {where}{message}"


def _is_own(record: logging.LogRecord) -> bool:
    return record.name == _OWN or record.name.startswith(_OWN + ".")


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A Python warning as a log record: ours as a sentence on the ``mdf_loops`` logger,
    a library's (numpy's overflow, a deprecation) on ``py.warnings``, shown with ``-v``."""
    if str(Path(filename).resolve()).startswith(_PACKAGE + os.sep):
        logging.getLogger(_OWN).warning("%s", message)
    else:
        logging.getLogger("py.warnings").warning(
            "%s", warnings.formatwarning(message, category, filename, lineno, line).rstrip()
        )


@contextmanager
def terminal_output(verbosity: int, quiet: bool) -> Iterator[None]:
    """Route logging and warnings to stderr as the module says while the block runs."""
    root, own = logging.getLogger(), logging.getLogger(_OWN)
    saved_handlers, saved_root_level, saved_own_level = root.handlers[:], root.level, own.level
    saved_show, saved_environment = warnings.showwarning, dict(os.environ)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Lines(verbosity))
    if not verbosity:
        handler.addFilter(_is_own)  # libraries' records stay off the terminal
        for name, value in _QUIET_ENVIRONMENT.items():
            os.environ.setdefault(name, value)
    root.handlers[:] = [handler]
    if quiet:
        root.setLevel(logging.ERROR)
        own.setLevel(logging.ERROR)
    else:
        root.setLevel(logging.DEBUG if verbosity >= 3 else logging.WARNING)
        own.setLevel({0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG))
    warnings.showwarning = _show_warning
    try:
        yield
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_root_level)
        own.setLevel(saved_own_level)
        warnings.showwarning = saved_show
        for name in _QUIET_ENVIRONMENT:
            if name in saved_environment:
                os.environ[name] = saved_environment[name]
            else:
                os.environ.pop(name, None)

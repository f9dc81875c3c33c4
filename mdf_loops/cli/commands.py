"""The ``mdf-loops`` command: run, import, export, validate and draw MDF models with loops.

Each subcommand lives in its own module of :mod:`mdf_loops.cli` with a function
``add(subparsers, common)`` that declares its parser and sets its handler
(``command``, a function ``(args) -> int``); :data:`SUBCOMMANDS` lists them, one
line each. A module imports nothing heavy at the top: parsing arguments (and
``--help``) stays fast, and each handler imports what it needs. Errors are one line on
stderr (``mdf-loops: error: ...``) and exit status 1; ``--verbose`` adds the
traceback. What else reaches the terminal (logging, warnings, the libraries' lines)
is set up in :mod:`mdf_loops.cli.output`. Files are written through a temporary file
and a rename, and never over the model being read.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from mdf_loops import __version__
from mdf_loops.cli import convert, render, run, validate
from mdf_loops.cli.output import terminal_output
from mdf_loops.errors import MdfLoopsError

#: the subcommands, in the order ``--help`` lists them; each adds its parser and handler
SUBCOMMANDS: tuple[Callable, ...] = (
    run.add,
    convert.add_import,
    convert.add_export,
    validate.add,
    render.add,
    lambda subparsers, common: _lazy_add("simulate", "add_simulate", subparsers, common),
    lambda subparsers, common: _lazy_add("sweep", "add_sweep", subparsers, common),
)


def _lazy_add(module: str, function: str, subparsers, common) -> None:
    """Add the parser of a subcommand whose module imports its work only when it runs."""
    from importlib import import_module

    getattr(import_module(f"mdf_loops.cli.{module}"), function)(subparsers, common)


__all__ = ["main", "build_parser"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command with ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    verbosity = getattr(args, "verbose", 0) or 0
    try:
        with terminal_output(verbosity, getattr(args, "quiet", False)), _command_line(args):
            return args.command(args)
    except KeyboardInterrupt:
        print("mdf-loops: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `mdf-loops run ... | head`
        _silence_stdout()
        return 0
    except Exception as exc:  # every failure becomes one readable line
        if verbosity:
            traceback.print_exc(file=sys.stderr)
        print(f"mdf-loops: error: {_one_line(exc, verbosity)}", file=sys.stderr)
        return 1


@contextmanager
def _command_line(args: argparse.Namespace) -> Iterator[None]:
    """The command and the limits it takes as options, for the messages that say how to
    raise a limit (:func:`mdf_loops.ops.common.how_to_raise`)."""
    from mdf_loops.ops.common import command_line

    options = frozenset(k for k in vars(args) if k.startswith("max_") and k != "max_memory")
    with command_line(args.subcommand, options):
        yield


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``mdf-loops`` and its subcommands."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=argparse.SUPPRESS,
        help="log what happens (-vv: debug detail); show tracebacks of errors",
    )
    common.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print only results and errors: no progress, notes or warnings",
    )
    parser = argparse.ArgumentParser(
        prog="mdf-loops",
        description="Run, import, export, validate and draw MDF models with ONNX Scan, Loop "
        "and If nodes.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"mdf-loops {__version__}")
    subparsers = parser.add_subparsers(
        title="commands", metavar="COMMAND", required=True, dest="subcommand"
    )
    for add in SUBCOMMANDS:
        add(subparsers, common)
    return parser


def _one_line(exc: BaseException, verbosity: int) -> str:
    message = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, MdfLoopsError):
        return message
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.filename}: {exc.strerror or message}"
    hint = "" if verbosity else " (run with --verbose for the traceback)"
    return f"unexpected {type(exc).__name__}: {message}{hint}"


def _silence_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    sys.exit(main())

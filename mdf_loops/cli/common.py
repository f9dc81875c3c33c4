"""Steps every ``mdf-loops`` subcommand shares: checking paths, loading a valid model, notes."""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from mdf_loops.errors import MdfLoopsError, ModelError
from mdf_loops.files import refuse_overwriting

MODEL_FILES = (".json", ".yaml", ".yml", ".onnx")


def add_input_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-i",
        "--input",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an input: NAME=FILE.npy, NAME=FILE.npz (the array stored as NAME), "
        "NAME=JSON (e.g. 'x=[1, 2, 3]'), or FILE.npz for all its arrays; "
        "repeat for several inputs",
    )


def positive_int(text: str) -> int:
    try:
        value = int(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
    return value


def add_limit_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="stop after this many seconds of wall clock or CPU time: loading, "
        "checking and running happen in a child process the kernel stops",
    )
    p.add_argument(
        "--max-memory",
        type=_memory_size,
        metavar="SIZE",
        help="cap the memory of that child process (e.g. 2G, 800M)",
    )
    p.add_argument(
        "--external-data-dir",
        metavar="DIR",
        help="read an ONNX file's external tensor data from files inside DIR "
        "(otherwise only with --trusted, from the model's folder)",
    )


def _memory_size(text: str) -> int:
    from mdf_loops.safety.sandbox import parse_memory

    try:
        return parse_memory(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def limited(args: argparse.Namespace, work: Callable[[], Any], what: str) -> Any:
    """``work()`` with the ONNX file access the options give; in a child process under hard
    limits when --timeout or --max-memory is given (mdf_loops.safety.sandbox). ``work``
    is picklable (a ``functools.partial`` of a module's function): a child started afresh
    receives it pickled."""
    accessed = functools.partial(
        _with_file_access, getattr(args, "trusted", False), args.external_data_dir, work
    )
    if not (args.timeout or args.max_memory):
        return accessed()
    from mdf_loops.safety.sandbox import call_limited

    return call_limited(accessed, timeout=args.timeout, max_memory=args.max_memory, what=what)


def _with_file_access(trusted: bool, external_data_dir: str | None, work: Callable[[], Any]):
    from mdf_loops.safety.onnx_files import onnx_file_access

    with onnx_file_access(trusted=trusted, external_data_dir=external_data_dir):
        return work()


def check_model_path(path: str) -> None:
    if not path.endswith(MODEL_FILES):
        raise MdfLoopsError(f"{path}: expected a model file ending in {', '.join(MODEL_FILES)}")
    if not os.path.exists(path):
        raise MdfLoopsError(f"{path}: no such file")


def check_output(path: str, extensions: tuple[str, ...], model: str) -> None:
    """Fail before any work when the output could not be written."""
    if not path.lower().endswith(extensions):
        raise MdfLoopsError(f"{path}: the output must end in {' or '.join(extensions)}")
    folder = Path(path).parent
    if not folder.is_dir():
        raise MdfLoopsError(f"{path}: folder '{folder}' does not exist")
    refuse_overwriting(path, model)


def load_valid_model(path: str, trusted: bool = False):
    """The model in ``path``; an MDF file is validated first and its first problem is the
    error (an ONNX file is imported, and the importer writes the convention). A trusted
    model's expressions are not held to the allow-list."""
    from mdf_loops.run import load_model
    from mdf_loops.validation.report import validate

    check_model_path(path)
    if not path.endswith(".onnx"):
        problems = validate(path, expressions=not trusted)
        if problems:
            more = (
                f" (and {len(problems) - 1} more; see `mdf-loops validate {path}`)"
                if len(problems) > 1
                else ""
            )
            raise ModelError(f"{path} is not a valid model: {problems[0]}{more}")
    return load_model(path)


def graph_of(model, graph_id: str | None):
    from mdf_loops.model.interface import select_graph

    return select_graph(model, graph_id)


def note(args: argparse.Namespace, message: str, stream: TextIO | None = None) -> None:
    """An informational line, left out under --quiet: on stderr (the default) it starts
    ``mdf-loops: ``, like every line of ours there; ``stream`` (e.g. stdout) takes it as is."""
    if not getattr(args, "quiet", False):
        print(message if stream else f"mdf-loops: {message}", file=stream or sys.stderr)


def count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"

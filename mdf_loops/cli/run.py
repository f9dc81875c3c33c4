"""``mdf-loops run``: run a model and print or save its outputs."""

from __future__ import annotations

import argparse
import functools
import logging
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from mdf_loops.cli.common import (
    MdfLoopsError,
    add_input_option,
    add_limit_options,
    check_output,
    count,
    limited,
    load_valid_model,
    note,
    positive_int,
)
from mdf_loops.cli.progress import progress, shows_progress
from mdf_loops.files import write_atomically

_log = logging.getLogger(__name__)


def add(subparsers, common) -> None:
    p = subparsers.add_parser(
        "run",
        parents=[common],
        help="run a model and print or save its outputs",
        description="Run an MDF (JSON/YAML) or ONNX model once and print each output's name, "
        "element type, shape and values, or save them to an .npz file. Inputs not "
        "given take the model's default values.",
    )
    p.add_argument("model", metavar="MODEL", help="MDF JSON/YAML or ONNX file")
    add_input_option(p)
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="save the outputs instead of printing them: FILE.npz (a NumPy archive), "
        "FILE.npy (a model with one output), FILE.json or FILE.csv (one row "
        "per element)",
    )
    p.add_argument(
        "--full",
        action="store_true",
        help="print every value to full precision (the default when the output "
        "is not a terminal); on a terminal long arrays are abridged",
    )
    p.add_argument("--graph", metavar="ID", help="the graph to run (default: the first)")
    p.add_argument(
        "--trusted",
        action="store_true",
        help="skip the expression allow-list: the model's expressions run as any "
        "Python (only for models whose author you trust; see docs/safety.md)",
    )
    for name, default in (
        ("max-iterations", "1,000,000"),
        ("max-total-iterations", "10,000,000"),
        ("max-depth", "24"),
        ("max-elements", "100,000,000"),
    ):
        p.add_argument(
            f"--{name}",
            type=positive_int,
            metavar="N",
            help=f"work limit (default {default}); see docs/safety.md",
        )
    add_limit_options(p)
    p.add_argument(
        "--backend",
        choices=("auto", "scheduler", "onnxruntime", "jax", "torch"),
        default="auto",
        help="scheduler: every loop iteration through modeci-mdf's engine (shows "
        "progress); onnxruntime: the model compiled to one ONNX model; auto "
        "(default): onnxruntime when the model compiles, else the scheduler",
    )
    p.set_defaults(command=_run)


def _run_keywords(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments of :func:`mdf_loops.run` given by the command-line options."""
    keywords = {"graph": args.graph, "backend": args.backend, "trusted": args.trusted}
    for name in ("max_iterations", "max_total_iterations", "max_depth", "max_elements"):
        if getattr(args, name) is not None:
            keywords[name] = getattr(args, name)
    return keywords


def _load_and_run(args: argparse.Namespace, progress_here: bool = False) -> dict[str, Any]:
    from mdf_loops.cli.io import read_inputs
    from mdf_loops.model.interface import graph_interface, select_graph
    from mdf_loops.run import run

    model = load_valid_model(args.model, args.trusted)
    graph = select_graph(model, args.graph)
    if args.output and args.output.lower().endswith(".npy"):
        names = list(graph_interface(graph).outputs)
        if len(names) != 1:
            raise MdfLoopsError(
                f"{args.output}: an .npy file holds one array, and the model has "
                f"{len(names)} outputs ({', '.join(names)}); write -o OUT.npz, "
                "OUT.json or OUT.csv"
            )
    inputs = read_inputs(args.input, graph)
    with ExitStack() as stack:
        if progress_here and shows_progress(args):  # a child under --timeout/--max-memory
            stack.enter_context(progress(sys.stderr))
        return run(model, inputs, **_run_keywords(args))


def _run(args: argparse.Namespace) -> int:
    from mdf_loops.cli.io import OUTPUT_FORMATS, encode_outputs, format_outputs

    if args.output:
        check_output(args.output, OUTPUT_FORMATS, args.model)

    started = time.monotonic()
    in_child = bool(args.timeout or args.max_memory)  # limited() runs the work in a child
    with ExitStack() as stack:
        if not in_child and shows_progress(args):  # from the start: imports and loading too
            stack.enter_context(progress(sys.stderr))
        work = functools.partial(_load_and_run, args, in_child)
        outputs = limited(args, work, f"running {args.model}")
    _log.info("ran %s in %.3f s", args.model, time.monotonic() - started)
    if args.output:
        data, left_out = encode_outputs(outputs, args.output)
        write_atomically(args.output, data)
        kind = Path(args.output).suffix.lower()
        for name in left_out:
            note(args, f"output '{name}' is an empty optional; a {kind} file cannot hold it")
        written = sum(value is not None for value in outputs.values())
        note(args, f"wrote {count(written, 'output')} to {args.output}")
    else:
        sys.stdout.write(format_outputs(outputs, full=args.full or not sys.stdout.isatty()))
    return 0

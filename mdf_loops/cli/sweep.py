"""``mdf-loops sweep``: run a model over a grid of parameter values, save an xarray file.

Only :func:`add_sweep` runs when the parser is built; Dask, xarray and the engine
are imported when the command runs.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

__all__ = ["add_sweep", "parse_values"]


def add_sweep(subparsers, common) -> None:
    """Declare ``mdf-loops sweep`` and its options."""
    from mdf_loops.cli.common import add_input_option

    p = subparsers.add_parser(
        "sweep",
        parents=[common],
        help="run a model over a grid of parameter values",
        description="Run a model once per combination of --param values on a Dask cluster "
        "(local, one worker per core, unless --scheduler is given) and save the "
        "outputs as an xarray dataset with one dimension per --param. A setting "
        "that fails is recorded in the 'error' variable; running the same sweep "
        "again with the same output file resumes it.",
    )
    p.add_argument("model", metavar="MODEL", help="MDF JSON/YAML or ONNX file")
    p.add_argument(
        "--param",
        action="append",
        required=True,
        type=_param,
        metavar="NAME=VALUES",
        help="a swept parameter 'node.parameter' (or an input name) and its "
        "values: START:STOP:COUNT (evenly spaced, both ends included) or "
        "V1,V2,...; repeat for a grid over several",
    )
    add_input_option(p)
    _add_output_options(p)
    _add_run_options(p)
    p.set_defaults(command=_sweep)


def _add_output_options(p: argparse.ArgumentParser) -> None:
    """Where the results go and which outputs they keep."""
    p.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE.nc",
        help="results file: netCDF (.nc) or zarr (.zarr); resumed if it exists",
    )
    p.add_argument(
        "--output-name",
        action="append",
        metavar="NAME",
        help="an output to keep (default: all); repeat for several",
    )


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """Where and how the settings run."""
    from mdf_loops.cli.common import positive_int

    p.add_argument(
        "--scheduler", metavar="ADDRESS", help="run on this Dask scheduler, e.g. tcp://host:8786"
    )
    p.add_argument(
        "--scheduler-timeout",
        type=_seconds,
        metavar="SECONDS",
        help="how long to wait for the scheduler to answer and for a worker to connect; "
        "past it the sweep ends with an error, its finished settings saved (default: "
        "mdf_loops.sweep's, 60)",
    )
    p.add_argument(
        "--batch-size",
        type=positive_int,
        metavar="N",
        help="settings per task (default: about four tasks per worker)",
    )
    p.add_argument(
        "--backend", default="auto", help="auto (default), scheduler or onnxruntime, as for 'run'"
    )
    p.add_argument("--graph", metavar="ID", help="the graph to run (default: the first)")
    p.add_argument(
        "--trusted", action="store_true", help="skip the expression allow-list (see docs/safety.md)"
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text}")
    return value


def parse_values(text: str) -> list[float] | list[int]:
    """``"0.1:1.0:10"`` as 10 evenly spaced values; ``"1,2,4"`` as a list."""
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise ValueError(f"expected START:STOP:COUNT, got {text!r}")
        start, stop, count = float(parts[0]), float(parts[1]), int(parts[2])
        if count < 1:
            raise ValueError(f"COUNT must be at least 1, got {count}")
        from mdf_loops.ops.common import current_limits

        limit = current_limits().max_sweep_settings
        if count > limit:  # refused before the values are built
            raise ValueError(f"COUNT {count:,} is more than a sweep's {limit:,} settings")
        return [start + (stop - start) * k / max(count - 1, 1) for k in range(count)]
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise ValueError("no values")
    try:
        return [int(item) for item in items]
    except ValueError:
        return [float(item) for item in items]


def _param(text: str) -> tuple[str, list]:
    name, sep, values = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(
            f"expected NAME=VALUES, e.g. node.rate=0.1:1.0:10; got {text!r}"
        )
    try:
        return name.strip(), parse_values(values)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{name.strip()}: {exc}") from None


def _sweep(args: argparse.Namespace) -> int:
    from mdf_loops.cli.common import load_valid_model, note
    from mdf_loops.cli.io import read_inputs
    from mdf_loops.cli.progress import shows_progress
    from mdf_loops.model.interface import select_graph
    from mdf_loops.sweep import SweepError, sweep
    from mdf_loops.sweep.results import check_output_path

    check_output_path(args.output)
    grid = dict(args.param)
    if len(grid) != len(args.param):
        raise SweepError("each --param name may be given once")
    model = load_valid_model(args.model, args.trusted)
    inputs = read_inputs(args.input, select_graph(model, args.graph))
    bar = _ProgressBar(sys.stderr) if shows_progress(args) else None
    try:
        with _dask_logging(getattr(args, "verbose", 0) or 0):
            dataset = sweep(
                model,
                grid,
                inputs=inputs,
                outputs=args.output_name,
                backend=args.backend,
                client=args.scheduler,
                batch_size=args.batch_size,
                output=args.output,
                graph=args.graph,
                trusted=args.trusted,
                progress=bar.update if bar else None,
                **({"timeout": args.scheduler_timeout} if args.scheduler_timeout else {}),
            )
    finally:
        if bar:
            bar.clear()
    failed = int((dataset["error"] != "").sum())
    total = int(dataset["completed"].size)
    note(
        args,
        f"wrote {total:,} settings to {args.output}"
        + (f"; {failed:,} failed (see the 'error' variable)" if failed else ""),
    )
    return 0


#: the loggers of Dask and of the libraries it runs on
_DASK_LOGGERS = ("distributed", "dask", "tornado", "bokeh", "asyncio")


@contextmanager
def _dask_logging(verbosity: int) -> Iterator[None]:
    """While the command runs, Dask's log records go to the command's own handler (Dask's
    handlers are set aside): none without -v, warnings and errors with -v, everything with
    -vvv; Dask's Python warnings show with -v only. Restored afterwards."""
    level = {0: logging.CRITICAL + 1, 1: logging.WARNING, 2: logging.WARNING}.get(
        verbosity, logging.DEBUG
    )
    import distributed  # noqa: F401 - it sets its loggers' levels when first imported

    saved = []
    known = [n for n in logging.root.manager.loggerDict if n.split(".")[0] in _DASK_LOGGERS]
    for name in sorted(set(_DASK_LOGGERS).union(known)):
        logger = logging.getLogger(name)
        saved.append((logger, logger.level, logger.handlers[:], logger.propagate))
        logger.handlers[:] = []
        logger.propagate = True
        logger.setLevel(level if name in _DASK_LOGGERS else logging.NOTSET)  # as its root
    try:
        with warnings.catch_warnings():
            if not verbosity:
                for module in _DASK_LOGGERS:
                    warnings.filterwarnings("ignore", module=module)
            yield
    finally:
        for logger, old_level, handlers, propagate in saved:
            logger.setLevel(old_level)
            logger.handlers[:] = handlers
            logger.propagate = propagate


class _ProgressBar:
    """``sweep: [#####.....] 500/1,000 settings``, redrawn at most ten times a second."""

    def __init__(self, stream: TextIO, width: int = 30):
        self.stream, self.width = stream, width
        self.last = 0.0
        self.shown = 0

    def update(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last < 0.1 and done < total:
            return
        self.last = now
        filled = self.width * done // max(total, 1)
        text = f"sweep: [{'#' * filled}{'.' * (self.width - filled)}] {done:,}/{total:,} settings"
        self.stream.write("\r" + text.ljust(self.shown))
        self.stream.flush()
        self.shown = len(text)

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r" + " " * self.shown + "\r")
            self.stream.flush()
            self.shown = 0

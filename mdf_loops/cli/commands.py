"""The ``mdf-loops`` command: run, import, export, validate and draw MDF models with loops.

Every subcommand is one function ``_<name>(args) -> int`` and one function
``_add_<name>(subparsers)`` that declares its options. Errors are one line on
stderr (``mdf-loops: error: ...``) and exit status 1; ``--verbose`` adds the
traceback. Files are written through a temporary file and a rename, and never
over the model being read.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import traceback
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TextIO

from mdf_loops import __version__
from mdf_loops.errors import MdfLoopsError, ModelError
from mdf_loops.files import refuse_overwriting, write_atomically

__all__ = ["main", "build_parser"]

_log = logging.getLogger(__name__)

_MODEL_FILES = (".json", ".yaml", ".yml", ".onnx")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command with ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    verbosity = getattr(args, "verbose", 0) or 0
    try:
        with _logging_to_stderr(verbosity, getattr(args, "quiet", False)):
            return args.command(args)
    except KeyboardInterrupt:
        print("mdf-loops: interrupted", file=sys.stderr)
        return 130
    except _Timeout as exc:
        print(f"mdf-loops: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. `mdf-loops run ... | head`
        _silence_stdout()
        return 0
    except Exception as exc:  # every failure becomes one readable line
        if verbosity:
            traceback.print_exc(file=sys.stderr)
        print(f"mdf-loops: error: {_one_line(exc, verbosity)}", file=sys.stderr)
        return 1


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``mdf-loops`` and its subcommands."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                        help="log what happens (-vv: debug detail); show tracebacks of errors")
    common.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                        help="print only results and errors: no progress, notes or warnings")
    parser = argparse.ArgumentParser(
        prog="mdf-loops",
        description="Run, import, export, validate and draw MDF models with ONNX Scan, Loop "
                    "and If nodes.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"mdf-loops {__version__}")
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    for add in (_add_run, _add_import, _add_export, _add_validate, _add_render):
        add(subparsers, common)
    return parser


# ---------------------------------------------------------------- run


def _add_run(subparsers, common) -> None:
    p = subparsers.add_parser(
        "run", parents=[common], help="run a model and print or save its outputs",
        description="Run an MDF (JSON/YAML) or ONNX model once and print each output's name, "
                    "element type, shape and values, or save them to an .npz file. Inputs not "
                    "given take the model's default values.")
    p.add_argument("model", metavar="MODEL", help="MDF JSON/YAML or ONNX file")
    _add_input_option(p)
    p.add_argument("-o", "--output", metavar="FILE",
                   help="save the outputs instead of printing them: FILE.npz (a NumPy archive), "
                        "FILE.npy (a model with one output), FILE.json or FILE.csv (one row "
                        "per element)")
    p.add_argument("--full", action="store_true",
                   help="print every value to full precision (the default when the output "
                        "is not a terminal); on a terminal long arrays are abridged")
    p.add_argument("--graph", metavar="ID", help="the graph to run (default: the first)")
    p.add_argument("--trusted", action="store_true",
                   help="skip the expression allow-list: the model's expressions run as any "
                        "Python (only for models whose author you trust; see docs/safety.md)")
    for name, default in (("max-iterations", "1,000,000"), ("max-total-iterations", "10,000,000"),
                          ("max-depth", "24"), ("max-elements", "100,000,000")):
        p.add_argument(f"--{name}", type=_positive_int, metavar="N",
                       help=f"work limit (default {default}); see docs/safety.md")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="stop a run that takes longer than this (wall clock, and CPU time "
                        "as a backstop for a single long computation)")
    p.add_argument("--backend", choices=("auto", "scheduler", "onnxruntime"), default="auto",
                   help="scheduler: every loop iteration through modeci-mdf's engine (shows "
                        "progress); onnxruntime: the model compiled to one ONNX model; auto "
                        "(default): onnxruntime when the model compiles, else the scheduler")
    p.set_defaults(command=_run)


def _add_input_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("-i", "--input", action="append", default=[], metavar="NAME=VALUE",
                   help="an input: NAME=FILE.npy, NAME=FILE.npz (the array stored as NAME), "
                        "NAME=JSON (e.g. 'x=[1, 2, 3]'), or FILE.npz for all its arrays; "
                        "repeat for several inputs")


def _run_keywords(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments of :func:`mdf_loops.run` given by the command-line options."""
    keywords = {"graph": args.graph, "backend": args.backend, "trusted": args.trusted}
    for name in ("max_iterations", "max_total_iterations", "max_depth", "max_elements"):
        if getattr(args, name) is not None:
            keywords[name] = getattr(args, name)
    return keywords


def _positive_int(text: str) -> int:
    try:
        value = int(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
    return value


class _Timeout(BaseException):
    """Raised by the alarm of --timeout (a BaseException: no library handler swallows it)."""


@contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Interrupt the block after ``seconds`` of wall clock (or of CPU time, as a backstop)."""
    if not seconds:
        yield
        return
    import resource
    import signal

    def expire(signum, frame):
        raise _Timeout(f"the run took longer than {seconds:g} s (--timeout)")

    old_alarm = signal.signal(signal.SIGALRM, expire)
    old_cpu = signal.signal(signal.SIGXCPU, expire)
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    used = resource.getrusage(resource.RUSAGE_SELF).ru_utime
    cap = int(used + seconds) + 2
    if hard == resource.RLIM_INFINITY or cap < hard:
        resource.setrlimit(resource.RLIMIT_CPU, (cap, hard))
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
        signal.signal(signal.SIGALRM, old_alarm)
        signal.signal(signal.SIGXCPU, old_cpu)


def _run(args: argparse.Namespace) -> int:
    from mdf_loops.cli.io import OUTPUT_FORMATS, encode_outputs, format_outputs, read_inputs
    from mdf_loops.model.interface import graph_interface
    from mdf_loops.run import run

    if args.output:
        _check_output(args.output, OUTPUT_FORMATS, args.model)
    model = _load_valid_model(args.model, args.trusted)
    graph = _graph_of(model, args.graph)
    if args.output and args.output.lower().endswith(".npy"):
        names = list(graph_interface(graph).outputs)
        if len(names) != 1:
            raise MdfLoopsError(f"{args.output}: an .npy file holds one array, and the model has "
                                f"{len(names)} outputs ({', '.join(names)}); write -o OUT.npz, "
                                "OUT.json or OUT.csv")
    inputs = read_inputs(args.input, graph)
    started = time.monotonic()
    with ExitStack() as stack:
        stack.enter_context(_time_limit(args.timeout))
        if _shows_progress(args):
            stack.enter_context(_progress(sys.stderr))
        outputs = run(model, inputs, **_run_keywords(args))
    _log.info("ran %s in %.3f s", args.model, time.monotonic() - started)
    if args.output:
        data, left_out = encode_outputs(outputs, args.output)
        write_atomically(args.output, data)
        kind = Path(args.output).suffix.lower()
        for name in left_out:
            _note(args, f"output '{name}' is an empty optional; a {kind} file cannot hold it")
        written = sum(value is not None for value in outputs.values())
        _note(args, f"wrote {_count(written, 'output')} to {args.output}")
    else:
        sys.stdout.write(format_outputs(outputs, full=args.full or not sys.stdout.isatty()))
    return 0


# ---------------------------------------------------------------- import / export


def _add_import(subparsers, common) -> None:
    p = subparsers.add_parser(
        "import", parents=[common], help="convert an ONNX model to MDF JSON or YAML",
        description="Convert an ONNX model (with Scan, Loop and If at any depth) to an MDF "
                    "model in JSON or YAML, chosen by the output file's extension.")
    p.add_argument("model", metavar="MODEL.onnx", help="the ONNX model")
    p.add_argument("-o", "--output", required=True, metavar="OUT.json|OUT.yaml",
                   help="the MDF file to write")
    p.set_defaults(command=_import)


def _import(args: argparse.Namespace) -> int:
    from mdf_loops.onnx.import_ import onnx_to_mdf

    _check_output(args.output, (".json", ".yaml", ".yml"), args.model)
    if not args.model.endswith(".onnx"):
        raise MdfLoopsError(f"{args.model}: expected an .onnx file to import")
    model = onnx_to_mdf(args.model)
    text = model.to_json() if args.output.endswith(".json") else model.to_yaml()
    write_atomically(args.output, text)
    _note(args, f"wrote {args.output}")
    return 0


def _add_export(subparsers, common) -> None:
    p = subparsers.add_parser(
        "export", parents=[common], help="convert an MDF model to ONNX",
        description="Convert an MDF model (JSON/YAML) with loop nodes to an ONNX model. Inputs "
                    "given with --input serve as examples: their element types and shapes type "
                    "the ONNX inputs the model does not declare.")
    p.add_argument("model", metavar="MODEL", help="MDF JSON/YAML file")
    p.add_argument("-o", "--output", required=True, metavar="OUT.onnx", help="the ONNX file to write")
    _add_input_option(p)
    p.add_argument("--opset", type=int, metavar="N",
                   help="ONNX opset to declare (default: the model's, else a recent one)")
    p.add_argument("--graph", metavar="ID", help="the graph to export (default: the first)")
    p.set_defaults(command=_export)


def _export(args: argparse.Namespace) -> int:
    from mdf_loops.cli.io import read_inputs
    from mdf_loops.onnx.export import UntypedInputError, mdf_to_onnx

    _check_output(args.output, (".onnx",), args.model)
    model = _load_valid_model(args.model)
    inputs = read_inputs(args.input, _graph_of(model, args.graph))
    try:
        exported = mdf_to_onnx(model, graph=args.graph, example_inputs=inputs, opset=args.opset)
    except UntypedInputError as exc:  # name the command line's way to give an example
        raise UntypedInputError(exc.graph_id, exc.name,
                                f"give an example value with -i {exc.name}=VALUE") from None
    write_atomically(args.output, exported.SerializeToString())
    _note(args, f"wrote {args.output}")
    return 0


# ---------------------------------------------------------------- validate / render


def _add_validate(subparsers, common) -> None:
    p = subparsers.add_parser(
        "validate", parents=[common], help="check a model and list every problem",
        description="Check a model against the JSON Schema of the loop-node convention and its "
                    "rules (body signatures, axes, ids, edges, references). Prints each problem "
                    "with its path in the model; exit status 1 when there is any.")
    p.add_argument("model", metavar="MODEL", help="MDF JSON/YAML or ONNX file")
    p.set_defaults(command=_validate)


def _validate(args: argparse.Namespace) -> int:
    from mdf_loops.validation.report import validate

    _check_model_path(args.model)
    problems = validate(args.model)
    for problem in problems:
        print(problem)
    if problems:
        print(f"mdf-loops: {args.model}: {_count(len(problems), 'problem')}", file=sys.stderr)
        return 1
    _note(args, f"{args.model}: valid", stream=sys.stdout)
    return 0


def _add_render(subparsers, common) -> None:
    p = subparsers.add_parser(
        "render", parents=[common], help="draw a model, loops open, as PNG, SVG or PDF",
        description="Draw a model with Graphviz: each loop node a cluster holding its body, "
                    "nested loops nested clusters. The format follows the output's extension.")
    p.add_argument("model", metavar="MODEL", help="MDF JSON/YAML or ONNX file")
    p.add_argument("-o", "--output", required=True, metavar="FILE.png|svg|pdf",
                   help="the picture to write")
    p.add_argument("--graph", metavar="ID", help="the graph to draw (default: the first)")
    p.set_defaults(command=_render)


def _render(args: argparse.Namespace) -> int:
    from mdf_loops.render import FORMATS, render
    from mdf_loops.run import load_model

    _check_output(args.output, tuple(FORMATS), args.model)
    _check_model_path(args.model)
    render(load_model(args.model), args.output, graph=args.graph)
    _note(args, f"wrote {args.output}")
    return 0


# ---------------------------------------------------------------- shared steps


def _check_model_path(path: str) -> None:
    if not path.endswith(_MODEL_FILES):
        raise MdfLoopsError(f"{path}: expected a model file ending in {', '.join(_MODEL_FILES)}")
    if not os.path.exists(path):
        raise MdfLoopsError(f"{path}: no such file")


def _check_output(path: str, extensions: tuple[str, ...], model: str) -> None:
    """Fail before any work when the output could not be written."""
    if not path.lower().endswith(extensions):
        raise MdfLoopsError(f"{path}: the output must end in {' or '.join(extensions)}")
    folder = Path(path).parent
    if not folder.is_dir():
        raise MdfLoopsError(f"{path}: folder '{folder}' does not exist")
    refuse_overwriting(path, model)


def _load_valid_model(path: str, trusted: bool = False):
    """The model in ``path``; an MDF file is validated first and its first problem is the
    error (an ONNX file is imported, and the importer writes the convention). A trusted
    model's expressions are not held to the allow-list."""
    from mdf_loops.run import load_model
    from mdf_loops.validation.report import validate

    _check_model_path(path)
    if not path.endswith(".onnx"):
        problems = validate(path, expressions=not trusted)
        if problems:
            more = f" (and {len(problems) - 1} more; see `mdf-loops validate {path}`)" \
                if len(problems) > 1 else ""
            raise ModelError(f"{path} is not a valid model: {problems[0]}{more}")
    return load_model(path)


def _graph_of(model, graph_id: str | None):
    for graph in model.graphs:
        if graph_id in (None, graph.id):
            return graph
    raise ModelError(f"model '{model.id}' has no graph '{graph_id}'"
                     f" (it has {', '.join(g.id for g in model.graphs)})")


def _note(args: argparse.Namespace, message: str, stream: TextIO | None = None) -> None:
    """An informational line (stderr unless told), left out under --quiet."""
    if not getattr(args, "quiet", False):
        print(message, file=stream or sys.stderr)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _one_line(exc: BaseException, verbosity: int) -> str:
    message = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, MdfLoopsError):
        return message
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.filename}: {exc.strerror or message}"
    hint = "" if verbosity else " (run with --verbose for the traceback)"
    return f"unexpected {type(exc).__name__}: {message}{hint}"


@contextmanager
def _logging_to_stderr(verbosity: int, quiet: bool) -> Iterator[None]:
    """Log to stderr while the command runs: -q errors only; by default warnings; -v what
    mdf-loops does; -vv its debug detail; -vvv also the libraries' debug output (the
    stock engine logs every node of every iteration). The earlier setup is restored."""
    root, own = logging.getLogger(), logging.getLogger("mdf_loops")
    saved_handlers, saved_root_level, saved_own_level = root.handlers[:], root.level, own.level
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("mdf-loops: %(levelname)s: %(name)s: %(message)s"))
    root.handlers[:] = [handler]
    if quiet:
        root.setLevel(logging.ERROR)
        own.setLevel(logging.ERROR)
    else:
        root.setLevel(logging.DEBUG if verbosity >= 3 else logging.WARNING)
        own.setLevel({0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG))
    try:
        yield
    finally:
        root.handlers[:] = saved_handlers
        root.setLevel(saved_root_level)
        own.setLevel(saved_own_level)


def _silence_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


# ---------------------------------------------------------------- progress


def _shows_progress(args: argparse.Namespace) -> bool:
    return not getattr(args, "quiet", False) and sys.stderr.isatty()


@contextmanager
def _progress(stream: TextIO) -> Iterator[None]:
    """Show loop iterations on ``stream`` (a terminal) while the block runs."""
    from mdf_loops import ops

    observe: Callable | None = getattr(ops, "observe_iterations", None)
    if observe is None:  # the engine offers no iteration hook
        yield
        return
    display = _ProgressLine(stream)
    try:
        with observe(display.update):
            yield
    finally:
        display.clear()


class _ProgressLine:
    """One status line, redrawn at most ten times a second after the first half second.

    It shows the innermost running loop with the iterations of the loops around it,
    e.g. ``node 'trials' > iteration 5/200 > node 'steps': iteration 96/100``.
    """

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.started = time.monotonic()
        self.last = 0.0
        self.width = 0
        self.totals: dict[str, int | None] = {}

    def update(self, location: str, done: int, total: int | None) -> None:
        """Called as an iteration of the loop at ``location`` starts (``done`` before it)."""
        self.totals[location] = total
        now = time.monotonic()
        if now - self.started < 0.5 or now - self.last < 0.1:
            return
        self.last = now
        self.show(f"{self.describe(location)}: iteration {_of(done, total)}")

    def describe(self, location: str) -> str:
        """``location`` with the total of each enclosing loop after its iteration number."""
        parts = location.split(" > ") if location else ["loop"]
        for k, part in enumerate(parts):
            total = self.totals.get(" > ".join(parts[:k]))
            if k and part.startswith("iteration ") and total is not None:
                parts[k] = f"iteration {_of(int(part.split()[1]), total)}"
        return " > ".join(parts)

    def show(self, text: str) -> None:
        width = _terminal_width(self.stream) - 1
        text = text if len(text) <= width else "..." + text[-(width - 3):]
        self.stream.write("\r" + text.ljust(self.width))
        self.stream.flush()
        self.width = len(text)

    def clear(self) -> None:
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


def _of(done: int, total: int | None) -> str:
    return f"{done:,}" if total is None else f"{done:,}/{total:,}"


def _terminal_width(stream: TextIO) -> int:
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        columns = 0
    return columns if columns >= 20 else 80


if __name__ == "__main__":
    sys.exit(main())

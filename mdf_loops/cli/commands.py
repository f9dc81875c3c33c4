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
    from mdf_loops.cli.sweep import add_sweep
    add_sweep(subparsers, common)
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
    p.add_argument("-o", "--output", metavar="FILE.npz",
                   help="save the outputs to this NumPy archive instead of printing them")
    p.add_argument("--graph", metavar="ID", help="the graph to run (default: the first)")
    p.add_argument("--trusted", action="store_true",
                   help="skip the expression allow-list: the model's expressions run as any "
                        "Python (only for models whose author you trust; see docs/safety.md)")
    for name, default in (("max-iterations", "1,000,000"), ("max-total-iterations", "10,000,000"),
                          ("max-depth", "24"), ("max-elements", "100,000,000")):
        p.add_argument(f"--{name}", type=_positive_int, metavar="N",
                       help=f"work limit (default {default}); see docs/safety.md")
    _add_limit_options(p)
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


def _add_limit_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="stop after this many seconds of wall clock or CPU time: loading, "
                        "checking and running happen in a child process the kernel stops")
    p.add_argument("--max-memory", type=_memory_size, metavar="SIZE",
                   help="cap the memory of that child process (e.g. 2G, 800M)")
    p.add_argument("--external-data-dir", metavar="DIR",
                   help="read an ONNX file's external tensor data from files inside DIR "
                        "(otherwise only with --trusted, from the model's folder)")


def _memory_size(text: str) -> int:
    from mdf_loops.safety.sandbox import parse_memory

    try:
        return parse_memory(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _limited(args: argparse.Namespace, work: Callable[[], Any], what: str) -> Any:
    """``work()`` with the ONNX file access the options give; in a child process under hard
    limits when --timeout or --max-memory is given (mdf_loops.safety.sandbox)."""
    from mdf_loops.safety.onnx_files import onnx_file_access

    def accessed() -> Any:
        with onnx_file_access(trusted=getattr(args, "trusted", False),
                              external_data_dir=args.external_data_dir):
            return work()

    if not (args.timeout or args.max_memory):
        return accessed()
    from mdf_loops.safety.sandbox import call_limited

    return call_limited(accessed, timeout=args.timeout, max_memory=args.max_memory, what=what)


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


def _run(args: argparse.Namespace) -> int:
    from mdf_loops.cli.io import format_outputs, outputs_to_npz

    if args.output:
        _check_output(args.output, (".npz",), args.model)
    started = time.monotonic()
    outputs = _limited(args, lambda: _load_and_run(args), f"running {args.model}")
    _log.info("ran %s in %.3f s", args.model, time.monotonic() - started)
    if args.output:
        data, left_out = outputs_to_npz(outputs)
        write_atomically(args.output, data)
        for name in left_out:
            _note(args, f"output '{name}' is an empty optional; an .npz file cannot hold it")
        written = sum(value is not None for value in outputs.values())
        _note(args, f"wrote {_count(written, 'output')} to {args.output}")
    else:
        sys.stdout.write(format_outputs(outputs))
    return 0


def _load_and_run(args: argparse.Namespace) -> dict[str, Any]:
    from mdf_loops.cli.io import read_inputs
    from mdf_loops.run import run

    model = _load_valid_model(args.model, args.trusted)
    inputs = read_inputs(args.input, _graph_of(model, args.graph))
    with ExitStack() as stack:
        if _shows_progress(args):
            stack.enter_context(_progress(sys.stderr))
        return run(model, inputs, **_run_keywords(args))


# ---------------------------------------------------------------- import / export


def _add_import(subparsers, common) -> None:
    p = subparsers.add_parser(
        "import", parents=[common], help="convert an ONNX model to MDF JSON or YAML",
        description="Convert an ONNX model (with Scan, Loop and If at any depth) to an MDF "
                    "model in JSON or YAML, chosen by the output file's extension.")
    p.add_argument("model", metavar="MODEL.onnx", help="the ONNX model")
    p.add_argument("-o", "--output", required=True, metavar="OUT.json|OUT.yaml",
                   help="the MDF file to write")
    _add_limit_options(p)
    p.set_defaults(command=_import)


def _import(args: argparse.Namespace) -> int:
    from mdf_loops.onnx.import_ import onnx_to_mdf

    _check_output(args.output, (".json", ".yaml", ".yml"), args.model)
    if not args.model.endswith(".onnx"):
        raise MdfLoopsError(f"{args.model}: expected an .onnx file to import")
    def convert() -> str:
        model = onnx_to_mdf(args.model)
        return model.to_json() if args.output.endswith(".json") else model.to_yaml()

    text = _limited(args, convert, f"importing {args.model}")
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
    from mdf_loops.onnx.export import mdf_to_onnx

    _check_output(args.output, (".onnx",), args.model)
    model = _load_valid_model(args.model)
    inputs = read_inputs(args.input, _graph_of(model, args.graph))
    exported = mdf_to_onnx(model, graph=args.graph, example_inputs=inputs, opset=args.opset)
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
    _add_limit_options(p)
    p.set_defaults(command=_validate)


def _validate(args: argparse.Namespace) -> int:
    from mdf_loops.validation.report import validate

    _check_model_path(args.model)
    problems = _limited(args, lambda: [str(p) for p in validate(args.model)],
                        f"validating {args.model}")
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

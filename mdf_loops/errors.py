"""The exceptions mdf-loops raises, and where in a model they happened.

Every error a user can cause derives from :class:`MdfLoopsError`, and every class a
user may catch is defined here, in one hierarchy::

    MdfLoopsError
    ├── ModelError               the model (or a file, or an input) cannot be used as given
    │   ├── InputError           a value given for a graph input does not fit its declared type
    │   ├── ExpressionError      an expression ONNX cannot express (export)
    │   ├── UntypedInputError    an exported input with no type and no example value
    │   ├── ConditionError       a scheduling condition with no time-loop equivalent
    │   └── NotCompilable        a time loop the ``python`` backend does not write out
    ├── EvaluationError          evaluating a node failed (``location`` says where)
    │   └── LoopError            a loop's inputs or body outputs break the operator's rules
    │       └── LimitError       a work limit was hit (:class:`mdf_loops.safety.Limits`)
    │           ├── IterationLimitError
    │           ├── DepthLimitError
    │           └── SizeLimitError
    ├── CompileError             the model cannot run compiled (onnxruntime, JAX)
    ├── UnsafeExpressionError    an untrusted model uses something outside the allow-list
    ├── ResourceLimitError       a limited child process ran out of time or memory
    ├── SweepError               a sweep's grid, outputs, file or cluster cannot be used
    └── AuthoringError           a traced operation is invalid
        └── ScanError            the arguments of ``scan`` break scan's rules

A :class:`Problem` is one thing wrong with a model, at a path in its file: what
:func:`mdf_loops.validate` lists and :class:`UnsafeExpressionError` carries (not an
error itself, so not in ``__all__``; users meet it as ``mdf_loops.Problem``).

Errors raised while a model runs carry a *location*: the path from the top-level
graph down to the node (and loop iteration) that failed, e.g.
``graph 'main' > node 'rnn' > iteration 3 > node 'add'``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = [
    "MdfLoopsError",
    "ModelError",
    "InputError",
    "ExpressionError",
    "UntypedInputError",
    "ConditionError",
    "NotCompilable",
    "EvaluationError",
    "LoopError",
    "LimitError",
    "IterationLimitError",
    "DepthLimitError",
    "SizeLimitError",
    "CompileError",
    "NotBatchable",
    "UnsafeExpressionError",
    "ResourceLimitError",
    "SweepError",
    "AuthoringError",
    "ScanError",
]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a model: where (``path``) and what (``message``).

    ``path`` names a place in the model file the way its keys nest, without the model
    id (``graphs.main.nodes.rnn.parameters.body``; :func:`mdf_loops.model.documents.format_path`).
    """

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class MdfLoopsError(Exception):
    """Base class of every error mdf-loops raises on purpose."""


class ModelError(MdfLoopsError):
    """The model breaks the loop-node convention (see docs/representation.md), or a file
    or an input cannot be used as given."""


class InputError(ModelError):
    """A value given for a graph input does not fit what the model declares."""


class ExpressionError(ModelError):
    """An expression uses something ONNX cannot express (or that is not understood)."""


class UntypedInputError(ModelError):
    """An input of the exported graph has no declared type and no example value."""

    def __init__(self, graph_id: str, name: str, how: str = ""):
        self.graph_id, self.name = graph_id, name
        how = how or f"pass example_inputs={{'{name}': ...}} to mdf_to_onnx"
        super().__init__(
            f"graph '{graph_id}' input '{name}': its type and rank are unknown; {how}, or "
            f"declare them on the input port: metadata=mdf_loops.model.port_type(...) "
            f"(e.g. port_type('steps', 3, dtype='float64'); docs/representation.md)"
        )


class ConditionError(ModelError):
    """A scheduling condition with no time-loop equivalent."""


class NotCompilable(ModelError):
    """A time loop's body uses something the ``python`` backend does not write out."""


class EvaluationError(MdfLoopsError):
    """Evaluating a node failed; ``location`` says where."""

    def __init__(self, message: str, location: str = ""):
        self.location = location or current_location()
        self.reason = message
        super().__init__(f"{self.location}: {message}" if self.location else message)


class LoopError(EvaluationError):
    """A loop's inputs or body outputs break the operator's rules."""


class LimitError(LoopError):
    """A run hit one of its work limits (:class:`mdf_loops.safety.Limits`).

    The message says how to raise it.
    """


class IterationLimitError(LimitError):
    """A loop (or a run's loops together) ran more iterations than the limit allows."""


class DepthLimitError(LimitError):
    """Loop bodies are nested deeper than the limit allows."""


class SizeLimitError(LimitError):
    """A loop or an operator produced a value with more elements than the limit allows."""


class CompileError(MdfLoopsError):
    """The model cannot run in the compiled mode (export or onnxruntime refused it)."""


class NotBatchable(CompileError):
    """A sweep cannot run many settings in one onnxruntime call: the model holds a node the
    batching transform has no rule for, with values that differ between settings flowing
    into it (the node is named). The sweep then runs one call per setting; users meet this
    only in the log."""


class UnsafeExpressionError(MdfLoopsError):
    """A model expression uses something outside the allow-list; nothing was evaluated.

    ``problems`` lists every refused expression (path and reason).
    """

    def __init__(self, problems: Sequence[Problem]):
        self.problems = list(problems)
        more = f" (and {len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
        super().__init__(
            f"{self.problems[0]}{more}; nothing was evaluated. Run the model with "
            "trusted=True (command line: --trusted) only if you trust its author"
        )


class ResourceLimitError(MdfLoopsError):
    """Work in a limited child process ran out of time or memory."""


class SweepError(MdfLoopsError):
    """A sweep's grid, samples, outputs, output file or cluster cannot be used as given."""


class AuthoringError(MdfLoopsError):
    """A traced operation is invalid (wrong types, a value used outside its scope, ...)."""


class ScanError(AuthoringError):
    """The arguments of ``scan`` (or of what ``fn`` returns) break scan's rules."""


_FRAMES: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "mdf_loops_location", default=()
)


def current_location() -> str:
    """The path to the model element being evaluated now ('' at top level)."""
    return " > ".join(_FRAMES.get())


@contextmanager
def location_frame(frame: str) -> Iterator[None]:
    """Push ``frame`` onto the evaluation path for the duration of the block."""
    token = _FRAMES.set(_FRAMES.get() + (frame,))
    try:
        yield
    finally:
        _FRAMES.reset(token)


def push_frame(frame: str) -> contextvars.Token:
    """Low-cost form of :func:`location_frame` for hot loops; pair with :func:`pop_frame`."""
    return _FRAMES.set(_FRAMES.get() + (frame,))


def pop_frame(token: contextvars.Token) -> None:
    _FRAMES.reset(token)


def did_you_mean(name: str, known, what: str = "") -> str:
    """``"; did you mean 'x'?"`` naming the known names closest to ``name`` (difflib), or ``""``.

    Case is ignored in the comparison (``onnx::scan`` finds ``onnx::Scan``).
    """
    close = closest_names(name, known, 3)
    if not close:
        return ""
    names = " or ".join(f"'{c}'" for c in close)
    return f"; did you mean {names}{f' ({what})' if what else ''}?"


def closest_names(name: str, known, n: int = 1) -> list[str]:
    """The (at most ``n``) known names closest to ``name``, case ignored (difflib)."""
    import difflib

    by_folded: dict[str, str] = {}
    for candidate in known:
        if isinstance(candidate, str):
            by_folded.setdefault(candidate.lower(), candidate)
    folded = str(name).lower()
    if folded in by_folded:
        return [by_folded[folded]]
    return [by_folded[c] for c in difflib.get_close_matches(folded, list(by_folded), n=n)]

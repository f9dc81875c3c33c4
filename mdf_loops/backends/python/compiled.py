"""A time-loop model compiled to one Python function (the ``"python"`` backend of ``simulate``).

The body graph of the model's ``onnx::Loop`` is written out as straight-line Python
(:mod:`~mdf_loops.backends.python.writer`) inside one ``for`` loop over the steps
(:mod:`~mdf_loops.backends.python.source`), compiled, and run in a namespace of
numpy, ``math`` and a few builtins.

The step is written out from the model on every call; what is made of that text (the
lean loop around it and its compiled code, a pure function of the text) is kept in a
small in-process cache keyed by the text, so a model converted again is not compiled
again. Nothing of a model's values or results is kept.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from modeci_mdf.mdf import Model

from mdf_loops.backends.cache import by_text
from mdf_loops.backends.python.errors import NotCompilable
from mdf_loops.backends.python.scalar_types import python_type
from mdf_loops.backends.python.source import function_source, scan_kinds
from mdf_loops.backends.python.writer import StepWriter
from mdf_loops.model.convention import body_graph, body_signature
from mdf_loops.model.signatures import mdf_signature
from mdf_loops.timeloop.spec import LOOP_FUNCTION, LOOP_NODE

__all__ = ["CompiledTimeLoop", "LoopSource", "compile_time_loop", "time_loop_source"]


@dataclass(frozen=True)
class LoopSource:
    """The text of a time-loop function (:func:`~mdf_loops.backends.python.source.function_source`)
    and how to call it: ``n_carried`` carried values, one scan output per ``scan_codes``."""

    source: str
    n_carried: int
    #: per scan output: an ``array`` typecode (``'d'`` float64, ``'q'`` int64 scalars), or
    #: None (values of other types); :class:`~mdf_loops.backends.python.recording.Recording`
    scan_codes: tuple[str | None, ...]
    #: set when the function leaves the time (scan 0) out: step ``k`` is at ``k * time_step``
    time_step: float | None = None

    def new_scans(self) -> list[Any]:
        """Empty scan outputs (lists) for one call of the function."""
        return [[] for _ in self.scan_codes]


@dataclass(frozen=True)
class CompiledTimeLoop:
    """``run(start, stop, cond, *carried, *series, *scans) -> (cond, carried, done)``: the
    steps ``start`` to ``stop`` (``done``: the steps run in all), appended to ``scans``
    (made by :meth:`new_scans`)."""

    code: LoopSource
    run: Callable[..., Any]

    def new_scans(self) -> list[Any]:
        return self.code.new_scans()

    def time(self, done: int, recorded: Any) -> np.ndarray:
        """The time of the ``done`` steps run: made here, or the ``recorded`` first scan."""
        if self.code.time_step is not None:
            return np.arange(done, dtype=np.float64) * self.code.time_step
        return np.asarray(recorded, dtype=np.float64)


def compile_time_loop(model: Model) -> CompiledTimeLoop:
    """Compile the ``onnx::Loop`` body of a time-loop model made by ``to_time_loop``."""
    code = time_loop_source(model)
    return CompiledTimeLoop(code, _function(code.source, model.graphs[0].id))


def time_loop_source(model: Model) -> LoopSource:
    """The text of the time-loop function of a time-loop model made by ``to_time_loop``
    (what :func:`compile_time_loop` compiles; an untrusted model's is compiled by
    :func:`~mdf_loops.backends.python.untrusted.guarded_time_loop` instead)."""
    graph = model.graphs[0]
    loop = next((n for n in graph.nodes if n.id == LOOP_NODE), None)
    if loop is None or len(graph.nodes) != 1:
        raise NotCompilable(f"graph '{graph.id}': expected the single node '{LOOP_NODE}'")
    params = {p.id: p for p in loop.parameters}
    mdf_signature(loop)  # a ModelError unless v_initial gives one value per carried input
    body = body_graph(params["body"].value, f"node '{LOOP_NODE}' parameter 'body'")
    signature = body_signature(body)
    n_carried = len(signature.formal_inputs) - 2
    writer = StepWriter(body, signature)
    first = writer.step(first=True)
    writer.reset()
    rest = writer.step(first=False)
    n_scan = len(signature.formal_outputs) - 1 - n_carried
    kinds = scan_kinds(loop, n_scan)
    names = params[LOOP_FUNCTION].args["v_initial"].strip().strip("[]").split(",")
    initial = [python_type(params[n.strip()].value) for n in names if n.strip()]
    step = _StepText(
        tuple(signature.outer_scope_inputs),
        n_carried,
        n_scan,
        tuple(first),
        tuple(rest),
        tuple(writer.tail(n_carried, n_scan)),
        tuple(initial),
    )
    source, time_step = _source(step)
    return LoopSource(source, n_carried, tuple(kinds), time_step)


@dataclass(frozen=True)
class _StepText:
    """Everything the loop function is made of: the written-out steps and their types."""

    outer: tuple[str, ...]
    n_carried: int
    n_scan: int
    first: tuple[str, ...]
    rest: tuple[str, ...]
    tail: tuple[str, ...]
    initial_types: tuple[str | None, ...]


@by_text(maxsize=64)
def _source(step: _StepText) -> tuple[str, float | None]:
    """The loop function's source and time step (cached by ``step``: the same text always
    makes the same source)."""
    return function_source(
        step.outer,
        step.n_carried,
        step.n_scan,
        step.first,
        step.rest,
        step.tail,
        step.initial_types,
    )


@by_text(maxsize=64)
def _function(source: str, graph_id: str) -> Callable[..., Any]:
    """The function compiled from ``source`` (cached by the text: the same text always
    makes the same function, which keeps no state)."""
    namespace: dict[str, Any] = {
        "numpy": np,
        "math": math,
        "np": np,
        "__builtins__": _BUILTINS,
        "_where": _where,
        "_scalar": _scalar,
    }
    exec(compile(source, f"<time loop {graph_id}>", "exec"), namespace)  # noqa: S102
    return namespace["time_loop"]


_SCALARS = (float, int, np.float64, np.int64)


def _where(condition: Any, a: Any, b: Any) -> Any:
    """``numpy.where`` without the 0-d array when all three are scalars of one type.

    A 0-d array and a scalar give the same sums, differences, products, quotients and
    comparisons (IEEE rounding); a scalar skips numpy's array machinery.
    """
    if type(condition) in (bool, np.bool_) and type(a) is type(b) and type(a) in _SCALARS:
        return a if condition else b
    return np.where(condition, a, b)


def _scalar(value: Any) -> Any:
    """``value[()]``: a 0-d array as a numpy scalar; a scalar as it is."""
    return value[()] if isinstance(value, np.ndarray) else value


_BUILTINS = {
    "abs": abs,
    "min": min,
    "max": max,
    "float": float,
    "int": int,
    "bool": bool,
    "round": round,
    "pow": pow,
    "sum": sum,
    "len": len,
    "range": range,
    "True": True,
    "False": False,
    "None": None,
}

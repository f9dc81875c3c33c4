"""A time-loop model compiled to one Python function (the ``"python"`` backend of ``simulate``).

The body graph of the model's ``onnx::Loop`` is written out as straight-line Python
(:mod:`~mdf_loops.backends.python.writer`) inside one ``for`` loop over the steps
(:mod:`~mdf_loops.backends.python.source`), compiled, and run in a namespace of
numpy, ``math`` and a few builtins.

The function is made from the model on every call, as a syntax tree from the body's
expressions (each parsed once) to the code compiled; its text is made only when asked
for (:attr:`LoopSource.source`). Nothing of it is kept between models: a model is
compiled once (:mod:`~mdf_loops.backends.python.simulate` keeps its loop with it).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from modeci_mdf.mdf import Model, Node

from mdf_loops.backends.python.errors import NotCompilable
from mdf_loops.backends.python.frame import number_lines
from mdf_loops.backends.python.recording import Recording
from mdf_loops.backends.python.scalar_types import python_type
from mdf_loops.backends.python.source import function_source
from mdf_loops.backends.python.writer import StepWriter
from mdf_loops.model.compat import input_default
from mdf_loops.model.convention import body_graph, body_signature
from mdf_loops.model.signatures.loop import LoopSignature
from mdf_loops.safety.proven_kinds import NUMERIC_DTYPE_KINDS
from mdf_loops.timeloop.parts import LoopParts, LoopStart
from mdf_loops.timeloop.spec import LOOP_FUNCTION, LOOP_NODE

__all__ = [
    "CompiledTimeLoop",
    "LoopSource",
    "compile_time_loop",
    "loop_source",
    "stored_parts",
    "stored_start",
    "time_loop_source",
]


@dataclass(frozen=True)
class LoopSource:
    """A time-loop function (:func:`~mdf_loops.backends.python.source.function_source`)
    and how to call it: ``n_carried`` carried values, one scan output per ``scan_codes``."""

    #: the module defining ``time_loop``, parsed (or its text); whoever compiles it
    #: leaves its statements as they are (the trusted compile renumbers the lines of a copy)
    definition: ast.Module | str
    n_carried: int
    #: per scan output: an ``array`` typecode (``'d'`` float64, ``'q'`` int64 scalars, which
    #: the function writes at their step), or None (values of other types, appended);
    #: :class:`~mdf_loops.backends.python.recording.Recording`
    scan_codes: tuple[str | None, ...]
    #: set when the function leaves the time (scan 0) out: step ``k`` is at ``k * time_step``
    time_step: float | None = None
    #: the loop node's parameters that hold the carried values' initial values, in order
    initial: tuple[str, ...] = ()
    #: the input ports whose series the function reads after the carried values, in order
    outer: tuple[str, ...] = ()
    #: per carried value, the shape of its initial value where that is a numeric array
    #: (one dimension at least), else None: what a proof of the function may assume
    initial_shapes: tuple[tuple[int, ...] | None, ...] = ()

    def new_scans(self, steps: int) -> list[Any]:
        """Empty scan outputs for one run of at most ``steps`` steps (the ``scans`` of a
        :class:`~mdf_loops.backends.python.recording.Recording`)."""
        return Recording(self.scan_codes, steps, self.time_step is not None).scans

    @property
    def tree(self) -> ast.Module:
        """The definition parsed (a new tree each time when it was given as text)."""
        if isinstance(self.definition, str):
            return ast.parse(self.definition)
        return self.definition

    @cached_property
    def source(self) -> str:
        """The definition's text (made when first asked for: for reading, not running)."""
        if isinstance(self.definition, str):
            return self.definition
        return ast.unparse(self.definition) + "\n"


@dataclass(frozen=True)
class CompiledTimeLoop:
    """``run(start, stop, cond, *carried, *series, *scans) -> (cond, carried, done)``: the
    steps ``start`` to ``stop`` (``done``: the steps run in all), recorded in ``scans``
    (made by :meth:`new_scans`)."""

    code: LoopSource
    run: Callable[..., Any]

    def new_scans(self, steps: int) -> list[Any]:
        return self.code.new_scans(steps)

    def time(self, done: int, recorded: Any) -> np.ndarray:
        """The time of the ``done`` steps run: made here, or the ``recorded`` first scan."""
        if self.code.time_step is not None:
            return np.arange(done, dtype=np.float64) * self.code.time_step
        return np.asarray(recorded, dtype=np.float64)


def compile_time_loop(model: Model | LoopParts) -> CompiledTimeLoop:
    """Compile the ``onnx::Loop`` body of a time-loop model made by ``to_time_loop``
    (or of the parts a conversion holds)."""
    parts = model if isinstance(model, LoopParts) else stored_parts(model)
    code = loop_source(parts)
    return CompiledTimeLoop(code, _function(code.tree, parts.graph_id))


def time_loop_source(model: Model) -> LoopSource:
    """The time-loop function of a time-loop model made by ``to_time_loop``
    (what :func:`compile_time_loop` compiles; an untrusted model's is compiled by
    :func:`~mdf_loops.backends.python.untrusted.guarded_time_loop` instead)."""
    return loop_source(stored_parts(model))


def stored_parts(model: Model) -> LoopParts:
    """The parts of the time loop a time-loop model stores (its ``onnx::Loop`` node read)."""
    graph = model.graphs[0]
    loop = next((n for n in graph.nodes if n.id == LOOP_NODE), None)
    if loop is None or len(graph.nodes) != 1:
        raise NotCompilable(f"graph '{graph.id}': expected the single node '{LOOP_NODE}'")
    params = {p.id: p for p in loop.parameters}
    if LOOP_FUNCTION not in params or params[LOOP_FUNCTION].function != "onnx::Loop":
        raise NotCompilable(f"node '{LOOP_NODE}': expected its parameter '{LOOP_FUNCTION}'")
    body = body_graph(params["body"].value, f"node '{LOOP_NODE}' parameter 'body'")
    signature = body_signature(body)
    # a ModelError unless v_initial gives one value per carried input
    LoopSignature.from_body(loop, signature)
    n_scan = len(signature.formal_outputs) - len(signature.formal_inputs) + 1
    names = params[LOOP_FUNCTION].args["v_initial"].strip().strip("[]").split(",")
    initial = tuple(n.strip() for n in names if n.strip())
    return LoopParts(
        model.id,
        graph.id,
        body,
        signature,
        initial,
        _scalar_scans(loop, n_scan),
        stored_start(loop, initial, signature.outer_scope_inputs),
    )


def stored_start(loop: Node, initial: Sequence[str], outer: Sequence[str]) -> LoopStart:
    """What the stored Loop node ``loop`` starts from: its trip count, the ``initial``
    parameters' values, the ``outer`` ports' series and ``continue0``."""
    params = {p.id: p.value for p in loop.parameters}
    ports = {p.id: p for p in loop.input_ports}
    series = [input_default(ports[name]) for name in outer]
    return LoopStart(
        input_default(ports["steps"]),
        tuple(params[name] for name in initial),
        tuple(None if value is None else np.asarray(value) for value in series),
        bool(params["continue0"]),
    )


def _scalar_scans(loop: Node, n_scan: int) -> tuple[np.dtype | None, ...]:
    """Per scan output, from its port's ``onnx_type``: the dtype of the scalar it records
    each step (one dimension, the steps), else None."""
    by_index = {}
    for port in loop.output_ports:
        value = (port.value or "").strip()
        if value.startswith(f"{LOOP_FUNCTION}[") and value.endswith("]"):
            by_index[int(value[len(LOOP_FUNCTION) + 1 : -1])] = port
    first = min(by_index) if by_index else 0
    dtypes: list[np.dtype | None] = []
    for k in range(n_scan):
        port = by_index.get(first + k)
        meta = (port.metadata or {}) if port is not None else {}
        tensor = (meta.get("onnx_type") or {}).get("tensorType") or {}
        dims = (tensor.get("shape") or {}).get("dim") or []
        dtypes.append(_ELEMENT_DTYPES.get(tensor.get("elemType")) if len(dims) == 1 else None)
    return tuple(dtypes)


#: ONNX element types of the scalars the function writes at their step
_ELEMENT_DTYPES: dict[Any, np.dtype] = {11: np.dtype("float64"), 7: np.dtype("int64")}
#: the dtypes of the scalars the function writes at their step -> ``array`` typecode
_ARRAY_CODES = {np.dtype("float64"): "d", np.dtype("int64"): "q"}


def loop_source(parts: LoopParts) -> LoopSource:
    """The time-loop function of a time loop's ``parts`` (read from a stored model by
    :func:`stored_parts`, or held by the conversion that made them)."""
    signature = parts.signature
    n_carried = len(signature.formal_inputs) - 2
    n_scan = len(parts.scalar_scans)
    writer = StepWriter(parts.body, signature)
    first = writer.step(True, n_carried, n_scan)
    writer.reset()
    rest = writer.step(False, n_carried, n_scan)
    kinds = tuple(_ARRAY_CODES.get(d) if d is not None else None for d in parts.scalar_scans)
    outer = tuple(signature.outer_scope_inputs)
    tree, time_step = function_source(
        outer,
        n_carried,
        n_scan,
        first,
        rest,
        [python_type(value) for value in parts.start.initial],
        [k for k, code in enumerate(kinds) if code is not None],
        [k for k, code in enumerate(kinds) if code == "q"],
    )
    shapes = tuple(_array_shape(value) for value in parts.start.initial)
    return LoopSource(tree, n_carried, kinds, time_step, parts.initial_names, outer, shapes)


def _array_shape(initial: Any) -> tuple[int, ...] | None:
    """The shape of the array a carried value starts as (an array, or a list that
    ``run_time_loop`` makes one), where that is numeric and of one dimension at least;
    else None."""
    if not isinstance(initial, (list, np.ndarray)):
        return None
    array = np.asarray(initial)
    return array.shape if array.ndim and array.dtype.kind in NUMERIC_DTYPE_KINDS else None


def _function(tree: ast.Module, graph_id: str) -> Callable[..., Any]:
    """The function ``time_loop`` compiled from ``tree`` (its lines renumbered as its text
    reads, for a traceback)."""
    tree = number_lines(tree)
    namespace: dict[str, Any] = {
        "numpy": np,
        "math": math,
        "np": np,
        "__builtins__": _BUILTINS,
        "_where": _where,
        "_scalar": _scalar,
        "_whole": _whole,
    }
    exec(compile(tree, f"<time loop {graph_id}>", "exec"), namespace)  # noqa: S102
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


def _whole(value: Any) -> Any:
    """A whole-number Python float as the ``int`` modeci-mdf's expressions give for it
    (modelspec's ``evaluate`` makes ``2 * 2.5`` the int 5), for an int64 recording;
    anything else as it is (a float with a fraction then fails the int64 store, and
    the run goes to a backend that records what stock records)."""
    if value.__class__ is float and value.is_integer():
        return int(value)
    return value


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

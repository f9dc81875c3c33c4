"""A time-loop model compiled to one Python function (the ``"python"`` backend of ``simulate``).

The body graph of the model's ``onnx::Loop`` is written out as straight-line Python
(:mod:`~mdf_loops.backends.python.writer`) inside one ``for`` loop over the steps
(:mod:`~mdf_loops.backends.python.source`), compiled once, and run in a namespace of
numpy, ``math`` and a few builtins.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from modeci_mdf.mdf import Model

from mdf_loops.backends.python.errors import NotCompilable
from mdf_loops.backends.python.scalar_types import python_type
from mdf_loops.backends.python.source import function_source, scan_kinds
from mdf_loops.backends.python.writer import StepWriter
from mdf_loops.model.convention import body_graph, body_signature
from mdf_loops.model.signatures import mdf_signature
from mdf_loops.timeloop.spec import LOOP_FUNCTION, LOOP_NODE

__all__ = ["CompiledTimeLoop", "compile_time_loop"]


@dataclass(frozen=True)
class CompiledTimeLoop:
    """``run(start, stop, cond, *carried, *series, *scans) -> (cond, carried)``: the steps
    ``start`` to ``stop``, appended to ``scans`` (made by :meth:`new_scans`)."""

    source: str
    run: Callable[..., Any]
    n_carried: int
    #: per scan output: an ``array`` typecode, or None for a list
    scan_codes: tuple[str | None, ...]

    def new_scans(self) -> list[Any]:
        """Empty scan outputs: an ``array`` (8 bytes a step) where the type allows."""
        return [array(code) if code else [] for code in self.scan_codes]


def compile_time_loop(model: Model) -> CompiledTimeLoop:
    """Compile the ``onnx::Loop`` body of a time-loop model made by ``to_time_loop``."""
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
    kinds = scan_kinds(loop, len(signature.formal_outputs) - 1 - n_carried)
    names = params[LOOP_FUNCTION].args["v_initial"].strip().strip("[]").split(",")
    initial = [python_type(params[n.strip()].value) for n in names if n.strip()]
    source = function_source(signature, n_carried, first, rest, writer, initial)
    namespace: dict[str, Any] = {
        "numpy": np,
        "math": math,
        "np": np,
        "__builtins__": _BUILTINS,
        "_where": _where,
        "_scalar": _scalar,
    }
    exec(compile(source, f"<time loop {graph.id}>", "exec"), namespace)  # noqa: S102
    return CompiledTimeLoop(source, namespace["time_loop"], n_carried, tuple(kinds))


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

"""The compiled execution mode: a whole MDF model lowered to ONNX, run by onnxruntime.

:func:`compile_model` exports the model once (:mod:`mdf_loops.onnx.export`, loop
bodies included) and opens one onnxruntime session; :meth:`CompiledModel.run`
then runs the whole model, loops and all, without per-iteration Python work.
:func:`mdf_loops.run` keeps compiled models in a cache keyed by the ``Model``
object and the element types and ranks of the inputs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from modeci_mdf.mdf import Model

from mdf_loops.backends.onnxruntime.guard import guard_model, nesting_depth
from mdf_loops.backends.onnxruntime.limit_codes import LimitFlag, limit_error
from mdf_loops.backends.onnxruntime.memory import VALUES, refused_by_cap, use_capped_arena
from mdf_loops.backends.onnxruntime.planned import PlannedScan, check_planned, planned_scans
from mdf_loops.backends.onnxruntime.totals import count_total
from mdf_loops.caches import CompileCache, clear_compiled, input_signature
from mdf_loops.errors import (
    CompileError,
    IterationLimitError,
    MdfLoopsError,
    ModelError,
    SizeLimitError,
)
from mdf_loops.onnx.export import export_model
from mdf_loops.onnx.ort_safe import make_safe
from mdf_loops.ops.common import Limits, how_to_raise
from mdf_loops.ops.loop import not_one_boolean

__all__ = [
    "CompiledModel",
    "compile_model",
    "cached_compile",
    "clear_compiled",
    "CompileError",
    "onnxruntime_message",
]

log = logging.getLogger(__name__)


@dataclass
class CompiledModel:
    """An ONNX export of an MDF graph and the onnxruntime session that runs it."""

    onnx_model: onnx.ModelProto
    session: ort.InferenceSession
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    limits: Limits | None = None
    limit_flags: dict[str, LimitFlag] = field(default_factory=dict)  # by flag output
    planned: list[PlannedScan] = field(default_factory=list)  # checked before running
    arena_bytes: int | None = None  # the capped arena it allocates from (untrusted models)

    def run(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """Outputs by name; inputs by name as numpy arrays (or lists for sequences).

        Raises :class:`~mdf_loops.errors.IterationLimitError` when a loop passed the
        limits the model was compiled with, :class:`~mdf_loops.errors.SizeLimitError` when
        an operator asked for more memory than the capped arena of untrusted models holds.
        """
        feed = {name: _feed_value(inputs[name]) for name in self.input_names if name in inputs}
        if self.limits is not None:
            check_planned(self.planned, feed, self.limits)  # known before running: refused now
        try:
            outputs = self.session.run(None, feed)
        except Exception as exc:
            if self.arena_bytes is None or not refused_by_cap(exc):
                raise
            assert self.limits is not None, "the arena is used only with limits"
            raise SizeLimitError(
                f"an operator asked onnxruntime for more memory than untrusted models may use "
                f"({self.arena_bytes / 2**20:.0f} MB: {VALUES} values of max_elements="
                f"{self.limits.max_elements} float64 elements); run with backend='scheduler' "
                "to see which node, or with trusted=True for a model whose author you trust"
            ) from None
        results = dict(zip(self.output_names, outputs, strict=True))
        flags = {name: np.asarray(results.pop(name)) for name in self.limit_flags}
        for name, flag in flags.items():
            if flag.size != 1:  # a flag carries its loop's condition: it was not one boolean
                where = f"node '{self.limit_flags[name].label}'"
                raise not_one_boolean("body condition output", f"shape {flag.shape}", None, where)
        passed = {name: float(flag.reshape(())) for name, flag in flags.items()}
        if any(passed.values()):
            assert self.limits is not None, "limit flags are compiled in only with limits"
            raise _limit_error(self.limit_flags, passed, self.limits)
        return results


def _limit_error(flags: dict[str, LimitFlag], passed: dict[str, float], limits: Limits):
    """The error for the limit outputs of the guarded model (guard.py, totals.py) that came
    back nonzero: the total first (a loop it stopped may look as if it wanted more), then
    a node's own iterations, then its body, each naming the site and iteration its code
    gives (limit_codes.py)."""
    over = [(flags[name], code) for name, code in passed.items() if code]
    flag, code = min(over, key=lambda pair: _reported_first(pair[0]))
    if flag.limit == "max_total_iterations":
        return IterationLimitError(
            f"node '{flag.label}': the loops of the run passed max_total_iterations="
            f"{limits.max_total_iterations} iterations together, at every depth (onnxruntime "
            f"backend); they were stopped there. If the model is meant to run that long, "
            f"{how_to_raise('max_total_iterations')}"
        )
    return limit_error(code, flag.label, list(flag.sites), limits)


def _reported_first(flag: LimitFlag) -> int:
    return 0 if flag.limit == "max_total_iterations" else 1 + flag.within


def compile_model(
    model: Model,
    example_inputs: Mapping[str, Any],
    *,
    graph: str | None = None,
    threads: int | None = None,
    limits: Limits | None = None,
    rewrite: Callable[[onnx.ModelProto], onnx.ModelProto] | None = None,
) -> CompiledModel:
    """Export ``model`` to ONNX and open an onnxruntime session for it.

    ``example_inputs`` give the element types and ranks of the inputs (any
    length: dimensions stay symbolic). ``threads`` sets onnxruntime's intra-op
    threads (default: onnxruntime's choice). With ``limits``, every loop of the
    exported model stops at them (:mod:`mdf_loops.backends.onnxruntime.guard`).
    ``rewrite`` changes the exported model before the guards go in (the batching
    transform, :mod:`mdf_loops.backends.onnxruntime.batching`). Raises
    :class:`CompileError` with the reason when the model cannot be compiled.
    """
    result = _exported(model, graph, example_inputs, limits)
    try:
        exported = result.model
        runnable = make_safe(exported)  # inputs that would make onnxruntime kill the process
    except ModelError as exc:
        raise CompileError(f"cannot run on onnxruntime: {exc}") from exc
    if rewrite is not None:
        runnable = rewrite(runnable)
    _check_feedable(runnable.graph)
    flags: dict[str, LimitFlag] = {}
    planned = planned_scans(runnable.graph, result.labels)
    if limits is not None:
        depth = nesting_depth(exported.graph)
        if depth > limits.max_depth:
            raise CompileError(f"loops nest {depth} deep, over max_depth={limits.max_depth}")
        runnable, flags = guard_model(runnable, limits, result.labels)
        runnable, totals = count_total(runnable, limits.max_total_iterations, result.labels)
        flags.update(totals)
    session, arena = _session(runnable, exported.graph.name, threads, limits)
    return CompiledModel(
        exported,
        session,
        tuple(i.name for i in runnable.graph.input),  # session.get_inputs() omits defaulted ones
        tuple(o.name for o in session.get_outputs()),
        limits,
        flags,
        planned,
        arena,
    )


def _session(
    runnable: onnx.ModelProto, graph_id: str, threads: int | None, limits: Limits | None
) -> tuple[ort.InferenceSession, int | None]:
    """onnxruntime's session for ``runnable``, and the capped arena it allocates from (with
    ``limits``); :class:`CompileError` where onnxruntime cannot open one."""
    options = ort.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    options.log_severity_level = 4  # its errors reach the caller as exceptions, not prints
    arena = None if limits is None else use_capped_arena(options, limits)
    try:
        session = ort.InferenceSession(
            runnable.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph/NotImplemented
        raise CompileError(  # (its operator lacks a kernel for these types, most often)
            f"graph '{graph_id}': onnxruntime cannot open a session for it: "
            f"{onnxruntime_message(exc)}; backend='auto' or 'scheduler' (--backend on the "
            "command line) runs it on modeci-mdf's engine"
        ) from None
    return session, arena


def onnxruntime_message(exc: BaseException) -> str:
    """onnxruntime's message of ``exc`` on one line (its kernels' messages span several)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def _exported(model: Model, graph: str | None, example_inputs, limits: Limits | None):
    """The model's ONNX lowering, or :class:`CompileError` saying why there is none."""
    if limits is not None:
        depth = _mdf_depth(model)
        if depth > limits.max_depth:  # before exporting: deep nesting is costly to export
            raise CompileError(f"loops nest {depth} deep, over max_depth={limits.max_depth}")
    try:
        return export_model(model, graph=graph, example_inputs=example_inputs)
    except ModelError as exc:
        raise CompileError(f"cannot export to ONNX: {exc}") from exc
    except (RecursionError, ValueError, TypeError) as exc:  # protobuf's nesting limit, odd values
        raise CompileError(f"cannot export to ONNX: {type(exc).__name__}: {exc}") from exc


#: element types onnxruntime runs but its Python binding cannot pass in or out (numpy has
#: no such dtype; ml_dtypes' stand-ins are refused by the binding at run time)
_UNFEEDABLE = {
    onnx.TensorProto.BFLOAT16: "bfloat16",
    onnx.TensorProto.FLOAT8E4M3FN: "float8e4m3fn",
    onnx.TensorProto.FLOAT8E4M3FNUZ: "float8e4m3fnuz",
    onnx.TensorProto.FLOAT8E5M2: "float8e5m2",
    onnx.TensorProto.FLOAT8E5M2FNUZ: "float8e5m2fnuz",
    onnx.TensorProto.INT4: "int4",
    onnx.TensorProto.UINT4: "uint4",
}


def _check_feedable(graph: onnx.GraphProto) -> None:
    """Refuse, at compile time, graph inputs and outputs onnxruntime's binding cannot pass."""
    for kind, values in (("input", graph.input), ("output", graph.output)):
        for value in values:
            name = _UNFEEDABLE.get(value.type.tensor_type.elem_type)
            if name is not None:
                raise CompileError(
                    f"graph {kind} '{value.name}' is {name}, which onnxruntime's Python "
                    "binding cannot pass; run it with backend='scheduler'"
                )


def _mdf_depth(model: Model) -> int:
    """How deep loop bodies nest in ``model`` (0 without loops)."""
    from mdf_loops.model.convention import body_graph

    def depth(graph) -> int:
        deepest = 0
        for node in graph.nodes:
            for p in node.parameters:
                value = p.value
                if (
                    isinstance(value, dict)
                    and len(value) == 1
                    and str(next(iter(value))).startswith("graph_")
                ):
                    try:
                        deepest = max(deepest, 1 + depth(body_graph(value)))
                    except MdfLoopsError:
                        continue
        return deepest

    return max((depth(g) for g in model.graphs), default=0)


def _feed_value(value: Any) -> Any:
    if isinstance(value, list):
        return [_feed_value(v) for v in value]
    return np.asarray(value)


_CACHE: CompileCache[CompiledModel] = CompileCache(CompileError)


def cached_compile(
    model: Model,
    inputs: Mapping[str, Any],
    graph: str | None = None,
    threads: int | None = None,
    limits: Limits | None = None,
) -> CompiledModel:
    """:func:`compile_model`, cached per ``Model`` object and input types/ranks.

    A model edited in place is compiled again (:mod:`mdf_loops.caches`). A
    failure is cached too (as the :class:`CompileError` to raise again).
    """
    key = (graph, threads, limits, input_signature(inputs))
    return _CACHE.get(
        model,
        key,
        lambda: compile_model(model, inputs, graph=graph, threads=threads, limits=limits),
    )

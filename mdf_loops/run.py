"""Run a whole MDF model (with or without loops) and return its outputs by name."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import numpy as np
from modeci_mdf.mdf import Graph, Model

from mdf_loops import ops, run_plans
from mdf_loops.backends import BACKENDS, Backend
from mdf_loops.backends.onnxruntime.runner import _PassedOver, auto_choice, onnxruntime_runner
from mdf_loops.caches import CompileCache
from mdf_loops.errors import EvaluationError, MdfLoopsError, ModelError
from mdf_loops.model.content import unchanged_during
from mdf_loops.model.inputs import check_inputs, graph_input_types
from mdf_loops.model.interface import GraphInterface, graph_interface, load_model, select_graph
from mdf_loops.model.values import OnnxSequence, to_engine, to_user
from mdf_loops.onnx.domains import other_opsets
from mdf_loops.ops.common import iteration_budget
from mdf_loops.safety.guarded_numpy import untrusted_expressions
from mdf_loops.safety.onnx_files import onnx_file_access
from mdf_loops.validation.gate import verify_model

__all__ = ["run", "load_model", "GraphInterface", "graph_interface", "BACKENDS"]


def run(
    model: Model | str | os.PathLike,
    inputs: Mapping[str, Any] | None = None,
    *,
    graph: str | None = None,
    trusted: bool = False,
    max_iterations: int | None = None,
    max_total_iterations: int | None = None,
    max_depth: int | None = None,
    max_elements: int | None = None,
    backend: Backend = "auto",
    threads: int = 1,
    external_data_dir: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Evaluate a model's graph once and return its outputs (docs/api.md).

    Args:
        model: an MDF ``Model``, or a path to MDF JSON/YAML or to an ONNX model.
        inputs: values by input name (see :func:`graph_interface`): arrays, lists for
            ONNX sequences, ``None`` for an empty optional. Inputs not given take their
            ports' ``default_value``. Each value is checked against the type the model
            declares and cast to it; one that does not fit raises :class:`ModelError`.
        graph: id of the graph to run (default: the first).
        trusted: skip the expression allow-list and the limit guards. Only for models
            whose author you trust: their expressions run as Python (docs/safety.md).
        max_iterations, max_total_iterations, max_depth, max_elements: the work limits
            of :class:`mdf_loops.safety.Limits` for this run, on every backend.
        backend: ``"scheduler"`` (node by node through modeci-mdf's ``EvaluableGraph``),
            ``"onnxruntime"`` (one ONNX model, compiled once and cached), ``"jax"`` (one
            ``jax.jit`` function, docs/jax.md), ``"torch"`` (torch operations, eagerly,
            docs/pytorch.md) or ``"auto"`` (onnxruntime when it runs the model, else
            the scheduler: a model onnxruntime cannot compile, open a session for or
            run, with a logged WARNING giving the reason, once per model and input form).
        threads: onnxruntime's intra-op threads (loops of small operations: one).
        external_data_dir: the only folder an ONNX file's external data may be read from;
            without it, only ``trusted`` files read it, from their own folder.

    Returns:
        ``{output name: value}``: arrays, lists for sequences, ``None`` for an
        empty optional.
    """
    given_limits = (max_iterations, max_total_iterations, max_depth, max_elements)
    plan_key = _plan_key(graph, backend, trusted, threads, given_limits)
    if external_data_dir is None and isinstance(model, Model):
        outputs = _replayed(model, inputs, plan_key)
        if outputs is not None:  # a call repeated: run as the last one ran (run_plans)
            return outputs
    backend, changed = _checked_arguments(backend, given_limits)
    with ExitStack() as stack:
        if changed:
            stack.enter_context(ops.limits(**changed))
        model = _loaded(model, trusted, external_data_dir)
        stack.enter_context(unchanged_during(model))  # one comparison with its snapshot
        verify_model(model, trusted)  # safety: before anything is evaluated (docs/safety.md)
        if not trusted:
            stack.enter_context(untrusted_expressions())
        limits = None if trusted else ops.current_limits()
        return _run_checked(_Call(model, graph, backend, threads, limits, plan_key), inputs)


def _replayed(model: Model, inputs: Mapping[str, Any] | None, plan_key: tuple) -> dict | None:
    try:
        return run_plans.replay(model, inputs, plan_key)
    except _PassedOver:
        return None  # auto: onnxruntime failed on these values; the full path decides


def _plan_key(graph, backend, trusted, threads, given_limits) -> tuple:
    """What a plan of ``run_plans`` is kept by: the call's arguments and the limits in force."""
    return (graph, backend, trusted, threads, given_limits, ops.current_limits())


def planned_runner(
    model: Model,
    inputs: Mapping[str, Any],
    *,
    graph: str | None = None,
    trusted: bool = False,
    max_iterations: int | None = None,
    max_total_iterations: int | None = None,
    max_depth: int | None = None,
    max_elements: int | None = None,
    backend: Backend = "auto",
    threads: int = 1,
    external_data_dir: str | os.PathLike | None = None,
) -> run_plans.Runner | None:
    """What ``run(model, inputs, ...)`` would replay now (:mod:`mdf_loops.run_plans`), or
    None when it would take the full path (call ``run`` first: it plans the call).

    For a caller that runs one model it never edits on many inputs of the same names,
    dtypes and shapes as ``inputs`` (numpy arrays, the others the same objects): the
    runner takes them as ``run`` would, without the per-call checks that ``run`` makes
    to find the plan again (a sweep's worker, which runs a batch of settings).
    """
    if external_data_dir is not None:
        return None  # run reads the file each time: no plan
    given_limits = (max_iterations, max_total_iterations, max_depth, max_elements)
    key = _plan_key(graph, backend, trusted, threads, given_limits)
    plan = run_plans.find(model, inputs, key)
    if plan is None or backend != "auto":
        return None if plan is None else plan.run
    limits: dict[str, Any] = dict(zip(_LIMIT_NAMES, given_limits, strict=True))
    full = functools.partial(run, model, graph=graph, trusted=trusted, threads=threads, **limits)
    return _AutoPlan(plan.run, full)


class _AutoPlan:
    """An ``auto`` plan's runner, until onnxruntime fails on some inputs that the full path
    then runs (passing onnxruntime over, as ``run`` does); the full path from then on."""

    def __init__(self, planned: run_plans.Runner, full: run_plans.Runner) -> None:
        self.planned: run_plans.Runner | None = planned
        self.full = full

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        if self.planned is not None:
            try:
                return self.planned(inputs)
            except _PassedOver:
                pass
        outputs = self.full(inputs)
        self.planned = None  # the scheduler ran what onnxruntime could not
        return outputs


def _loaded(model: Model | str | os.PathLike, trusted: bool, external_data_dir) -> Model:
    if isinstance(model, Model) and external_data_dir is None:
        return model  # nothing to read
    with onnx_file_access(trusted=trusted, external_data_dir=external_data_dir):
        return load_model(model)


_LIMIT_NAMES = ("max_iterations", "max_total_iterations", "max_depth", "max_elements")


def _checked_arguments(backend: Backend, given_limits: tuple) -> tuple[Backend, dict[str, int]]:
    """The backend that runs, and the limits changed for this run."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    limits = zip(_LIMIT_NAMES, given_limits, strict=True)
    changed = {name: value for name, value in limits if value is not None}
    return backend, changed


@dataclass(frozen=True)
class _Prepared:
    """What a run reads of a graph before its inputs: kept until the model is edited."""

    target: Graph
    interface: GraphInterface
    ports: dict[str, list]  # input ports by id
    types: dict[str, Any]  # declared input types by input name


_PREPARED: CompileCache[_Prepared] = CompileCache()


def _prepare(model: Model, graph: str | None) -> _Prepared:
    try:
        target = select_graph(model, graph)
        interface = graph_interface(target)
    except MdfLoopsError:
        raise
    except Exception as exc:  # metadata of the wrong form
        raise ModelError(
            f"model '{model.id}': cannot read its graph's inputs and outputs: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    types = graph_input_types(target, interface.inputs)
    return _Prepared(target, interface, _input_ports(target), types)


@dataclass(frozen=True)
class _Call:
    """One call's model (loaded and checked) and arguments."""

    model: Model
    graph: str | None
    backend: str
    threads: int
    limits: ops.Limits | None
    plan_key: tuple


def _run_checked(call: _Call, inputs: Mapping[str, Any] | None) -> dict[str, Any]:
    model = call.model
    prepared = _PREPARED.get(model, call.graph, lambda: _prepare(model, call.graph))
    typed = _typed_inputs(model, prepared, inputs)
    given = dict(inputs or {})
    runner = _compiled_runner(call, prepared.target.id, typed)
    if runner is None:
        return _run_scheduler(model, prepared, typed)
    try:
        outputs = runner(typed)
    except _PassedOver as exc:  # auto: onnxruntime cannot run it; the scheduler may
        choice = auto_choice(model, prepared.target.id, call.threads, call.limits, typed)
        choice.warn(model.id, str(exc))
        outputs = _run_scheduler(model, prepared, typed)  # its error, naming the node, if any
        choice.remember(str(exc))  # the scheduler ran it: later calls go straight there
        run_plans.forget(model, call.plan_key)
        return outputs
    run_plans.keep(model, call.plan_key, runner, given, typed)
    return outputs


def _compiled_runner(call: _Call, graph_id: str, typed: dict) -> run_plans.Runner | None:
    """The compiled form of the call's backend as a runner; ``None``: the scheduler runs it."""
    if call.backend == "jax":  # docs/jax.md: lowered to one jit-compiled JAX function
        from mdf_loops.backends.jax import compiled as jax

        lowered = jax.cached_compile(call.model, typed, graph=graph_id, limits=call.limits)
        return jax.jax_runner(lowered, typed)
    if call.backend == "torch":  # docs/pytorch.md: run eagerly as torch operations
        from mdf_loops.backends.torch import compiled as torch_backend

        module = torch_backend.cached_compile(call.model, typed, graph=graph_id, limits=call.limits)
        return torch_backend.torch_runner(module, call.limits)
    if call.backend == "scheduler":
        return None
    return onnxruntime_runner(
        call.model, typed, graph_id, call.threads, call.limits, auto=call.backend == "auto"
    )


def _typed_inputs(model: Model, prepared: _Prepared, inputs: Mapping[str, Any] | None) -> dict:
    """The given inputs and the defaults of the rest, each fitted to its declared type
    (the one check of every entry point: :func:`mdf_loops.model.inputs.check_inputs`)."""
    target, interface = prepared.target, prepared.interface
    return check_inputs(
        target, interface.inputs, inputs, prepared.types, prepared.ports, model=model
    )


def _run_scheduler(model: Model, prepared: _Prepared, inputs: dict) -> dict[str, Any]:
    # modeci-mdf's engine (with graph-scheduler, pint and torch) only when the scheduler runs
    from modeci_mdf.execution_engine import EvaluableGraph

    from mdf_loops.backends.scheduler.onnx_functions import opset
    from mdf_loops.backends.scheduler.registry import register
    from mdf_loops.model.semantics import onnx_semantics

    register()
    target, interface, ports = prepared.target, prepared.interface, prepared.ports
    with ExitStack() as stack:
        stack.enter_context(onnx_semantics())  # loop-free models too: ONNX semantics in run()
        stack.enter_context(opset(_opset_of(model), other_opsets(target.metadata)))
        stack.enter_context(iteration_budget())
        try:
            engine = EvaluableGraph(target)
        except MdfLoopsError:
            raise
        except Exception as exc:
            raise ModelError(f"graph '{target.id}' cannot be built: {exc}") from exc
        slots: dict[str, list] = {}
        for enode in engine.enodes.values():
            for port_id, evaluable_input in enode.evaluable_inputs.items():
                slots.setdefault(port_id, []).append(evaluable_input)
        for name, value in inputs.items():
            port_id = interface.inputs[name]
            value = _engine_input(value, ports.get(port_id, []))
            for slot in slots.get(port_id, []):
                slot.curr_value = value
        try:
            engine.evaluate()
        except MdfLoopsError:
            raise
        except Exception as exc:  # outside any node: edges, the scheduler
            raise EvaluationError(f"graph '{target.id}': {type(exc).__name__}: {exc}") from exc
    try:
        return {
            name: to_user(engine.enodes[node].evaluable_outputs[port].curr_value)
            for name, (node, port) in interface.outputs.items()
        }
    except KeyError as exc:
        raise ModelError(f"graph '{target.id}': output {exc} is not an output port") from None


def _input_ports(graph: Graph) -> dict[str, list]:
    ports: dict[str, list] = {}
    for node in graph.nodes:
        for p in node.input_ports:
            ports.setdefault(p.id, []).append(p)
    return ports


def _opset_of(model: Model) -> int | None:
    version = model.onnx_opset_version
    try:
        return int(version) if version not in (None, "") else None
    except (TypeError, ValueError):
        raise ModelError(
            f"model '{model.id}': onnx_opset_version {version!r} is not a number"
        ) from None


def _engine_input(value: Any, ports: list) -> Any:
    """A user value in engine form; lists become sequences only where a sequence is declared."""
    if value is None:
        return to_engine(None)
    declared = next(
        ((p.metadata or {}).get("onnx_type") for p in ports if (p.metadata or {}).get("onnx_type")),
        None,
    )
    if isinstance(value, list):
        if declared and ("sequenceType" in declared or "optionalType" in declared):
            return to_engine(value)
        return np.asarray(value)
    if isinstance(value, OnnxSequence):
        return value
    return to_engine(np.asarray(value)) if not isinstance(value, np.ndarray) else value

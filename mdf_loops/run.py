"""Run a whole MDF model (with or without loops) and return its outputs by name."""

from __future__ import annotations

import difflib
import logging
import os
from collections import OrderedDict
from collections.abc import Mapping
from contextlib import ExitStack
from typing import Any

import numpy as np
from modeci_mdf.execution_engine import EvaluableGraph
from modeci_mdf.mdf import Graph, Model

from mdf_loops import ops
from mdf_loops.backends import BACKENDS, Backend
from mdf_loops.backends.onnxruntime.compiled import CompileError, cached_compile
from mdf_loops.backends.scheduler.onnx_functions import opset
from mdf_loops.backends.scheduler.registry import register
from mdf_loops.backends.scheduler.semantics import onnx_semantics
from mdf_loops.errors import EvaluationError, MdfLoopsError, ModelError
from mdf_loops.model.compat import input_default
from mdf_loops.model.inputs import default_input, fit_input, graph_input_types
from mdf_loops.model.interface import GraphInterface, graph_interface, load_model
from mdf_loops.model.values import OnnxSequence, to_engine, to_user
from mdf_loops.onnx.domains import other_opsets
from mdf_loops.ops.common import iteration_budget
from mdf_loops.safety.allowlist import untrusted_expressions
from mdf_loops.safety.checks import check_model, check_structure, current_limits_key, model_digest
from mdf_loops.safety.onnx_files import onnx_file_access

__all__ = ["run", "load_model", "GraphInterface", "graph_interface", "BACKENDS"]

log = logging.getLogger(__name__)


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
    """Evaluate a model's graph once and return its outputs.

    Args:
        model: an MDF ``Model``, or a path to MDF JSON/YAML or to an ONNX model.
        inputs: values by input name (see :func:`graph_interface`): numpy arrays,
            lists for ONNX sequences, ``None`` for an empty optional. Inputs not
            given take their ports' ``default_value``. Each value is checked
            against the shape and type the model declares and cast to it (the
            rules of :mod:`mdf_loops.model.inputs`, docs/api.md); a value that
            does not fit raises :class:`ModelError` naming the input.
        graph: id of the graph to run (default: the first).
        trusted: skip the expression allow-list of :mod:`mdf_loops.safety.checks`, and the
            limit guard of the onnxruntime backend. Only for models whose author you
            trust: their expressions then run as arbitrary Python (docs/safety.md).
        max_iterations, max_total_iterations, max_depth, max_elements: change the
            work limits of :class:`mdf_loops.Limits` for this run.
        backend: ``"scheduler"`` (every node, every loop iteration, through
            modeci-mdf's ``EvaluableGraph``), ``"onnxruntime"`` (the model lowered
            to one ONNX model, compiled once and cached, run by onnxruntime) or
            ``"auto"`` (onnxruntime when the model compiles, else the scheduler,
            with a logging WARNING that gives the reason; a failure while running
            on onnxruntime is an error, not a reason to rerun), or ``"jax"``
            (lowered to one ``jax.jit``-compiled function; needs ``mdf-loops[jax]``,
            docs/jax.md). All enforce ``max_iterations``,
            ``max_elements`` and ``max_depth`` (onnxruntime through
            :mod:`mdf_loops.backends.onnxruntime.guard`, unless ``trusted``);
            ``max_total_iterations`` is counted by the scheduler only.
        threads: onnxruntime intra-op threads of the compiled mode (loops of small
            operations run fastest on one).
        external_data_dir: the folder an ONNX file's external tensor data may be read
            from (only files inside it); without it, external data is read only when
            ``trusted``, from the model's own folder (docs/safety.md).

    Returns:
        ``{output name: value}``: arrays, lists for sequences, ``None`` for an
        empty optional.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
    register()
    changed = {
        name: value
        for name, value in (
            ("max_iterations", max_iterations),
            ("max_total_iterations", max_total_iterations),
            ("max_depth", max_depth),
            ("max_elements", max_elements),
        )
        if value is not None
    }
    if backend in ("onnxruntime", "jax") and "max_total_iterations" in changed:
        raise ValueError("max_total_iterations applies to the scheduler backend only")
    with ExitStack() as stack:
        stack.enter_context(ops.limits(**changed))
        with onnx_file_access(trusted=trusted, external_data_dir=external_data_dir):
            model = load_model(model)
        # -- safety: before anything is evaluated (docs/safety.md)
        _verify(model, trusted)
        if not trusted:
            stack.enter_context(untrusted_expressions())
        # -- end safety
        if backend == "auto" and "max_total_iterations" in changed:
            backend = "scheduler"  # only the scheduler counts iterations across loops
        limits = None if trusted else ops.current_limits()
        return _run_checked(model, inputs, graph, backend, threads, limits)


_VERIFIED: OrderedDict[tuple, set] = OrderedDict()  # content key -> checks passed


def _verify(model: Model, trusted: bool) -> None:
    """The structure and expression checks, once per model content (an edit checks again)."""
    key = (model_digest(model), current_limits_key())
    done = _VERIFIED.setdefault(key, set())
    _VERIFIED.move_to_end(key)
    while len(_VERIFIED) > 256:
        _VERIFIED.popitem(last=False)
    if "structure" not in done:
        check_structure(model)
        done.add("structure")
    if not trusted and "expressions" not in done:
        check_model(model)
        done.add("expressions")


def _run_checked(model, inputs, graph, backend, threads, limits) -> dict[str, Any]:
    try:
        target = _select_graph(model, graph)
        interface = graph_interface(target)
    except MdfLoopsError:
        raise
    except Exception as exc:  # metadata of the wrong form
        raise ModelError(
            f"model '{model.id}': cannot read its graph's inputs and outputs: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    ports = _input_ports(target)
    inputs = _typed_inputs(target, interface, dict(inputs or {}), ports)

    if backend == "jax":  # docs/jax.md: lowered to one jit-compiled JAX function
        from mdf_loops.backends.jax.compiled import run_jax

        return run_jax(model, inputs, target.id, limits)
    if backend != "scheduler":
        try:
            compiled = cached_compile(
                model, inputs, graph=target.id, threads=threads, limits=limits
            )
        except CompileError as exc:
            if backend == "onnxruntime":
                raise
            log.warning(
                "model '%s' runs on the scheduler, not onnxruntime (slower): %s", model.id, exc
            )
        else:
            try:
                outputs = compiled.run(inputs)
            except MdfLoopsError:
                raise
            except Exception as exc:  # onnxruntime's errors name no model element
                raise EvaluationError(
                    f"graph '{target.id}' (onnxruntime backend): {exc}; run with "
                    "backend='scheduler' (--backend scheduler) to find the failing node"
                ) from exc
            return {name: to_user(value) for name, value in outputs.items()}
    return _run_scheduler(model, target, interface, inputs, ports)


def _typed_inputs(target: Graph, interface: GraphInterface, inputs: dict, ports: dict) -> dict:
    """The given inputs and the defaults of the rest, each fitted to its declared type
    (the rules of :mod:`mdf_loops.model.inputs`)."""
    unknown = sorted(set(inputs) - set(interface.inputs))
    if unknown:
        hints = "".join(_nearest(name, interface.inputs) for name in unknown)
        raise ModelError(
            f"graph '{target.id}': unknown inputs {unknown}; it takes "
            f"{sorted(interface.inputs)}{hints}"
        )
    types = graph_input_types(target, interface.inputs)
    typed, missing = {}, []
    for name, port_id in interface.inputs.items():
        if name in inputs:
            typed[name] = fit_input(name, inputs[name], types[name])
            continue
        has_default, value = default_input(ports.get(port_id, []))
        if has_default:
            typed[name] = fit_input(name, value, types[name])
        elif ports.get(port_id) and not any(input_default(p) is not None for p in ports[port_id]):
            missing.append(name)
    if missing:
        raise ModelError(
            f"graph '{target.id}': missing inputs {sorted(missing)}; give a value "
            "for each, or a default_value on its input port"
        )
    return typed


def _nearest(name: str, known) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" ('{name}': did you mean '{close[0]}'?)" if close else ""


def _run_scheduler(model, target, interface, inputs, ports) -> dict[str, Any]:
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


def _select_graph(model: Model, graph_id: str | None) -> Graph:
    if not model.graphs:
        raise ModelError(f"model '{model.id}' has no graph")
    if graph_id is None:
        return model.graphs[0]
    for g in model.graphs:
        if g.id == graph_id:
            return g
    raise ModelError(f"model '{model.id}' has no graph '{graph_id}'")


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

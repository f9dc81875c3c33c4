"""Run a whole MDF model (with or without loops) and return its outputs by name."""

from __future__ import annotations

import os
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
from modeci_mdf.execution_engine import EvaluableGraph
from modeci_mdf.mdf import Graph, Model

from . import ops
from .errors import MdfLoopsError, ModelError
from .onnx_functions import opset
from .registry import register
from .values import OnnxSequence, to_engine, to_user

__all__ = ["run", "load_model", "GraphInterface", "graph_interface"]


@dataclass(frozen=True)
class GraphInterface:
    """The names a graph's inputs and outputs go by in :func:`run`.

    ``inputs`` maps an input name to the input-port id it binds (every port of
    that id without an incoming edge); ``outputs`` maps an output name to the
    ``(node id, port id)`` it reads.
    """

    inputs: dict[str, str]
    outputs: dict[str, tuple[str, str]]


def graph_interface(graph: Graph) -> GraphInterface:
    """Inputs and outputs of a top-level graph.

    A graph with ``formal_inputs``/``formal_outputs`` metadata (an imported ONNX
    graph) uses those, named by the original ONNX names. Any other graph takes as
    inputs the input ports with no incoming edge and no default value, named by
    port id, and as outputs the output ports with no outgoing edge, named
    ``"node_id.port_id"``.
    """
    meta = graph.metadata or {}
    names = meta.get("onnx_names") or {}
    if "formal_inputs" in meta and "formal_outputs" in meta:
        inputs = {names.get(p, p): p for p in meta["formal_inputs"]}
        outputs = {}
        for ref in meta["formal_outputs"]:
            node, port = ref.split(".")
            outputs[names.get(ref, ref)] = (node, port)
        return GraphInterface(inputs, outputs)
    received = {(e.receiver, e.receiver_port) for e in graph.edges}
    sent = {(e.sender, e.sender_port) for e in graph.edges}
    inputs = {}
    for node in graph.nodes:
        for p in node.input_ports:
            if (node.id, p.id) not in received and p.default_value is None:
                inputs[p.id] = p.id
    outputs = {
        f"{node.id}.{p.id}": (node.id, p.id)
        for node in graph.nodes
        for p in node.output_ports
        if (node.id, p.id) not in sent
    }
    return GraphInterface(inputs, outputs)


def load_model(model_or_path: Model | str | os.PathLike) -> Model:
    """An MDF ``Model`` from a Model, an MDF JSON/YAML file, or an ONNX file."""
    if isinstance(model_or_path, Model):
        return model_or_path
    path = os.fspath(model_or_path)
    if path.endswith(".onnx"):
        from .onnx_import import onnx_to_mdf

        return onnx_to_mdf(path)
    if not os.path.exists(path):
        raise ModelError(f"{path}: no such file")
    if not path.endswith((".json", ".yaml", ".yml")):
        raise ModelError(f"{path}: expected a .json, .yaml, .yml or .onnx file")
    from modeci_mdf.utils import load_mdf

    try:
        return load_mdf(path)
    except Exception as exc:  # json/yaml/cattrs errors of many kinds
        raise ModelError(f"{path}: not a readable MDF model ({type(exc).__name__}: {exc})") from exc


def run(
    model: Model | str | os.PathLike,
    inputs: Mapping[str, Any] | None = None,
    *,
    graph: str | None = None,
    max_iterations: int | None = None,
) -> dict[str, Any]:
    """Evaluate a model's graph once with modeci-mdf's engine and return its outputs.

    Args:
        model: an MDF ``Model``, or a path to MDF JSON/YAML or to an ONNX model.
        inputs: values by input name (see :func:`graph_interface`): numpy arrays,
            lists for ONNX sequences, ``None`` for an empty optional.
        graph: id of the graph to run (default: the first).
        max_iterations: iteration limit of each loop (default 1,000,000).

    Returns:
        ``{output name: value}``: arrays, lists for sequences, ``None`` for an
        empty optional.
    """
    register()
    model = load_model(model)
    target = _select_graph(model, graph)
    interface = graph_interface(target)
    inputs = dict(inputs or {})
    unknown = sorted(set(inputs) - set(interface.inputs))
    if unknown:
        raise ModelError(
            f"graph '{target.id}': unknown inputs {unknown}; it takes {sorted(interface.inputs)}"
        )
    ports = _input_ports(target)
    missing = sorted(
        name for name, port in interface.inputs.items()
        if name not in inputs and not any(p.default_value is not None for p in ports.get(port, []))
        and ports.get(port)
    )
    if missing:
        raise ModelError(f"graph '{target.id}': missing inputs {missing}")

    with ExitStack() as stack:
        stack.enter_context(opset(_opset_of(model)))
        if max_iterations is not None:
            stack.enter_context(ops.limits(max_iterations=int(max_iterations)))
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
        engine.evaluate()
    return {
        name: to_user(engine.enodes[node].evaluable_outputs[port].curr_value)
        for name, (node, port) in interface.outputs.items()
    }


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
    return int(version) if version not in (None, "") else None


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

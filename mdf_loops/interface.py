"""A model's inputs and outputs by name, and reading a model from a file."""

from __future__ import annotations

import os
from dataclasses import dataclass

from modeci_mdf.mdf import Graph, Model

from .errors import ModelError

__all__ = ["GraphInterface", "graph_interface", "load_model"]


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

"""A model's inputs and outputs by name, and reading a model from a file."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from modeci_mdf.mdf import Graph, Model

from mdf_loops.errors import MdfLoopsError, ModelError
from mdf_loops.files import read_file
from mdf_loops.model.compat import keep_input_defaults, set_input_default

__all__ = [
    "GraphInterface",
    "select_graph",
    "graph_interface",
    "load_model",
    "set_input_defaults",
    "stock_evaluate",
]


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
    inputs the input ports with no incoming edge, named by port id (optional where
    the port has a default value), and as outputs the output ports with no
    outgoing edge, named ``"node_id.port_id"``.
    """
    meta = graph.metadata or {}
    names = meta.get("onnx_names") or {}
    if not isinstance(names, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in names.items()
    ):
        raise ModelError(
            f"graph '{graph.id}': metadata 'onnx_names' must map ids to ONNX "
            f"names (strings), found {names!r:.80}"
        )
    if "formal_inputs" in meta and "formal_outputs" in meta:
        inputs = {names.get(p, p): p for p in _strings(meta, "formal_inputs", graph.id)}
        outputs = {}
        for ref in _strings(meta, "formal_outputs", graph.id):
            if ref.count(".") != 1:
                raise ModelError(
                    f"graph '{graph.id}': formal output {ref!r} must be 'node_id.port_id'"
                )
            node, port = ref.split(".")
            outputs[names.get(ref, ref)] = (node, port)
        return GraphInterface(inputs, outputs)
    received = {(e.receiver, e.receiver_port) for e in graph.edges}
    sent = {(e.sender, e.sender_port) for e in graph.edges}
    inputs = {}
    for node in graph.nodes:
        for p in node.input_ports:
            if (node.id, p.id) not in received:
                inputs[p.id] = p.id
    outputs = {
        f"{node.id}.{p.id}": (node.id, p.id)
        for node in graph.nodes
        for p in node.output_ports
        if (node.id, p.id) not in sent
    }
    return GraphInterface(inputs, outputs)


def _strings(meta: dict, key: str, graph_id: str) -> list[str]:
    values = meta[key]
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ModelError(
            f"graph '{graph_id}': metadata '{key}' must be a list of ids, found {values!r:.60}"
        )
    return values


def select_graph(model: Model, graph_id: str | None = None) -> Graph:
    """The graph ``graph_id`` of ``model`` (None: its first), or :class:`ModelError`
    saying which graphs it has: the one way every command and entry point picks it."""
    if not model.graphs:
        raise ModelError(
            f"model '{model.id}' has no graph; an MDF model holds at least one under 'graphs'"
        )
    if graph_id is None:
        return model.graphs[0]
    for graph in model.graphs:
        if graph.id == graph_id:
            return graph
    raise ModelError(
        f"model '{model.id}' has no graph '{graph_id}'; its graphs: "
        + ", ".join(f"'{g.id}'" for g in model.graphs)
    )


def load_model(model_or_path: Model | str | os.PathLike) -> Model:
    """An MDF ``Model`` from a Model, an MDF JSON/YAML file, or an ONNX file.

    Raises:
        ModelError: the file is missing, unreadable, truncated, of another format
            than its extension says, repeats a key, multiplies its content with
            YAML aliases, or does not describe an MDF model.
    """
    if isinstance(model_or_path, Model):
        return model_or_path
    if not isinstance(model_or_path, (str, os.PathLike)):
        raise ModelError(
            f"expected an MDF Model or a file path, got {type(model_or_path).__name__}"
        )
    path = os.fspath(model_or_path)
    if path.endswith(".onnx"):
        return _load_onnx(path)
    if not path.endswith((".json", ".yaml", ".yml")):
        raise ModelError(f"{path}: expected a .json, .yaml, .yml or .onnx file")
    from mdf_loops.model.documents import check_document_nodes, read_noted_document
    from mdf_loops.safety.documents import check_document  # safety's limits on the content

    try:
        document, notes = read_noted_document(path)
    except ModelError as exc:
        raise ModelError(f"{exc}{_format_hint(path)}") from None
    except RecursionError:
        raise ModelError(f"{path}: nested too deeply to read") from None
    json_file = path.endswith(".json")
    if notes.repeated_keys or not json_file:  # the walks run where the parser met something
        check_document(document, path, aliases=not json_file)  # JSON has no aliases
    if notes.graphs_as_nodes:
        check_document_nodes(document, path)  # loading would drop a graph put among nodes
    if not (
        isinstance(document, dict)
        and len(document) == 1
        and isinstance(next(iter(document.values())), dict)
    ):
        raise ModelError(
            f"{path}: an MDF file holds one model, {{model_id: {{...}}}}; "
            f"found {type(document).__name__}"
        )
    try:  # from the content read and checked above: the file is read once
        model = _model_from_document(document, yaml_file=not path.endswith(".json"))
    except Exception as exc:  # cattrs errors of many kinds
        raise ModelError(f"{path}: not a readable MDF model ({type(exc).__name__}: {exc})") from exc
    keep_input_defaults(model, document)  # modeci-mdf 0.4.13 drops them (model/compat.py)
    return model


def _model_from_document(document: dict, yaml_file: bool) -> Model:
    """The model modeci-mdf's ``load_mdf`` makes of a file's content (its
    ``Model.from_json_file`` / ``from_yaml_file`` without reading the file again)."""
    if yaml_file:
        from modelspec.base_types import yaml_converter

        document = yaml_converter.structure(document, dict)
    return Model.from_dict(document)


def _load_onnx(path: str) -> Model:
    from mdf_loops.onnx.import_ import onnx_to_mdf

    if _sniff(path) in ("JSON", "YAML"):
        raise ModelError(f"{path}: is a text file, not an ONNX model{_format_hint(path)}")
    try:
        return onnx_to_mdf(path)
    except MdfLoopsError:
        raise
    except Exception as exc:  # onnx/protobuf errors of many kinds
        raise ModelError(f"{path}: cannot be imported ({type(exc).__name__}: {exc})") from exc


def _sniff(path: str) -> str | None:
    """The format the first bytes of a file suggest: "JSON", "YAML", "ONNX" or None."""
    try:
        head = read_file(path, length=512)
    except MdfLoopsError:
        return None  # reported where the file is read
    if any(byte < 9 or 13 < byte < 32 for byte in head):  # control bytes: binary (protobuf)
        return "ONNX"
    text = head.lstrip()
    if text[:1] in (b"{", b"["):
        return "JSON"
    return "YAML" if text else None


def _format_hint(path: str) -> str:
    """'; it looks like ONNX (...)' when the content does not match the extension."""
    found = _sniff(path)
    expected = "ONNX" if path.endswith(".onnx") else "JSON" if path.endswith(".json") else "YAML"
    if found is None or found == expected or (found, expected) == ("JSON", "YAML"):
        return ""
    extension = {"ONNX": ".onnx", "JSON": ".json", "YAML": ".yaml"}[found]
    return f"; its content looks like {found}: is it a {extension} file?"


def stock_evaluate(graph: Graph, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Evaluate ``graph`` with modeci-mdf's own ``EvaluableGraph``; outputs by name.

    The inputs go in through ``EvaluableGraph.evaluate(initializer=...)``, the
    way a modeci-mdf user feeds a graph; names are those of :func:`graph_interface`.
    """
    from modeci_mdf.execution_engine import EvaluableGraph

    interface = graph_interface(graph)
    engine = EvaluableGraph(graph)
    engine.evaluate(initializer={interface.inputs[name]: value for name, value in inputs.items()})
    return {
        name: engine.enodes[node].evaluable_outputs[port].curr_value
        for name, (node, port) in interface.outputs.items()
    }


def set_input_defaults(graph: Graph, values: Mapping[str, Any]) -> None:
    """Give inputs of ``graph`` default values, by input name (see :func:`graph_interface`).

    Each value is stored as MDF's ``default_value`` (nested lists) on every input
    port that takes the input, so ``mdf_loops.run(model)`` and ``mdf-loops run
    MODEL`` need no inputs; declared element types (:func:`mdf_loops.model.port_type`)
    restore the dtype when the model runs.
    """
    import numpy as np

    interface = graph_interface(graph)
    unknown = sorted(set(values) - set(interface.inputs))
    if unknown:
        raise ModelError(
            f"graph '{graph.id}': no inputs {unknown}; it takes {sorted(interface.inputs)}"
        )
    received = {(e.receiver, e.receiver_port) for e in graph.edges}
    for name, value in values.items():
        port_id = interface.inputs[name]
        stored = np.asarray(value).tolist()
        for node in graph.nodes:
            for port in node.input_ports:
                if port.id == port_id and (node.id, port.id) not in received:
                    set_input_default(port, stored)

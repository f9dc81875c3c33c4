"""Pictures of MDF models with loops, drawn with Graphviz.

modeci-mdf's own ``modeci_mdf.interfaces.graphviz`` draws a loop node as one box
and its body not at all. Here

* each Scan/Loop/If node is a cluster labelled with the operator and its
  attributes (trip count, condition, num_scan_inputs, axes, directions);
* the cluster holds the loop's input ports (top) and output ports (bottom) as
  small ovals, and one inner cluster per body graph (an If has two);
* a body starts with its formal inputs (house shapes, in order, with their role:
  state, scan element, iteration number, condition, loop-carried value); dashed
  edges bind the loop's inputs to them and the body's formal outputs to the
  loop's outputs; dotted edges carry outer-scope reads into the body; a
  dashed grey "next" edge runs from each new state back to its formal input;
* nested loops are nested clusters, drawn the same way.

:func:`to_graphviz` gives the ``graphviz.Digraph``; :func:`render` writes a PNG,
SVG or PDF (chosen by the file extension) with Graphviz's ``dot`` program.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import graphviz
from modeci_mdf.mdf import Graph, Model, Node

from .errors import MdfLoopsError
from .files import write_atomically
from .representation import BODY_ATTRIBUTES, CONTROL_FLOW_FUNCTIONS, function_parameter, loop_bodies
from .run import graph_interface, load_model
from .values import is_encoded_tensor

__all__ = ["to_graphviz", "render", "FORMATS"]

#: file extensions :func:`render` writes, and the Graphviz output format of each
FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}

_LINE = 48  # longest label line, in characters
_LOOP_FILL = ("#e8f0fb", "#d5e3f6", "#c3d6f0")  # by nesting depth
_BODY_FILL = ("#ffffff", "#f7f9fc")


def to_graphviz(model: Model | str | os.PathLike, graph: str | None = None) -> graphviz.Digraph:
    """A Graphviz drawing of one graph of ``model`` (default: the first), loops drawn open.

    Args:
        model: an MDF ``Model``, or a path to MDF JSON/YAML or ONNX.
        graph: id of the graph to draw.
    """
    model = load_model(model)
    if not model.graphs:
        raise MdfLoopsError(f"model '{model.id}' has no graph to draw")
    target = model.graphs[0] if graph is None else next((g for g in model.graphs if g.id == graph), None)
    if target is None:
        raise MdfLoopsError(f"model '{model.id}' has no graph '{graph}'")
    dot = graphviz.Digraph(name=model.id)
    dot.attr(label=_html(f"<b>{_text(model.id)}</b>: graph {_text(target.id)}"), labelloc="t",
             fontname="Helvetica", fontsize="16", newrank="true")
    dot.attr("node", fontname="Helvetica", fontsize="11")
    dot.attr("edge", fontname="Helvetica", fontsize="9", color="#555555")
    _Drawer(dot).top_level(target)
    return dot


def render(model: Model | str | os.PathLike, path: str | os.PathLike, graph: str | None = None) -> Path:
    """Draw ``model`` into ``path``: PNG, SVG or PDF by its extension. Returns the path.

    Needs Graphviz's ``dot`` program (Debian/Ubuntu: ``apt-get install graphviz``).
    The file is written through a temporary file, so an earlier file survives a failure.
    """
    path = Path(path)
    image_format = FORMATS.get(path.suffix.lower())
    if image_format is None:
        raise MdfLoopsError(
            f"{path}: cannot tell the picture format; use one of {', '.join(FORMATS)}"
        )
    dot = to_graphviz(model, graph)
    try:
        image = dot.pipe(format=image_format, quiet=True)
    except graphviz.ExecutableNotFound:
        raise MdfLoopsError(
            "drawing needs Graphviz's 'dot' program on the PATH "
            "(Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz)"
        ) from None
    except graphviz.CalledProcessError as exc:
        reason = (exc.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        raise MdfLoopsError(f"{path}: Graphviz failed: {reason[-1] if reason else exc}") from None
    return write_atomically(path, image)


@dataclass
class _Ports:
    """Where edges attach to a drawn node: Graphviz node names by port id."""

    inputs: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)


class _Drawer:
    def __init__(self, dot: graphviz.Digraph):
        self.dot = dot

    # -- graphs
    def top_level(self, graph: Graph) -> None:
        interface = graph_interface(graph)
        names = (graph.metadata or {}).get("onnx_names") or {}
        ports = self.graph(self.dot, graph, graph.id, bindings={}, depth=0)
        free = {port: name for name, port in interface.inputs.items()}
        for port_id, target in self._unbound_inputs(graph, ports, {}):
            if port_id not in free:
                continue
            source = f"{graph.id}/input/{port_id}"
            self.dot.node(source, _html(f"<b>{_text(free[port_id])}</b>"), shape="oval",
                          style="filled", fillcolor="#fff4cc")
            self.dot.edge(source, target)
        for name, (node_id, port_id) in interface.outputs.items():
            source = ports[node_id].outputs.get(port_id)
            if source is None:
                continue
            sink = f"{graph.id}/output/{name}"
            self.dot.node(sink, _html(f"<b>{_text(names.get(f'{node_id}.{port_id}', name))}</b>"),
                          shape="oval", style="filled", fillcolor="#ddf2dd")
            self.dot.edge(source, sink)

    def graph(self, container, graph: Graph, prefix: str, bindings: dict[str, tuple[str, str]],
              depth: int) -> dict[str, _Ports]:
        """Draw the nodes and edges of ``graph``; ``bindings`` maps a port id to (source, style)."""
        ports: dict[str, _Ports] = {}
        for node in graph.nodes:
            name = f"{prefix}/{node.id}"
            if function_parameter(node) is not None and \
                    function_parameter(node).function in CONTROL_FLOW_FUNCTIONS:
                ports[node.id] = self.loop(container, node, name, depth)
            else:
                container.node(name, _node_label(node), shape="box", style="rounded,filled",
                               fillcolor="#ffffff")
                ports[node.id] = _Ports({p.id: name for p in node.input_ports},
                                        {p.id: name for p in node.output_ports})
        for edge in graph.edges:
            source = ports.get(edge.sender, _Ports()).outputs.get(edge.sender_port)
            target = ports.get(edge.receiver, _Ports()).inputs.get(edge.receiver_port)
            if source and target:
                container.edge(source, target, label=_text(edge.sender_port))
        for port_id, target in self._unbound_inputs(graph, ports, bindings):
            if port_id in bindings:
                source, style = bindings[port_id]
                container.edge(source, target, style=style)
        return ports

    @staticmethod
    def _unbound_inputs(graph: Graph, ports: dict[str, _Ports], bindings) -> Iterable[tuple[str, str]]:
        received = {(e.receiver, e.receiver_port) for e in graph.edges}
        for node in graph.nodes:
            for port in node.input_ports:
                if (node.id, port.id) not in received and node.id in ports:
                    yield port.id, ports[node.id].inputs[port.id]

    # -- loop nodes
    def loop(self, container, node: Node, name: str, depth: int) -> _Ports:
        call = function_parameter(node)
        op = CONTROL_FLOW_FUNCTIONS[call.function]
        bodies = loop_bodies(node)
        with container.subgraph(name=f"cluster_{name}") as cluster:
            cluster.attr(label=_html(_loop_label(node, op, call)), style="rounded,filled",
                         fillcolor=_LOOP_FILL[min(depth, len(_LOOP_FILL) - 1)], color="#4a74b4",
                         labeljust="l", penwidth="1.5")
            ports = _Ports()
            for port in node.input_ports:
                ports.inputs[port.id] = f"{name}#in#{port.id}"
                cluster.node(ports.inputs[port.id], _html(_text(port.id)), shape="oval",
                             style="filled", fillcolor="#ffffff", fontsize="10", height="0.3")
            for port in node.output_ports:
                ports.outputs[port.id] = f"{name}#out#{port.id}"
                cluster.node(ports.outputs[port.id], _html(_text(port.id)), shape="oval",
                             style="filled", fillcolor="#ffffff", fontsize="10", height="0.3")
            arguments = self._arguments(cluster, node, name, op, call)
            outputs_by_index = _outputs_by_index(node, call.id, ports)
            for attribute, body in bodies.items():
                self.body(cluster, node, name, op, attribute, body, ports, arguments,
                          outputs_by_index, depth)
        return ports

    def _arguments(self, cluster, node: Node, name: str, op: str, call) -> dict[str, list[str]]:
        """Graphviz names of the values bound to each formal input of the operator."""
        args = call.args or {}
        inputs = {p.id for p in node.input_ports}
        result: dict[str, list[str]] = {}
        for formal, expression in args.items():
            result[formal] = []
            for k, item in enumerate(_list_items(expression)):
                if item in inputs:
                    result[formal].append(f"{name}#in#{item}")
                    continue
                holder = f"{name}#arg#{formal}#{k}"
                cluster.node(holder, _html(f"{_text(formal)} = {_text(item)}"), shape="plain",
                             fontsize="10")
                result[formal].append(holder)
        return result

    def body(self, cluster, node: Node, name: str, op: str, attribute: str, body: Graph,
             ports: _Ports, arguments: dict[str, list[str]], outputs_by_index: dict[int, str],
             depth: int) -> None:
        meta = body.metadata or {}
        formal_inputs = [str(x) for x in meta.get("formal_inputs") or []]
        formal_outputs = [tuple(str(r).split(".", 1)) for r in meta.get("formal_outputs") or []]
        outer = [str(x) for x in meta.get("outer_scope_inputs") or []]
        prefix = f"{name}/{attribute}"
        roles_in, sources, roles_out, back_edges = _signature_roles(op, node, arguments,
                                                                    len(formal_inputs), len(formal_outputs))
        with cluster.subgraph(name=f"cluster_{prefix}") as inner:
            inner.attr(label=_html(f"<b>{_text(attribute)}</b>: graph {_text(body.id)}"),
                       style="rounded,filled", fillcolor=_BODY_FILL[depth % 2], color="#8c8c8c",
                       penwidth="1")
            bindings: dict[str, tuple[str, str]] = {}
            formal_names = []
            for k, port_id in enumerate(formal_inputs):
                formal_name = f"{prefix}#formal#{k}"
                formal_names.append(formal_name)
                inner.node(formal_name, _html(f"<b>{_text(port_id)}</b><br/>"
                                              f"<font point-size='9'>{roles_in[k]}</font>"),
                           shape="house", style="filled", fillcolor="#fff4cc")
                bindings[port_id] = (formal_name, "solid")
            for port_id in outer:
                if port_id in ports.inputs:
                    bindings[port_id] = (ports.inputs[port_id], "dotted")
            body_ports = self.graph(inner, body, prefix, bindings, depth + 1)
        for k, source in sources.items():
            if k < len(formal_names):
                cluster.edge(source, formal_names[k], style="dashed", color="#4a74b4",
                             label=roles_in[k].split(" ")[0] if roles_in[k] else "")
        for j, (node_id, port_id) in enumerate(formal_outputs):
            produced = body_ports.get(node_id, _Ports()).outputs.get(port_id)
            if produced is None:
                continue
            if j in roles_out and roles_out[j] in outputs_by_index:
                cluster.edge(produced, outputs_by_index[roles_out[j]], style="dashed",
                             color="#4a74b4", label="stacked" if j in back_edges.get("scan", ()) else "")
            if j in back_edges and back_edges[j] < len(formal_names):
                cluster.edge(produced, formal_names[back_edges[j]], style="dashed", color="#999999",
                             constraint="false", label="next", fontcolor="#999999")


def _signature_roles(op: str, node: Node, arguments: dict[str, list[str]], n_in: int, n_out: int):
    """For a body: the role of each formal input, the loop value feeding it, the loop
    output index each formal output becomes, and which formal input each carried
    output returns to in the next iteration."""
    roles_in = [""] * n_in
    sources: dict[int, str] = {}
    roles_out: dict[int, int] = {}
    back: dict[Any, Any] = {"scan": set()}
    if op == "Scan":
        values = arguments.get("initial_state_and_scan_inputs", [])
        m = _int_parameter(node, "num_scan_inputs", default=len(values))
        n = max(len(values) - m, 0)
        for k in range(n_in):
            roles_in[k] = f"state {k}" if k < n else f"scan element {k - n}"
            if k < len(values):
                sources[k] = values[k]
        for j in range(n_out):
            roles_out[j] = j
            if j < n:
                back[j] = j
            else:
                back["scan"].add(j)
    elif op == "Loop":
        carried = arguments.get("v_initial", [])
        for k in range(n_in):
            roles_in[k] = ("iteration number", "condition")[k] if k < 2 else f"carried {k - 2}"
            if k >= 2 and k - 2 < len(carried):
                sources[k] = carried[k - 2]
        if n_in > 1 and arguments.get("cond"):
            sources[1] = arguments["cond"][0]
        back[0] = 1
        for j in range(1, n_out):
            roles_out[j] = j - 1
            if j - 1 < len(carried):
                back[j] = j + 1
            else:
                back["scan"].add(j)
    else:  # If: branch outputs are the node's outputs
        for j in range(n_out):
            roles_out[j] = j
    return roles_in, sources, roles_out, back


# ---------------------------------------------------------------- labels


def _loop_label(node: Node, op: str, call) -> str:
    lines = [f"<b>{_text(node.id)}</b>: onnx::{op}"]
    args = call.args or {}
    if op == "Loop":
        trip = args.get("M")
        condition = args.get("cond")
        lines.append(f"trip count: {_text(_describe_argument(node, trip)) if trip else 'none'}")
        lines.append(f"condition: {_text(_describe_argument(node, condition)) if condition else 'none'}")
        if not trip and not condition:
            lines.append("runs until the iteration limit")
    elif op == "If":
        lines.append(f"condition: {_text(_describe_argument(node, args.get('cond')))}")
    attributes = set(BODY_ATTRIBUTES[op]) | {call.id}
    for parameter in node.parameters:
        if parameter.id not in attributes and not parameter.function:
            lines.append(f"{_text(parameter.id)} = {_text(_short_value(parameter.value))}")
    return "<br align='left'/>".join(lines) + "<br align='left'/>"


def _describe_argument(node: Node, expression: Any) -> str:
    """An argument as written, with the value of a constant parameter it names."""
    for parameter in node.parameters:
        if parameter.id == expression and parameter.value is not None:
            return f"{expression} = {_short_value(parameter.value)}"
    return str(expression)


def _node_label(node: Node) -> str:
    lines = [f"<b>{_text(node.id)}</b>"]
    call = function_parameter(node)
    if call is not None:
        if call.function.startswith("onnx::"):
            lines.append(_text(call.function))
        else:
            arguments = ", ".join(f"{k}={v}" for k, v in (call.args or {}).items())
            lines.append(_text(f"{call.function}({arguments})"))
    for function in getattr(node, "functions", None) or []:
        lines.append(_text(f"{function.id} = {function.function or function.value}"))
    for parameter in node.parameters:
        if parameter is not call and not parameter.function:
            lines.append(f"<font point-size='9'>{_text(parameter.id)} = "
                         f"{_text(_short_value(parameter.value))}</font>")
    for port in node.output_ports:
        if call is None or str(port.value) not in (call.id,) and not str(port.value).startswith(f"{call.id}["):
            lines.append(f"<font point-size='9'>{_text(port.id)} = {_text(port.value)}</font>")
    return _html("<br/>".join(lines))


def _short_value(value: Any) -> str:
    if is_encoded_tensor(value):
        shape = ", ".join(str(d) for d in value["shape"])
        data = value["data"]
        if len(data) <= 4:
            return f"{value['dtype']}[{shape}] {data}"
        return f"{value['dtype']}[{shape}]"
    if isinstance(value, dict):
        return "{...}"
    text = str(value)
    return text


def _text(value: Any) -> str:
    """HTML-escaped text, cut to one short line."""
    text = " ".join(str(value).split())
    if len(text) > _LINE:
        text = text[: _LINE - 3] + "..."
    return html.escape(text, quote=True)


def _html(markup: str) -> str:
    return f"<{markup}>"


def _list_items(expression: Any) -> list[str]:
    """The items of a list expression ``"[a, b]"``; a single expression is one item."""
    if isinstance(expression, list):
        return [str(e) for e in expression]
    text = str(expression).strip()
    if text.startswith("[") and text.endswith("]"):
        import ast

        try:
            tree = ast.parse(text, mode="eval").body
            return [ast.unparse(e) for e in tree.elts]
        except (SyntaxError, AttributeError):
            pass
    return [text]


def _int_parameter(node: Node, parameter_id: str, default: int) -> int:
    for parameter in node.parameters:
        if parameter.id == parameter_id:
            try:
                return int(parameter.value)
            except (TypeError, ValueError):
                return default
    return default


def _outputs_by_index(node: Node, call_id: str, ports: _Ports) -> dict[int, str]:
    """Graphviz names of the output ports that read output ``i`` of the call (``call[i]``)."""
    found = {}
    for port in node.output_ports:
        value = str(port.value).replace(" ", "")
        if value.startswith(f"{call_id}[") and value.endswith("]") and value[len(call_id) + 1:-1].isdigit():
            found[int(value[len(call_id) + 1:-1])] = ports.outputs[port.id]
    return found

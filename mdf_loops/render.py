"""Pictures of MDF models with loops, drawn with Graphviz.

modeci-mdf's own ``modeci_mdf.interfaces.graphviz`` draws a loop node as one box
and its body not at all. Here

* each Scan/Loop/If node is a blue cluster labelled with the operator and its
  attributes (trip count, condition, num_scan_inputs, axes, directions);
* the cluster holds the node's input ports (small ovals, above) and output ports
  (below), and one grey cluster per body graph (an If has two);
* a body starts with its formal inputs (yellow houses, in order, each with its
  role: state, scan element, iteration number, condition, carried value);
  dashed blue edges bind the loop's inputs to them and the body's formal
  outputs to the loop's outputs ("final" values and "stacked" scan outputs);
  dotted edges carry outer-scope reads into the body; a dashed grey "next" edge
  runs from each new state or carried value back to its formal input;
* nested loops are nested clusters, drawn the same way.

:func:`to_graphviz` gives the ``graphviz.Digraph``; :func:`render` writes a PNG,
SVG or PDF (chosen by the file extension) with Graphviz's ``dot`` program.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import graphviz
from modeci_mdf.mdf import Graph, Model, Node, Parameter

from mdf_loops.errors import MdfLoopsError
from mdf_loops.files import write_atomically
from mdf_loops.model.convention import (
    CONTROL_FLOW_FUNCTIONS,
    function_parameter,
    loop_bodies,
    output_index,
    variadic_items,
)
from mdf_loops.model.interface import graph_interface, load_model
from mdf_loops.model.signatures import LoopSignature, ScanSignature
from mdf_loops.render_labels import (
    constant_values,
    describe_argument,
    html_label,
    int_parameter,
    loop_label,
    node_label,
    parameters_read_by_bodies,
    short_value,
    text,
)

__all__ = ["to_graphviz", "render", "FORMATS"]

#: file extensions :func:`render` writes, and the Graphviz output format of each
FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}

_LOOP_FILL = ("#e8f0fb", "#d5e3f6", "#c3d6f0")  # by nesting depth
_BODY_FILL = ("#ffffff", "#f7f9fc")
_BINDING = {"style": "dashed", "color": "#4a74b4", "fontcolor": "#4a74b4"}
_NEXT = {"style": "dashed", "color": "#999999", "arrowhead": "none"}
_PORT = {
    "shape": "oval",
    "style": "filled",
    "fillcolor": "#ffffff",
    "fontsize": "10",
    "height": "0.3",
}


def to_graphviz(model: Model | str | os.PathLike, graph: str | None = None) -> graphviz.Digraph:
    """A Graphviz drawing of one graph of ``model`` (default: the first), loops drawn open.

    Args:
        model: an MDF ``Model``, or a path to MDF JSON/YAML or ONNX.
        graph: id of the graph to draw.
    """
    model = load_model(model)
    if not model.graphs:
        raise MdfLoopsError(f"model '{model.id}' has no graph to draw")
    target = (
        model.graphs[0] if graph is None else next((g for g in model.graphs if g.id == graph), None)
    )
    if target is None:
        raise MdfLoopsError(f"model '{model.id}' has no graph '{graph}'")
    dot = graphviz.Digraph(name=model.id)
    dot.attr(
        label=html_label(f"<b>{text(model.id)}</b>: graph {text(target.id)}"),
        labelloc="t",
        fontname="Helvetica",
        fontsize="16",
        newrank="true",
    )
    dot.attr("node", fontname="Helvetica", fontsize="11")
    dot.attr("edge", fontname="Helvetica", fontsize="9", color="#555555")
    drawing = _Drawing(dot)
    drawing.top_level(target)
    drawing.finish()
    return dot


def render(
    model: Model | str | os.PathLike, path: str | os.PathLike, graph: str | None = None
) -> Path:
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


@dataclass
class _Wiring:
    """How a body connects to its loop node, by position in the body's signature."""

    roles: list[str]  # role of each formal input
    feeds: dict[int, tuple[str, str]] = field(
        default_factory=dict
    )  # formal input -> (loop value, label)
    results: dict[int, tuple[int, str]] = field(
        default_factory=dict
    )  # formal output -> (loop output, label)
    carries: dict[int, int] = field(
        default_factory=dict
    )  # formal output -> formal input it returns to


class _Drawing:
    """Nodes go into the (nested) cluster they belong to; every edge goes into the root
    graph at the end, because Graphviz makes a node a member of each subgraph that
    mentions it, edges included."""

    def __init__(self, dot: graphviz.Digraph):
        self.dot = dot
        self.edges: list[tuple[str, str, dict]] = []

    def edge(self, tail: str, head: str, **attributes: str) -> None:
        self.edges.append((tail, head, attributes))

    def finish(self) -> None:
        """Add the edges; parallel edges of the same style become one, their labels joined
        (Graphviz would print the labels of parallel edges on top of each other)."""
        merged: dict[tuple, dict] = {}
        for tail, head, attributes in self.edges:
            style = tuple(sorted((k, v) for k, v in attributes.items() if k != "label"))
            key = (tail, head, style)
            if key in merged and attributes.get("label"):
                known = merged[key].get("label", "")
                merged[key]["label"] = (
                    f"{known}, {attributes['label']}" if known else attributes["label"]
                )
            else:
                merged.setdefault(key, dict(attributes))
        for (tail, head, _), attributes in merged.items():
            self.dot.edge(tail, head, **attributes)

    # -- graphs
    def top_level(self, graph: Graph) -> None:
        interface = graph_interface(graph)
        names = (graph.metadata or {}).get("onnx_names") or {}
        ports = self.graph(self.dot, graph, graph.id, bindings={}, depth=0)
        free_ports = {port: name for name, port in interface.inputs.items()}
        received = {(e.receiver, e.receiver_port) for e in graph.edges}
        with self.dot.subgraph() as row:
            row.attr(rank="source")
            sources = []
            for node in graph.nodes:
                for port in node.input_ports:
                    if (node.id, port.id) in received or port.id not in free_ports:
                        continue
                    source = f"{graph.id}/input/{port.id}"
                    row.node(
                        source,
                        html_label(f"<b>{text(free_ports[port.id])}</b>"),
                        shape="oval",
                        style="filled",
                        fillcolor="#fff4cc",
                    )
                    self.edge(source, ports[node.id].inputs[port.id])
                    sources.append(source)
            declared = [f"{graph.id}/input/{port}" for port in interface.inputs.values()]
            _in_order(row, sorted(dict.fromkeys(sources), key=declared.index))
        with self.dot.subgraph() as row:
            row.attr(rank="sink")
            for name, (node_id, port_id) in interface.outputs.items():
                output = ports[node_id].outputs.get(port_id) if node_id in ports else None
                if output is not None:
                    sink = f"{graph.id}/output/{name}"
                    label = names.get(f"{node_id}.{port_id}", name)
                    row.node(
                        sink,
                        html_label(f"<b>{text(label)}</b>"),
                        shape="oval",
                        style="filled",
                        fillcolor="#ddf2dd",
                    )
                    self.edge(output, sink)

    def graph(
        self, container, graph: Graph, prefix: str, bindings: dict[str, tuple[str, str]], depth: int
    ) -> dict[str, _Ports]:
        """Draw the nodes and edges of ``graph``; ``bindings`` maps a port id to (source, edge
        style) for ports bound from outside the graph (a body's formal and outer-scope inputs)."""
        ports: dict[str, _Ports] = {}
        constants = constant_values(graph)  # (receiver node, port) -> value text
        folded = {e.sender for e in graph.edges if (e.receiver, e.receiver_port) in constants}
        for node in graph.nodes:
            name = f"{prefix}/{node.id}"
            call = function_parameter(node)
            if node.id in folded and all(
                (e.receiver, e.receiver_port) in constants
                for e in graph.edges
                if e.sender == node.id
            ):
                continue  # drawn as a line of each node that reads it
            reads = {
                port: value for (receiver, port), value in constants.items() if receiver == node.id
            }
            if call is not None and call.function in CONTROL_FLOW_FUNCTIONS:
                ports[node.id] = self.loop(container, node, call, name, depth, reads)
            else:
                container.node(
                    name,
                    node_label(node, call, reads),
                    shape="box",
                    style="rounded,filled",
                    fillcolor="#ffffff",
                )
                ports[node.id] = _Ports(
                    {p.id: name for p in node.input_ports}, {p.id: name for p in node.output_ports}
                )
        received = set(constants)
        for edge in graph.edges:
            source = ports.get(edge.sender, _Ports()).outputs.get(edge.sender_port)
            target = ports.get(edge.receiver, _Ports()).inputs.get(edge.receiver_port)
            if source and target and (edge.receiver, edge.receiver_port) not in constants:
                self.edge(source, target, label=text(edge.sender_port))
            received.add((edge.receiver, edge.receiver_port))
        for node in graph.nodes:
            for port in node.input_ports:
                if (node.id, port.id) not in received and port.id in bindings:
                    source, style = bindings[port.id]
                    self.edge(source, ports[node.id].inputs[port.id], style=style)
        return ports

    # -- loop nodes
    def loop(
        self,
        container,
        node: Node,
        call: Parameter,
        name: str,
        depth: int,
        reads: dict[str, str] | None = None,
    ) -> _Ports:
        op = CONTROL_FLOW_FUNCTIONS[call.function]
        bodies = loop_bodies(node)
        with container.subgraph(name=f"cluster_{name}") as cluster:
            cluster.attr(
                label=html_label(loop_label(node, op, call)),
                style="rounded,filled",
                fillcolor=_LOOP_FILL[min(depth, len(_LOOP_FILL) - 1)],
                color="#4a74b4",
                labeljust="l",
                penwidth="1.5",
            )
            ports = _Ports()
            with cluster.subgraph() as row:
                row.attr(rank="same")
                for port in node.input_ports:
                    ports.inputs[port.id] = f"{name}#in#{port.id}"
                    shown = (
                        f"{port.id} = {reads[port.id]}"
                        if reads is not None and port.id in reads
                        else port.id
                    )
                    row.node(ports.inputs[port.id], html_label(text(shown)), **_PORT)
                _in_order(row, list(ports.inputs.values()))
            for parameter in parameters_read_by_bodies(node, call):
                ports.inputs[parameter.id] = f"{name}#parameter#{parameter.id}"
                cluster.node(
                    ports.inputs[parameter.id],
                    html_label(text(f"{parameter.id} = {short_value(parameter.value)}")),
                    shape="note",
                    style="filled",
                    fillcolor="#ffffff",
                    fontsize="10",
                )
            for port in node.output_ports:
                ports.outputs[port.id] = f"{name}#out#{port.id}"
                cluster.node(ports.outputs[port.id], html_label(text(port.id)), **_PORT)
            arguments = self.arguments(cluster, node, call, name)
            parameter_nodes = {k: v for k, v in ports.inputs.items() if "#parameter#" in v}
            for k in parameter_nodes:
                del ports.inputs[k]  # not ports: edges into the node never end there
            results = {}
            for port in node.output_ports:
                index = output_index(port.value, call.id)
                if index is not None:
                    results[index] = ports.outputs[port.id]
            for attribute, body in bodies.items():
                self.body(
                    cluster,
                    f"{name}/{attribute}",
                    attribute,
                    body,
                    _wiring(op, node, arguments, body),
                    _Ports({**ports.inputs, **parameter_nodes}, ports.outputs),
                    results,
                    depth,
                )
        return ports

    def arguments(self, cluster, node: Node, call: Parameter, name: str) -> dict[str, list[str]]:
        """Graphviz names of the values the call binds to each formal input of the operator."""
        inputs = {p.id for p in node.input_ports}
        arguments: dict[str, list[str]] = {}
        for formal, expression in (call.args or {}).items():
            try:
                items = variadic_items(expression) or [str(expression)]
            except SyntaxError:
                items = [str(expression)]
            arguments[formal] = []
            for k, item in enumerate(items):
                if item in inputs:
                    arguments[formal].append(f"{name}#in#{item}")
                    continue
                holder = f"{name}#arg#{formal}#{k}"
                cluster.node(
                    holder,
                    html_label(text(describe_argument(node, item))),
                    shape="plain",
                    fontsize="10",
                )
                arguments[formal].append(holder)
        return arguments

    def body(
        self,
        cluster,
        prefix: str,
        attribute: str,
        body: Graph,
        wiring: _Wiring,
        ports: _Ports,
        results: dict[int, str],
        depth: int,
    ) -> None:
        meta = body.metadata or {}
        formal_inputs = [str(x) for x in meta.get("formal_inputs") or []]
        formal_outputs = [str(r).partition(".") for r in meta.get("formal_outputs") or []]
        formal_names = [f"{prefix}#formal#{k}" for k in range(len(formal_inputs))]
        top = f"{prefix}#top"  # an invisible point above the body's nodes, below the loop's inputs
        with cluster.subgraph(name=f"cluster_{prefix}") as inner:
            inner.attr(
                label=html_label(f"<b>{text(attribute)}</b>: graph {text(body.id)}"),
                style="rounded,filled",
                fillcolor=_BODY_FILL[depth % 2],
                color="#8c8c8c",
                penwidth="1",
            )
            bindings = {}
            with inner.subgraph() as row:
                row.attr(rank="same")
                row.node(top, "", shape="point", style="invis", width="0")
                for k, (port_id, formal_name) in enumerate(zip(formal_inputs, formal_names)):
                    role = (
                        f"<br/><font point-size='9'>{wiring.roles[k]}</font>"
                        if wiring.roles[k]
                        else ""
                    )
                    row.node(
                        formal_name,
                        html_label(f"<b>{text(port_id)}</b>{role}"),
                        shape="house",
                        style="filled",
                        fillcolor="#fff4cc",
                        margin="0.15,0.1",
                    )
                    bindings[port_id] = (formal_name, "solid")
                _in_order(row, formal_names)
            nexts = {
                j: f"{prefix}#next#{j}"
                for j, k in wiring.carries.items()
                if k < len(formal_inputs) and j < len(formal_outputs)
            }
            if nexts:
                with inner.subgraph() as row:
                    row.attr(rank="max")
                    for j, marker in nexts.items():
                        k = wiring.carries[j]
                        row.node(
                            marker,
                            html_label(
                                f"next <b>{text(formal_inputs[k])}</b>"
                                f"<br/><font point-size='9'>{wiring.roles[k]}</font>"
                            ),
                            shape="invhouse",
                            style="filled,dashed",
                            fillcolor="#fffaf0",
                            color="#999999",
                            fontsize="10",
                            margin="0.1,0.05",
                        )
                    _in_order(row, list(nexts.values()))
            for port_id in meta.get("outer_scope_inputs") or []:
                if port_id in ports.inputs:
                    bindings[port_id] = (ports.inputs[port_id], "dotted")
            body_ports = self.graph(inner, body, prefix, bindings, depth + 1)
        for drawn in body_ports.values():
            first = next(iter({**drawn.inputs, **drawn.outputs}.values()), None)
            if first is not None:
                self.edge(top, first, style="invis")
        for source in ports.inputs.values():
            self.edge(source, top, style="invis")
        for k, (source, label) in wiring.feeds.items():
            if k < len(formal_names):
                self.edge(source, formal_names[k], label=label, **_BINDING)
        for j, (node_id, _, port_id) in enumerate(formal_outputs):
            produced = body_ports.get(node_id, _Ports()).outputs.get(port_id)
            if produced is None:
                continue
            index, label = wiring.results.get(j, (None, ""))
            if index in results:
                self.edge(produced, results[index], label=label, **_BINDING)
            if j in nexts:  # the new value of a state: a marker at the body's foot says which
                self.edge(produced, nexts[j], **_NEXT)


def _in_order(row, names: list[str]) -> None:
    """Keep the nodes of a same-rank row left to right in the order given (invisible edges)."""
    for left, right in zip(names, names[1:]):
        row.edge(left, right, style="invis")


def _wiring(op: str, node: Node, arguments: dict[str, list[str]], body: Graph) -> _Wiring:
    meta = body.metadata or {}
    n_in = len(meta.get("formal_inputs") or [])
    n_out = len(meta.get("formal_outputs") or [])
    if op == "Scan":
        values = arguments.get(ScanSignature.VALUES_ARGUMENT, [])
        m = int_parameter(node, "num_scan_inputs", len(values))
        n = max(len(values) - m, 0)
        scan = ScanSignature(n, m, max(n_out - n, 0))
        states, outputs = scan.body_states, scan.body_state_outputs
        return _Wiring(
            roles=[
                f"state {k}" if k < states.stop else f"scan element {k - states.stop}"
                for k in range(n_in)
            ],
            feeds={
                k: (v, "initial" if k < states.stop else "slices") for k, v in enumerate(values)
            },
            results={j: (j, "final" if j < outputs.stop else "stacked") for j in range(n_out)},
            carries={j: j for j in range(min(outputs.stop, n_out))},
        )
    if op == "Loop":
        carried = arguments.get(LoopSignature.CARRIED_ARGUMENT, [])
        loop = LoopSignature(len(carried), max(n_out - 1 - len(carried), 0))
        first_in, first_out = loop.body_carried.start, loop.body_carried_outputs.start
        feeds = {first_in + k: (source, "initial") for k, source in enumerate(carried)}
        if arguments.get(loop.CONDITION_ARGUMENT):
            feeds[loop.BODY_CONDITION] = (arguments[loop.CONDITION_ARGUMENT][0], "initial")
        named = {loop.ITERATION: "iteration number", loop.BODY_CONDITION: "condition"}
        carries = {loop.CONDITION_OUTPUT: loop.BODY_CONDITION}
        carries.update({first_out + k: first_in + k for k in range(loop.num_carried)})
        return _Wiring(
            roles=[named.get(k, f"carried {k - first_in}") for k in range(n_in)],
            feeds=feeds,
            results={
                j: (j - first_out, "final" if j < loop.body_carried_outputs.stop else "stacked")
                for j in range(first_out, n_out)
            },
            carries={j: k for j, k in carries.items() if j < n_out},
        )
    return _Wiring(roles=[""] * n_in, results={j: (j, "") for j in range(n_out)})  # If

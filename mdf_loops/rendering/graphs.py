"""A picture's graphs: the nodes and edges of a graph, its inputs and outputs at the top
level, and the edges collected until the end (merged where parallel)."""

from __future__ import annotations

import graphviz
from modeci_mdf.mdf import Graph

from mdf_loops.model.convention import CONTROL_FLOW_FUNCTIONS, function_parameter
from mdf_loops.model.interface import graph_interface
from mdf_loops.rendering.labels import constant_values, html_label, node_label, text
from mdf_loops.rendering.layout import Ports, in_order
from mdf_loops.rendering.loops import draw_loop

__all__ = ["Drawing"]


class Drawing:
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
            in_order(row, sorted(dict.fromkeys(sources), key=declared.index))
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
    ) -> dict[str, Ports]:
        """Draw the nodes and edges of ``graph``; ``bindings`` maps a port id to (source, edge
        style) for ports bound from outside the graph (a body's formal and outer-scope inputs)."""
        ports: dict[str, Ports] = {}
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
                ports[node.id] = draw_loop(self, container, node, call, name, depth, reads)
            else:
                container.node(
                    name,
                    node_label(node, call, reads),
                    shape="box",
                    style="rounded,filled",
                    fillcolor="#ffffff",
                )
                ports[node.id] = Ports(
                    {p.id: name for p in node.input_ports}, {p.id: name for p in node.output_ports}
                )
        received = set(constants)
        for edge in graph.edges:
            source = ports.get(edge.sender, Ports()).outputs.get(edge.sender_port)
            target = ports.get(edge.receiver, Ports()).inputs.get(edge.receiver_port)
            if source and target and (edge.receiver, edge.receiver_port) not in constants:
                self.edge(source, target, label=text(edge.sender_port))
            received.add((edge.receiver, edge.receiver_port))
        for node in graph.nodes:
            for port in node.input_ports:
                if (node.id, port.id) not in received and port.id in bindings:
                    source, style = bindings[port.id]
                    self.edge(source, ports[node.id].inputs[port.id], style=style)
        return ports

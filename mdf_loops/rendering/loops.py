"""A loop node drawn open: a blue cluster with the node's ports, the values its call binds,
and one grey cluster per body with its formal inputs (and their roles), the markers of
the values carried to the next iteration, and the edges binding the body to the loop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from modeci_mdf.mdf import Graph, Node, Parameter

from mdf_loops.model.convention import (
    CONTROL_FLOW_FUNCTIONS,
    loop_bodies,
    output_index,
    variadic_items,
)
from mdf_loops.rendering.labels import (
    describe_argument,
    html_label,
    loop_label,
    parameters_read_by_bodies,
    short_value,
    text,
)
from mdf_loops.rendering.layout import Ports, Wiring, body_wiring, in_order

if TYPE_CHECKING:
    from mdf_loops.rendering.graphs import Drawing

__all__ = ["draw_loop"]

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


def draw_loop(
    drawing: Drawing,
    container,
    node: Node,
    call: Parameter,
    name: str,
    depth: int,
    reads: dict[str, str] | None = None,
) -> Ports:
    """Draw the loop node ``node`` (its call ``call``) as a cluster named after ``name``.

    ``reads`` are the constants the node reads, by input port. Returns the drawn ports.
    """
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
        ports, parameter_nodes = _loop_ports(cluster, node, call, name, reads)
        arguments = _arguments(cluster, node, call, name)
        results = {}
        for port in node.output_ports:
            index = output_index(port.value, call.id)
            if index is not None:
                results[index] = ports.outputs[port.id]
        for attribute, body in bodies.items():
            _draw_body(
                drawing,
                cluster,
                f"{name}/{attribute}",
                attribute,
                body,
                body_wiring(op, node, arguments, body),
                Ports({**ports.inputs, **parameter_nodes}, ports.outputs),
                results,
                depth,
            )
    return ports


def _loop_ports(
    cluster, node: Node, call: Parameter, name: str, reads: dict[str, str] | None
) -> tuple[Ports, dict[str, str]]:
    """Draw the loop's input ports (a row above), the parameters its bodies read and its
    output ports. Returns the ports, and the parameters' Graphviz names by id (not ports:
    edges into the node never end there)."""
    ports = Ports()
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
        in_order(row, list(ports.inputs.values()))
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
    parameter_nodes = {k: v for k, v in ports.inputs.items() if "#parameter#" in v}
    for k in parameter_nodes:
        del ports.inputs[k]
    return ports, parameter_nodes


def _arguments(cluster, node: Node, call: Parameter, name: str) -> dict[str, list[str]]:
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


@dataclass
class _Formals:
    """A body's formal inputs (port ids) and outputs (node, ".", port), and the Graphviz
    names of its formal inputs."""

    inputs: list[str]
    outputs: list[tuple[str, str, str]]
    names: list[str]

    @classmethod
    def of(cls, body: Graph, prefix: str) -> _Formals:
        meta = body.metadata or {}
        inputs = [str(x) for x in meta.get("formal_inputs") or []]
        outputs = [str(r).partition(".") for r in meta.get("formal_outputs") or []]
        return cls(inputs, outputs, [f"{prefix}#formal#{k}" for k in range(len(inputs))])


def _draw_body(
    drawing: Drawing,
    cluster,
    prefix: str,
    attribute: str,
    body: Graph,
    wiring: Wiring,
    ports: Ports,
    results: dict[int, str],
    depth: int,
) -> None:
    """Draw ``body`` (the loop's attribute ``attribute``) in a cluster of the loop's
    ``cluster``, and bind it to the loop's ``ports`` and ``results`` as ``wiring`` says."""
    formals = _Formals.of(body, prefix)
    top = f"{prefix}#top"  # an invisible point above the body's nodes, below the loop's inputs
    with cluster.subgraph(name=f"cluster_{prefix}") as inner:
        inner.attr(
            label=html_label(f"<b>{text(attribute)}</b>: graph {text(body.id)}"),
            style="rounded,filled",
            fillcolor=_BODY_FILL[depth % 2],
            color="#8c8c8c",
            penwidth="1",
        )
        bindings = _formal_inputs_row(inner, top, formals, wiring)
        nexts = _next_markers(inner, prefix, formals, wiring)
        for port_id in (body.metadata or {}).get("outer_scope_inputs") or []:
            if port_id in ports.inputs:
                bindings[port_id] = (ports.inputs[port_id], "dotted")
        body_ports = drawing.graph(inner, body, prefix, bindings, depth + 1)
    for drawn in body_ports.values():
        first = next(iter({**drawn.inputs, **drawn.outputs}.values()), None)
        if first is not None:
            drawing.edge(top, first, style="invis")
    for source in ports.inputs.values():
        drawing.edge(source, top, style="invis")
    _bind(drawing, body_ports, formals, wiring, results, nexts)


def _formal_inputs_row(
    inner, top: str, formals: _Formals, wiring: Wiring
) -> dict[str, tuple[str, str]]:
    """Draw the body's formal inputs in a row, in order, each with its role. Returns the
    bindings of the body's ports to them: port id -> (Graphviz name, edge style)."""
    bindings = {}
    with inner.subgraph() as row:
        row.attr(rank="same")
        row.node(top, "", shape="point", style="invis", width="0")
        for k, (port_id, formal_name) in enumerate(zip(formals.inputs, formals.names, strict=True)):
            role = f"<br/><font point-size='9'>{wiring.roles[k]}</font>" if wiring.roles[k] else ""
            row.node(
                formal_name,
                html_label(f"<b>{text(port_id)}</b>{role}"),
                shape="house",
                style="filled",
                fillcolor="#fff4cc",
                margin="0.15,0.1",
            )
            bindings[port_id] = (formal_name, "solid")
        in_order(row, formals.names)
    return bindings


def _next_markers(inner, prefix: str, formals: _Formals, wiring: Wiring) -> dict[int, str]:
    """Draw a marker at the body's foot for each value carried to the next iteration.
    Returns their Graphviz names by formal output."""
    nexts = {
        j: f"{prefix}#next#{j}"
        for j, k in wiring.carries.items()
        if k < len(formals.inputs) and j < len(formals.outputs)
    }
    if nexts:
        with inner.subgraph() as row:
            row.attr(rank="max")
            for j, marker in nexts.items():
                k = wiring.carries[j]
                row.node(
                    marker,
                    html_label(
                        f"next <b>{text(formals.inputs[k])}</b>"
                        f"<br/><font point-size='9'>{wiring.roles[k]}</font>"
                    ),
                    shape="invhouse",
                    style="filled,dashed",
                    fillcolor="#fffaf0",
                    color="#999999",
                    fontsize="10",
                    margin="0.1,0.05",
                )
            in_order(row, list(nexts.values()))
    return nexts


def _bind(
    drawing: Drawing,
    body_ports: dict[str, Ports],
    formals: _Formals,
    wiring: Wiring,
    results: dict[int, str],
    nexts: dict[int, str],
) -> None:
    """The edges from the loop's values to the body's formal inputs, and from its formal
    outputs to the loop's outputs and to the markers of the next iteration."""
    for k, (source, label) in wiring.feeds.items():
        if k < len(formals.names):
            drawing.edge(source, formals.names[k], label=label, **_BINDING)
    for j, (node_id, _, port_id) in enumerate(formals.outputs):
        produced = body_ports.get(node_id, Ports()).outputs.get(port_id)
        if produced is None:
            continue
        index, label = wiring.results.get(j, (None, ""))
        if index in results:
            drawing.edge(produced, results[index], label=label, **_BINDING)
        if j in nexts:  # the new value of a state: a marker at the body's foot says which
            drawing.edge(produced, nexts[j], **_NEXT)

"""The loop-node rules a JSON Schema cannot express, checked on a model document.

A document is the content of an MDF file (``{model_id: {"graphs": {...}}}``). The
checks read it defensively: a part of the wrong type (which the schema reports)
is skipped, never an exception (:mod:`mdf_loops.validation.document`). Each
rule reports a :class:`~mdf_loops.validation.report.Problem` at the path of the
element it concerns. Here: edges, formal outputs, what binds a body's inputs,
and the bodies of each loop node; the layout of each Scan, Loop and If node is
checked by :mod:`mdf_loops.validation.operator_rules`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mdf_loops.errors import did_you_mean
from mdf_loops.model.convention import BODY_ATTRIBUTES, CONTROL_FLOW_FUNCTIONS
from mdf_loops.validation.document import (
    as_mapping,
    entries,
    keys_of,
    list_or_none,
    mapping_at,
    stored_body,
    strings,
)
from mdf_loops.validation.operator_rules import (
    FoundBody,
    check_output_indices,
    layout_output_count,
)
from mdf_loops.validation.report import Problem, format_path

__all__ = ["rule_problems"]


def rule_problems(document: Any) -> list[Problem]:
    """Problems of the semantic rules in ``document`` (see :mod:`mdf_loops.validation.report`)."""
    checker = _RuleChecker()
    if isinstance(document, Mapping) and len(document) == 1:
        (model,) = document.values()
        for graph_id, graph in entries(mapping_at(model, "graphs")):
            if isinstance(graph, Mapping):
                checker.graph(graph, ("graphs", graph_id), owner=None)
    return checker.problems


@dataclass(frozen=True)
class _Owner:
    """The loop node a body belongs to."""

    node_id: str
    names: frozenset  # ids of its input ports and parameters: what a body may read from outside


class _RuleChecker:
    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def report(self, path: tuple, message: str) -> None:
        self.problems.append(Problem(format_path(path), message))

    # -- graphs
    def graph(self, graph: Mapping, path: tuple, owner: _Owner | None) -> None:
        nodes = {k: v for k, v in entries(graph.get("nodes")) if isinstance(v, Mapping)}
        name = graph.get("id") or path[-1]
        received = self._edges(graph, path, nodes, name)
        meta = mapping_at(graph, "metadata")
        if owner is not None or "formal_outputs" in meta:
            self._formal_outputs(meta, path, nodes)
        if owner is not None:
            self._body_bindings(meta, path, nodes, received, owner)
        for node_id, node in nodes.items():
            self.node(node_id, node, path + ("nodes", node_id))

    def _edges(self, graph: Mapping, path: tuple, nodes: Mapping, name: str) -> set:
        received = set()
        for edge_id, edge in entries(graph.get("edges")):
            if not isinstance(edge, Mapping):
                continue
            where = path + ("edges", edge_id)
            for end, port_kind, ports in (
                ("sender", "output", "output_ports"),
                ("receiver", "input", "input_ports"),
            ):
                node_id, port_id = edge.get(end), edge.get(f"{end}_port")
                if not isinstance(node_id, str) or node_id not in nodes:
                    self.report(where + (end,), f"'{node_id}' is not a node of graph '{name}'")
                elif not isinstance(port_id, str) or port_id not in keys_of(
                    nodes[node_id].get(ports)
                ):
                    self.report(
                        where + (f"{end}_port",),
                        f"'{port_id}' is not an {port_kind} port of node '{node_id}' "
                        f"(it has {sorted(map(str, keys_of(nodes[node_id].get(ports))))})",
                    )
            receiver, receiver_port = edge.get("receiver"), edge.get("receiver_port")
            if isinstance(receiver, str) and isinstance(receiver_port, str):
                received.add((receiver, receiver_port))
        return received

    def _formal_outputs(self, meta: Mapping, path: tuple, nodes: Mapping) -> None:
        outputs = meta.get("formal_outputs")
        for index, ref in enumerate(outputs if isinstance(outputs, list) else []):
            node_id, _, port_id = str(ref).partition(".")
            if node_id not in nodes or port_id not in keys_of(nodes[node_id].get("output_ports")):
                self.report(
                    path + ("metadata", "formal_outputs", index),
                    f"'{ref}' is not an output port of a node of this graph",
                )

    def _body_bindings(
        self, meta: Mapping, path: tuple, nodes: Mapping, received: set, owner: _Owner
    ) -> None:
        formal = strings(meta.get("formal_inputs"))
        outer = strings(meta.get("outer_scope_inputs"))
        for index, name in enumerate(outer):
            if name not in owner.names:
                self.report(
                    path + ("metadata", "outer_scope_inputs", index),
                    f"'{name}' is not an input port or parameter of the loop node "
                    f"'{owner.node_id}', so the body cannot read it",
                )
            if name in formal:
                self.report(
                    path + ("metadata", "outer_scope_inputs", index),
                    f"'{name}' is also a formal input",
                )
        bound = set(formal) | set(outer)
        for node_id, node in nodes.items():
            for port_id, port in entries(node.get("input_ports")):
                if (node_id, port_id) in received or port_id in bound:
                    continue
                if isinstance(port, Mapping) and port.get("default_value") is not None:
                    continue
                unbound = sorted(
                    set(formal)
                    - {
                        p
                        for _, n in nodes.items()
                        for p in keys_of(as_mapping(n).get("input_ports"))
                    }
                )
                self.report(
                    path + ("nodes", node_id, "input_ports", port_id),
                    "is bound by nothing: no incoming edge, not a formal input or "
                    "outer-scope input of the body, and no default_value"
                    + _nearest_formal(port_id, formal, unbound),
                )

    # -- nodes
    def node(self, node_id: str, node: Mapping, path: tuple) -> None:
        parameters = {k: v for k, v in entries(node.get("parameters")) if isinstance(v, Mapping)}
        inputs = keys_of(node.get("input_ports"))
        for parameter_id in parameters:
            if parameter_id in inputs:
                self.report(
                    path + ("parameters", parameter_id),
                    "has the same id as an input port; the node's expressions "
                    "cannot tell them apart",
                )
        call = next(((k, p) for k, p in parameters.items() if p.get("function")), None)
        if (
            call is None
            or not isinstance(call[1].get("function"), str)
            or call[1].get("function") not in CONTROL_FLOW_FUNCTIONS
        ):
            return
        call_id, function = call
        op = CONTROL_FLOW_FUNCTIONS[function["function"]]
        owner = _Owner(node_id, frozenset(inputs) | frozenset(parameters))
        bodies = self._bodies(op, parameters, path)
        args = mapping_at(function, "args")
        output_count = layout_output_count(op, self.report, node, path, parameters, args, bodies)
        if output_count is not None:
            check_output_indices(self.report, node, path, call_id, op, output_count)
        for body in bodies.values():
            self.graph(body.graph, body.path, owner)

    def _bodies(self, op: str, parameters: Mapping, path: tuple) -> dict[str, FoundBody]:
        bodies = {}
        for attribute in BODY_ATTRIBUTES[op]:
            if attribute not in parameters:
                self.report(
                    path + ("parameters",),
                    f"onnx::{op} needs a parameter '{attribute}' holding its body graph",
                )
                continue
            value = parameters[attribute].get("value")
            key, graph = stored_body(value)
            if graph is None or key is None:
                self.report(
                    path + ("parameters", attribute),
                    "expected a body graph as value: {'graph_<id>': graph}",
                )
                continue
            if "id" not in graph:
                self.report(
                    path + ("parameters", attribute, "value", key),
                    f'the body graph has no \'id\'; write "id": "{key[len("graph_") :]}" '
                    "in it (a body is stored as {'graph_<id>': {'id': '<id>', ...}})",
                )
                continue
            meta = mapping_at(graph, "metadata")
            bodies[attribute] = FoundBody(
                attribute,
                path + ("parameters", attribute, "value", key),
                graph,
                list_or_none(meta.get("formal_inputs")),
                list_or_none(meta.get("formal_outputs")),
            )
        return bodies


# ---------------------------------------------------------------- messages


def _nearest_formal(port_id: str, formal: list, unread: list) -> str:
    """A hint naming the formal input ``port_id`` was probably meant to be."""
    if len(unread) == 1:
        return f"; did you mean '{unread[0]}' (a formal input no port of the body reads)?"
    return did_you_mean(port_id, unread or formal, "a formal input")

"""The loop-node rules a JSON Schema cannot express, checked on a model document.

A document is the content of an MDF file (``{model_id: {"graphs": {...}}}``). The
checks read it defensively: a part of the wrong type (which the schema reports)
is skipped, never an exception. Each rule reports a :class:`~mdf_loops.validation.report.Problem`
at the path of the element it concerns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mdf_loops.errors import did_you_mean
from mdf_loops.model.convention import (
    BODY_ATTRIBUTES,
    CONTROL_FLOW_FUNCTIONS,
    output_index,
    variadic_items,
)
from mdf_loops.model.signatures import IfSignature, LoopSignature, ScanSignature
from mdf_loops.validation.report import Problem, format_path

__all__ = ["rule_problems"]


def rule_problems(document: Any) -> list[Problem]:
    """Problems of the semantic rules in ``document`` (see :mod:`mdf_loops.validation.report`)."""
    checker = _RuleChecker()
    if isinstance(document, Mapping) and len(document) == 1:
        (model,) = document.values()
        for graph_id, graph in _entries(_get(model, "graphs")):
            if isinstance(graph, Mapping):
                checker.graph(graph, ("graphs", graph_id), owner=None)
    return checker.problems


@dataclass(frozen=True)
class _Owner:
    """The loop node a body belongs to."""

    node_id: str
    names: frozenset  # ids of its input ports and parameters: what a body may read from outside


@dataclass(frozen=True)
class _Body:
    """A loop body found in a node parameter."""

    attribute: str
    path: tuple
    graph: Mapping
    formal_inputs: list | None
    formal_outputs: list | None


class _RuleChecker:
    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def report(self, path: tuple, message: str) -> None:
        self.problems.append(Problem(format_path(path), message))

    # -- graphs
    def graph(self, graph: Mapping, path: tuple, owner: _Owner | None) -> None:
        nodes = {k: v for k, v in _entries(graph.get("nodes")) if isinstance(v, Mapping)}
        name = graph.get("id") or path[-1]
        received = self._edges(graph, path, nodes, name)
        meta = _get(graph, "metadata")
        if owner is not None or "formal_outputs" in meta:
            self._formal_outputs(meta, path, nodes)
        if owner is not None:
            self._body_bindings(meta, path, nodes, received, owner)
        for node_id, node in nodes.items():
            self.node(node_id, node, path + ("nodes", node_id))

    def _edges(self, graph: Mapping, path: tuple, nodes: Mapping, name: str) -> set:
        received = set()
        for edge_id, edge in _entries(graph.get("edges")):
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
                elif not isinstance(port_id, str) or port_id not in _keys(
                    nodes[node_id].get(ports)
                ):
                    self.report(
                        where + (f"{end}_port",),
                        f"'{port_id}' is not an {port_kind} port of node '{node_id}' "
                        f"(it has {sorted(map(str, _keys(nodes[node_id].get(ports))))})",
                    )
            receiver, receiver_port = edge.get("receiver"), edge.get("receiver_port")
            if isinstance(receiver, str) and isinstance(receiver_port, str):
                received.add((receiver, receiver_port))
        return received

    def _formal_outputs(self, meta: Mapping, path: tuple, nodes: Mapping) -> None:
        outputs = meta.get("formal_outputs")
        for index, ref in enumerate(outputs if isinstance(outputs, list) else []):
            node_id, _, port_id = str(ref).partition(".")
            if node_id not in nodes or port_id not in _keys(nodes[node_id].get("output_ports")):
                self.report(
                    path + ("metadata", "formal_outputs", index),
                    f"'{ref}' is not an output port of a node of this graph",
                )

    def _body_bindings(
        self, meta: Mapping, path: tuple, nodes: Mapping, received: set, owner: _Owner
    ) -> None:
        formal = _strings(meta.get("formal_inputs"))
        outer = _strings(meta.get("outer_scope_inputs"))
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
            for port_id, port in _entries(node.get("input_ports")):
                if (node_id, port_id) in received or port_id in bound:
                    continue
                if isinstance(port, Mapping) and port.get("default_value") is not None:
                    continue
                unbound = sorted(
                    set(formal)
                    - {p for _, n in nodes.items() for p in _keys(_mapping(n).get("input_ports"))}
                )
                self.report(
                    path + ("nodes", node_id, "input_ports", port_id),
                    "is bound by nothing: no incoming edge, not a formal input or "
                    "outer-scope input of the body, and no default_value"
                    + _nearest_formal(port_id, formal, unbound),
                )

    # -- nodes
    def node(self, node_id: str, node: Mapping, path: tuple) -> None:
        parameters = {k: v for k, v in _entries(node.get("parameters")) if isinstance(v, Mapping)}
        inputs = _keys(node.get("input_ports"))
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
        rules: dict[str, Callable] = {"Scan": self._scan, "Loop": self._loop, "If": self._if}
        output_count = rules[op](node, path, parameters, _get(function, "args"), bodies)
        if output_count is not None:
            self._output_indices(node, path, call_id, op, output_count)
        for body in bodies.values():
            self.graph(body.graph, body.path, owner)

    def _bodies(self, op: str, parameters: Mapping, path: tuple) -> dict[str, _Body]:
        bodies = {}
        for attribute in BODY_ATTRIBUTES[op]:
            if attribute not in parameters:
                self.report(
                    path + ("parameters",),
                    f"onnx::{op} needs a parameter '{attribute}' holding its body graph",
                )
                continue
            value = parameters[attribute].get("value")
            key, graph = _stored_body(value)
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
            meta = _get(graph, "metadata")
            bodies[attribute] = _Body(
                attribute,
                path + ("parameters", attribute, "value", key),
                graph,
                _list_or_none(meta.get("formal_inputs")),
                _list_or_none(meta.get("formal_outputs")),
            )
        return bodies

    def _scan(self, node, path, parameters, args, bodies) -> int | None:
        values = self._arity(args, ScanSignature.VALUES_ARGUMENT, path)
        m = _integer(_value(parameters, "num_scan_inputs"))
        if m is None:
            self.report(
                path + ("parameters",), "onnx::Scan needs an integer parameter 'num_scan_inputs'"
            )
        body = bodies.get("body")
        if values is None or m is None:
            return len(body.formal_outputs) if body and body.formal_outputs is not None else None
        if not 1 <= m <= len(values):
            self.report(
                path + ("parameters", "num_scan_inputs"),
                f"is {m}, but the node passes {_count(len(values), 'value')} (initial states, "
                "then at least one scan input)",
            )
            return None
        n = len(values) - m
        expected = ScanSignature(num_states=n, num_scan_inputs=m, num_scan_outputs=0)
        ports = _mapping(node.get("input_ports"))
        self._axes(
            parameters,
            path,
            "scan_input_axes",
            "scan_input_directions",
            m,
            [_rank(ports.get(v)) for v in values[expected.node_scan_inputs]],
        )
        if body is None:
            return None
        where = path + ("parameters", "body")
        if body.formal_inputs is not None and len(body.formal_inputs) != expected.num_body_inputs:
            self.report(
                where,
                f"expects {len(values)} formal inputs ({_count(n, 'state')} + "
                f"{_count(m, 'scan input')}), found {len(body.formal_inputs)}",
            )
        if body.formal_outputs is None:
            return None
        if len(body.formal_outputs) < expected.num_body_outputs:
            self.report(
                where,
                f"expects at least {_count(n, 'formal output')} (the new "
                f"{_count(n, 'state')}, then scan-output elements), found "
                f"{len(body.formal_outputs)}",
            )
            return None
        signature = ScanSignature(n, m, num_scan_outputs=len(body.formal_outputs) - n)
        outputs = range(signature.num_node_outputs)[signature.node_scan_outputs]
        self._axes(
            parameters,
            path,
            "scan_output_axes",
            "scan_output_directions",
            len(outputs),
            [_rank(_output_port(node, parameters, j)) for j in outputs],
        )
        return signature.num_node_outputs

    def _loop(self, node, path, parameters, args, bodies) -> int | None:
        name = LoopSignature.CARRIED_ARGUMENT
        carried = self._arity(args, name, path) if name in args else []
        body = bodies.get("body")
        if body is None or carried is None or body.formal_outputs is None:
            return None
        where, n = path + ("parameters", "body"), len(carried)
        expected = LoopSignature(num_carried=n, num_scan_outputs=0)
        if body.formal_inputs is not None and len(body.formal_inputs) != expected.num_body_inputs:
            self.report(
                where,
                f"expects {expected.num_body_inputs} formal inputs (iteration number, "
                f"condition, {_count(n, 'loop-carried value')}), found "
                f"{len(body.formal_inputs)}",
            )
        if len(body.formal_outputs) < expected.num_body_outputs:
            self.report(
                where,
                f"expects at least {expected.num_body_outputs} formal outputs "
                f"(condition, {_count(n, 'loop-carried value')}, then scan-output "
                f"elements), found {len(body.formal_outputs)}",
            )
            return None
        return LoopSignature(
            n, len(body.formal_outputs) - expected.num_body_outputs
        ).num_node_outputs

    def _if(self, node, path, parameters, args, bodies) -> int | None:
        for body in bodies.values():
            if body.formal_inputs and len(body.formal_inputs) != IfSignature.num_body_inputs:
                self.report(
                    path + ("parameters", body.attribute),
                    f"expects no formal inputs (a branch reads the enclosing graph "
                    f"through outer_scope_inputs), found {len(body.formal_inputs)}",
                )
        then, other = (bodies.get(branch) for branch in IfSignature.BRANCHES)
        if then is None or then.formal_outputs is None:
            return None
        if (
            other is not None
            and other.formal_outputs is not None
            and len(other.formal_outputs) != len(then.formal_outputs)
        ):
            self.report(
                path + ("parameters", "else_branch"),
                f"returns {_count(len(other.formal_outputs), 'value')} but then_branch returns "
                f"{len(then.formal_outputs)}; both must return the If node's outputs",
            )
        return IfSignature(len(then.formal_outputs)).num_node_outputs

    def _arity(self, args: Mapping, name: str, path: tuple) -> list[str] | None:
        """The expressions a variadic argument lists, or None when it is not a list literal."""
        value = args.get(name)
        try:
            return variadic_items(value)
        except SyntaxError:
            self.report(
                path + ("parameters",), f"argument '{name}' = {value!r} is not a valid expression"
            )
            return None

    def _axes(self, parameters, path, axes_name, directions_name, count, ranks) -> None:
        axes = _list_or_none(_value(parameters, axes_name))
        if axes is not None:
            if len(axes) != count:
                self.report(
                    path + ("parameters", axes_name),
                    f"has {_count(len(axes), 'entry', 'entries')}, expected {count}",
                )
            for k, (axis, rank) in enumerate(zip(axes, ranks)):
                if rank is not None and _integer(axis) is not None and not -rank <= axis < rank:
                    self.report(
                        path + ("parameters", axes_name),
                        f"axis {axis} of entry {k} is out of range for a value of rank {rank}",
                    )
        directions = _list_or_none(_value(parameters, directions_name))
        if directions is not None:
            if len(directions) != count:
                self.report(
                    path + ("parameters", directions_name),
                    f"has {_count(len(directions), 'entry', 'entries')}, expected {count}",
                )
            if any(d not in (0, 1) for d in directions):
                self.report(
                    path + ("parameters", directions_name),
                    f"entries must be 0 (forward) or 1 (backward), found {directions}",
                )

    def _output_indices(self, node, path, call_id, op, count) -> None:
        for port_id, port in _entries(node.get("output_ports")):
            index = output_index(_mapping(port).get("value"), call_id)
            if index is not None and index >= count:
                self.report(
                    path + ("output_ports", port_id, "value"),
                    f"reads output {index} of '{call_id}', but its body gives "
                    f"onnx::{op} {_count(count, 'output')}",
                )


# ---------------------------------------------------------------- reading the document


def _entries(value: Any) -> list[tuple[Any, Any]]:
    return list(value.items()) if isinstance(value, Mapping) else []


def _nearest_formal(port_id: str, formal: list, unread: list) -> str:
    """A hint naming the formal input ``port_id`` was probably meant to be."""
    if len(unread) == 1:
        return f"; did you mean '{unread[0]}' (a formal input no port of the body reads)?"
    return did_you_mean(port_id, unread or formal, "a formal input")


def _keys(value: Any) -> set:
    return set(value) if isinstance(value, Mapping) else set()


def _mapping(value: Any) -> Mapping:
    return value if isinstance(value, Mapping) else {}


def _get(value: Any, key: str) -> Any:
    """``value[key]`` as a mapping when both exist, else an empty mapping."""
    return _mapping(_mapping(value).get(key))


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _list_or_none(value: Any) -> list | None:
    return list(value) if isinstance(value, list) else None


def _integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _stored_body(value: Any) -> tuple[str | None, Mapping | None]:
    if isinstance(value, Mapping) and len(value) == 1:
        ((key, graph),) = value.items()
        if isinstance(key, str) and key.startswith("graph_") and isinstance(graph, Mapping):
            return key, graph
    return None, None


def _rank(port: Any) -> int | None:
    """The rank of a port's value where the file states it (``shape`` or the ONNX type)."""
    port = _mapping(port)
    if isinstance(port.get("shape"), list):
        return len(port["shape"])
    tensor = _get(_get(port, "metadata").get("onnx_type"), "tensorType")
    if "shape" in tensor:
        return len(_mapping(tensor["shape"]).get("dim") or [])
    return None


def _output_port(node: Mapping, parameters: Mapping, index: int) -> Any:
    """The output port of a control-flow node that reads output ``index``, if any."""
    call_id = next((k for k, p in parameters.items() if p.get("function")), None)
    for _, port in _entries(node.get("output_ports")):
        if isinstance(port, Mapping) and output_index(port.get("value"), call_id) == index:
            return port
    return None


def _value(parameters: Mapping, parameter_id: str) -> Any:
    """The ``value`` of a parameter, or None."""
    return _mapping(parameters.get(parameter_id)).get("value")


def _count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 state``, ``2 states``."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"

"""What the ONNX exporter reads off MDF nodes: evaluation order, names, calls, outputs.

Helpers of :mod:`mdf_loops.onnx.export_graph` that look at MDF items (parameters,
functions, output ports) only, never at ONNX.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

import onnx
from modeci_mdf.mdf import Graph, Node

from mdf_loops.errors import ModelError
from mdf_loops.model.convention import (
    CONTROL_FLOW_FUNCTIONS,
    body_signature,
    loop_bodies,
    output_reference,
)
from mdf_loops.onnx.builder import NameAllocator
from mdf_loops.onnx.domains import domain_of_function


@dataclass(frozen=True)
class Outputs:
    """The outputs of an ONNX node called by an MDF function parameter (ports read ``f[i]``)."""

    names: tuple[str, ...]


def topological(graph: Graph) -> list[Node]:
    nodes = {n.id: n for n in graph.nodes}
    deps: dict[str, set[str]] = {n.id: set() for n in graph.nodes}
    for e in graph.edges:
        if e.sender not in nodes or e.receiver not in nodes:
            raise ModelError(f"graph '{graph.id}': edge '{e.id}' connects unknown nodes")
        deps[e.receiver].add(e.sender)
    order: list[Node] = []
    done: set[str] = set()
    while len(order) < len(nodes):
        ready = [i for i in nodes if i not in done and deps[i] <= done]
        if not ready:
            raise ModelError(
                f"graph '{graph.id}': edges form a cycle among {sorted(set(nodes) - done)}"
            )
        for i in ready:
            order.append(nodes[i])
            done.add(i)
    return order


def refuse_state(node: Node, item) -> None:
    """A ModelError for a parameter that keeps state between evaluations of the graph."""
    where = f"node '{node.id}' parameter '{item.id}'"
    if (
        getattr(item, "time_derivative", None)
        or getattr(item, "default_initial_value", None) is not None
    ):
        raise ModelError(
            f"{where}: a stateful parameter (time_derivative / default_initial_value) "
            "keeps state between evaluations, which ONNX cannot express; use a loop node"
        )
    if getattr(item, "conditions", None):
        raise ModelError(f"{where}: parameter conditions do not export")
    value = getattr(item, "value", None)
    if isinstance(value, str) and item.id in names_in(value):
        raise ModelError(
            f"{where}: value {value!r} refers to itself (stateful); it does not export"
        )


def function_of(item) -> tuple[str | None, dict]:
    """(function name, args) of a Parameter or Function, whichever form it uses."""
    function = getattr(item, "function", None)
    if isinstance(function, dict):
        ((name, args),) = function.items()
        return name, args or {}
    return function, getattr(item, "args", None) or {}


def attribute_parameter_names(node: Node, version_of) -> set[str]:
    names: set[str] = set()
    for item in list(node.parameters) + list(node.functions):
        function, _ = function_of(item)
        call = domain_of_function(function)
        if call is not None:
            domain, op_type = call
            try:
                schema = onnx.defs.get_schema(op_type, version_of(domain), domain.name)
            except onnx.defs.SchemaError:
                continue
            names.update(schema.attributes)
            if schema.name == "Split":
                names.add("num_outputs")
    return names


def names_in(expression: Any) -> set[str]:
    """The names ``expression`` may read: its Python names, and the text itself, which
    is a reference when it is exactly an id in scope (``model/references.py``)."""
    if not isinstance(expression, str):
        if isinstance(expression, list):
            return set().union(*(names_in(e) for e in expression)) if expression else set()
        return set()
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        return {expression}
    return {expression} | {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def names_used(item) -> set[str]:
    used = names_in(item.value) if getattr(item, "value", None) is not None else set()
    _, args = function_of(item)
    for expr in args.values():
        used |= names_in(expr)
    return used - {"numpy", "math", "np"}


def dependencies(item, node: Node) -> set[str]:
    """Names ``item`` reads: its expressions' names, and for the control-flow call the
    values its bodies read from the enclosing scope (parameters of the loop node too)."""
    used = names_used(item)
    function, _ = function_of(item)
    if function in CONTROL_FLOW_FUNCTIONS:
        for body in loop_bodies(node).values():
            used |= set(body_signature(body).outer_scope_inputs)
    return used


def is_ready(item, env: dict, node: Node) -> bool:
    own = {p.id for p in node.parameters} | {f.id for f in node.functions}
    return all(name in env or name not in own for name in dependencies(item, node))


def outputs_used(node: Node, function_id: str, schema) -> int:
    if schema.max_output == 1:
        return 1
    used = [0]
    for port in node.output_ports:
        parsed = output_reference(port.value or "")
        if parsed and parsed[0] == function_id:
            used.append(parsed[1] + 1)
    count = max(used)
    split = next((p for p in node.parameters if p.id == "num_outputs"), None)
    if schema.name == "Split" and split is not None:
        count = max(count, int(split.value))
    return max(count, schema.min_output)


def output_names(names: NameAllocator, node: Node, function_id: str, n_outputs: int) -> list[str]:
    """ONNX names for a function's outputs: the ids of the ports that read them."""
    by_index: dict[int, str] = {}
    for port in node.output_ports:
        value = (port.value or "").strip()
        parsed = output_reference(value)
        if value == function_id:
            by_index.setdefault(0, port.id)
        elif parsed and parsed[0] == function_id:
            by_index.setdefault(parsed[1], port.id)
    return [names.fresh(by_index.get(k, f"{node.id}_{k}")) for k in range(n_outputs)]

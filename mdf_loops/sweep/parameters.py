"""Swept parameters turned into graph inputs, so one compiled model serves every setting.

A sweep addresses a parameter as ``"node.parameter"`` (or ``"loop/node.parameter"``
where the node id is used in more than one graph). Setting such a parameter on a
copy of the model for each setting would compile the model once per setting.
Instead, :func:`lift_parameters` rewrites a copy of the model once: the parameter's
value becomes an expression naming a new input port of its node, and that port is
threaded out of every enclosing loop body as an outer-scope input, up to the
top-level graph, where it is a graph input. Running the rewritten model with that
input set to ``v`` computes what the original model computes with the parameter's
value set to ``v``.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass

from modeci_mdf.mdf import Graph, InputPort, Model, Node, Parameter

from mdf_loops.model.convention import (
    BODY_ATTRIBUTES,
    CONTROL_FLOW_FUNCTIONS,
    body_graph,
    function_parameter,
    wrap_body,
)
from mdf_loops.sweep.errors import SweepError

__all__ = ["ParameterSite", "find_parameter", "lift_parameters"]


@dataclass(frozen=True)
class ParameterSite:
    """Where a parameter lives: the loop nodes (and body attributes) around its node."""

    address: str
    enclosing: tuple[tuple[str, str], ...]  # (loop node id, body attribute), outermost first
    node_id: str
    parameter_id: str

    @property
    def path(self) -> str:
        """The node's path, ``loop/inner_loop/node``."""
        return "/".join([loop for loop, _ in self.enclosing] + [self.node_id])


def _nodes(graph: Graph, enclosing: tuple = ()):
    """Every node of ``graph`` and of its loop bodies, with the loops around it."""
    for node in graph.nodes:
        yield enclosing, node
        for attribute, body in _bodies(node).items():
            yield from _nodes(body, enclosing + ((node.id, attribute),))


def _bodies(node: Node) -> dict[str, Graph]:
    """The body graphs of a loop node, stored back as ``Graph`` objects so edits stick."""
    call = function_parameter(node)
    if call is None or call.function not in CONTROL_FLOW_FUNCTIONS:
        return {}
    bodies = {}
    for parameter in node.parameters:
        if parameter.id in BODY_ATTRIBUTES[CONTROL_FLOW_FUNCTIONS[call.function]]:
            graph = body_graph(parameter.value, f"node '{node.id}' parameter '{parameter.id}'")
            parameter.value = wrap_body(graph)
            bodies[parameter.id] = graph
    return bodies


def find_parameter(graph: Graph, address: str) -> ParameterSite:
    """The parameter ``address`` names in ``graph`` (bodies included).

    Raises :class:`SweepError` when no node has that path, the node id is used in
    several graphs (give its path, ``loop/node.parameter``), or the node has no such
    parameter, or the parameter cannot take a value (a function call, a body, a state).
    """
    if "." not in address:
        raise SweepError(
            f"'{address}' is neither an input of graph '{graph.id}' nor a "
            "parameter address 'node.parameter'"
        )
    path, parameter_id = address.rsplit(".", 1)
    wanted = path.split("/")
    matches = [
        (enclosing, node)
        for enclosing, node in _nodes(graph)
        if ([loop for loop, _ in enclosing] + [node.id])[-len(wanted) :] == wanted
    ]
    if not matches:
        raise SweepError(
            f"parameter '{address}': graph '{graph.id}' has no node '{path}' "
            "(nodes inside loop bodies count; write 'loop/node' to be explicit)"
        )
    if len(matches) > 1:
        paths = sorted("/".join([loop for loop, _ in e] + [n.id]) for e, n in matches)
        raise SweepError(
            f"parameter '{address}': node id '{path}' is used in several graphs "
            f"({paths}); address it by its path, e.g. '{paths[0]}.{parameter_id}'"
        )
    enclosing, node = matches[0]
    parameter = next((p for p in node.parameters if p.id == parameter_id), None)
    if parameter is None:
        raise SweepError(
            f"parameter '{address}': node '{node.id}' has no parameter "
            f"'{parameter_id}'; it has {sorted(p.id for p in node.parameters)}"
        )
    _check_settable(address, node, parameter)
    return ParameterSite(address, tuple(enclosing), node.id, parameter_id)


def _check_settable(address: str, node: Node, parameter: Parameter) -> None:
    reason = None
    if parameter.function or parameter.args:
        reason = f"calls the function {parameter.function!r}"
    elif parameter.default_initial_value is not None or parameter.time_derivative:
        reason = "is a state (it has an initial value or a time derivative)"
    elif isinstance(parameter.value, dict) and any(
        str(k).startswith("graph_") for k in parameter.value
    ):
        reason = "holds a loop body"
    elif parameter.id in _operator_attributes(node):
        reason = "is an attribute of the node's ONNX operator, fixed when the model is compiled"
    if reason:
        raise SweepError(
            f"parameter '{address}': '{parameter.id}' of node '{node.id}' {reason}; "
            "a sweep sets parameters that hold a value"
        )


def _operator_attributes(node: Node) -> set[str]:
    """Attribute names of the ONNX operator ``node`` calls (none for other nodes)."""
    import onnx

    call = function_parameter(node)
    if call is None or not str(call.function).startswith("onnx::"):
        return set()
    try:
        return set(onnx.defs.get_schema(call.function[len("onnx::") :]).attributes)
    except onnx.defs.SchemaError:
        return set()


def lift_parameters(
    model: Model, graph_id: str, addresses: list[str]
) -> tuple[Model, dict[str, str]]:
    """A copy of ``model`` whose parameters at ``addresses`` are inputs of graph ``graph_id``.

    Returns the copy and ``{address: input name}``. ``model`` is not changed.
    """
    lifted = copy.deepcopy(model)
    graph = next(g for g in lifted.graphs if g.id == graph_id)
    taken = _identifiers(graph)
    names: dict[str, str] = {}
    for address in addresses:
        site = find_parameter(graph, address)
        name = _fresh_name(site, taken)
        taken.add(name)
        _thread(graph, site, name)
        names[address] = name
    return lifted, names


def _identifiers(graph: Graph) -> set[str]:
    ids: set[str] = set()
    for _, node in _nodes(graph):
        ids.add(node.id)
        ids.update(p.id for p in node.input_ports)
        ids.update(p.id for p in node.parameters)
        ids.update(p.id for p in node.output_ports)
    return ids


def _fresh_name(site: ParameterSite, taken: set[str]) -> str:
    stem = "sweep_" + re.sub(r"\W", "_", f"{site.path}_{site.parameter_id}".replace("/", "_"))
    name, k = stem, 1
    while name in taken:
        k += 1
        name = f"{stem}_{k}"
    return name


def _thread(graph: Graph, site: ParameterSite, name: str) -> None:
    """Make ``name`` an input of the top graph that reaches the parameter through every body."""
    if "formal_inputs" in (graph.metadata or {}):
        graph.metadata["formal_inputs"] = list(graph.metadata["formal_inputs"]) + [name]
    current = graph
    for loop_id, attribute in site.enclosing:
        loop = next(n for n in current.nodes if n.id == loop_id)
        if all(p.id != name for p in loop.input_ports):
            loop.input_ports.append(InputPort(id=name))
        current = _bodies(loop)[attribute]
        meta = dict(current.metadata or {})
        meta["outer_scope_inputs"] = list(meta.get("outer_scope_inputs") or []) + [name]
        current.metadata = meta
    node = next(n for n in current.nodes if n.id == site.node_id)
    node.input_ports.append(InputPort(id=name))
    parameter = next(p for p in node.parameters if p.id == site.parameter_id)
    parameter.value = name

"""Imported ONNX constants named as parameters, one resolution for grad, run_batch and sweep.

The ONNX importer turns each initializer (and each ``Constant`` operator) into a node
calling ``onnx::Constant``: its tensor in the parameter ``value``, its ONNX name on
its output port (``Wx`` -> node ``Wx_constant``, output port ``Wx``). Those are the
weights a user differentiates, batches or sweeps, and the user knows them by their
ONNX name. :func:`plain_constants` gives every caller the same answer for such a
name: it rewrites the named constant nodes (in a copy) into nodes whose one
parameter holds the tensor as a plain value, so the caller's own lifting of constant
parameters into graph inputs applies to them unchanged, and says which
``"node.parameter"`` each name now is. A name may be the ONNX name (the output
port), the node id, or ``"node.value"``; the constant may sit in any loop body.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence

from modeci_mdf.mdf import Graph, Model, Node, Parameter

from mdf_loops.model.convention import function_parameter, loop_bodies, wrap_body
from mdf_loops.model.values import is_encoded_tensor

__all__ = ["plain_constants", "constant_names"]

_CONSTANT = "onnx::Constant"


def _constant_value(node: Node) -> Parameter | None:
    """The ``value`` parameter of an ``onnx::Constant`` node holding a tensor, else None."""
    call = function_parameter(node)
    if call is None or call.function != _CONSTANT:
        return None
    value = next((p for p in node.parameters if p.id == "value"), None)
    if value is None or value.function or not is_encoded_tensor(value.value):
        return None
    return value


def _names_of(node: Node) -> set[str]:
    return {node.id, f"{node.id}.value"} | {p.id for p in node.output_ports}


def _constant_nodes(graph: Graph, *, editing: bool = False) -> Iterator[Node]:
    """Every constant node of ``graph`` and of its loop bodies; ``editing`` stores each body
    back as the ``Graph`` walked, so that edits to the nodes yielded stick."""
    for node in graph.nodes:
        if _constant_value(node) is not None:
            yield node
        for parameter_id, body in loop_bodies(node).items():
            if editing:
                parameter = next(p for p in node.parameters if p.id == parameter_id)
                parameter.value = wrap_body(body)
            yield from _constant_nodes(body, editing=editing)


def constant_names(graph: Graph) -> list[str]:
    """The ONNX names of the constants in ``graph`` and its bodies (for messages)."""
    return sorted(p.id for node in _constant_nodes(graph) for p in node.output_ports)


def plain_constants(
    model: Model, graph_id: str, names: Sequence[str]
) -> tuple[Model, dict[str, str]]:
    """``(model, {name: "node.parameter"})`` for the ``names`` that name a constant node.

    Names that name none (or more than one) are left out, for the caller to resolve
    or refuse. When any is found, ``model`` is a copy in which each such node holds
    its tensor in one plain parameter (named as the node, which its output port
    reads), the form of any other constant parameter; the given model is unchanged.
    """
    if not names:
        return model, {}
    found = _matches(_graph(model, graph_id), names)
    if not found:
        return model, {}
    model = copy.deepcopy(model)
    addresses = {}
    for node in _constant_nodes(_graph(model, graph_id), editing=True):
        if node.id in found.values():
            value = _constant_value(node)
            assert value is not None
            (port,) = node.output_ports  # the ONNX name: the parameter's name too
            node.parameters = [Parameter(id=port.id, value=value.value)]
            port.value = port.id
            addresses.update({n: f"{node.id}.{port.id}" for n, i in found.items() if i == node.id})
    return model, addresses


def _matches(graph: Graph, names: Sequence[str]) -> dict[str, str]:
    """``{name: node id}`` for the names that name exactly one constant node."""
    by_name: dict[str, list[str]] = {}
    for node in _constant_nodes(graph):
        for name in _names_of(node):
            by_name.setdefault(name, []).append(node.id)
    return {n: by_name[n][0] for n in names if len(by_name.get(n, [])) == 1}


def _graph(model: Model, graph_id: str) -> Graph:
    return next(g for g in model.graphs if g.id == graph_id)

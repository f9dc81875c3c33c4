"""Constant MDF parameters turned into graph inputs, so JAX can differentiate or batch over them.

A parameter ``alpha = 0.2`` of node ``learn`` (at any depth of loop bodies) becomes
an input port ``alpha`` of ``learn``; every body between it and the top graph
reads it from the enclosing scope (``outer_scope_inputs``) and every loop node
around it carries it as an input port; the top graph takes it as input ``alpha``.
The model is copied; the original is left as it was.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from modeci_mdf.mdf import Graph, InputPort, Model, Parameter

from mdf_loops.errors import ModelError
from mdf_loops.model.constants import constant_names
from mdf_loops.model.convention import (
    body_graph,
    body_signature,
    port_type,
    set_body_signature,
    wrap_body,
)
from mdf_loops.model.values import decode_tensor, is_encoded_tensor

__all__ = ["ParameterSite", "find_parameters", "resolve", "parameters_as_inputs"]


@dataclass(frozen=True)
class ParameterSite:
    """Where a constant parameter lives: the loop nodes (and body parameters) above it."""

    qualified: str  # "node.parameter"
    chain: tuple[tuple[int, int], ...]  # (node index, body-parameter index) per level
    node: int
    parameter: int
    value: np.ndarray


def _constant(value: Any) -> np.ndarray | None:
    if is_encoded_tensor(value):
        array = decode_tensor(value)
    elif isinstance(value, (int, float, list)) and not isinstance(value, bool):
        try:
            array = np.asarray(value)
        except ValueError:
            return None
    else:
        return None
    return array if array.dtype.kind in "fiu" else None


def find_parameters(graph: Graph, chain: tuple = ()) -> list[ParameterSite]:
    """Every constant numeric parameter in ``graph`` and its loop bodies."""
    sites = []
    for k, node in enumerate(graph.nodes):
        calls_onnx = any((p.function or "").startswith("onnx::") for p in node.parameters)
        for j, p in enumerate(node.parameters):
            body = _body(p)
            if body is not None:
                sites += find_parameters(body, chain + ((k, j),))
                continue
            value = None if p.function or calls_onnx else _constant(p.value)
            if value is not None:
                sites.append(ParameterSite(f"{node.id}.{p.id}", chain, k, j, value))
    return sites


def _body(parameter: Parameter) -> Graph | None:
    value = parameter.value
    if isinstance(value, dict) and len(value) == 1 and str(next(iter(value))).startswith("graph_"):
        return body_graph(value)
    return None


def resolve(graph: Graph, names: Sequence[str]) -> dict[str, ParameterSite]:
    """The site of each name: ``"node.parameter"``, or a parameter id found once in the model."""
    sites = find_parameters(graph)
    resolved = {}
    for name in names:
        matches = [s for s in sites if s.qualified == name] or [
            s for s in sites if s.qualified.split(".", 1)[1] == name
        ]
        if len(matches) != 1:
            known = sorted(s.qualified for s in sites)
            what = (
                "is ambiguous" if matches else "is neither a graph input nor a constant parameter"
            )
            raise ModelError(
                f"graph '{graph.id}': '{name}' {what}; constant parameters "
                f"(use 'node.parameter'): {known}; imported ONNX constants: "
                f"{constant_names(graph)}"
            )
        resolved[name] = matches[0]
    return resolved


def parameters_as_inputs(
    model: Model,
    graph_id: str,
    sites: dict[str, ParameterSite],
    dtypes: dict[str, np.dtype] | None = None,
) -> tuple[Model, dict[str, str]]:
    """A copy of ``model`` whose parameters at ``sites`` are graph inputs; their input names."""
    model = copy.deepcopy(model)
    top = next(g for g in model.graphs if g.id == graph_id)
    names = {}
    # sites are indices into lists that lifting shortens: the last position first, so that
    # no removal moves a site still to come (two parameters of one node, a loop node's own
    # parameter before its body's)
    for name, site in sorted(sites.items(), key=lambda item: _position(item[1]), reverse=True):
        dtype = (dtypes or {}).get(name, site.value.dtype)
        names[name] = _lift(top, site, np.dtype(dtype))
    return model, {name: names[name] for name in sites}


def _position(site: ParameterSite) -> tuple:
    return (*((node, parameter) for node, parameter in site.chain), (site.node, site.parameter))


def _lift(top: Graph, site: ParameterSite, dtype: np.dtype) -> str:
    graphs, holders = [top], []
    for node_index, param_index in site.chain:
        holder = graphs[-1].nodes[node_index]
        holders.append((holder, holder.parameters[param_index]))
        graphs.append(body_graph(holder.parameters[param_index].value))
    signatures = [body_signature(body) for body in graphs[1:]]  # before the ports change
    node = graphs[-1].nodes[site.node]
    parameter = node.parameters[site.parameter]
    port_id = parameter.id
    declared = port_type(*site.value.shape, dtype=dtype.name)
    if any(p.id == port_id for p in node.input_ports):
        raise ModelError(f"node '{node.id}': parameter '{port_id}' has the id of an input port")
    node.parameters.remove(parameter)
    node.input_ports.append(InputPort(id=port_id, metadata=declared))
    for (holder, body_parameter), body, signature in reversed(
        list(zip(holders, graphs[1:], signatures, strict=True))
    ):
        if port_id not in signature.outer_scope_inputs:
            set_body_signature(
                body,
                signature.formal_inputs,
                [f"{n}.{p}" for n, p in signature.formal_outputs],
                signature.outer_scope_inputs + (port_id,),
            )
        body_parameter.value = wrap_body(body)
        if not any(p.id == port_id for p in holder.input_ports):
            holder.input_ports.append(InputPort(id=port_id, metadata=declared))
    meta = top.metadata or {}
    if "formal_inputs" in meta:
        if port_id in meta["formal_inputs"]:
            raise ModelError(
                f"graph '{top.id}': parameter '{site.qualified}' has the name of a graph input"
            )
        top.metadata = {**meta, "formal_inputs": list(meta["formal_inputs"]) + [port_id]}
    return port_id

"""Which of a model's constants a torch module trains, and how their values go back to MDF.

Two kinds of constant become ``torch.nn.Parameter``\\ s, at any depth of loop bodies:

* a constant numeric parameter of a node (``tau = 2.0`` read by an expression): it
  is made a graph input (:func:`mdf_loops.backends.jax.parameters.parameters_as_inputs`,
  the rewrite that ``mdf_loops.grad`` uses), fed from the module's parameter;
* the tensor of an ``onnx::Constant`` node (an imported model's weights): its
  ``Constant`` in the exported ONNX model is read from the module's parameter.

Only floating-point values are trained; integers and booleans (shapes, counts) stay
buffers. Each trained value remembers its :class:`ParameterSite`, so
:func:`write_back` puts the current values into a copy of the model.
"""

from __future__ import annotations

import copy
import keyword
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from modeci_mdf.mdf import Graph, Model, Parameter

from mdf_loops.backends.jax.parameters import ParameterSite, find_parameters, parameters_as_inputs
from mdf_loops.backends.torch.interpreter import ConstantSite
from mdf_loops.errors import ModelError
from mdf_loops.model.convention import body_graph, wrap_body
from mdf_loops.model.values import decode_tensor, encode_tensor, is_encoded_tensor

__all__ = ["Trained", "lift_parameters", "constant_sites", "attribute_names", "write_back"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Trained:
    """One trained value: where it lives in the MDF model, and its value there."""

    qualified: str  # "node.parameter"
    site: ParameterSite


def lift_parameters(model: Model, graph: Graph) -> tuple[Model, dict[str, Trained]]:
    """A copy of ``model`` whose floating-point parameters are graph inputs, by input name.

    A parameter whose id is shared with another (two nodes' ``tau``), or taken by a
    port, stays a constant of the model (logged at INFO level).
    """
    sites = [s for s in find_parameters(graph) if s.value.dtype.kind == "f"]
    counts = Counter(s.qualified.split(".", 1)[1] for s in sites)
    ports = {p.id for node in graph.nodes for p in node.input_ports}
    chosen = {}
    # a node's later parameters first: lifting one removes it, moving those after it
    for s in sorted(sites, key=lambda s: (s.chain, s.node, -s.parameter)):
        short = s.qualified.split(".", 1)[1]
        if counts[short] == 1 and short not in ports:
            chosen[s.qualified] = s
        else:
            log.info("parameter '%s' is not trained: its id is not unique", s.qualified)
    if not chosen:
        return model, {}
    try:
        rewritten, names = parameters_as_inputs(model, graph.id, chosen)
    except ModelError as exc:
        log.info("the model's parameters stay constants (not trained): %s", exc)
        return model, {}
    return rewritten, {names[q]: Trained(q, site) for q, site in chosen.items()}


def constant_sites(graph: Graph, sites: list[ConstantSite]) -> dict[str, Trained]:
    """The ``onnx::Constant`` nodes of ``graph`` behind the exported model's constants, by key."""
    found = {}
    for constant in sites:
        if constant.value.dtype.kind != "f":
            continue
        located = _locate(graph, constant)
        if located is not None:
            found[constant.key] = located
    return found


def _locate(graph: Graph, constant: ConstantSite) -> Trained | None:
    chain = []
    path = constant.graph_path
    for owner, attribute in zip(path[::2], path[1::2], strict=True):
        k = _index(graph.nodes, owner)
        j = None if k is None else _index(graph.nodes[k].parameters, attribute)
        if k is None or j is None:
            return None
        chain.append((k, j))
        graph = body_graph(graph.nodes[k].parameters[j].value)
    for k, node in enumerate(graph.nodes):
        functions = [p.function for p in node.parameters if p.function]
        if functions != ["onnx::Constant"]:
            continue
        if not any(o.id == constant.name for o in node.output_ports):
            continue
        j = _index(node.parameters, "value")
        if j is None or not is_encoded_tensor(node.parameters[j].value):
            return None
        value = decode_tensor(node.parameters[j].value)
        site = ParameterSite(f"{node.id}.value", tuple(chain), k, j, value)
        return Trained(site.qualified, site)
    return None


def _index(items, item_id: str) -> int | None:
    return next((k for k, item in enumerate(items) if item.id == item_id), None)


def attribute_names(trained: Mapping[Any, Trained], reserved: set[str]) -> dict[Any, str]:
    """A module attribute name for each trained value: its parameter or port id when free
    (not an ``nn.Module`` attribute, not one of the ``reserved`` buffer names)."""
    import torch

    wanted = {key: t.qualified.split(".", 1)[1] for key, t in trained.items()}
    for key, t in trained.items():
        if wanted[key] == "value":  # an onnx::Constant node: named by the node
            wanted[key] = t.qualified.split(".", 1)[0]
    counts = Counter(wanted.values())
    names, taken = {}, set(reserved)
    for key, t in trained.items():
        name = wanted[key]
        if counts[name] > 1 or not name.isidentifier() or keyword.iskeyword(name):
            name = "".join(c if c.isalnum() else "_" for c in t.qualified)
        if hasattr(torch.nn.Module, name) or name in taken or not name.isidentifier():
            name = f"p_{name}"
        while name in taken:
            name += "_"
        taken.add(name)
        names[key] = name
    return names


def write_back(model: Model, graph_id: str, values: Sequence[tuple[Trained, np.ndarray]]) -> Model:
    """A copy of ``model`` with each trained value written where it came from."""
    result = copy.deepcopy(model)
    top = next(g for g in result.graphs if g.id == graph_id)
    for trained, value in values:
        graphs, holders = [top], []
        for node_index, param_index in trained.site.chain:
            holder = graphs[-1].nodes[node_index].parameters[param_index]
            holders.append(holder)
            graphs.append(body_graph(holder.value))
        parameter = graphs[-1].nodes[trained.site.node].parameters[trained.site.parameter]
        parameter.value = _as_written(parameter, np.asarray(value))
        for holder, body in reversed(list(zip(holders, graphs[1:], strict=True))):
            holder.value = wrap_body(body)  # a body read from JSON is a new Graph each time
    return result


def _as_written(parameter: Parameter, value: np.ndarray):
    """``value`` in the form the parameter held (a number, a list, an encoded tensor)."""
    before = parameter.value
    if is_encoded_tensor(before):
        return encode_tensor(value.astype(decode_tensor(before).dtype))
    if isinstance(before, list):
        return value.tolist()
    return value.item() if value.ndim == 0 else value.tolist()

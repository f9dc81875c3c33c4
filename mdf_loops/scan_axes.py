"""Rewrite ONNX Scan nodes to iterate and stack along axis 0, with Transpose nodes around them.

onnxruntime transposes a Scan's inputs and outputs itself when a scan axis is
not 0, and that internal transpose divides by zero, killing the process with
SIGFPE, when the tensor has no elements: a zero-length sequence scanned along
an axis other than 0, or an empty per-iteration output stacked along one.
Separate ``Transpose`` nodes handle empty tensors. :func:`scan_axes_to_zero`
moves every such axis out of the Scan, at every depth::

    Scan(x; scan_input_axes=[a])           Transpose(x; perm=[a, ...]) -> Scan(axis 0)
    Scan(...; scan_output_axes=[b]) -> y   Scan(axis 0) -> Transpose(perm=[1..b, 0, ...]) -> y

The values are unchanged. The rewrite needs the rank of each value it moves an
axis of; ONNX shape inference supplies them.
"""

from __future__ import annotations

import itertools
from typing import Iterator

import onnx
from onnx import helper

from .errors import ModelError
from .onnx_builder import NameAllocator, all_nodes, subgraphs

__all__ = ["scan_axes_to_zero"]


def scan_axes_to_zero(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` whose Scan nodes all use axis 0 (see the module docstring).

    Raises :class:`~mdf_loops.ModelError` when the rank of a value whose axis
    must move is unknown.
    """
    if not any(_scans_with_axes(model.graph)):
        return model
    try:
        rewritten = onnx.shape_inference.infer_shapes(model)
    except Exception as exc:  # onnx raises InferenceError and friends
        raise ModelError(f"ONNX shape inference failed: {exc}") from exc
    names = NameAllocator.of_graph(rewritten.graph)
    _rewrite_graph(rewritten.graph, {}, names)
    return rewritten


def _scans_with_axes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    for node in all_nodes(graph):
        if node.op_type == "Scan" and node.domain in ("", "ai.onnx") and any(
                a.name in ("scan_input_axes", "scan_output_axes") and any(a.ints)
                for a in node.attribute):
            yield node


def _rank(value_info: onnx.ValueInfoProto) -> int | None:
    tensor = value_info.type.tensor_type
    if not value_info.type.HasField("tensor_type") or not tensor.HasField("shape"):
        return None
    return len(tensor.shape.dim)


def _ranks(graph: onnx.GraphProto) -> dict[str, int]:
    ranks = {t.name: len(t.dims) for t in graph.initializer}
    for info in itertools.chain(graph.input, graph.value_info, graph.output):
        rank = _rank(info)
        if rank is not None:
            ranks[info.name] = rank
    return ranks


def _rewrite_graph(graph: onnx.GraphProto, outer: dict[str, int], names: NameAllocator) -> None:
    ranks = {**outer, **_ranks(graph)}
    nodes = []
    for node in graph.node:
        for g in subgraphs(node):
            _rewrite_graph(g, ranks, names)
        if node.op_type == "Scan" and node.domain in ("", "ai.onnx"):
            nodes.extend(_rewrite_scan(node, ranks, names))
        else:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)


def _rewrite_scan(node: onnx.NodeProto, ranks: dict[str, int], names: NameAllocator) -> list:
    attrs = {a.name: a for a in node.attribute}
    if "num_scan_inputs" not in attrs or "body" not in attrs:
        return [node]
    input_axes = list(attrs["scan_input_axes"].ints) if "scan_input_axes" in attrs else []
    output_axes = list(attrs["scan_output_axes"].ints) if "scan_output_axes" in attrs else []
    if not any(input_axes) and not any(output_axes):
        return [node]
    body = attrs["body"].g
    m = attrs["num_scan_inputs"].i
    n_states = len(node.input) - m
    before, after = [], []
    where = node.name or f"a Scan producing {list(node.output)}"

    for k, axis in enumerate(input_axes):
        if axis == 0:
            continue
        name = node.input[n_states + k]
        rank = _known(ranks.get(name), f"scan input {k} ('{name}') of {where}")
        axis %= rank
        moved = names.fresh(f"{name}_axis0")
        before.append(helper.make_node(
            "Transpose", [name], [moved], perm=[axis] + [d for d in range(rank) if d != axis]))
        node.input[n_states + k] = moved

    body_ranks = _ranks(body)
    for j, axis in enumerate(output_axes):
        if axis == 0:
            continue
        element = body.output[n_states + j].name
        rank = 1 + _known(body_ranks.get(element), f"scan output {j} ('{element}') of {where}")
        axis %= rank
        name = node.output[n_states + j]
        stacked = names.fresh(f"{name}_axis0")
        after.append(helper.make_node(
            "Transpose", [stacked], [name],
            perm=list(range(1, axis + 1)) + [0] + list(range(axis + 1, rank))))
        node.output[n_states + j] = stacked

    for attr_name in ("scan_input_axes", "scan_output_axes"):
        if attr_name in attrs:
            attr = attrs[attr_name]
            del attr.ints[:]
            attr.ints.extend([0] * (len(input_axes) if attr_name == "scan_input_axes"
                                    else len(output_axes)))
    return before + [node] + after


def _known(rank: int | None, what: str) -> int:
    if rank is None:
        raise ModelError(f"the rank of {what} is unknown, and onnxruntime cannot scan it "
                         "along a non-zero axis safely")
    return rank

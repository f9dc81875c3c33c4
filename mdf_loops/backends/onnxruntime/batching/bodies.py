"""What the rules of the operators that hold graphs (``Loop``, ``Scan``, ``If``) share: a
body rewritten in its own scope, values given the batch axis, and stacked scan outputs
``[T, B, ...]`` turned to ``[B, T, ...]``."""

from __future__ import annotations

import onnx
from onnx import helper

from mdf_loops.backends.onnxruntime.batching.scope import Scope

__all__ = [
    "batched_info",
    "body_scope",
    "batched_value",
    "renamed",
    "graph_of",
    "stacked_names",
    "transposed",
]


def batched_info(value: onnx.ValueInfoProto, size: int) -> onnx.ValueInfoProto:
    """``value``'s type with the batch axis in front (where it has a shape)."""
    new = onnx.ValueInfoProto()
    new.CopyFrom(value)
    tensor = new.type.tensor_type
    if new.type.HasField("tensor_type") and tensor.HasField("shape"):
        dims = list(tensor.shape.dim)
        del tensor.shape.dim[:]
        tensor.shape.dim.add().dim_value = size
        tensor.shape.dim.extend(dims)
    return new


def body_scope(body: onnx.GraphProto, scope: Scope, batched: set[str]) -> Scope:
    """``body`` rewritten in a scope of its own, its inputs ``batched`` given the batch axis."""
    from mdf_loops.backends.onnxruntime.batching.graph import rewrite_nodes  # a cycle: bodies

    inner = scope.child(body)
    inner.batched.update(batched)
    rewrite_nodes(body, inner)
    return inner


def batched_value(scope: Scope, name: str, node: onnx.NodeProto) -> str:
    """``name`` with the batch axis (repeated where it has none)."""
    return name if scope.is_batched(name) else scope.expanded(name, scope.rank(name, node))


def renamed(value: onnx.ValueInfoProto, name: str) -> onnx.ValueInfoProto:
    new = onnx.ValueInfoProto()
    new.CopyFrom(value)
    new.name = name
    return new


def graph_of(body: onnx.GraphProto, inner: Scope, inputs: list, outputs: list) -> onnx.GraphProto:
    graph = helper.make_graph(inner.nodes, body.name, inputs, outputs)
    graph.initializer.extend(body.initializer)
    return graph


def stacked_names(scope: Scope, scan_outputs: list[str], flags: list[bool]) -> list[str]:
    """The loop's names for its scan outputs: a fresh one for each batched ``[T, B, ...]``."""
    return [
        scope.names.fresh(f"{name}_stacked") if flag and name else name
        for name, flag in zip(scan_outputs, flags, strict=True)
    ]


def transposed(node, scope: Scope, names: list[str], stacked: list[str], flags) -> None:
    """Each batched scan output ``[T, B, ...]`` as ``[B, T, ...]``."""
    for name, temp, flag in zip(names, stacked, flags, strict=True):
        if flag and name:
            rank = scope.rank(name, node)  # per setting: the steps, then one step's axes
            perm = [1, 0, *range(2, rank + 1)]
            scope.nodes.append(helper.make_node("Transpose", [temp], [name], perm=perm))
            scope.batched.add(name)

"""What the batching transform knows where it rewrites a graph: which values carry the
batch axis, each value's per-setting shape, the constants in sight, and the nodes written.

A :class:`Scope` is one graph being rewritten (the model's graph, or a loop body inside
it); values of enclosing graphs are found through its ``parent``. Shapes are those of
one setting, as ONNX shape inference gave them for the unbatched model: a batched
value has the batch axis in front of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from mdf_loops.errors import NotBatchable
from mdf_loops.onnx.builder import NameAllocator

__all__ = ["NotBatchable", "Scope", "Shape", "known_shapes"]

#: a value's per-setting dimensions (a number, a symbol, or None where unknown)
Shape = tuple[int | str | None, ...]


def known_shapes(graph: onnx.GraphProto) -> dict[str, Shape]:
    """Each value of ``graph`` (not of its subgraphs) whose rank is known, by name."""
    shapes: dict[str, Shape] = {}
    for value in list(graph.input) + list(graph.output) + list(graph.value_info):
        tensor = value.type.tensor_type
        if value.type.HasField("tensor_type") and tensor.HasField("shape"):
            shapes[value.name] = tuple(_dimension(d) for d in tensor.shape.dim)
    for initializer in graph.initializer:
        shapes[initializer.name] = tuple(int(d) for d in initializer.dims)
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            value = _constant_value(node)
            if value is not None:
                shapes[node.output[0]] = value.shape
    return shapes


def _dimension(dim: onnx.TensorShapeProto.Dimension) -> int | str | None:
    if dim.HasField("dim_value"):
        return int(dim.dim_value)
    return dim.dim_param or None


def _constant_value(node: onnx.NodeProto) -> np.ndarray | None:
    for attr in node.attribute:
        if attr.name == "value":
            return numpy_helper.to_array(attr.t)
        if attr.name in ("value_int", "value_float"):
            return np.asarray(helper.get_attribute_value(attr))
        if attr.name in ("value_ints", "value_floats"):
            return np.asarray(helper.get_attribute_value(attr))
    return None


@dataclass
class Scope:
    """One graph being rewritten for a batch of ``size`` settings."""

    size: int
    names: NameAllocator
    shapes: dict[str, Shape]  # per-setting shapes of this graph's values
    constants: dict[str, np.ndarray]  # values known before running, of this graph
    batched: set[str] = field(default_factory=set)  # values with the batch axis in front
    #: scan outputs whose length differs between settings, and the value holding each
    #: setting's length: allowed only as outputs of the model's graph
    ragged: dict[str, str] = field(default_factory=dict)
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    parent: Scope | None = None

    @classmethod
    def of_graph(
        cls, graph: onnx.GraphProto, size: int, names: NameAllocator, parent: Scope | None = None
    ) -> Scope:
        constants = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
        for node in graph.node:
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                value = _constant_value(node)
                if value is not None:
                    constants[node.output[0]] = value
        return cls(size, names, known_shapes(graph), constants, parent=parent)

    def child(self, graph: onnx.GraphProto) -> Scope:
        """The scope of a subgraph of this graph (a loop body)."""
        return Scope.of_graph(graph, self.size, self.names, parent=self)

    # ---------------------------------------------------------------- lookups
    def is_batched(self, name: str) -> bool:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.batched:
                return True
            if name in scope.shapes or name in scope.constants:
                return False  # defined here: an inner name hides an outer one
            scope = scope.parent
        return False

    def is_ragged(self, name: str) -> bool:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.ragged:
                return True
            scope = scope.parent
        return False

    def shape(self, name: str, node: onnx.NodeProto) -> Shape:
        """The per-setting shape of ``name`` (a :class:`NotBatchable` naming ``node`` when
        shape inference did not give its rank)."""
        scope: Scope | None = self
        while scope is not None:
            if name in scope.shapes:
                return scope.shapes[name]
            scope = scope.parent
        raise refused(node, f"the rank of its input '{name}' is not known")

    def rank(self, name: str, node: onnx.NodeProto) -> int:
        return len(self.shape(name, node))

    def constant(self, name: str) -> np.ndarray | None:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.constants:
                return scope.constants[name]
            if name in scope.shapes:
                return None
            scope = scope.parent
        return None

    # ---------------------------------------------------------------- writing
    def emit(self, op: str, inputs: list[str], **attrs) -> str:
        """Append a node of ``op``; its one output's fresh name."""
        out = self.names.fresh(f"batch_{op.lower()}")
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def ints(self, values: list[int]) -> str:
        """A 1-D int64 constant."""
        tensor = helper.make_tensor("v", TensorProto.INT64, [len(values)], values)
        return self.emit("Constant", [], value=tensor)

    def unsqueezed(self, name: str, axes: list[int]) -> str:
        return self.emit("Unsqueeze", [name, self.ints(axes)]) if axes else name

    def expanded(self, name: str, rank: int) -> str:
        """An unbatched value of per-setting ``rank`` given the batch axis (repeated)."""
        front = self.unsqueezed(name, [0])
        return self.emit("Expand", [front, self.ints([self.size] + [1] * rank)])

    def keep(self, node: onnx.NodeProto, inputs: list[str], batched: bool, **attrs) -> None:
        """``node`` with ``inputs`` (and attributes replaced by ``attrs``); its outputs
        batched or not."""
        new = onnx.NodeProto()
        new.CopyFrom(node)
        del new.input[:]
        new.input.extend(inputs)
        for name, value in attrs.items():
            for k, attr in enumerate(new.attribute):
                if attr.name == name:
                    del new.attribute[k]
                    break
            if value is not None:
                new.attribute.append(helper.make_attribute(name, value))
        self.nodes.append(new)
        if batched:
            self.batched.update(o for o in node.output if o)


def refused(node: onnx.NodeProto, why: str) -> NotBatchable:
    """The refusal of ``node``: which node (its name and operator) and why."""
    name = node.name or (node.output[0] if node.output else "?")
    return NotBatchable(f"node '{name}' ({node.op_type}): {why}")

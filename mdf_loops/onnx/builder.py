"""Build one ONNX graph node by node, tracking value names and types as it goes."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TypeProto, helper, numpy_helper, shape_inference

__all__ = [
    "NameAllocator",
    "GraphBuilder",
    "Weak",
    "elem_dtype",
    "onnx_dtype",
    "value_names",
    "subgraphs",
    "all_nodes",
]


@dataclass(frozen=True)
class Weak:
    """A value known at export time (a literal or a constant parameter).

    Like a Python number in numpy, it takes the element type of the tensor it
    meets (``CastLike``); two weak values combine in Python.
    """

    value: Any

    def array(self) -> np.ndarray:
        return np.asarray(self.value)


class NameAllocator:
    """Unique names: ONNX value and node names across a model (subgraphs included, so none
    shadows another), or MDF ids.

    ``fresh(hint)`` gives ``hint``, else ``hint_2``, ``hint_3``...; ``normalize`` first
    turns a hint into an acceptable base name (an MDF id must be a Python identifier).
    The one allocator of the package: the exporter, the importer, the authoring
    lowering and the onnxruntime rewrites all use it.
    """

    def __init__(
        self, taken: Iterable[str] = (), normalize: Callable[[str], str] | None = None
    ) -> None:
        self._taken: set[str] = set(taken)
        self._normalize = normalize

    def reserve(self, name: str) -> str:
        self._taken.add(name)
        return name

    def taken(self, name: str) -> bool:
        return name in self._taken

    def mark(self) -> frozenset[str]:
        """The names taken now, for :meth:`rewind`."""
        return frozenset(self._taken)

    def rewind(self, mark: frozenset[str]) -> None:
        """Free every name taken since :meth:`mark` gave ``mark`` (a graph made again
        then gets the names it had the first time)."""
        self._taken = set(mark)

    def fresh(self, hint: str) -> str:
        base = (self._normalize(hint) if self._normalize is not None else hint) or "v"
        name, k = base, 2
        while name in self._taken:
            name, k = f"{base}_{k}", k + 1
        self._taken.add(name)
        return name

    @classmethod
    def of_graph(cls, graph: onnx.GraphProto) -> NameAllocator:
        """An allocator with every value name of ``graph`` (subgraphs included) taken."""
        return cls(value_names(graph))


def subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The graphs held in ``node``'s attributes (a loop body, the branches of an If)."""
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield from attr.graphs


def all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of ``graph`` and of its subgraphs, each before the nodes it holds."""
    for node in graph.node:
        yield node
        for g in subgraphs(node):
            yield from all_nodes(g)


def value_names(graph: onnx.GraphProto) -> set[str]:
    """Every value name used in ``graph`` and its subgraphs."""
    names = {v.name for v in list(graph.input) + list(graph.output)}
    names |= {t.name for t in graph.initializer}
    for node in graph.node:
        names |= set(node.input) | set(node.output)
        for g in subgraphs(node):
            names |= value_names(g)
    return names


def onnx_dtype(dtype: Any) -> int:
    """ONNX element type of a numpy dtype (the inverse of :func:`elem_dtype`)."""
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def elem_dtype(type_proto: TypeProto | None) -> np.dtype | None:
    """numpy dtype of a tensor type, or None when not a tensor or unknown."""
    if type_proto is None or not type_proto.HasField("tensor_type"):
        return None
    elem = type_proto.tensor_type.elem_type
    if not elem:
        return None
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem))


@dataclass
class GraphBuilder:
    """Nodes of one ONNX graph under construction, with the types known so far."""

    names: NameAllocator
    opset: int
    nodes: list = field(default_factory=list)
    types: dict[str, TypeProto] = field(default_factory=dict)
    constants: dict[str, onnx.TensorProto] = field(default_factory=dict)
    #: opsets of the other domains the graph may use (``{"ai.onnx.ml": 3}``)
    domain_opsets: dict[str, int] = field(default_factory=dict)

    def op(
        self,
        op_type: str,
        inputs: list[str],
        n_outputs: int = 1,
        hint: str | None = None,
        output_names: list[str] | None = None,
        doc_string: str | None = None,
        domain: str = "",
        **attributes: Any,
    ) -> list[str]:
        """Append ``op_type(inputs)`` (of ``domain``); return its output names."""
        base = hint or op_type.lower()
        outputs = output_names or [
            self.names.fresh(base if n_outputs == 1 else f"{base}_{k}") for k in range(n_outputs)
        ]
        node = helper.make_node(
            op_type,
            inputs,
            outputs,
            name=self.names.fresh(f"{base}_node"),
            doc_string=doc_string,
            domain=domain or None,
            **attributes,
        )
        self.nodes.append(node)
        self._infer(node)
        return outputs

    def produced(self, name: str) -> bool:
        """True when a node of this graph computes ``name``."""
        return any(name in node.output for node in self.nodes)

    def rename(self, old: str, new: str) -> None:
        """Give a value computed in this graph another name (``new`` must be unused)."""
        self.names.reserve(new)
        for node in self.nodes:
            for field_ in (node.input, node.output):
                for i, name in enumerate(field_):
                    if name == old:
                        field_[i] = new
        if old in self.types:
            self.types[new] = self.types.pop(old)
        if old in self.constants:
            self.constants[new] = self.constants.pop(old)

    def constant(self, value: Any, hint: str = "const") -> str:
        """A Constant node holding ``value`` (numpy's own dtype for Python numbers)."""
        tensor = numpy_helper.from_array(np.asarray(value))
        (name,) = self.op("Constant", [], hint=hint, value=tensor)
        self.constants[name] = tensor
        return name

    def strong(self, operand: str | Weak, like: str | None = None) -> str:
        """An ONNX value for ``operand``; a weak value takes the element type of ``like``."""
        if isinstance(operand, str):
            return operand
        if isinstance(like, str) and like:
            target = elem_dtype(self.types.get(like))
            if target is not None:
                return self.constant(operand.array().astype(target))
            const = self.constant(operand.array())
            return self.op("CastLike", [const, like])[0]
        return self.constant(operand.array())

    def dtype(self, name: str) -> np.dtype | None:
        return elem_dtype(self.types.get(name))

    def shape(self, name: str) -> tuple[int | None, ...] | None:
        """The shape of ``name`` (None for a dimension not known at export time), or None
        when its rank is not known."""
        type_proto = self.types.get(name)
        if type_proto is None or not type_proto.HasField("tensor_type"):
            return None
        tensor = type_proto.tensor_type
        if not tensor.HasField("shape"):
            return None
        return tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)

    def _infer(self, node: onnx.NodeProto) -> None:
        try:
            version = self.domain_opsets[node.domain] if node.domain else self.opset
            schema = onnx.defs.get_schema(node.op_type, version, node.domain)
            input_types = {n: self.types[n] for n in node.input if n in self.types}
            if any(n and n not in self.types for n in node.input):
                return
            data = {n: self.constants[n] for n in node.input if n in self.constants}
            inferred = shape_inference.infer_node_outputs(
                schema,
                node,
                input_types,
                data,
                opset_imports=[helper.make_opsetid("", self.opset)]
                + [helper.make_opsetid(d, v) for d, v in self.domain_opsets.items()],
            )
        except Exception:  # inference is best effort: types stay unknown
            return
        for name, type_proto in inferred.items():
            if type_proto.WhichOneof("value"):
                self.types[name] = type_proto

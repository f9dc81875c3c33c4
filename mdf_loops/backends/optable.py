"""The table of ONNX operators a backend lowers node by node, and the node a lowering gets.

The JAX and torch backends each fill one :class:`OperatorTable` with their lowering
functions (a decorator per function: ``@OPS.op("Add", "Sum")``) and look a node's
lowering up with :meth:`OperatorTable.lowering_of`, which names the operator and
the backends that run it when there is none. Operators of ``ai.onnx`` are keyed
by their ``op_type``, those of other domains ``"domain::op_type"``
(:func:`operator_key`). A lowering is called with a :class:`NodeCall` (the
backend's subclass), which reads the node's attributes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import onnx
from onnx import helper

from mdf_loops.errors import CompileError

__all__ = ["OperatorTable", "NodeCall", "operator_key"]

L = TypeVar("L")


def operator_key(node: onnx.NodeProto) -> str:
    """A node's key in an :class:`OperatorTable`: ``op_type``, or ``"domain::op_type"``."""
    if node.domain in ("", "ai.onnx"):
        return node.op_type
    return f"{node.domain}::{node.op_type}"


class OperatorTable(Mapping[str, L], Generic[L]):
    """``operator key -> lowering`` of one backend.

    ``make(fn, **options)`` turns a decorated function and the options given to
    :meth:`op` into the table's entry (the function itself where there are none).
    """

    def __init__(self, backend: str, make: Callable[..., L]) -> None:
        self.backend = backend
        self._make = make
        self._lowerings: dict[str, L] = {}

    def op(self, *op_types: str, **options: Any) -> Callable:
        """Register the decorated function as the lowering of ``op_types``."""

        def register(fn: Callable) -> Callable:
            for name in op_types:
                self._lowerings[name] = self._make(fn, **options)
            return fn

        return register

    def lowering_of(self, node: onnx.NodeProto, where: str) -> L:
        """The lowering of ``node``; :class:`CompileError` naming the operator if none."""
        lowering = self._lowerings.get(operator_key(node))
        if lowering is None:
            raise CompileError(
                f"{where}: no {self.backend} lowering for {node.domain or 'ai.onnx'}::"
                f"{node.op_type}; run it with backend='onnxruntime' or 'scheduler'"
            )
        return lowering

    def get(self, key: str, default: Any = None) -> Any:  # a dict's speed: looked up per node
        return self._lowerings.get(key, default)

    def __getitem__(self, key: str) -> L:
        return self._lowerings[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._lowerings)

    def __len__(self) -> int:
        return len(self._lowerings)


@dataclass
class NodeCall:
    """One ONNX node as a lowering sees it: the node, where it is (for errors), its attributes.

    Each backend adds what its lowerings need (the opset, subgraph programs, the scope).
    """

    proto: onnx.NodeProto
    where: str
    attrs: dict[str, Any] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.attrs = {a.name: helper.get_attribute_value(a) for a in self.proto.attribute}

    def attr(self, name: str, default: Any = None) -> Any:
        """An attribute's value (text as ``str``), or ``default`` when the node has none."""
        value = self.attrs.get(name, default)
        return value.decode() if isinstance(value, bytes) else value

    @property
    def n_outputs(self) -> int:
        return len(self.proto.output)

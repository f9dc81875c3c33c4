"""The table of ONNX operators the JAX lowering knows: ``op_type -> implementation``.

An implementation is ``fn(call, *inputs) -> value | tuple of values``; ``call``
is the :class:`NodeCall` (attributes, the node's name for errors, the evaluator
for loop bodies). Operators of other domains are keyed ``"domain::op_type"``.
Absent optional inputs arrive as ``None``. The modules
:mod:`.elementwise`, :mod:`.shapes`, :mod:`.reductions`, :mod:`.sequences` and
:mod:`.control` fill the table when imported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import onnx
from onnx import helper

__all__ = ["NodeCall", "OPS", "op"]

OPS: dict[str, Callable[..., Any]] = {}


def op(*op_types: str) -> Callable:
    """Register the decorated function as the lowering of ``op_types``."""

    def register(fn: Callable) -> Callable:
        for name in op_types:
            OPS[name] = fn
        return fn

    return register


@dataclass
class NodeCall:
    """One ONNX node being lowered."""

    proto: onnx.NodeProto
    where: str
    evaluator: Any
    scope: Mapping[str, Any]  # the values visible to the node (bodies read the outer scope)
    attrs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.attrs = {a.name: helper.get_attribute_value(a) for a in self.proto.attribute}

    def attr(self, name: str, default: Any = None) -> Any:
        value = self.attrs.get(name, default)
        return value.decode() if isinstance(value, bytes) else value

    @property
    def opset(self) -> int:
        return self.evaluator.opset

    @property
    def n_outputs(self) -> int:
        return len(self.proto.output)

"""The table of ONNX operators the torch lowering knows: ``op_type -> Lowering``.

An implementation is ``fn(call, *inputs) -> value | tuple of values`` (``plain``
ones, torch functions themselves, ``fn(*inputs)``); ``call`` is
the :class:`NodeCall` (attributes, the node's name for errors, its opset, the
planned programs of its subgraphs). Operators that run subgraphs (``Scan``,
``Loop``, ``If``) are registered ``scoped``: they get ``fn(call, scope, *inputs)``,
the values their bodies read from the enclosing graph. Operators of other domains
are keyed ``"domain::op_type"``. Absent optional inputs arrive as ``None``. The
modules :mod:`.elementwise`, :mod:`.shapes`, :mod:`.reductions`, :mod:`.sequences`
and :mod:`.control` fill the table when imported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import onnx
from onnx import helper

__all__ = ["Lowering", "NodeCall", "OPS", "op"]


@dataclass(frozen=True)
class Lowering:
    """How one operator runs in torch."""

    fn: Callable[..., Any]
    scoped: bool = False  # reads the enclosing scope (runs subgraphs)
    plain: bool = False  # takes the inputs only, no NodeCall (a torch function itself)


OPS: dict[str, Lowering] = {}


def op(*op_types: str, scoped: bool = False, plain: bool = False) -> Callable:
    """Register the decorated function as the lowering of ``op_types``."""

    def register(fn: Callable) -> Callable:
        for name in op_types:
            OPS[name] = Lowering(fn, scoped, plain)
        return fn

    return register


@dataclass
class NodeCall:
    """One ONNX node as planned: its attributes and the programs of its subgraphs."""

    proto: onnx.NodeProto
    where: str
    opset: int
    #: subgraph attribute name -> its planned program (:class:`.interpreter.Program`)
    bodies: dict[str, Any] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.attrs = {a.name: helper.get_attribute_value(a) for a in self.proto.attribute}

    def attr(self, name: str, default: Any = None) -> Any:
        value = self.attrs.get(name, default)
        return value.decode() if isinstance(value, bytes) else value

    @property
    def n_outputs(self) -> int:
        return len(self.proto.output)

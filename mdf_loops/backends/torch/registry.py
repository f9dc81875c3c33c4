"""The table of ONNX operators the torch lowering knows: ``op_type -> Lowering``.

An implementation is ``fn(call, *inputs) -> value | tuple of values`` (``plain``
ones, torch functions themselves, ``fn(*inputs)``); ``call`` is
the :class:`NodeCall` (attributes, the node's name for errors, its opset, the
planned programs of its subgraphs). Operators that run subgraphs (``Scan``,
``Loop``, ``If``) are registered ``scoped``: they get ``fn(call, scope, *inputs)``,
the values their bodies read from the enclosing graph. Absent optional inputs
arrive as ``None``. The table is an :class:`~mdf_loops.backends.optable.OperatorTable`
(keys, lookup and the error for an operator without a lowering); the modules
:mod:`.elementwise`, :mod:`.shapes`, :mod:`.reductions`, :mod:`.sequences` and
:mod:`.control` fill it when imported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mdf_loops.backends import optable
from mdf_loops.backends.optable import OperatorTable

__all__ = ["Lowering", "NodeCall", "OPS", "op"]


@dataclass(frozen=True)
class Lowering:
    """How one operator runs in torch."""

    fn: Callable[..., Any]
    scoped: bool = False  # reads the enclosing scope (runs subgraphs)
    plain: bool = False  # takes the inputs only, no NodeCall (a torch function itself)


OPS: OperatorTable[Lowering] = OperatorTable("torch", Lowering)
#: ``@op("Add", scoped=False, plain=False)`` registers the decorated function
op = OPS.op


@dataclass
class NodeCall(optable.NodeCall):
    """One ONNX node as planned: its attributes and the programs of its subgraphs."""

    opset: int
    #: subgraph attribute name -> its planned program (:class:`.interpreter.Program`)
    bodies: dict[str, Any] = field(default_factory=dict)
    #: a model that is not trusted: loops hold their values to the limits (:mod:`.limits`)
    sized: bool = False

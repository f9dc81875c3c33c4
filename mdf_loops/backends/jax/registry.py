"""The table of ONNX operators the JAX lowering knows: ``op_type -> implementation``.

An implementation is ``fn(call, *inputs) -> value | tuple of values``; ``call``
is the :class:`NodeCall` (attributes, the node's name for errors, the evaluator
for loop bodies). Absent optional inputs arrive as ``None``. The table is an
:class:`~mdf_loops.backends.optable.OperatorTable` (keys, lookup and the error for
an operator without a lowering); the modules :mod:`.elementwise`, :mod:`.shapes`,
:mod:`.reductions`, :mod:`.sequences` and :mod:`.control` fill it when imported.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mdf_loops.backends import optable
from mdf_loops.backends.optable import OperatorTable

__all__ = ["NodeCall", "OPS", "op"]


def _itself(fn: Callable[..., Any]) -> Callable[..., Any]:
    return fn


OPS: OperatorTable[Callable[..., Any]] = OperatorTable("JAX", _itself)
#: ``@op("Add", "Sum")`` registers the decorated function
op = OPS.op


@dataclass
class NodeCall(optable.NodeCall):
    """One ONNX node being lowered."""

    evaluator: Any
    #: the values visible to the node (bodies read the outer scope)
    scope: Mapping[str, Any]

    @property
    def opset(self) -> int:
        return self.evaluator.opset

"""What the signatures read from a node: an ONNX node's graph attributes, an MDF loop
node's call arguments, and the check of a node's counts against its layout."""

from __future__ import annotations

from typing import TYPE_CHECKING

import onnx
from modeci_mdf.mdf import Node

from mdf_loops.errors import ModelError
from mdf_loops.model.convention import function_parameter, variadic_items

if TYPE_CHECKING:
    from mdf_loops.model.signatures.loop import LoopSignature
    from mdf_loops.model.signatures.scan import ScanSignature

__all__ = [
    "count",
    "graph_attribute",
    "onnx_where",
    "check_node_counts",
    "call_args",
    "variadic",
]


def count(n: int, what: str) -> str:
    """``1 state``, ``2 states``: a count for an error message."""
    return f"{n} {what}" + ("" if n == 1 else "s")


def graph_attribute(node: onnx.NodeProto, name: str, where: str) -> onnx.GraphProto:
    """The graph attribute ``name`` of an ONNX node (a body or a branch)."""
    for attr in node.attribute:
        if attr.name == name and attr.type == onnx.AttributeProto.GRAPH:
            return attr.g
    raise ModelError(f"{where}: {node.op_type} needs a graph attribute '{name}'")


def onnx_where(node: onnx.NodeProto) -> str:
    """An ONNX node named for an error message."""
    return f"{node.op_type} node '{node.name or list(node.output)}'"


def check_node_counts(
    signature: ScanSignature | LoopSignature,
    num_inputs: int,
    num_outputs: int,
    where: str,
    inputs: str,
) -> None:
    """A ModelError when a node's counts do not fit ``signature`` (``inputs`` says what
    its inputs are)."""
    if num_inputs != signature.num_node_inputs:
        raise ModelError(
            f"{where}: the node has {count(num_inputs, 'input')}, the body needs "
            f"{signature.num_node_inputs} ({inputs})"
        )
    if num_outputs > signature.num_node_outputs:
        raise ModelError(
            f"{where}: the node has {count(num_outputs, 'output')}, the body "
            f"returns only {signature.num_node_outputs}"
        )


def call_args(node: Node) -> dict:
    """The arguments of an MDF loop node's call (none when it has no call)."""
    call = function_parameter(node)
    return dict(call.args or {}) if call is not None else {}


def variadic(expression: object) -> list[str] | None:
    """The items of a variadic argument (``[a, b]``), or None when its length is unknown
    (not a list, or not an expression)."""
    try:
        return variadic_items(expression)
    except SyntaxError:
        return None

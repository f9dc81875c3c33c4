"""Where each control-flow operator's values sit: one small dataclass per operator.

ONNX binds a Scan, Loop or If node's inputs and outputs, and its body's formal
inputs and outputs, by position. These classes say once which positions hold the
states, scan inputs, iteration number, condition and outputs:

* :class:`ScanSignature` (N states, M scan inputs, K scan outputs)::

      node inputs      [sequence_lens (opset 8)] + N initial states + M sequences
      body inputs      N states + M sequence elements
      body outputs     N new states + K scan-output elements
      node outputs     N final states + K stacked scan outputs

* :class:`LoopSignature` (N loop-carried values, K scan outputs)::

      node inputs      M (trip count, may be absent), cond (may be absent), N initial values
      body inputs      iteration number, condition, N carried values
      body outputs     condition, N carried values, K scan-output elements
      node outputs     N final values + K stacked scan outputs

* :class:`IfSignature` (K outputs)::

      node inputs      cond
      branch inputs    none (a branch reads the enclosing graph)
      branch outputs   K values, the same count in both branches
      node outputs     K values

Each is built from a body's formal input/output counts (``from_counts``), an ONNX
``NodeProto`` (``from_onnx``) or an MDF loop node (``from_mdf``); counts that do not
fit raise :class:`~mdf_loops.errors.ModelError` naming the node.
"""

from __future__ import annotations

import onnx
from modeci_mdf.mdf import Node

from mdf_loops.errors import ModelError
from mdf_loops.model.convention import CONTROL_FLOW_FUNCTIONS, function_parameter
from mdf_loops.model.signatures.if_ import IfSignature
from mdf_loops.model.signatures.loop import LoopSignature
from mdf_loops.model.signatures.reading import onnx_where
from mdf_loops.model.signatures.scan import ScanSignature

__all__ = [
    "IfSignature",
    "LoopSignature",
    "ScanSignature",
    "Signature",
    "mdf_signature",
    "onnx_signature",
]

Signature = ScanSignature | LoopSignature | IfSignature

_BY_OP: dict[str, type[Signature]] = {
    "Scan": ScanSignature,
    "Loop": LoopSignature,
    "If": IfSignature,
}


def onnx_signature(node: onnx.NodeProto, opset: int | None = None) -> Signature:
    """The signature of an ONNX Scan, Loop or If node."""
    if node.op_type not in _BY_OP:
        raise ModelError(f"{onnx_where(node)}: not a control-flow operator (Scan, Loop or If)")
    return _BY_OP[node.op_type].from_onnx(node, opset)


def mdf_signature(node: Node, opset: int | None = None) -> Signature:
    """The signature of an MDF loop node (``onnx::Scan``, ``onnx::Loop`` or ``onnx::If``);
    ``opset`` is the model's ``onnx_opset_version`` when it has one."""
    call = function_parameter(node)
    op = CONTROL_FLOW_FUNCTIONS.get(call.function) if call is not None else None
    if op is None:
        raise ModelError(
            f"node '{node.id}': not a loop node (its function is not "
            f"{' / '.join(CONTROL_FLOW_FUNCTIONS)})"
        )
    return _BY_OP[op].from_mdf(node, opset)

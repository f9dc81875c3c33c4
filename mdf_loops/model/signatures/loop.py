"""The layout of a Loop: trip count, condition, N carried values, K scan outputs (see
:mod:`mdf_loops.model.signatures`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import onnx
from modeci_mdf.mdf import Node

from mdf_loops.errors import ModelError
from mdf_loops.model.convention import BodySignature, body_signature, loop_bodies
from mdf_loops.model.signatures.reading import (
    call_args,
    check_node_counts,
    count,
    graph_attribute,
    onnx_where,
    variadic,
)

__all__ = ["LoopSignature"]


@dataclass(frozen=True)
class LoopSignature:
    """Positions of a Loop's trip count, condition, carried values and scan outputs."""

    num_carried: int
    num_scan_outputs: int

    #: node inputs: the trip count and the condition (either may be the empty name)
    TRIP_COUNT: ClassVar[int] = 0
    CONDITION: ClassVar[int] = 1
    #: body inputs: the iteration number and the condition
    ITERATION: ClassVar[int] = 0
    BODY_CONDITION: ClassVar[int] = 1
    #: body output: the condition of the next iteration
    CONDITION_OUTPUT: ClassVar[int] = 0
    #: the MDF call's arguments (ONNX's formal input names)
    TRIP_COUNT_ARGUMENT: ClassVar[str] = "M"
    CONDITION_ARGUMENT: ClassVar[str] = "cond"
    CARRIED_ARGUMENT: ClassVar[str] = "v_initial"

    @property
    def node_carried(self) -> slice:
        return slice(2, 2 + self.num_carried)

    @property
    def num_node_inputs(self) -> int:
        return 2 + self.num_carried

    body_carried = node_carried
    num_body_inputs = num_node_inputs

    @property
    def body_carried_outputs(self) -> slice:
        return slice(1, 1 + self.num_carried)

    @property
    def body_scan_outputs(self) -> slice:
        return slice(1 + self.num_carried, 1 + self.num_carried + self.num_scan_outputs)

    @property
    def num_body_outputs(self) -> int:
        return 1 + self.num_carried + self.num_scan_outputs

    @property
    def node_carried_outputs(self) -> slice:
        return slice(0, self.num_carried)

    @property
    def node_scan_outputs(self) -> slice:
        return slice(self.num_carried, self.num_carried + self.num_scan_outputs)

    @property
    def num_node_outputs(self) -> int:
        return self.num_carried + self.num_scan_outputs

    @classmethod
    def from_counts(
        cls, num_body_inputs: int, num_body_outputs: int, where: str = "Loop"
    ) -> LoopSignature:
        """The layout of a body with these formal input and output counts."""
        if num_body_inputs < 2:
            raise ModelError(
                f"{where}: the body has {count(num_body_inputs, 'formal input')}; a Loop body "
                "takes at least 2 (iteration number, condition, then the loop-carried values)"
            )
        carried = num_body_inputs - 2
        if num_body_outputs < 1 + carried:
            raise ModelError(
                f"{where}: the body has {count(num_body_outputs, 'formal output')}; it needs at "
                f"least {1 + carried} (condition, {count(carried, 'loop-carried value')}, then "
                "scan-output elements)"
            )
        return cls(carried, num_body_outputs - 1 - carried)

    @classmethod
    def from_onnx(cls, node: onnx.NodeProto, opset: int | None = None) -> LoopSignature:
        """The layout of an ONNX Loop node (the same in every opset)."""
        where = onnx_where(node)
        body = graph_attribute(node, "body", where)
        signature = cls.from_counts(len(body.input), len(body.output), where)
        signature.check_node(max(len(node.input), 2), len(node.output), where)
        return signature

    @classmethod
    def from_mdf(cls, node: Node, opset: int | None = None) -> LoopSignature:
        """The layout of an MDF ``onnx::Loop`` node (its ``v_initial`` argument and body)."""
        return cls.from_body(node, body_signature(loop_bodies(node)["body"]))

    @classmethod
    def from_body(cls, node: Node, body: BodySignature) -> LoopSignature:
        """:meth:`from_mdf` for a caller that has read the signature of the node's body."""
        where = f"node '{node.id}'"
        signature = cls.from_counts(len(body.formal_inputs), len(body.formal_outputs), where)
        carried = variadic(call_args(node).get(cls.CARRIED_ARGUMENT))
        if carried is not None and len(carried) != signature.num_carried:
            raise ModelError(
                f"{where}: the body has {signature.num_body_inputs} formal inputs (iteration "
                f"number, condition, {count(signature.num_carried, 'loop-carried value')}), but "
                f"the node passes {len(carried)} loop-carried values (v_initial); "
                "pass one per carried formal input"
            )
        return signature

    def check_node(self, num_inputs: int, num_outputs: int, where: str) -> None:
        """A ModelError when a node's input or output count does not fit this layout."""
        check_node_counts(
            self,
            num_inputs,
            num_outputs,
            where,
            f"trip count, condition, {count(self.num_carried, 'loop-carried value')}",
        )

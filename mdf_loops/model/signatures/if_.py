"""The layout of an If: the condition, and K outputs of two branches that take no
formal inputs (see :mod:`mdf_loops.model.signatures`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import onnx
from modeci_mdf.mdf import Node

from mdf_loops.errors import ModelError
from mdf_loops.model.convention import BODY_ATTRIBUTES, body_signature, loop_bodies
from mdf_loops.model.signatures.reading import count, graph_attribute, onnx_where

__all__ = ["IfSignature"]


@dataclass(frozen=True)
class IfSignature:
    """Positions of an If's condition and outputs (a branch takes no formal inputs)."""

    num_outputs: int

    CONDITION: ClassVar[int] = 0
    CONDITION_ARGUMENT: ClassVar[str] = "cond"
    BRANCHES: ClassVar[tuple[str, ...]] = BODY_ATTRIBUTES["If"]
    num_node_inputs: ClassVar[int] = 1
    num_body_inputs: ClassVar[int] = 0

    @property
    def num_body_outputs(self) -> int:
        return self.num_outputs

    num_node_outputs = num_body_outputs

    @classmethod
    def from_counts(
        cls,
        then_inputs: int,
        then_outputs: int,
        else_inputs: int,
        else_outputs: int,
        where: str = "If",
    ) -> IfSignature:
        """The layout of branches with these formal input and output counts."""
        for branch, inputs in zip(cls.BRANCHES, (then_inputs, else_inputs), strict=True):
            if inputs:
                raise ModelError(
                    f"{where}: {branch} has {count(inputs, 'formal input')}; a branch takes "
                    "none (it reads the enclosing graph through outer_scope_inputs)"
                )
        if then_outputs != else_outputs:
            raise ModelError(
                f"{where}: else_branch returns {count(else_outputs, 'value')} but then_branch "
                f"returns {then_outputs}; both must return the If node's outputs"
            )
        return cls(then_outputs)

    @classmethod
    def from_onnx(cls, node: onnx.NodeProto, opset: int | None = None) -> IfSignature:
        """The layout of an ONNX If node (the same in every opset)."""
        where = onnx_where(node)
        then = graph_attribute(node, "then_branch", where)
        other = graph_attribute(node, "else_branch", where)
        signature = cls.from_counts(
            len(then.input), len(then.output), len(other.input), len(other.output), where
        )
        if len(node.output) > signature.num_outputs:
            raise ModelError(
                f"{where}: the node has {count(len(node.output), 'output')}, the "
                f"branches return only {signature.num_outputs}"
            )
        return signature

    @classmethod
    def from_mdf(cls, node: Node, opset: int | None = None) -> IfSignature:
        """The layout of an MDF ``onnx::If`` node (its two branch signatures)."""
        bodies = loop_bodies(node)
        then, other = (body_signature(bodies[b]) for b in cls.BRANCHES)
        return cls.from_counts(
            len(then.formal_inputs),
            len(then.formal_outputs),
            len(other.formal_inputs),
            len(other.formal_outputs),
            f"node '{node.id}'",
        )

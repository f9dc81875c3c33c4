"""The layout of a Scan: N states, M scan inputs, K scan outputs (see
:mod:`mdf_loops.model.signatures`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import onnx
from modeci_mdf.mdf import Node

from mdf_loops.errors import ModelError
from mdf_loops.model.convention import body_signature, loop_bodies
from mdf_loops.model.signatures.reading import (
    call_args,
    check_node_counts,
    count,
    graph_attribute,
    onnx_where,
    variadic,
)

__all__ = ["ScanSignature"]


@dataclass(frozen=True)
class ScanSignature:
    """Positions of a Scan's states, scan inputs and scan outputs."""

    num_states: int
    num_scan_inputs: int
    num_scan_outputs: int
    #: opset 8: node input 0 is ``sequence_lens`` and every input has a batch axis
    sequence_lens: bool = False

    #: the MDF call's arguments (ONNX's formal input names; states and sequences in one list)
    VALUES_ARGUMENT: ClassVar[str] = "initial_state_and_scan_inputs"
    SEQUENCE_LENS_ARGUMENT: ClassVar[str] = "sequence_lens"

    @property
    def node_states(self) -> slice:
        start = 1 if self.sequence_lens else 0
        return slice(start, start + self.num_states)

    @property
    def node_scan_inputs(self) -> slice:
        start = self.node_states.stop
        return slice(start, start + self.num_scan_inputs)

    @property
    def node_values(self) -> slice:
        """The initial states and the sequences (every node input but ``sequence_lens``)."""
        return slice(self.node_states.start, self.node_scan_inputs.stop)

    @property
    def num_node_inputs(self) -> int:
        return self.node_scan_inputs.stop

    @property
    def body_states(self) -> slice:
        return slice(0, self.num_states)

    @property
    def body_scan_inputs(self) -> slice:
        return slice(self.num_states, self.num_states + self.num_scan_inputs)

    @property
    def num_body_inputs(self) -> int:
        return self.num_states + self.num_scan_inputs

    @property
    def body_scan_outputs(self) -> slice:
        return slice(self.num_states, self.num_states + self.num_scan_outputs)

    @property
    def num_body_outputs(self) -> int:
        return self.num_states + self.num_scan_outputs

    # -- the new states come out where they go in; node outputs sit as the body's outputs
    body_state_outputs = body_states
    node_state_outputs = body_states
    node_scan_outputs = body_scan_outputs
    num_node_outputs = num_body_outputs

    @classmethod
    def from_counts(
        cls,
        num_body_inputs: int,
        num_body_outputs: int,
        num_scan_inputs: int,
        sequence_lens: bool = False,
        where: str = "Scan",
    ) -> ScanSignature:
        """The layout of a body with these formal input and output counts."""
        if not 1 <= num_scan_inputs <= num_body_inputs:
            raise ModelError(
                f"{where}: num_scan_inputs is {num_scan_inputs}, but the body has "
                f"{count(num_body_inputs, 'formal input')}; expected between 1 and "
                f"{num_body_inputs} (initial states, then at least one scan input)"
            )
        states = num_body_inputs - num_scan_inputs
        if num_body_outputs < states:
            raise ModelError(
                f"{where}: the body has {count(num_body_outputs, 'formal output')}, but "
                f"{count(states, 'state')} need at least as many (the new states, then "
                "scan-output elements)"
            )
        return cls(states, num_scan_inputs, num_body_outputs - states, sequence_lens)

    @classmethod
    def from_onnx(cls, node: onnx.NodeProto, opset: int | None = None) -> ScanSignature:
        """The layout of an ONNX Scan node (opset 8 when ``opset`` < 9, or when the
        body takes one input fewer than the node and ``opset`` is not given)."""
        where = onnx_where(node)
        body = graph_attribute(node, "body", where)
        attrs = {a.name: a for a in node.attribute}
        if "num_scan_inputs" not in attrs:
            raise ModelError(f"{where}: Scan needs the attribute 'num_scan_inputs'")
        legacy = len(body.input) == len(node.input) - 1 if opset is None else opset < 9
        signature = cls.from_counts(
            len(body.input), len(body.output), attrs["num_scan_inputs"].i, legacy, where
        )
        signature.check_node(len(node.input), len(node.output), where)
        return signature

    @classmethod
    def from_mdf(cls, node: Node, opset: int | None = None) -> ScanSignature:
        """The layout of an MDF ``onnx::Scan`` node (its arguments, ``num_scan_inputs``
        parameter and body signature); opset 8's when ``opset`` (the model's
        ``onnx_opset_version``) is below 9, or when not given and it binds ``sequence_lens``."""
        where = f"node '{node.id}'"
        args = call_args(node)
        body = body_signature(loop_bodies(node)["body"])
        value = next((p.value for p in node.parameters if p.id == "num_scan_inputs"), None)
        try:
            m = int(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ModelError(
                f"{where}: onnx::Scan needs an integer parameter 'num_scan_inputs', found {value!r}"
            ) from None
        signature = cls.from_counts(
            len(body.formal_inputs),
            len(body.formal_outputs),
            m,
            cls.SEQUENCE_LENS_ARGUMENT in args if opset is None else opset < 9,
            where,
        )
        values = variadic(args.get(cls.VALUES_ARGUMENT))
        if values is not None and len(values) != signature.num_body_inputs:
            raise ModelError(
                f"{where}: the body has {signature.num_body_inputs} formal inputs "
                f"({count(signature.num_states, 'state')} + {count(m, 'scan input')}), "
                f"but the node passes {len(values)} (initial_state_and_scan_inputs); "
                "pass one value per formal input"
            )
        return signature

    def check_node(self, num_inputs: int, num_outputs: int, where: str) -> None:
        """A ModelError when a node's input or output count does not fit this layout."""
        check_node_counts(
            self,
            num_inputs,
            num_outputs,
            where,
            f"{'sequence_lens, ' if self.sequence_lens else ''}"
            f"{count(self.num_states, 'state')}, "
            f"{count(self.num_scan_inputs, 'scan input')}",
        )

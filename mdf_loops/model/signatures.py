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

from dataclasses import dataclass
from typing import ClassVar

import onnx
from modeci_mdf.mdf import Node

from mdf_loops.errors import ModelError
from mdf_loops.model.convention import (
    BODY_ATTRIBUTES,
    CONTROL_FLOW_FUNCTIONS,
    body_signature,
    function_parameter,
    loop_bodies,
    variadic_items,
)

__all__ = [
    "IfSignature",
    "LoopSignature",
    "ScanSignature",
    "Signature",
    "mdf_signature",
    "onnx_signature",
]


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def _graph_attribute(node: onnx.NodeProto, name: str, where: str) -> onnx.GraphProto:
    for attr in node.attribute:
        if attr.name == name and attr.type == onnx.AttributeProto.GRAPH:
            return attr.g
    raise ModelError(f"{where}: {node.op_type} needs a graph attribute '{name}'")


def _onnx_where(node: onnx.NodeProto) -> str:
    return f"{node.op_type} node '{node.name or list(node.output)}'"


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
                f"{_count(num_body_inputs, 'formal input')}; expected between 1 and "
                f"{num_body_inputs} (initial states, then at least one scan input)"
            )
        states = num_body_inputs - num_scan_inputs
        if num_body_outputs < states:
            raise ModelError(
                f"{where}: the body has {_count(num_body_outputs, 'formal output')}, but "
                f"{_count(states, 'state')} need at least as many (the new states, then "
                "scan-output elements)"
            )
        return cls(states, num_scan_inputs, num_body_outputs - states, sequence_lens)

    @classmethod
    def from_onnx(cls, node: onnx.NodeProto, opset: int | None = None) -> ScanSignature:
        """The layout of an ONNX Scan node (opset 8 when ``opset`` < 9, or when the
        body takes one input fewer than the node and ``opset`` is not given)."""
        where = _onnx_where(node)
        body = _graph_attribute(node, "body", where)
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
        args = _call_args(node)
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
        values = _variadic(args.get(cls.VALUES_ARGUMENT))
        if values is not None and len(values) != signature.num_body_inputs:
            raise ModelError(
                f"{where}: the body has {signature.num_body_inputs} formal inputs "
                f"({_count(signature.num_states, 'state')} + {_count(m, 'scan input')}), "
                f"but the node passes {len(values)} (initial_state_and_scan_inputs); "
                "pass one value per formal input"
            )
        return signature

    def check_node(self, num_inputs: int, num_outputs: int, where: str) -> None:
        """A ModelError when a node's input or output count does not fit this layout."""
        _check_node_counts(
            self,
            num_inputs,
            num_outputs,
            where,
            f"{'sequence_lens, ' if self.sequence_lens else ''}"
            f"{_count(self.num_states, 'state')}, "
            f"{_count(self.num_scan_inputs, 'scan input')}",
        )


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
                f"{where}: the body has {_count(num_body_inputs, 'formal input')}; a Loop body "
                "takes at least 2 (iteration number, condition, then the loop-carried values)"
            )
        carried = num_body_inputs - 2
        if num_body_outputs < 1 + carried:
            raise ModelError(
                f"{where}: the body has {_count(num_body_outputs, 'formal output')}; it needs at "
                f"least {1 + carried} (condition, {_count(carried, 'loop-carried value')}, then "
                "scan-output elements)"
            )
        return cls(carried, num_body_outputs - 1 - carried)

    @classmethod
    def from_onnx(cls, node: onnx.NodeProto, opset: int | None = None) -> LoopSignature:
        """The layout of an ONNX Loop node (the same in every opset)."""
        where = _onnx_where(node)
        body = _graph_attribute(node, "body", where)
        signature = cls.from_counts(len(body.input), len(body.output), where)
        signature.check_node(max(len(node.input), 2), len(node.output), where)
        return signature

    @classmethod
    def from_mdf(cls, node: Node, opset: int | None = None) -> LoopSignature:
        """The layout of an MDF ``onnx::Loop`` node (its ``v_initial`` argument and body)."""
        where = f"node '{node.id}'"
        body = body_signature(loop_bodies(node)["body"])
        signature = cls.from_counts(len(body.formal_inputs), len(body.formal_outputs), where)
        carried = _variadic(_call_args(node).get(cls.CARRIED_ARGUMENT))
        if carried is not None and len(carried) != signature.num_carried:
            raise ModelError(
                f"{where}: the body has {signature.num_body_inputs} formal inputs (iteration "
                f"number, condition, {_count(signature.num_carried, 'loop-carried value')}), but "
                f"the node passes {len(carried)} loop-carried values (v_initial); "
                "pass one per carried formal input"
            )
        return signature

    def check_node(self, num_inputs: int, num_outputs: int, where: str) -> None:
        """A ModelError when a node's input or output count does not fit this layout."""
        _check_node_counts(
            self,
            num_inputs,
            num_outputs,
            where,
            f"trip count, condition, {_count(self.num_carried, 'loop-carried value')}",
        )


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
        for branch, inputs in zip(cls.BRANCHES, (then_inputs, else_inputs)):
            if inputs:
                raise ModelError(
                    f"{where}: {branch} has {_count(inputs, 'formal input')}; a branch takes "
                    "none (it reads the enclosing graph through outer_scope_inputs)"
                )
        if then_outputs != else_outputs:
            raise ModelError(
                f"{where}: else_branch returns {_count(else_outputs, 'value')} but then_branch "
                f"returns {then_outputs}; both must return the If node's outputs"
            )
        return cls(then_outputs)

    @classmethod
    def from_onnx(cls, node: onnx.NodeProto, opset: int | None = None) -> IfSignature:
        """The layout of an ONNX If node (the same in every opset)."""
        where = _onnx_where(node)
        then = _graph_attribute(node, "then_branch", where)
        other = _graph_attribute(node, "else_branch", where)
        signature = cls.from_counts(
            len(then.input), len(then.output), len(other.input), len(other.output), where
        )
        if len(node.output) > signature.num_outputs:
            raise ModelError(
                f"{where}: the node has {_count(len(node.output), 'output')}, the "
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


Signature = ScanSignature | LoopSignature | IfSignature

_BY_OP: dict[str, type[Signature]] = {
    "Scan": ScanSignature,
    "Loop": LoopSignature,
    "If": IfSignature,
}


def onnx_signature(node: onnx.NodeProto, opset: int | None = None) -> Signature:
    """The signature of an ONNX Scan, Loop or If node."""
    if node.op_type not in _BY_OP:
        raise ModelError(f"{_onnx_where(node)}: not a control-flow operator (Scan, Loop or If)")
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


def _check_node_counts(
    signature: ScanSignature | LoopSignature,
    num_inputs: int,
    num_outputs: int,
    where: str,
    inputs: str,
) -> None:
    if num_inputs != signature.num_node_inputs:
        raise ModelError(
            f"{where}: the node has {_count(num_inputs, 'input')}, the body needs "
            f"{signature.num_node_inputs} ({inputs})"
        )
    if num_outputs > signature.num_node_outputs:
        raise ModelError(
            f"{where}: the node has {_count(num_outputs, 'output')}, the body "
            f"returns only {signature.num_node_outputs}"
        )


def _call_args(node: Node) -> dict:
    call = function_parameter(node)
    return dict(call.args or {}) if call is not None else {}


def _variadic(expression: object) -> list[str] | None:
    try:
        return variadic_items(expression)
    except SyntaxError:
        return None

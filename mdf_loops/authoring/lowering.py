"""Lower a traced graph to ONNX: operators become nodes, each :class:`LoopOp` a Scan or Loop.

A loop with sequences and no stop condition becomes ``Scan`` (states, then one
scan input per sequence tap). A loop with an ``until`` condition, or with no
sequence, becomes ``Loop`` with the trip count as ``M``: its body reads element
``i`` of each sequence slice with ``Gather`` and returns ``not until`` as the
condition. Body graphs read values of enclosing graphs by name (ONNX outer
scope); the keys of a scan's updates are read as the state that replaces them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from mdf_loops.authoring.canonical import LoopOp, post_order
from mdf_loops.authoring.errors import AuthoringError
from mdf_loops.authoring.shared import SharedOp
from mdf_loops.authoring.symbolic import (
    ROOT,
    ConstantOp,
    FormalOp,
    InputOp,
    OnnxOp,
    Operation,
    Scope,
    Symbol,
)
from mdf_loops.authoring.types import OPSET, TensorType
from mdf_loops.model.signatures import LoopSignature, ScanSignature
from mdf_loops.onnx.builder import NameAllocator

__all__ = ["to_onnx"]

#: IR version that goes with :data:`~mdf_loops.authoring.types.OPSET` (onnxruntime reads it).
IR_VERSION = 10


class _Graph:
    """One ONNX graph being written; ``parent`` resolves names of enclosing graphs."""

    def __init__(self, writer: _Writer, scope: Scope, parent: _Graph | None):
        self.writer = writer
        self.scope = scope
        self.parent = parent
        self.bound: dict[Symbol, str] = {}
        self.nodes: list[onnx.NodeProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self._output_names: set[str] = set()
        self._produced: set[str] = set()
        self.constants: dict[tuple, str] = {}  # (dtype, shape, bytes) -> name

    def constant_named(self, key: tuple) -> str | None:
        """The name of a constant with this value in this graph or an enclosing one."""
        graph: _Graph | None = self
        while graph is not None:
            if key in graph.constants:
                return graph.constants[key]
            graph = graph.parent
        return None

    def lookup(self, symbol: Symbol) -> str | None:
        """The ONNX name of ``symbol`` in this graph or an enclosing one (None: not computed)."""
        graph: _Graph | None = self
        while graph is not None:
            if symbol in graph.bound:
                return graph.bound[symbol]
            graph = graph.parent
        return None

    def name_of(self, symbol: Symbol) -> str:
        name = self.lookup(symbol)
        if name is None:
            raise AuthoringError(f"internal: {symbol.describe()} is used before it is computed")
        return name

    def bind_input(
        self, symbol: Symbol, hint: str | None = None, dim_names: Sequence[str | None] | None = None
    ) -> str:
        name = self.writer.names.fresh(hint or symbol.name or "input")
        self.bound[symbol] = name
        self.inputs.append(helper.make_value_info(name, symbol.type.to_onnx(dim_names)))
        return name

    def raw_input(self, hint: str, elem_type: int) -> str:
        name = self.writer.names.fresh(hint)
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, []))
        return name

    def node(
        self,
        op_type: str,
        inputs: list[str],
        hint: str,
        n_outputs: int = 1,
        output_names: Sequence[str | None] | None = None,
        **attributes,
    ) -> list[str]:
        given = output_names or [None] * n_outputs
        outputs = [
            name or self.writer.names.fresh(f"{hint}_out" if len(given) == 1 else f"{hint}_out{k}")
            for k, name in enumerate(given)
        ]
        self.nodes.append(
            helper.make_node(
                op_type, inputs, outputs, name=self.writer.names.fresh(hint), **attributes
            )
        )
        self._produced.update(outputs)
        return outputs

    def output(self, symbol: Symbol | str, tensor_type: TensorType, name: str | None = None) -> str:
        """Make ``symbol`` an output of this graph (through an Identity when needed)."""
        source = symbol if isinstance(symbol, str) else self.name_of(symbol)
        if (
            (name is None or name == source)
            and source in self._produced
            and source not in self._output_names
        ):
            target = source
        else:
            target = name or self.writer.names.fresh(f"{source}_result")
            self.node("Identity", [source], "Identity", output_names=[target])
        self._output_names.add(target)
        self.outputs.append(helper.make_value_info(target, tensor_type.to_onnx()))
        return target

    def compute(self, roots: list[Symbol]) -> None:
        """Emit, in dependency order, every operation of this scope that ``roots`` need."""
        for op in _ops_in_order(self.scope, roots, self):
            self.writer.emit(op, self)

    def proto(self, name: str) -> onnx.GraphProto:
        return helper.make_graph(self.nodes, name, self.inputs, self.outputs)


def _ops_in_order(scope: Scope, roots: list[Symbol], graph: _Graph) -> list[Operation]:
    """Operations of ``scope`` reachable from ``roots`` (not yet bound), dependencies first."""

    def wanted(symbol: Symbol) -> bool:
        return (
            symbol.op.scope is scope
            and not isinstance(symbol.op, (FormalOp, InputOp))
            and graph.lookup(symbol) is None
        )

    return post_order(roots, lambda op: op.dependencies(), wanted)


class _Writer:
    def __init__(self) -> None:
        self.names = NameAllocator()  # unique model-wide: a body may not shadow an outer name
        #: names reserved for symbols that are outputs of the model
        self.preferred: dict[Symbol, str] = {}

    def output_names(self, symbols: Sequence[Symbol | None]) -> list[str | None]:
        return [None if s is None else self.preferred.pop(s, None) for s in symbols]

    def emit(self, op: Operation, graph: _Graph) -> None:
        if isinstance(op, OnnxOp):
            self._onnx_op(op, graph)
        elif isinstance(op, (ConstantOp, SharedOp)):  # a shared value not fed: its value now
            self._constant(op, graph)
        elif isinstance(op, LoopOp):
            self._loop(op, graph)
        else:
            raise AuthoringError(f"internal: cannot lower {op.describe()} here")

    def _constant(self, op: ConstantOp | SharedOp, graph: _Graph) -> None:
        """A Constant node, or the name of an equal constant this graph can already read."""
        symbol = op.outputs[0]
        preferred = self.output_names([symbol])[0]
        key = (op.value.dtype.str, op.value.shape, op.value.tobytes())
        known = graph.constant_named(key)
        if known is not None and preferred is None and symbol.name is None:
            graph.bound[symbol] = known
            return
        (name,) = graph.node(
            "Constant",
            [],
            _hint(op),
            output_names=[preferred],
            value=numpy_helper.from_array(op.value),
        )
        graph.bound[symbol] = name
        graph.constants.setdefault(key, name)

    def _onnx_op(self, op: OnnxOp, graph: _Graph) -> None:
        inputs = ["" if s is None else graph.name_of(s) for s in op.inputs]
        attributes = {
            k: numpy_helper.from_array(v) if isinstance(v, np.ndarray) else v
            for k, v in op.attributes.items()
        }
        names = graph.node(
            op.op_type,
            inputs,
            _hint(op),
            len(op.outputs),
            output_names=self.output_names(op.outputs),
            **attributes,
        )
        for symbol, name in zip(op.outputs, names, strict=True):
            graph.bound[symbol] = name

    def _final_names(self, op: LoopOp) -> list[str]:
        finals = self.output_names([s.final for s in op.states])
        steps = self.output_names([o.result for o in op.stacked])
        return [n or self.names.fresh(f"{op.name}_final") for n in finals] + [
            n or self.names.fresh(f"{op.name}_steps") for n in steps
        ]

    def _loop(self, op: LoopOp, graph: _Graph) -> None:
        body = _Graph(self, op.body, graph)
        if op.lowers_to_loop:
            node_inputs, attributes = self._loop_body(op, graph, body)
            op_type = "Loop"
        else:
            node_inputs, attributes = self._scan_body(op, graph, body)
            op_type = "Scan"
        outputs = self._final_names(op)
        graph.node(
            op_type,
            node_inputs,
            op.name,
            output_names=outputs,
            body=body.proto(self.names.fresh(f"{op.name}_body")),
            **attributes,
        )
        results = [s.final for s in op.states] + [o.result for o in op.stacked]
        for symbol, name in zip(results, outputs, strict=True):
            assert symbol is not None, "LoopOp sets every final value and stacked result"
            graph.bound[symbol] = name

    def _bind_states(self, op: LoopOp, body: _Graph) -> None:
        for state in op.states:
            body.bind_input(state.formal)
        for key, formal in op.replacements.items():
            body.bound[key] = body.bound[formal]

    def _state_and_step_outputs(self, op: LoopOp, body: _Graph) -> None:
        for state in op.states:
            body.output(state.next, state.next.type)
        for out in op.stacked:
            body.output(out.step_value, out.step_value.type)

    def _scan_body(self, op: LoopOp, graph: _Graph, body: _Graph):
        """Scan: states, then one scan input per sequence slice."""
        self._bind_states(op, body)
        for seq in op.sequences:
            body.bind_input(seq.formal)
        body.compute(op.body_roots())
        self._state_and_step_outputs(op, body)
        signature = ScanSignature(len(op.states), len(op.sequences), len(op.stacked))
        node_inputs = [""] * signature.num_node_inputs
        node_inputs[signature.node_states] = [graph.name_of(s.initial) for s in op.states]
        node_inputs[signature.node_scan_inputs] = [graph.name_of(s.source) for s in op.sequences]
        return node_inputs, {"num_scan_inputs": signature.num_scan_inputs}

    def _loop_body(self, op: LoopOp, graph: _Graph, body: _Graph):
        """Loop: iteration number, condition, states; elements gathered from the slices."""
        iteration = body.raw_input(f"{op.name}_iteration", TensorProto.INT64)
        keep_going = body.raw_input(f"{op.name}_cond_in", TensorProto.BOOL)
        self._bind_states(op, body)
        for seq in op.sequences:
            (name,) = body.node(
                "Gather",
                [self._rows(seq.source, graph), iteration],
                seq.formal.name or "element",
                axis=0,
            )
            body.bound[seq.formal] = name
        body.compute(op.body_roots())
        if op.until is None:
            condition = body.node("Identity", [keep_going], "keep_going")[0]
        else:
            condition = body.node("Not", [body.name_of(op.until)], "keep_going")[0]
        body.output(condition, TensorType(np.dtype(np.bool_), ()))
        self._state_and_step_outputs(op, body)
        trip = graph.name_of(op.trip_count) if op.trip_count is not None else ""
        start = ""
        if op.until is not None:
            (start,) = graph.node(
                "Constant", [], f"{op.name}_start", value=numpy_helper.from_array(np.array(True))
            )
        signature = LoopSignature(len(op.states), len(op.stacked))
        node_inputs = [""] * signature.num_node_inputs
        node_inputs[signature.TRIP_COUNT], node_inputs[signature.CONDITION] = trip, start
        node_inputs[signature.node_carried] = [graph.name_of(s.initial) for s in op.states]
        return node_inputs, {}

    def _rows(self, source: Symbol, graph: _Graph) -> str:
        """The rows a Loop body gathers from: an empty sequence gets one row of zeros.

        The Loop then runs zero times, but a run that learns the shapes of its
        outputs (the reference semantics, onnxruntime's rewrite) may read row 0.
        """
        name = graph.name_of(source)
        shape = source.static_shape
        if shape and shape[0] is not None and shape[0] > 0:
            return name
        first = graph.node("Shape", [name], f"{name}_length", start=0, end=1)[0]
        zero = graph.node(
            "Constant", [], "zero", value=numpy_helper.from_array(np.array([0], np.int64))
        )[0]
        empty = graph.node("Equal", [first, zero], f"{name}_is_empty")[0]
        extra = graph.node("Cast", [empty], f"{name}_extra_row", to=TensorProto.INT64)[0]
        pads = graph.node("Concat", [zero, extra], f"{name}_pads", axis=0)[0]
        axis = graph.node(
            "Constant", [], "axis_0", value=numpy_helper.from_array(np.array([0], np.int64))
        )[0]
        return graph.node("Pad", [name, pads, "", axis], f"{name}_rows")[0]


def _hint(op: Operation) -> str:
    name = op.outputs[0].name if op.outputs else None
    if name:
        return name
    if isinstance(op, OnnxOp):
        return op.op_type.lower()
    return "constant" if isinstance(op, ConstantOp) else "value"


def to_onnx(outputs: list[tuple[str, Symbol]], inputs: list[Symbol], name: str) -> onnx.ModelProto:
    """An ONNX model computing ``outputs`` (named) from the graph ``inputs``."""
    writer = _Writer()
    graph = _Graph(writer, ROOT, None)
    for out_name, symbol in outputs:
        if writer.names.taken(out_name):
            raise AuthoringError(f"two outputs are named '{out_name}'")
        writer.names.reserve(out_name)
        if symbol.op.scope is ROOT and not isinstance(symbol.op, InputOp):
            writer.preferred.setdefault(symbol, out_name)
    for symbol in inputs:
        if isinstance(symbol.op, SharedOp):  # fed by a function: any free name will do
            graph.bind_input(symbol, symbol.name or "shared", symbol.op.dim_names)
            continue
        if symbol.name is not None and writer.names.taken(symbol.name):
            raise AuthoringError(f"the input name '{symbol.name}' is also an output name")
        op = symbol.op
        assert isinstance(op, InputOp), "a graph input is an input() or a shared value"
        graph.bind_input(symbol, symbol.name, op.dim_names)
    graph.compute([s for _, s in outputs])
    for out_name, symbol in outputs:
        graph.output(symbol, symbol.type, out_name)
    model = helper.make_model(
        graph.proto(name),
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="mdf_loops.authoring",
    )
    model.ir_version = IR_VERSION
    return model

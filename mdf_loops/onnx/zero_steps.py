"""Rewrites that give onnxruntime the reference answer for loops that run zero times.

onnxruntime (1.31) differs from the reference semantics (:mod:`mdf_loops.ops`)
in two places, both when a loop runs no step at all:

* **A Scan over zero-length inputs** fails ("Invalid dim0_offset of 0").
* **A Loop that runs zero times** gives its scan outputs the element shape
  shape inference found, with every unknown dimension 0: ``(0, 0)`` where the
  reference gives ``(0, 3)``.

The reference semantics learn the element shapes of a zero-step loop from one
probe run of the body on the initial states (and on zeros for the elements of
the scan inputs), and return the initial states. Each such node is rewritten to
do the same, so that onnxruntime never runs a zero-length Scan::

    Scan(states, xs) -> If(len(xs) == 0,
                           then: (states, Slice(Scan(states, zeros of one row)).[0:0]),
                           else: Scan(states, xs))
    Loop(M, cond, states) -> If(M <= 0 or not cond,
                                then: (states, Slice(Loop(1, true, states)).[0:0]),
                                else: Loop(M, cond, states))

A Loop whose per-step outputs have a fully known shape is left alone (onnxruntime
is right then), and so is a node whose element types or ranks are unknown.
"""

from __future__ import annotations

import copy
import itertools

import numpy as np
import onnx
from onnx import helper, numpy_helper

from mdf_loops.errors import ModelError
from mdf_loops.model.signatures import (
    IfSignature,
    LoopSignature,
    ScanSignature,
    onnx_signature,
)
from mdf_loops.onnx.builder import NameAllocator, all_nodes, subgraphs

__all__ = ["probe_zero_steps"]

_DEFAULT_DOMAINS = ("", "ai.onnx")
#: Slice with inputs, ConstantOfShape and the If used here are all in opset 11
_MIN_OPSET = 11


def probe_zero_steps(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with each Scan and Loop wrapped as the module docstring shows.

    Returns ``model`` itself when no node needs it (else a rewritten copy).
    """
    opset = next((o.version for o in model.opset_import if o.domain in _DEFAULT_DOMAINS), 0)
    if opset < _MIN_OPSET or not any(_plan(n, {}) for n in all_nodes(model.graph)):
        return model
    rewritten = copy.deepcopy(model)
    rewriter = _Rewriter(NameAllocator.of_graph(rewritten.graph))
    rewriter.graph(rewritten.graph)
    if not rewriter.wrapped:
        return model
    return rewritten


def _attrs(node: onnx.NodeProto) -> dict[str, onnx.AttributeProto]:
    return {a.name: a for a in node.attribute}


def _elem_and_rank(value: onnx.ValueInfoProto) -> tuple[int, int | None]:
    tensor = value.type.tensor_type if value.type.HasField("tensor_type") else None
    if tensor is None or not tensor.elem_type:
        return 0, None
    return tensor.elem_type, len(tensor.shape.dim) if tensor.HasField("shape") else None


def _known_rank(value: onnx.ValueInfoProto) -> int:
    rank = _elem_and_rank(value)[1]
    assert rank is not None, f"'{value.name}': a planned rewrite knows every input's rank"
    return rank


def _static(value: onnx.ValueInfoProto) -> bool:
    tensor = value.type.tensor_type
    return tensor.HasField("shape") and all(d.HasField("dim_value") for d in tensor.shape.dim)


def _static_values(graph: onnx.GraphProto) -> dict[str, onnx.ValueInfoProto]:
    """The values of ``graph`` whose shapes are declared (inputs, value_info)."""
    return {
        v.name: v
        for v in itertools.chain(graph.input, graph.value_info)
        if v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape")
    }


def _signature(node: onnx.NodeProto) -> ScanSignature | LoopSignature | IfSignature | None:
    """The node's layout, None when its counts do not fit one (onnxruntime then says why)."""
    try:
        return onnx_signature(node)
    except ModelError:
        return None


def _never_empty(
    node: onnx.NodeProto,
    first_sequence: int,
    axes: list[int],
    known: dict[str, onnx.ValueInfoProto],
) -> bool:
    """True when a Scan's first scan input is declared with a positive length."""
    value = known.get(node.input[first_sequence])
    if value is None:
        return False
    dims = value.type.tensor_type.shape.dim
    axis = axes[0] if axes else 0
    if not -len(dims) <= axis < len(dims):
        return False
    dim = dims[axis]
    return dim.HasField("dim_value") and dim.dim_value > 0


def _plan(node: onnx.NodeProto, known: dict[str, onnx.ValueInfoProto]) -> bool:
    """True when ``node`` is a Scan or Loop this module rewrites (types all known)."""
    if (
        node.domain not in _DEFAULT_DOMAINS
        or node.op_type not in ("Scan", "Loop")
        or not all(node.output)
    ):
        return False
    signature = _signature(node)
    if signature is None:
        return False
    attrs = _attrs(node)
    body = attrs["body"].g
    if isinstance(signature, ScanSignature):
        if signature.sequence_lens:  # opset 8's batched Scan
            return False
        inputs_ok = all(
            _elem_and_rank(v)[1] is not None for v in body.input[signature.body_scan_inputs]
        )
        axes = list(attrs["scan_input_axes"].ints) if "scan_input_axes" in attrs else []
        return (
            inputs_ok
            and all(_elem_and_rank(v)[0] for v in body.output)
            and not _never_empty(node, signature.node_scan_inputs.start, axes, known)
        )
    if not isinstance(signature, LoopSignature):  # not reached: the op_type is Scan or Loop
        return False
    scan_outputs = body.output[signature.body_scan_outputs]
    bounded = any(name for name in node.input[: signature.node_carried.start])  # M or cond
    return (
        bounded
        and len(scan_outputs) > 0
        and not all(_static(v) for v in scan_outputs)
        and all(_elem_and_rank(v)[0] for v in body.output)
    )


class _Rewriter:
    def __init__(self, names: NameAllocator):
        self.names = names
        self.wrapped = 0

    def graph(self, graph: onnx.GraphProto) -> None:
        nodes: list[onnx.NodeProto] = []
        known = _static_values(graph)
        for node in graph.node:
            for g in subgraphs(node):
                self.graph(g)
            nodes.extend(self.wrap(node) if _plan(node, known) else [node])
        del graph.node[:]
        graph.node.extend(nodes)

    def const(self, value: np.ndarray, hint: str) -> tuple[str, onnx.NodeProto]:
        name = self.names.fresh(hint)
        return name, helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value))

    def wrap(self, node: onnx.NodeProto) -> list[onnx.NodeProto]:
        self.wrapped += 1
        body = _attrs(node)["body"].g
        signature = _signature(node)
        if isinstance(signature, ScanSignature):
            before, condition = self.scan_is_empty(node, signature)
            probe = self.scan_probe(node, signature)
            first_output = signature.body_state_outputs.start
        else:
            assert isinstance(signature, LoopSignature)  # _plan took only Scan and Loop
            before, condition = self.loop_is_empty(node)
            probe = self.loop_probe(node, signature)
            first_output = signature.body_carried_outputs.start
        element_types = body.output[first_output:]
        then_branch = self.branch(probe, node, signature, element_types, empty=True)
        else_branch = self.branch([node], node, signature, element_types, empty=False)
        wrapper = helper.make_node(
            "If",
            [condition],
            list(node.output),
            name=self.names.fresh(f"{node.name or node.op_type}_zero_steps"),
            then_branch=then_branch,
            else_branch=else_branch,
        )
        return before + [wrapper]

    # -- the conditions

    def scan_is_empty(self, node, signature: ScanSignature) -> tuple[list, str]:
        attrs = _attrs(node)
        axes = list(attrs["scan_input_axes"].ints) if "scan_input_axes" in attrs else []
        body = attrs["body"].g
        rank = _known_rank(body.input[signature.body_scan_inputs.start]) + 1
        axis = (axes[0] if axes else 0) % rank
        shape, length, zero, empty = (
            self.names.fresh(h)
            for h in ("scan_input_shape", "scan_length", "zero", "scan_is_empty")
        )
        index, index_node = self.const(np.array([axis], np.int64), "scan_axis")
        zero_name, zero_node = self.const(np.array([0], np.int64), zero)
        first_sequence = node.input[signature.node_scan_inputs.start]
        return [
            helper.make_node("Shape", [first_sequence], [shape]),
            index_node,
            helper.make_node("Gather", [shape, index], [length], axis=0),
            zero_node,
            helper.make_node("Equal", [length, zero_name], [empty + "_1"]),
            helper.make_node("Squeeze", [empty + "_1"], [empty]),
        ], empty

    def loop_is_empty(self, node) -> tuple[list, str]:
        nodes, tests = [], []
        trip = node.input[LoopSignature.TRIP_COUNT]
        cond = node.input[LoopSignature.CONDITION] if len(node.input) > 1 else ""
        if trip:
            one, one_node = self.const(np.array(1, np.int64), "one")
            test = self.names.fresh("no_trips")
            nodes += [one_node, helper.make_node("Less", [trip, one], [test])]
            tests.append(test)
        if cond:
            test = self.names.fresh("stopped_before_start")
            nodes.append(helper.make_node("Not", [cond], [test]))
            tests.append(test)
        if len(tests) == 2:
            either = self.names.fresh("zero_steps")
            nodes.append(helper.make_node("Or", tests, [either]))
            tests = [either]
        flat = self.names.fresh("zero_steps_scalar")
        shape, shape_node = self.const(np.zeros(0, np.int64), "scalar_shape")
        nodes += [shape_node, helper.make_node("Reshape", [tests[0], shape], [flat])]
        return nodes, flat

    # -- the probes: one step on the initial states

    def scan_probe(self, node, signature: ScanSignature) -> list[onnx.NodeProto]:
        attrs = _attrs(node)
        axes = list(attrs["scan_input_axes"].ints) if "scan_input_axes" in attrs else []
        body = attrs["body"].g
        nodes, inputs = [], list(node.input[signature.node_states])
        elements = body.input[signature.body_scan_inputs]
        for k, (name, element) in enumerate(
            zip(node.input[signature.node_scan_inputs], elements, strict=True)
        ):
            elem = _elem_and_rank(element)[0]
            rank = _known_rank(element) + 1
            axis = (axes[k] if k < len(axes) else 0) % rank
            one_hot = np.zeros(rank, np.int64)
            one_hot[axis] = 1
            bump, bump_node = self.const(one_hot, "one_row")
            shape, row_shape, zeros, probe = (
                self.names.fresh(h)
                for h in (f"{name}_shape", f"{name}_probe_shape", f"{name}_zeros", f"{name}_probe")
            )
            nodes += [
                bump_node,
                helper.make_node("Shape", [name], [shape]),
                helper.make_node("Add", [shape, bump], [row_shape]),
                helper.make_node("ConstantOfShape", [row_shape], [zeros]),
                helper.make_node("Cast", [zeros], [probe], to=elem),
            ]
            inputs.append(probe)
        return nodes + [self.copy_node(node, inputs)]

    def loop_probe(self, node, signature: LoopSignature) -> list[onnx.NodeProto]:
        one, one_node = self.const(np.array(1, np.int64), "one_trip")
        true, true_node = self.const(np.array(True), "start")
        inputs = [""] * signature.num_node_inputs
        inputs[signature.TRIP_COUNT] = one
        inputs[signature.CONDITION] = true if len(node.input) > 1 and node.input[1] else ""
        inputs[signature.node_carried] = node.input[signature.node_carried]
        return [one_node, true_node, self.copy_node(node, inputs)]

    def copy_node(self, node, inputs) -> onnx.NodeProto:
        probe = onnx.NodeProto()
        probe.CopyFrom(node)
        del probe.input[:]
        probe.input.extend(inputs)
        del probe.output[:]
        probe.output.extend(self.names.fresh(f"{o}_probe") for o in node.output)
        probe.name = self.names.fresh(f"{node.name or node.op_type}_probe")
        return probe

    # -- the branches

    def branch(
        self,
        nodes: list[onnx.NodeProto],
        node: onnx.NodeProto,
        signature: ScanSignature | LoopSignature,
        element_types,
        empty: bool,
    ) -> onnx.GraphProto:
        """A branch returning the states and the scan outputs of its loop node."""
        loop = nodes[-1]
        if not empty:  # the original node, its outputs renamed inside the branch
            loop = self.copy_node(node, list(node.input))
            loop.name = node.name  # the node itself: its name labels it in limit errors
            nodes = [loop]
        is_scan = isinstance(signature, ScanSignature)
        states = (
            signature.node_states
            if isinstance(signature, ScanSignature)
            else signature.node_carried
        )
        state_inputs = list(node.input[states])
        n_states = len(state_inputs)  # states come out first, then the scan outputs
        attrs = _attrs(node)
        out_axes = (
            list(attrs["scan_output_axes"].ints) if is_scan and "scan_output_axes" in attrs else []
        )
        nodes = list(nodes)
        outputs = []
        for k, produced in enumerate(loop.output):
            elem, element_rank = _elem_and_rank(element_types[k])
            result = self.names.fresh(f"{node.output[k]}_branch") if empty else ""
            if empty and k < n_states:
                nodes.append(helper.make_node("Identity", [state_inputs[k]], [result]))
            elif empty:
                j = k - n_states
                axis = out_axes[j] if j < len(out_axes) else 0
                if axis < 0 and element_rank is not None:
                    axis += element_rank + 1
                start, start_node = self.const(np.array([0], np.int64), "no_rows")
                axes, axes_node = self.const(np.array([axis], np.int64), "row_axis")
                nodes += [
                    start_node,
                    axes_node,
                    helper.make_node("Slice", [produced, start, start, axes], [result]),
                ]
            else:  # the node's own output leaves the branch: no copy
                result = produced
            outputs.append(helper.make_tensor_value_info(result, elem, None))
        return helper.make_graph(nodes, self.names.fresh("zero_steps_branch"), [], outputs)

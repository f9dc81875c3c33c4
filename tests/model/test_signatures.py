"""The operator signatures (mdf_loops/model/signatures/) against the ONNX spec's layouts.

The oracle is the ONNX conformance cases' own nodes: the counts of each node's and
body's inputs and outputs, and the element types the spec fixes (a Loop body's
iteration number is int64, its condition input and output bool; a Scan state keeps
its element type), plus the same node after import into MDF.
"""

from __future__ import annotations

import onnx
import pytest
from conftest import control_flow_cases, expression_node, loop_node, mdf_body
from onnx import TensorProto
from onnx import helper as oh

import mdf_loops
from mdf_loops.errors import ModelError
from mdf_loops.model.convention import function_parameter
from mdf_loops.model.signatures import (
    IfSignature,
    LoopSignature,
    ScanSignature,
    mdf_signature,
    onnx_signature,
)

CASES = sorted(control_flow_cases())


def _opset(model: onnx.ModelProto) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def _control_flow_nodes(graph: onnx.GraphProto):
    for node in graph.node:
        if node.op_type in ("Scan", "Loop", "If") and node.domain in ("", "ai.onnx"):
            yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _control_flow_nodes(attr.g)


def _elem(value: onnx.ValueInfoProto) -> int | None:
    """The element type a body value declares, None when it declares none."""
    if not value.type.HasField("tensor_type"):
        return None
    return value.type.tensor_type.elem_type or None


def _body(node: onnx.NodeProto, name: str) -> onnx.GraphProto:
    return next(a.g for a in node.attribute if a.name == name)


@pytest.mark.parametrize("name", CASES)
def test_conformance_nodes(name):
    model = control_flow_cases()[name].model
    opset = _opset(model)
    nodes = list(_control_flow_nodes(model.graph))
    assert nodes
    for node in nodes:
        signature = onnx_signature(node, opset)
        if node.op_type == "Scan":
            _check_scan(node, signature, opset)
        elif node.op_type == "Loop":
            _check_loop(node, signature)
        else:
            _check_if(node, signature)


def _check_scan(node, signature, opset):
    body = _body(node, "body")
    m = next(a.i for a in node.attribute if a.name == "num_scan_inputs")
    assert isinstance(signature, ScanSignature)
    assert signature.sequence_lens == (opset < 9)
    assert signature.num_scan_inputs == m
    assert signature.num_states == len(body.input) - m
    assert signature.num_node_inputs == len(node.input)
    assert signature.num_body_inputs == len(body.input)
    assert signature.num_body_outputs == len(body.output)
    assert len(node.output) <= signature.num_node_outputs
    inputs = list(node.input)
    assert inputs[signature.node_states] + inputs[signature.node_scan_inputs] == \
        inputs[1:] if opset < 9 else inputs
    # a state keeps its element type from one iteration to the next
    for given, returned in zip(body.input[signature.body_states], body.output[signature.body_state_outputs]):
        assert None in (_elem(given), _elem(returned)) or _elem(given) == _elem(returned)
    assert len(body.output[signature.body_scan_outputs]) == signature.num_scan_outputs


def _check_loop(node, signature):
    body = _body(node, "body")
    assert isinstance(signature, LoopSignature)
    assert _elem(body.input[LoopSignature.ITERATION]) in (TensorProto.INT64, None)
    assert _elem(body.input[LoopSignature.BODY_CONDITION]) in (TensorProto.BOOL, None)
    assert _elem(body.output[LoopSignature.CONDITION_OUTPUT]) in (TensorProto.BOOL, None)
    assert signature.num_node_inputs == len(node.input) == len(body.input)
    assert len(node.input[signature.node_carried]) == len(body.input[signature.body_carried]) \
        == len(body.input) - 2
    assert signature.num_body_outputs == len(body.output)
    assert len(node.output) == signature.num_node_outputs
    for given, returned in zip(body.input[signature.body_carried],
                               body.output[signature.body_carried_outputs]):
        assert None in (_elem(given), _elem(returned)) or _elem(given) == _elem(returned)


def _check_if(node, signature):
    assert isinstance(signature, IfSignature)
    assert signature.num_outputs == len(_body(node, "then_branch").output) \
        == len(_body(node, "else_branch").output) == len(node.output)
    assert len(node.input) == IfSignature.num_node_inputs


@pytest.mark.parametrize("name", CASES)
def test_mdf_node_has_the_onnx_nodes_signature(name):
    """The imported MDF loop nodes have the layout of the ONNX nodes they came from."""
    model = control_flow_cases()[name].model
    opset = _opset(model)
    expected = sorted(repr(onnx_signature(n, opset)) for n in model.graph.node
                      if n.op_type in ("Scan", "Loop", "If"))
    mdf = mdf_loops.onnx_to_mdf(model)
    actual = sorted(repr(mdf_signature(n, int(mdf.onnx_opset_version))) for n in mdf.graphs[0].nodes
                    if function_parameter(n) is not None
                    and function_parameter(n).function in ("onnx::Scan", "onnx::Loop", "onnx::If"))
    assert actual == expected


def test_positions():
    scan = ScanSignature(num_states=2, num_scan_inputs=1, num_scan_outputs=3)
    assert (scan.node_states, scan.node_scan_inputs) == (slice(0, 2), slice(2, 3))
    assert (scan.body_state_outputs, scan.body_scan_outputs) == (slice(0, 2), slice(2, 5))
    assert (scan.node_state_outputs, scan.node_scan_outputs) == (slice(0, 2), slice(2, 5))
    legacy = ScanSignature(2, 1, 3, sequence_lens=True)
    assert (legacy.node_states, legacy.node_scan_inputs, legacy.num_node_inputs) == \
        (slice(1, 3), slice(3, 4), 4)
    assert legacy.body_states == slice(0, 2)
    loop = LoopSignature(num_carried=2, num_scan_outputs=1)
    assert (loop.node_carried, loop.body_carried) == (slice(2, 4), slice(2, 4))
    assert (loop.body_carried_outputs, loop.body_scan_outputs) == (slice(1, 3), slice(3, 4))
    assert (loop.node_carried_outputs, loop.node_scan_outputs) == (slice(0, 2), slice(2, 3))
    assert ScanSignature.from_counts(3, 5, 1) == scan
    assert LoopSignature.from_counts(4, 4) == loop
    assert IfSignature.from_counts(0, 2, 0, 2) == IfSignature(2)


@pytest.mark.parametrize("counts, message", [
    ((2, 1, 3), "num_scan_inputs is 3"),
    ((2, 1, 0), "num_scan_inputs is 0"),
    ((3, 1, 1), "2 states need at least as many"),
])
def test_scan_counts_that_do_not_fit(counts, message):
    with pytest.raises(ModelError, match=message):
        ScanSignature.from_counts(*counts, where="node 's'")


def test_loop_and_if_counts_that_do_not_fit():
    with pytest.raises(ModelError, match="takes at least 2"):
        LoopSignature.from_counts(1, 1)
    with pytest.raises(ModelError, match="it needs at least 3"):
        LoopSignature.from_counts(4, 2)
    with pytest.raises(ModelError, match="then_branch has 1 formal input"):
        IfSignature.from_counts(1, 1, 0, 1)
    with pytest.raises(ModelError, match="else_branch returns 2 values but then_branch returns 1"):
        IfSignature.from_counts(0, 1, 0, 2)


def test_onnx_node_that_does_not_fit():
    body = oh.make_graph([oh.make_node("Identity", ["s"], ["s_out"])], "body",
                         [oh.make_tensor_value_info("s", TensorProto.FLOAT, [])],
                         [oh.make_tensor_value_info("s_out", TensorProto.FLOAT, [])])
    node = oh.make_node("Loop", ["", "", "a", "b"], ["y"], name="L", body=body)
    with pytest.raises(ModelError, match="Loop node 'L'.*takes at least 2"):
        onnx_signature(node)
    scan = oh.make_node("Scan", ["x"], ["y"], name="S", body=body)
    with pytest.raises(ModelError, match="Scan node 'S': Scan needs the attribute 'num_scan_inputs'"):
        onnx_signature(scan)
    with pytest.raises(ModelError, match="not a control-flow operator"):
        onnx_signature(oh.make_node("Relu", ["x"], ["y"]))


def test_mdf_node_that_does_not_fit():
    body = mdf_body("b", [expression_node("n", ["i", "c", "h"], {"c_out": "c", "h_out": "h"})],
                    ["i", "c", "h"], ["n.c_out", "n.h_out"])
    node = loop_node("loop", "Loop", {"v_initial": "[h0, h1]"}, {"body": body}, ["h0", "h1"], 2)
    with pytest.raises(ModelError, match="node .loop.*passes 2 loop-carried values"):
        mdf_signature(node)

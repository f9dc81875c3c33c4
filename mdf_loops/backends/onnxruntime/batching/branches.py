"""The batched forms of ``Scan`` and ``If``.

A ``Scan`` runs the same number of steps for every setting (the settings of a batch
share their shapes): its batched states carry the batch axis (a state becomes batched
where its body makes it so), a batched sequence ``[B, T, ...]`` is scanned as
``[T, B, ...]``, and batched scan outputs come back as ``[B, T, ...]``. An ``If``
whose condition every setting shares runs one branch for all; an output batched in
either branch is given the batch axis in both. An ``If`` whose condition differs
between settings is refused, as is a ``Scan`` with axes other than 0 (the exporter's
rewrites leave none) or opset 8's ``sequence_lens``.
"""

from __future__ import annotations

import onnx

from mdf_loops.backends.onnxruntime.batching.bodies import (
    batched_info,
    batched_value,
    body_scope,
    graph_of,
    renamed,
    stacked_names,
    transposed,
)
from mdf_loops.backends.onnxruntime.batching.scope import Scope, refused
from mdf_loops.model.signatures import IfSignature, ScanSignature
from mdf_loops.onnx.builder import subgraphs

__all__ = ["batched_scan", "batched_if"]


def batched_scan(node: onnx.NodeProto, scope: Scope) -> None:
    signature = ScanSignature.from_onnx(node)
    if signature.sequence_lens:
        raise refused(node, "it is opset 8's Scan (with sequence_lens)")
    for attr in node.attribute:
        if attr.name in ("scan_input_axes", "scan_output_axes") and any(attr.ints):
            raise refused(node, f"its {attr.name} are not all 0")
    body = next(subgraphs(node))
    ins, outs = list(body.input), list(body.output)
    states = list(node.input[signature.node_states])
    sequences = list(node.input[signature.node_scan_inputs])
    inner, flags, batched = _scan_body(scope, signature, body, states, sequences)
    for value in outs:
        if inner.is_ragged(value.name):
            raise refused(node, f"its body returns '{value.name}', whose length differs")
    new_inputs = [batched_info(v, scope.size) if v.name in batched else v for v in ins]
    new_outputs = []
    for value, flag in zip(outs[signature.body_state_outputs], flags, strict=True):
        name = batched_value(inner, value.name, node) if flag else value.name
        new_outputs.append(renamed(batched_info(value, scope.size) if flag else value, name))
    scans = outs[signature.body_scan_outputs]
    scan_flags = [inner.is_batched(v.name) for v in scans]
    new_outputs += [
        batched_info(v, scope.size) if f else v for v, f in zip(scans, scan_flags, strict=True)
    ]
    node_inputs = [
        batched_value(scope, s, node) if f else s for s, f in zip(states, flags, strict=True)
    ]
    for name in sequences:  # [B, T, ...] scanned along T
        if scope.is_batched(name):
            perm = [1, 0, *range(2, scope.rank(name, node) + 1)]
            name = scope.emit("Transpose", [name], perm=perm)
        node_inputs.append(name)
    node_outputs = list(node.output)
    state_outputs = node_outputs[signature.node_state_outputs]
    scope.batched.update(n for n, f in zip(state_outputs, flags, strict=True) if f and n)
    scan_outputs = node_outputs[signature.node_scan_outputs]
    stacked = stacked_names(scope, scan_outputs, scan_flags)
    _append(
        node,
        scope,
        node_inputs,
        state_outputs + stacked,
        {"body": graph_of(body, inner, new_inputs, new_outputs)},
    )
    transposed(node, scope, scan_outputs, stacked, scan_flags)


def _scan_body(scope: Scope, signature: ScanSignature, body, states, sequences):
    """The Scan's body rewritten with the states that differ between settings batched
    (those given batched, and those the body makes so: until nothing changes); the
    scope, each state's flag and the body inputs batched."""
    ins, outs = list(body.input), list(body.output)
    flags = [scope.is_batched(name) for name in states]
    scan_ins = ins[signature.body_scan_inputs]
    scanned = {v.name for v, s in zip(scan_ins, sequences, strict=True) if scope.is_batched(s)}
    while True:
        state_ins = zip(ins[signature.body_states], flags, strict=True)
        batched = scanned | {v.name for v, f in state_ins if f}
        inner = body_scope(body, scope, batched)
        returned = [inner.is_batched(v.name) for v in outs[signature.body_state_outputs]]
        wanted = [f or r for f, r in zip(flags, returned, strict=True)]
        if wanted == flags:
            return inner, flags, batched
        flags = wanted


def batched_if(node: onnx.NodeProto, scope: Scope) -> None:
    if scope.is_batched(node.input[0]):
        raise refused(node, "its condition differs between settings")
    branches = {attr.name: attr.g for attr in node.attribute if attr.name in IfSignature.BRANCHES}
    inners = {name: body_scope(graph, scope, set()) for name, graph in branches.items()}
    count = len(node.output)
    flags = [
        any(inner.is_batched(branches[b].output[k].name) for b, inner in inners.items())
        for k in range(count)
    ]
    new = {}
    for name, graph in branches.items():
        inner = inners[name]
        outputs = []
        for value, flag in zip(graph.output, flags, strict=True):
            if inner.is_ragged(value.name):
                raise refused(node, f"its branch returns '{value.name}', whose length differs")
            kept = batched_value(inner, value.name, node) if flag else value.name
            outputs.append(renamed(batched_info(value, scope.size) if flag else value, kept))
        new[name] = graph_of(graph, inner, list(graph.input), outputs)
    _append(node, scope, list(node.input), list(node.output), new)
    scope.batched.update(n for n, f in zip(node.output, flags, strict=True) if f and n)


def _append(node, scope: Scope, inputs: list[str], outputs: list[str], graphs: dict) -> None:
    """``node`` with new inputs, outputs and graph attributes."""
    new = onnx.NodeProto()
    new.CopyFrom(node)
    del new.input[:]
    new.input.extend(inputs)
    del new.output[:]
    new.output.extend(outputs)
    for attr in new.attribute:
        if attr.name in graphs:
            attr.g.CopyFrom(graphs[attr.name])
    scope.nodes.append(new)

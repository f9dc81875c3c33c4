"""The batched form of an ONNX ``Loop``: one loop runs every setting of the batch.

Carried values that differ between settings carry the batch axis. Where the condition
differs between settings (its initial value, or the one the body computes), the loop
runs while *any* setting goes on, and each setting keeps its own state::

    active = cond                         # [B]: which settings still run
    count = 0                             # [B]: how many iterations each ran
    for i in range(M):                    # M, the trip count, is shared
        if not any(active): break
        new, cond_out = body(i, active, carried)
        carried = where(active, new, carried)      # a finished setting keeps its values
        count += active
        active = active and cond_out

so every setting ends with the values it ends with when run alone. Its scan outputs
are stacked for every iteration the batch ran; ``count`` says how many of them are the
setting's own (:attr:`Scope.ragged`), and the stacked ``[T, B, ...]`` values are
transposed to ``[B, T, ...]``. A trip count that differs between settings is refused.
"""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

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
from mdf_loops.model.signatures import LoopSignature
from mdf_loops.onnx.builder import subgraphs

__all__ = ["batched_loop"]


def batched_loop(node: onnx.NodeProto, scope: Scope) -> None:
    signature = LoopSignature.from_onnx(node)
    inputs = list(node.input) + [""] * (signature.num_node_inputs - len(node.input))
    trip, cond = inputs[signature.TRIP_COUNT], inputs[signature.CONDITION]
    if trip and scope.is_batched(trip):
        raise refused(node, "its trip count differs between settings")
    body = next(subgraphs(node))
    stops = bool(cond) and scope.is_batched(cond)
    flags = [scope.is_batched(name) for name in inputs[signature.node_carried]]
    while True:  # which carried values differ between settings: until nothing changes
        carried = [value.name for value in body.input][signature.body_carried]
        batched = {name for name, flag in zip(carried, flags, strict=True) if flag}
        inner = body_scope(body, scope, batched | ({_condition_input(body)} if stops else set()))
        outputs = [value.name for value in body.output]
        stops = stops or inner.is_batched(outputs[signature.CONDITION_OUTPUT])
        returned = [inner.is_batched(o) for o in outputs[signature.body_carried_outputs]]
        wanted = (
            [True] * len(flags) if stops else [f or r for f, r in zip(flags, returned, strict=True)]
        )
        if wanted == flags and (not stops or inner.is_batched(_condition_input(body))):
            break
        flags = wanted
    for name in outputs[1:]:
        if inner.is_ragged(name):
            raise refused(node, f"its body returns '{name}', whose length differs between settings")
    if stops:
        _stopping_loop(node, scope, inner, signature)
    else:
        _shared_loop(node, scope, inner, signature, flags)


def _condition_input(body: onnx.GraphProto) -> str:
    return body.input[LoopSignature.BODY_CONDITION].name


def _shared_loop(node, scope: Scope, inner: Scope, signature: LoopSignature, flags) -> None:
    """A loop whose condition every setting shares: some carried values batched."""
    body = next(subgraphs(node))
    ins, outs = list(body.input), list(body.output)
    carried_in = ins[signature.body_carried]
    new_inputs = ins[:2] + [
        batched_info(v, scope.size) if f else v for v, f in zip(carried_in, flags, strict=True)
    ]
    new_outputs = [outs[0]]
    for value, flag in zip(outs[signature.body_carried_outputs], flags, strict=True):
        name = batched_value(inner, value.name, node) if flag else value.name
        new_outputs.append(renamed(batched_info(value, scope.size) if flag else value, name))
    scans = outs[signature.body_scan_outputs]
    scan_flags = [inner.is_batched(v.name) for v in scans]
    new_outputs += [
        batched_info(v, scope.size) if f else v for v, f in zip(scans, scan_flags, strict=True)
    ]
    inputs = list(node.input) + [""] * (signature.num_node_inputs - len(node.input))
    carried = [
        batched_value(scope, name, node) if flag else name
        for name, flag in zip(inputs[signature.node_carried], flags, strict=True)
    ]
    node_outputs = list(node.output) + [""] * (signature.num_node_outputs - len(node.output))
    carried_outputs = node_outputs[signature.node_carried_outputs]
    scope.batched.update(name for name, f in zip(carried_outputs, flags, strict=True) if f and name)
    body_graph = graph_of(body, inner, new_inputs, new_outputs)
    scan_outputs = node_outputs[signature.node_scan_outputs]
    stacked = stacked_names(scope, scan_outputs, scan_flags)
    _append_loop(node, scope, inputs[:2] + carried, carried_outputs + stacked, body_graph)
    transposed(node, scope, scan_outputs, stacked, scan_flags)


def _stopping_loop(node, scope: Scope, inner: Scope, signature: LoopSignature) -> None:
    """A loop whose condition differs between settings: every value batched, a finished
    setting's values kept, each setting's iterations counted (module docstring)."""
    body = next(subgraphs(node))
    ins, outs = list(body.input), list(body.output)
    size = scope.size
    any_in = helper.make_tensor_value_info(scope.names.fresh("batch_any"), TensorProto.BOOL, [])
    count_in = helper.make_tensor_value_info(
        scope.names.fresh("batch_count"), TensorProto.INT64, [size]
    )
    active = ins[signature.BODY_CONDITION]
    active_info = helper.make_tensor_value_info(active.name, TensorProto.BOOL, [size])
    carried_in = ins[signature.body_carried]
    body_outputs = _freezing_body(node, inner, signature, active.name, count_in.name)
    infos = [batched_info(v, size) for v in outs[signature.body_carried_outputs]]
    scan_infos = [batched_info(v, size) for v in outs[signature.body_scan_outputs]]
    new_outputs = [
        renamed(info, name)
        for info, name in zip(
            [outs[0], *infos, active_info, count_in, *scan_infos], body_outputs, strict=True
        )
    ]
    new_inputs = [
        ins[0],
        any_in,
        *(batched_info(v, size) for v in carried_in),
        active_info,
        count_in,
    ]
    inputs = list(node.input) + [""] * (signature.num_node_inputs - len(node.input))
    trip, cond = inputs[signature.TRIP_COUNT], inputs[signature.CONDITION]
    if not cond:
        cond = scope.emit(
            "Constant", [], value=helper.make_tensor("v", TensorProto.BOOL, [], [True])
        )
        scope.shapes[cond] = ()
    active_init = batched_value(scope, cond, node)
    carried = [batched_value(scope, name, node) for name in inputs[signature.node_carried]]
    zeros = scope.emit(
        "Constant", [], value=helper.make_tensor("v", TensorProto.INT64, [size], [0] * size)
    )
    node_outputs = list(node.output) + [""] * (signature.num_node_outputs - len(node.output))
    carried_outputs = node_outputs[signature.node_carried_outputs]
    scope.batched.update(name for name in carried_outputs if name)
    scan_outputs = node_outputs[signature.node_scan_outputs]
    flags = [True] * len(scan_outputs)
    stacked = stacked_names(scope, scan_outputs, flags)
    count = scope.names.fresh("batch_iterations")
    final_active = scope.names.fresh("batch_active")
    body_graph = graph_of(body, inner, new_inputs, new_outputs)
    loop_inputs = [trip, _any(scope, active_init), *carried, active_init, zeros]
    _append_loop(
        node, scope, loop_inputs, [*carried_outputs, final_active, count, *stacked], body_graph
    )
    transposed(node, scope, scan_outputs, stacked, flags)
    scope.ragged.update({name: count for name in scan_outputs if name})


def _freezing_body(node, inner: Scope, signature, active: str, count_in: str) -> list[str]:
    """The body's outputs: condition (any setting goes on), carried values (kept where a
    setting had finished), which settings go on, iterations per setting, scan outputs."""
    body = next(subgraphs(node))
    ins, outs = list(body.input), list(body.output)
    condition = batched_value(inner, outs[0].name, node)
    carried = []
    for given, value in zip(
        ins[signature.body_carried], outs[signature.body_carried_outputs], strict=True
    ):
        new = batched_value(inner, value.name, node)
        rank = inner.rank(given.name, node)
        mask = inner.unsqueezed(active, list(range(1, 1 + rank)))
        carried.append(inner.emit("Where", [mask, new, given.name]))
    active_out = inner.emit("And", [active, condition])
    ran = inner.emit("Cast", [active], to=TensorProto.INT64)
    count_out = inner.emit("Add", [count_in, ran])
    going = inner.emit("Cast", [active_out], to=TensorProto.INT64)
    any_out = inner.emit(
        "Cast", [inner.emit("ReduceMax", [going], keepdims=0)], to=TensorProto.BOOL
    )
    scans = [batched_value(inner, v.name, node) for v in outs[signature.body_scan_outputs]]
    return [any_out, *carried, active_out, count_out, *scans]


def _any(scope: Scope, active: str) -> str:
    """Whether any setting of ``active`` ([B] booleans) goes on, as a boolean scalar."""
    going = scope.emit("Cast", [active], to=TensorProto.INT64)
    return scope.emit("Cast", [scope.emit("ReduceMax", [going], keepdims=0)], to=TensorProto.BOOL)


def _append_loop(node, scope: Scope, inputs: list[str], outputs: list[str], body) -> None:
    new = onnx.NodeProto()
    new.CopyFrom(node)
    del new.input[:]
    new.input.extend(inputs)
    del new.output[:]
    new.output.extend(outputs)
    for attr in new.attribute:
        if attr.name == "body":
            attr.g.CopyFrom(body)
    scope.nodes.append(new)

"""ONNX export of the loop nodes: Scan, Loop and If with their bodies as subgraphs.

Each body is exported by the same exporter as the enclosing graph, with its
formal inputs typed from the node's inputs (positions from
:mod:`mdf_loops.model.signatures`); the node's output types are then completed
from the exported body, which ONNX's inference cannot see into.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx
from modeci_mdf.mdf import Graph
from onnx import TypeProto

from mdf_loops.errors import ModelError
from mdf_loops.model.convention import BODY_ATTRIBUTES, body_graph, body_signature
from mdf_loops.model.signatures import LoopSignature, ScanSignature, Signature, mdf_signature
from mdf_loops.onnx.builder import GraphBuilder, Weak
from mdf_loops.onnx.export_items import Outputs, output_names
from mdf_loops.onnx.expressions import stacked
from mdf_loops.onnx.types import (
    check_state_types,
    control_flow_output_types,
    drop_axis,
    has_shape,
    known_type,
    loosened,
    tensor_type,
    without_shape,
)

__all__ = ["export_control_flow"]

#: how often a Loop body is re-exported with looser carried types before they are declared shapeless
_LOOSENING_ROUNDS = 3


def export_control_flow(
    exporter, node, op_type, inputs, attributes, env, builder, where
) -> Outputs:
    """Export an ``onnx::Scan``/``Loop``/``If`` call with its bodies; ``exporter`` is the
    :class:`~mdf_loops.onnx.export_graph.Exporter` exporting the enclosing graph."""
    bodies = _body_graphs(node, op_type, where)
    signature = mdf_signature(node, exporter.opset)
    types = [builder.types.get(i) for i in inputs]
    body_inputs = _body_input_types(signature, types, attributes, where)
    for attr, body in bodies.items():
        attributes[attr] = _export_body(
            exporter, body, signature, body_inputs, env, builder, f"{where} {attr}"
        )
    body = next(iter(attributes[a] for a in BODY_ATTRIBUTES[op_type]))
    names = builder.op(
        op_type,
        inputs,
        hint=node.id,
        doc_string=f"MDF node {node.id}",
        **attributes,
        output_names=output_names(
            exporter.names,
            node,
            next(p.id for p in node.parameters if p.function == f"onnx::{op_type}"),
            signature.num_node_outputs,
        ),
    )
    exporter.labels[builder.nodes[-1].name] = node.id
    # ONNX's inference cannot see the bodies' outer-scope values and drops the shapes of
    # loop-carried values: complete what it left unknown from the exported bodies
    derived = control_flow_output_types(signature, body, attributes, types)
    for name, t in zip(names, derived, strict=True):
        if t is not None and not has_shape(builder.types.get(name)):
            builder.types[name] = t
    return Outputs(tuple(names))


def _body_graphs(node, op_type: str, where: str) -> dict[str, Graph]:
    """The loop node's bodies (an If's two branches), by attribute."""
    bodies = {}
    params = {p.id: p for p in node.parameters}
    for attr in BODY_ATTRIBUTES[op_type]:
        if attr not in params:
            raise ModelError(f"{where}: missing body parameter '{attr}'")
        bodies[attr] = body_graph(params[attr].value, f"{where} parameter '{attr}'")
    return bodies


def _body_input_types(signature: Signature, types, attributes, where: str) -> list[TypeProto]:
    """The types of a body's formal inputs, from the node's input types."""
    if isinstance(signature, ScanSignature):
        return _scan_body_types(signature, types, attributes, where)
    if isinstance(signature, LoopSignature):
        body_inputs = [tensor_type(np.int64, ())] * signature.num_body_inputs
        body_inputs[signature.BODY_CONDITION] = tensor_type(np.bool_, ())
        body_inputs[signature.body_carried] = [
            known_type(t, where) for t in types[signature.node_carried]
        ]
        return body_inputs
    return []


def _export_body(
    exporter,
    body: Graph,
    signature: Signature,
    body_inputs: list[TypeProto],
    env: dict,
    builder: GraphBuilder,
    owner: str,
) -> onnx.GraphProto:
    """One body exported with its formal inputs of ``body_inputs``, reading the enclosing
    graph's values from ``env``; a state must keep its type through an iteration."""
    outer = {}
    for port_id in body_signature(body).outer_scope_inputs:
        if port_id in env:
            # a constant stays weak inside the body
            outer[port_id] = stacked(env[port_id], builder, f"{owner} outer '{port_id}'")
    if isinstance(signature, LoopSignature):
        exported = _loop_body(exporter, body, signature, body_inputs, outer, builder, owner)
        check_state_types(
            exported, body, signature.body_carried, signature.body_carried_outputs, owner
        )
    else:
        exported = exporter.body_graph(body, body_inputs, outer, builder.types, owner)
    if isinstance(signature, ScanSignature):
        check_state_types(
            exported, body, signature.body_states, signature.body_state_outputs, owner
        )
    return exported


def _loop_body(
    exporter,
    body: Graph,
    signature: LoopSignature,
    body_inputs: list[TypeProto],
    outer: Mapping[str, str | Weak],
    builder: GraphBuilder,
    owner: str,
) -> onnx.GraphProto:
    """A Loop body whose carried input types admit every iteration's values.

    A loop-carried value may change shape from one iteration to the next (a
    growing sequence, a fixed size the body computes): the body is exported
    again with the carried types loosened to what holds for both the given and
    the returned value, until they agree, or with no shape at all.
    """
    carried = signature.body_carried
    given = list(body_inputs)
    before = exporter.names.mark()  # each round names the body's values as the first did
    for _ in range(_LOOSENING_ROUNDS):
        exporter.names.rewind(before)
        exported = exporter.body_graph(body, given, outer, builder.types, owner)
        returned = [o.type for o in exported.output[signature.body_carried_outputs]]
        looser = list(given)
        looser[carried] = [loosened(g, r) for g, r in zip(given[carried], returned, strict=True)]
        if looser == given:
            return exported
        given = looser
    given[carried] = [without_shape(t, owner) for t in given[carried]]
    exporter.names.rewind(before)
    return exporter.body_graph(body, given, outer, builder.types, owner)


def _scan_body_types(signature: ScanSignature, types, attributes, where) -> list[TypeProto]:
    m, legacy = signature.num_scan_inputs, signature.sequence_lens
    values = types[signature.node_values]
    n = signature.num_states
    _check_axes_counts(signature, attributes, where)
    axes = list(attributes.get("scan_input_axes") or [0] * m)
    result = []
    for k, t in enumerate(values):
        if t is None:
            raise ModelError(
                f"{where}: the type of input {k} is unknown; declare the input "
                "port's type or pass example_inputs"
            )
        if legacy:
            t = drop_axis(t, 0)
        result.append(t if k < n else drop_axis(t, axes[k - n] if not legacy else 0))
    return result


def _check_axes_counts(signature: ScanSignature, attributes, where) -> None:
    """A ModelError when scan_input_axes or scan_output_axes lists another number of axes
    than the Scan has scan inputs or scan outputs."""
    for name, expected, what in (
        ("scan_input_axes", signature.num_scan_inputs, "scan input"),
        ("scan_output_axes", signature.num_scan_outputs, "scan output"),
    ):
        axes = attributes.get(name)
        if axes and len(axes) != expected:
            raise ModelError(
                f"{where}: {name} has {len(axes)} entries, expected {expected} "
                f"(one per {what}); give one axis per {what}, or leave it out for axis 0"
            )

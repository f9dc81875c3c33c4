"""ONNX export of one MDF function call: an ``onnx::<Op>`` call or an MDF standard function.

An ``onnx::<Op>`` call becomes that ONNX node, its inputs typed as the operator's
schema requires and its attributes taken from the node's parameters of the same
names; ``onnx::Scan``/``Loop``/``If`` go to :mod:`mdf_loops.onnx.export_loops`. A
standard function (``linear``, ``logistic``, ...) becomes the ONNX nodes of its
expression. ``exporter`` is the :class:`~mdf_loops.onnx.export_graph.Exporter`
exporting the enclosing graph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import onnx
from modeci_mdf.mdf import Node

from mdf_loops.errors import ModelError
from mdf_loops.model.convention import BODY_ATTRIBUTES, quoted_name, variadic_items
from mdf_loops.onnx.attributes import (
    attribute_value,
    is_attribute_text,
    schema_string_attributes,
)
from mdf_loops.onnx.builder import GraphBuilder, Weak
from mdf_loops.onnx.domains import DEFAULT, OperatorDomain
from mdf_loops.onnx.export_items import Outputs, output_names, outputs_used
from mdf_loops.onnx.export_loops import export_control_flow
from mdf_loops.onnx.expressions import translate
from mdf_loops.onnx.types import VECTOR_INPUTS, as_vector, conformed, required_elem_type

if TYPE_CHECKING:
    from mdf_loops.onnx.export_graph import Exporter

__all__ = ["onnx_call", "standard_call"]


def standard_call(exporter: Exporter, node, item_id, function, args, env, builder) -> Any:
    """The value of the MDF standard function ``function`` called by ``item_id``."""
    # modeci-mdf's registry imports torch when it is installed: read only when a model calls it
    from modeci_mdf.functions.standard import mdf_functions

    if function not in mdf_functions:
        raise ModelError(f"node '{node.id}' parameter '{item_id}': unknown function '{function}'")
    spec = mdf_functions[function]
    local = dict(env)
    for name, arg in args.items():
        local[name] = exporter.expression(
            arg, env, builder, f"node '{node.id}' parameter '{item_id}' arg '{name}'"
        )
    missing = [a for a in spec["arguments"] if a not in local]
    if missing:
        raise ModelError(f"node '{node.id}' parameter '{item_id}': {function} needs {missing}")
    return translate(
        spec["expression_string"],
        local,
        builder,
        f"node '{node.id}' parameter '{item_id}' ({function})",
    )


def onnx_call(
    exporter: Exporter,
    node,
    item_id,
    op_type,
    args,
    env,
    builder,
    domain: OperatorDomain = DEFAULT,
) -> Any:
    """The ONNX node of the call ``item_id`` of ``op_type`` (in ``domain``): its output
    name, or its :class:`Outputs` when the operator has several."""
    where = f"node '{node.id}' function '{item_id}' ({domain.function(op_type)})"
    version = exporter.version_of(domain)
    try:
        schema = onnx.defs.get_schema(op_type, version, domain.name)
    except onnx.defs.SchemaError:
        raise ModelError(
            f"{where}: no such operator in opset {version} of domain '{domain.label}'"
        ) from None
    exporter.domains_used.add(domain)
    inputs = _call_inputs(exporter, schema, args, env, builder, where)
    attributes = _call_attributes(node, schema, op_type, args, env, builder)
    if op_type in BODY_ATTRIBUTES and domain is DEFAULT:
        return export_control_flow(exporter, node, op_type, inputs, attributes, env, builder, where)
    n_outputs = outputs_used(node, item_id, schema)
    names = builder.op(
        op_type,
        inputs,
        hint=node.id,
        domain=domain.name,
        **attributes,
        output_names=output_names(exporter.names, node, item_id, n_outputs),
    )
    return names[0] if schema.max_output == 1 else Outputs(tuple(names))


def _call_inputs(
    exporter: Exporter, schema, args: dict, env: dict, builder: GraphBuilder, where: str
) -> list[str]:
    """The node's inputs, one per formal input of ``schema`` (``""`` when not given, each
    item of a variadic one), of the element types the schema requires."""
    inputs: list[str] = []
    constraint_of: list[str] = []
    for formal in schema.inputs:
        if formal.name not in args:
            inputs.append("")
            constraint_of.append(formal.type_str)
            continue
        expr = args[formal.name]
        if formal.option == onnx.defs.OpSchema.FormalParameterOption.Variadic:
            try:
                items = variadic_items(expr) if isinstance(expr, str) else None
            except SyntaxError:
                items = None
            items = items if items is not None else [expr]
            for item in items:
                named = quoted_name(item)  # modeci-mdf's "['_59', '_61']"
                item = named if named is not None and named in env else item
                inputs.append(exporter.expression(item, env, builder, where))
                constraint_of.append(formal.type_str)
        else:
            value = exporter.expression(expr, env, builder, where)
            inputs.append(as_vector(builder, value) if formal.name in VECTOR_INPUTS else value)
            constraint_of.append(formal.type_str)
    inputs = _strong_inputs(builder, inputs, constraint_of)
    inputs = [
        conformed(builder, value, required_elem_type(schema, constraint))
        for value, constraint in zip(inputs, constraint_of, strict=True)
    ]
    while len(inputs) > schema.min_input and inputs[-1] == "":  # Loop keeps its cond
        inputs.pop()
    return inputs


def _call_attributes(
    node: Node, schema, op_type: str, args: dict, env: dict, builder: GraphBuilder
) -> dict[str, Any]:
    """The operator's attributes from the call's args of the same names, as modeci-mdf's
    engine passes them (PsyNeuLink's ``"axes": 0`` before opset 13), else from the node's
    parameters of the same names (bodies aside); an expression must be known at export
    time; the text of a string attribute (``"constant"``) is that text."""
    attributes = {}
    texts = schema_string_attributes(schema)
    for name in schema.attributes:
        if name in BODY_ATTRIBUTES.get(op_type, ()):
            continue
        if name in args:
            value = args[name]
        else:
            param = next((p for p in node.parameters if p.id == name), None)
            value = None if param is None else param.value
        if value is None:
            continue
        if is_attribute_text(name, value, texts, env.keys() | args.keys()):
            pass  # the attribute's own text, not a name to read
        elif isinstance(value, str):
            weak = translate(value, env, builder, f"node '{node.id}' attribute '{name}'")
            if not isinstance(weak, Weak):
                raise ModelError(
                    f"node '{node.id}': attribute '{name}' must be known at export time"
                )
            value = weak.value
        attributes[name] = attribute_value(schema.attributes[name].type, value, op_type, name)
    return attributes


def _strong_inputs(builder, inputs: list, constraints: list[str]) -> list[str]:
    """Weak values as tensors of the type of another input of the same type constraint."""
    result = []
    for value, constraint in zip(inputs, constraints, strict=True):
        if isinstance(value, Weak):
            like = next(
                (
                    v
                    for v, c in zip(inputs, constraints, strict=True)
                    if isinstance(v, str) and v and c == constraint
                ),
                None,
            )
            value = builder.strong(value, like)
        result.append(value)
    return result

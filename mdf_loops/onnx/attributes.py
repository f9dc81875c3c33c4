"""MDF parameter values as the values of ONNX attributes (import, export and the
scheduler's kernels read them the same way), and which text in a node is an attribute's.

A node that calls an ONNX operator passes it, as modeci-mdf's engine does, the
call's arguments and the node's parameters named like the operator's attributes.
modeci-mdf's ``pytorch_to_mdf`` writes a string attribute as bare text
(``"mode": "constant"`` beside an ``onnx::Pad`` call), where mdf-loops' importer
writes a one-element list (``["constant"]``). Bare text that is one name, in a
parameter or argument named like a ``STRING`` attribute of an operator the node
calls, and that names nothing the node binds, is that attribute's value (data),
not an expression (:func:`is_attribute_text`); every other bare text stays an
expression.
"""

from __future__ import annotations

import copy
import functools
import keyword
from collections.abc import Container, Iterable, Mapping
from typing import Any

import numpy as np
import onnx
import onnx.defs
from google.protobuf import json_format
from onnx import AttributeProto, numpy_helper

from mdf_loops.errors import ModelError
from mdf_loops.model.values import decode_tensor, is_encoded_tensor
from mdf_loops.onnx.domains import domain_of_function

__all__ = [
    "attribute_value",
    "string_attribute",
    "string_attributes",
    "schema_string_attributes",
    "is_attribute_text",
    "attribute_texts_as_lists",
]


def attribute_value(attr_type, value, op_type: str, name: str) -> Any:
    """An MDF parameter value as the Python value ``onnx.helper.make_attribute`` expects."""
    T = AttributeProto.AttributeType
    try:
        if attr_type == T.INT:
            return int(np.asarray(value).reshape(()))
        if attr_type == T.FLOAT:
            return float(np.asarray(value).reshape(()))
        if attr_type == T.STRING:
            return string_attribute(value)
        if attr_type == T.INTS:
            return [int(v) for v in np.asarray(value).reshape(-1)]
        if attr_type == T.FLOATS:
            return [float(v) for v in np.asarray(value).reshape(-1)]
        if attr_type == T.STRINGS:
            return [str(v) for v in np.asarray(value).reshape(-1)]
        if attr_type == T.TENSOR:
            array = decode_tensor(value) if is_encoded_tensor(value) else np.asarray(value)
            return numpy_helper.from_array(array)
        if attr_type == T.TYPE_PROTO:
            return json_format.ParseDict(value, onnx.TypeProto())
    except (TypeError, ValueError, json_format.ParseError) as exc:
        raise ModelError(
            f"parameter '{name}' of onnx::{op_type}: cannot read {value!r} as "
            f"{AttributeProto.AttributeType.Name(attr_type)}: {exc}"
        ) from exc
    raise ModelError(
        f"parameter '{name}' of onnx::{op_type}: attributes of type "
        f"{AttributeProto.AttributeType.Name(attr_type)} are not supported"
    )


def string_attribute(value: Any) -> str:
    """A string attribute: stored as a one-element list (the engine refuses bare strings)."""
    array = np.asarray(value)
    if array.size != 1:
        raise ValueError("expected one string")
    item = array.reshape(-1)[0]
    return item.decode() if isinstance(item, bytes) else str(item)


@functools.lru_cache(maxsize=1024)
def _string_attributes_of(function: str) -> frozenset[str]:
    found = domain_of_function(function)
    if found is None:
        return frozenset()
    domain, op_type = found
    try:
        schema = onnx.defs.get_schema(op_type, domain.name)
    except onnx.defs.SchemaError:
        return frozenset()
    return schema_string_attributes(schema)


def schema_string_attributes(schema: onnx.defs.OpSchema) -> frozenset[str]:
    """The names of the ``STRING`` attributes of an operator's ``schema``."""
    string = AttributeProto.AttributeType.STRING
    return frozenset(name for name, attr in schema.attributes.items() if attr.type == string)


def string_attributes(functions: Iterable[Any]) -> frozenset[str]:
    """The names of the ``STRING`` attributes of the ONNX operators among the ``function``
    fields ``functions`` (``["onnx::Pad"]`` gives ``{"mode"}``); others give none."""
    names: frozenset[str] = frozenset()
    for function in functions:
        if isinstance(function, str):
            names |= _string_attributes_of(function)
    return names


def is_attribute_text(
    name: Any, value: Any, attributes: frozenset[str], scope: Container[str]
) -> bool:
    """Whether ``value``, of the parameter or argument ``name``, is the text of a string
    attribute: one name (``"constant"``), ``name`` one of the ``attributes`` of
    :func:`string_attributes`, and no name of ``scope`` (the node's ports, parameters,
    functions and the call's arguments), which it would read."""
    return (
        isinstance(value, str)
        and name in attributes
        and value.isascii()
        and value.isidentifier()
        and not keyword.iskeyword(value)
        and value not in scope
    )


def attribute_texts_as_lists(node: Any) -> Any:
    """``node`` itself when it holds no text of a string attribute (:func:`is_attribute_text`),
    else a copy whose parameters and functions hold each such text as a one-element list
    (``["reflect"]``: the form mdf-loops' importer writes, which modeci-mdf's engine
    takes as data where it would read bare text as a name)."""
    items = [*node.parameters, *node.functions]
    attributes = string_attributes(getattr(item, "function", None) for item in items)
    if not attributes:
        return node
    names = {port.id for port in node.input_ports} | {item.id for item in items}
    copied = [_texts_as_lists(item, attributes, names) for item in items]
    if all(new is old for new, old in zip(copied, items, strict=True)):
        return node
    node = copy.copy(node)
    node.parameters = copied[: len(node.parameters)]
    node.functions = copied[len(node.parameters) :]
    return node


def _texts_as_lists(item: Any, attributes: frozenset[str], names: set[str]) -> Any:
    args = item.args if isinstance(item.args, Mapping) else {}
    scope = names | set(args)
    value = getattr(item, "value", None)
    texts = {k for k, v in args.items() if is_attribute_text(k, v, attributes, scope)}
    own = is_attribute_text(item.id, value, attributes, scope)
    if not texts and not own:
        return item
    item = copy.copy(item)
    if own:
        item.value = [value]
    if texts:
        item.args = {k: [v] if k in texts else v for k, v in args.items()}
    return item

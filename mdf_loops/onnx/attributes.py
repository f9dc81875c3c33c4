"""MDF parameter values as the values of ONNX attributes (import, export and the
scheduler's kernels read them the same way)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from google.protobuf import json_format
from onnx import AttributeProto, numpy_helper

from mdf_loops.errors import ModelError
from mdf_loops.model.values import decode_tensor, is_encoded_tensor

__all__ = ["attribute_value", "string_attribute"]


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

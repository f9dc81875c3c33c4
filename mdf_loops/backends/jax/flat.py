"""Values in and out of a lowered JAX function: user inputs typed as the model declares
them, constant inputs as cache keys, and outputs (sequences, optionals, loop outputs in
buffers) flattened into the arrays JAX returns and rebuilt after."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from mdf_loops.backends.jax.values import Opt, Ragged, np_dtype

__all__ = ["feed_value", "is_discrete", "static_key", "flatten", "unflatten"]


def feed_value(value: Any, type_proto: onnx.TypeProto) -> Any:
    """A user value as the lowered function takes an input of ``type_proto``."""
    kind = type_proto.WhichOneof("value")
    if kind == "sequence_type":
        return [feed_value(v, type_proto.sequence_type.elem_type) for v in value]
    if kind == "optional_type":
        return Opt(None if value is None else feed_value(value, type_proto.optional_type.elem_type))
    array = np.asarray(value)
    if kind == "tensor_type" and type_proto.tensor_type.elem_type:
        array = array.astype(np_dtype(type_proto.tensor_type.elem_type), copy=False)
    return array


def is_discrete(value: Any) -> bool:
    """Whether ``value`` holds only integers and booleans (taken as constants at level 1)."""
    if isinstance(value, list):
        return all(is_discrete(v) for v in value)
    if isinstance(value, Opt):
        return value.value is None or is_discrete(value.value)
    return np.asarray(value).dtype.kind in "biu"


def static_key(static: Mapping[str, Any]) -> tuple:
    """Inputs taken as constants, as a key of what was compiled for them."""

    def one(v):
        if isinstance(v, list):
            return tuple(one(x) for x in v)
        if isinstance(v, Opt):
            return ("opt", None if v.value is None else one(v.value))
        return (v.dtype.str, v.shape, v.tobytes())

    return tuple((k, one(v)) for k, v in sorted(static.items()))


def flatten(outputs: Mapping[str, Any], layout: list) -> list:
    """Arrays for JAX to return; ``layout`` records how to rebuild the values."""
    flat: list = []
    for name, value in outputs.items():
        layout.append((name, _flatten_one(value, flat)))
    return flat


def _flatten_one(value: Any, flat: list) -> Any:
    if isinstance(value, Ragged):
        flat += [value.buffer, value.count]
        return ("ragged", len(flat) - 2)
    if isinstance(value, list):
        return ("list", [_flatten_one(v, flat) for v in value])
    if isinstance(value, Opt):
        return ("opt", None if value.value is None else _flatten_one(value.value, flat))
    flat.append(value)
    return ("array", len(flat) - 1)


def unflatten(flat: list, layout: list) -> dict[str, Any]:
    """The values :func:`flatten` took apart, as numpy arrays, lists and ``None``."""
    return {name: _rebuild(spec, flat) for name, spec in layout}


def _rebuild(spec, flat: list) -> Any:
    kind, where = spec
    if kind == "ragged":
        return np.asarray(flat[where])[: int(flat[where + 1])]
    if kind == "list":
        return [_rebuild(s, flat) for s in where]
    if kind == "opt":
        return None if where is None else _rebuild(where, flat)
    return np.asarray(flat[where])

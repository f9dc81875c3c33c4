"""Reading an MDF document defensively: each part, or nothing when it has another type.

The rules of :mod:`mdf_loops.validation.rules` read a file's content before any
schema guarantees its types, so a part of the wrong type (which the JSON Schema
reports) reads as empty here, never as an exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mdf_loops.model.convention import output_index

__all__ = [
    "entries",
    "keys_of",
    "as_mapping",
    "mapping_at",
    "strings",
    "list_or_none",
    "integer_or_none",
    "stored_body",
    "stated_rank",
    "output_port_of",
    "parameter_value",
]


def entries(value: Any) -> list[tuple[Any, Any]]:
    """The items of a mapping; none for a part of another type."""
    return list(value.items()) if isinstance(value, Mapping) else []


def keys_of(value: Any) -> set:
    """The keys of a mapping; none for a part of another type."""
    return set(value) if isinstance(value, Mapping) else set()


def as_mapping(value: Any) -> Mapping:
    """``value`` when it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def mapping_at(value: Any, key: str) -> Any:
    """``value[key]`` as a mapping when both exist, else an empty mapping."""
    return as_mapping(as_mapping(value).get(key))


def strings(value: Any) -> list[str]:
    """The entries of a list as text; none for a part of another type."""
    return [str(v) for v in value] if isinstance(value, list) else []


def list_or_none(value: Any) -> list | None:
    """A copy of a list, or None for a part of another type."""
    return list(value) if isinstance(value, list) else None


def integer_or_none(value: Any) -> int | None:
    """An integer (not a bool), or None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def stored_body(value: Any) -> tuple[str | None, Mapping | None]:
    """``('graph_<id>', graph)`` of a body stored as ``{'graph_<id>': graph}``, else Nones."""
    if isinstance(value, Mapping) and len(value) == 1:
        ((key, graph),) = value.items()
        if isinstance(key, str) and key.startswith("graph_") and isinstance(graph, Mapping):
            return key, graph
    return None, None


def stated_rank(port: Any) -> int | None:
    """The rank of a port's value where the file states it (``shape`` or the ONNX type)."""
    port = as_mapping(port)
    if isinstance(port.get("shape"), list):
        return len(port["shape"])
    tensor = mapping_at(mapping_at(port, "metadata").get("onnx_type"), "tensorType")
    if "shape" in tensor:
        return len(list_or_none(as_mapping(tensor["shape"]).get("dim")) or [])
    return None


def output_port_of(node: Mapping, parameters: Mapping, index: int) -> Any:
    """The output port of a control-flow node that reads output ``index``, if any."""
    call_id = next((k for k, p in parameters.items() if p.get("function")), None)
    for _, port in entries(node.get("output_ports")):
        if isinstance(port, Mapping) and output_index(port.get("value"), call_id) == index:
            return port
    return None


def parameter_value(parameters: Mapping, parameter_id: str) -> Any:
    """The ``value`` of a parameter, or None."""
    return as_mapping(parameters.get(parameter_id)).get("value")

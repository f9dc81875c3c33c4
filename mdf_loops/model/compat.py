"""What differs between the modeci-mdf versions mdf-loops supports, in one place.

modeci-mdf 0.4.14 added ``InputPort.default_value`` (and ``reduce``). 0.4.13, the
newest release psyneulink 0.21 accepts, lacks them and its loader drops a
``default_value`` key silently. Under it mdf-loops keeps an input port's default
in ``port.metadata["default_value"]`` (written back into files as metadata), and
the features built on the new fields (time loops) refuse with a clear error.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

import attrs
from modeci_mdf.mdf import InputPort, Model

from mdf_loops.errors import ModelError

__all__ = [
    "INPUT_DEFAULTS",
    "input_default",
    "set_input_default",
    "keep_input_defaults",
    "require_input_defaults",
]

#: whether this modeci-mdf's InputPort has ``default_value`` and ``reduce`` (0.4.14 and later)
INPUT_DEFAULTS: bool = "default_value" in attrs.fields_dict(InputPort)

_KEY = "default_value"


def input_default(port: Any) -> Any:
    """The default value of an input port, or None."""
    value = getattr(port, "default_value", None)
    if value is None and not INPUT_DEFAULTS:
        value = (getattr(port, "metadata", None) or {}).get(_KEY)
    return value


def set_input_default(port: Any, value: Any) -> None:
    """Give an input port a default value (its field, or its metadata before 0.4.14)."""
    if INPUT_DEFAULTS:
        port.default_value = value
    else:
        port.metadata = {**(port.metadata or {}), _KEY: value}


def keep_input_defaults(model: Model, document: Any) -> None:
    """Before 0.4.14, copy the ``default_value`` of each top-level input port in the file's
    ``document`` (which the loader dropped) into the loaded port's metadata."""
    if INPUT_DEFAULTS or not isinstance(document, dict):
        return
    content = next(iter(document.values()), None)
    graphs = _mapping(content, "graphs")
    for graph in getattr(model, "graphs", None) or ():
        nodes = _mapping(graphs.get(getattr(graph, "id", None)), "nodes")
        for node in getattr(graph, "nodes", None) or ():
            ports = _mapping(nodes.get(getattr(node, "id", None)), "input_ports")
            for port in getattr(node, "input_ports", None) or ():
                stored = ports.get(getattr(port, "id", None))
                if isinstance(stored, dict) and stored.get(_KEY) is not None:
                    set_input_default(port, stored[_KEY])


def _mapping(owner: Any, key: str) -> dict:
    """``owner[key]`` when both are mappings, else an empty one (malformed files load as
    far as modeci-mdf takes them; the checks report the rest)."""
    value = owner.get(key) if isinstance(owner, dict) else None
    return value if isinstance(value, dict) else {}


def require_input_defaults(what: str) -> None:
    """Refuse ``what`` under a modeci-mdf without ``InputPort.default_value``/``reduce``."""
    if not INPUT_DEFAULTS:
        raise ModelError(
            f"{what} needs modeci-mdf 0.4.14 or later (InputPort.default_value and reduce); "
            f"modeci-mdf {metadata.version('modeci-mdf')} is installed: "
            "pip install 'modeci-mdf>=0.4.14,<0.4.16'"
        )

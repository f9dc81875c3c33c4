"""What must hold of a file's content, and the key of a model's content.

:func:`check_document` refuses the raw content of a JSON/YAML file that cannot
become a model safely (YAML alias bombs, aliases that contain themselves,
repeated keys); :func:`model_digest` is the key by which :func:`mdf_loops.run`
remembers that a model's content passed the checks of :mod:`mdf_loops.safety.checks`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mdf_loops.errors import ModelError
from mdf_loops.model.content import model_digest
from mdf_loops.ops.common import current_limits
from mdf_loops.validation.report import format_path

__all__ = ["check_document", "check_aliases", "model_digest", "current_limits_key"]


def check_document(document: Any, where: str) -> None:
    """Raise :class:`ModelError` for file content that cannot become a model safely.

    Refuses keys a mapping repeats (JSON and YAML keep only the last), a YAML
    alias that contains itself, and aliases that multiply the content (a
    "billion laughs" file expands to more than a million items).
    """
    repeated = _first_repeated_key(document, ())
    if repeated:
        raise ModelError(f"{where}: {repeated}")
    check_aliases(document, where)


def check_aliases(document: Any, where: str) -> None:
    """Raise :class:`ModelError` for YAML aliases that contain themselves or multiply content."""
    distinct, expanded = _document_size(document, where)
    if expanded > max(1_000_000, 2 * distinct):
        raise ModelError(
            f"{where}: YAML aliases expand {distinct} items into {expanded}; refusing a "
            "file that multiplies its own content"
        )


def current_limits_key() -> tuple:
    """The limits the checks depend on (body depth walked, literal sizes refused)."""
    limits = current_limits()
    return (limits.max_depth, limits.max_elements)


def _first_repeated_key(value: Any, path: tuple) -> str | None:
    stack = [(value, path)]
    seen: set[int] = set()
    while stack:
        item, where = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, Mapping):
            for key in getattr(item, "repeated", ()):
                return f"{format_path(where[1:]) or 'top level'}: '{key}' is defined more than once"
            stack.extend((v, where + (k,)) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, where + (i,)) for i, v in enumerate(item))
    return None


def _document_size(document: Any, where: str) -> tuple[int, int]:
    """(items as written, items after expanding aliases); refuses cycles.

    Items are the document, its lists and mappings and their entries; as written, a
    list or mapping that aliases repeat counts once.
    """
    sizes: dict[int, int] = {}
    written: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(document, False)]
    while stack:
        item, done = stack.pop()
        key = id(item)
        children = (
            list(item.values())
            if isinstance(item, Mapping)
            else item
            if isinstance(item, list)
            else None
        )
        if children is None:
            continue
        if done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes.get(id(c), 1) for c in children)
            continue
        if key in on_path:
            raise ModelError(f"{where}: a YAML alias refers to a mapping or list that contains it")
        if key in sizes:
            continue
        written[key] = len(children)
        on_path.add(key)
        stack.append((item, True))
        stack.extend((c, False) for c in children if isinstance(c, (Mapping, list)))
    return 1 + sum(written.values()), sizes.get(id(document), 1)

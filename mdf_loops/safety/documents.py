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
from mdf_loops.model.documents import PLAIN_SCALARS, format_path
from mdf_loops.ops.common import current_limits

__all__ = ["check_document", "check_aliases", "model_digest", "current_limits_key"]


def check_document(document: Any, where: str, *, aliases: bool = True) -> None:
    """Raise :class:`ModelError` for file content that cannot become a model safely.

    Refuses keys a mapping repeats (JSON and YAML keep only the last), a YAML
    alias that contains itself, and aliases that multiply the content (a
    "billion laughs" file expands to more than a million items). ``aliases=False``
    for content read from JSON, which has none: every list and mapping is read
    once, so its content is never larger than as written.
    """
    repeated = _first_repeated_key(document, ())
    if repeated:
        raise ModelError(f"{where}: {repeated}")
    if aliases:
        check_aliases(document, where)


def check_aliases(document: Any, where: str) -> None:
    """Raise :class:`ModelError` for YAML aliases that contain themselves or multiply content.

    Content is counted in items and text bytes: an alias of a long string repeated
    thousands of times multiplies the bytes, not the items.
    """
    written, expanded = _document_size(document, where)
    if expanded > max(1_000_000, 2 * written):
        raise ModelError(
            f"{where}: YAML aliases expand {written} items and text bytes into {expanded}; "
            "refusing a file that multiplies its own content"
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
            entries: Any = item.items()
        elif isinstance(item, list):
            entries = enumerate(item)
        else:
            continue
        stack.extend((v, where + (k,)) for k, v in entries if type(v) not in PLAIN_SCALARS)
    return None


def _document_size(document: Any, where: str) -> tuple[int, int]:
    """(size as written, size after expanding aliases); refuses cycles.

    The size counts the document, its lists and mappings and their entries, and the
    characters of text values; as written, a list, mapping or text that aliases
    repeat counts once.
    """
    sizes: dict[int, int] = {}
    written = 1
    texts: set[int] = set()
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(document, False)]
    while stack:
        item, done = stack.pop()
        key = id(item)
        children = _children(item)
        if children is None:
            continue
        if done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes.get(id(c)) or _text_size(c) for c in children)
            continue
        if key in on_path:
            raise ModelError(f"{where}: a YAML alias refers to a mapping or list that contains it")
        if key in sizes:
            continue
        written += len(children)
        for child in children:
            if isinstance(child, str) and id(child) not in texts:
                texts.add(id(child))
                written += len(child)
        on_path.add(key)
        stack.append((item, True))
        stack.extend((c, False) for c in children if isinstance(c, (Mapping, list)))
    return written, sizes.get(id(document), 1)


def _children(item: Any) -> list | None:
    if isinstance(item, Mapping):
        return list(item.values())
    return item if isinstance(item, list) else None


def _text_size(value: Any) -> int:
    """An entry's size when it is not a list or mapping: 1, and its characters for text."""
    return 1 + len(value) if isinstance(value, str) else 1

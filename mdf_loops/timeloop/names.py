"""Renaming the names an MDF value expression reads (its other text kept as it is).

Both are pure functions of the expression's text (and the names it maps), asked many
times a conversion for the same few expressions: the names of a text and where they
stand are kept in a bounded in-process cache keyed by that text, so each text is parsed
once (:func:`mdf_loops.clear_compiled` empties it). A renaming that puts a name (or a
float literal) where a name stood is written into the text at those places; one that
puts an expression there is parsed and unparsed, so that it is parenthesized as needed.
"""

from __future__ import annotations

import ast
import keyword
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mdf_loops.caches import by_text
from mdf_loops.errors import ModelError
from mdf_loops.safety.allowlist import parsed_pieces

__all__ = ["rename", "names_read", "literal"]


def names_read(expression: Any) -> set[str]:
    """The bare names an expression reads (not attribute names such as ``numpy.exp``)."""
    if isinstance(expression, (list, tuple)):
        return set().union(*(names_read(e) for e in expression)) if expression else set()
    if not isinstance(expression, str):
        return set()
    return set(_names(expression, "expression"))


def rename(expression: Any, mapping: Mapping[str, str], where: str) -> str:
    """``expression`` as text with each name in ``mapping`` replaced (numbers become literals)."""
    if not isinstance(expression, str):
        return literal(expression, where)
    text = expression.strip()
    read = _read(text, where)
    used = tuple(sorted((n, mapping[n]) for n in read.names if n in mapping))
    if read.spans is not None and all(_is_atom(new) for _, new in used):
        return _spliced(text, read.spans, dict(used))
    return _renamed(text, used)


@dataclass(frozen=True)
class _Read:
    """The bare names a text reads, and where each stands: ``(start, end, name)`` in
    text order, or None where the parser's columns are no character offsets (text
    that is not ASCII, spans lines or holds a comment, which renaming drops)."""

    names: frozenset[str]
    spans: tuple[tuple[int, int, str], ...] | None


def _names(expression: str, where: str) -> frozenset[str]:
    return _read(expression.strip(), where).names


def _read(text: str, where: str) -> _Read:
    try:
        return _read_text(text)
    except SyntaxError as exc:
        raise ModelError(f"{where}: {text!r} is not a Python expression ({exc.msg})") from None


@by_text(maxsize=4096)
def _read_text(text: str) -> _Read:
    """The names ``text`` reads (a SyntaxError, not kept, if it is no expression)."""
    if _is_name(text):  # half of a step's expressions: no parse
        return _Read(frozenset((text,)), ((0, len(text), text),))
    found = [n for n in parsed_pieces(text) if isinstance(n, ast.Name)]
    spans = None
    if text.isascii() and not any(c in text for c in "\n\r\f#"):
        spans = tuple(sorted((n.col_offset, n.end_col_offset or 0, n.id) for n in found))
    return _Read(frozenset(n.id for n in found), spans)


def _spliced(text: str, spans: tuple[tuple[int, int, str], ...], mapping: dict[str, str]) -> str:
    """``text`` with the names of ``mapping`` replaced where they stand (each replacement
    an atom, which reads as the name did wherever the name stood)."""
    pieces: list[str] = []
    last = 0
    for start, end, name in spans:
        if name in mapping:
            pieces += (text[last:start], mapping[name])
            last = end
    pieces.append(text[last:])
    return "".join(pieces)


_FLOAT = re.compile(r"[0-9]+\.[0-9]+")


def _is_atom(text: str) -> bool:
    """A name, or a float literal with a point (``0.0.real`` reads as ``x.real`` does)."""
    return _is_name(text) or _FLOAT.fullmatch(text) is not None


@by_text(maxsize=4096)
def _renamed(text: str, mapping: tuple[tuple[str, str], ...]) -> str:
    """``text`` (an expression) with the names of ``mapping`` replaced."""
    names = dict(mapping)
    if _is_name(text) and _is_name(names.get(text, text)):
        return names.get(text, text)  # what the parse and unparse below give
    tree = ast.parse(text, mode="eval")
    renamed = ast.unparse(_Renamer(names).visit(tree))
    if isinstance(tree.body, ast.Tuple) and renamed.startswith("("):
        # "a[0], b" as written: modeci-mdf's variable search splits the text at each
        # subscript and cannot parse a piece that opens a bracket ("(a")
        renamed = renamed[1:-1]
    return renamed


class _Renamer(ast.NodeTransformer):
    """Replaces each name of ``mapping`` by its expression (one class for every call:
    a class made per call costs more than the renaming)."""

    def __init__(self, mapping: Mapping[str, str]) -> None:
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.mapping:
            text = self.mapping[node.id]
            if _is_name(text):
                return ast.copy_location(ast.Name(id=text, ctx=ast.Load()), node)
            return ast.copy_location(ast.parse(text, mode="eval").body, node)
        return node


def _is_name(text: str) -> bool:
    """Whether ``text`` is one bare name (which parses to an ``ast.Name`` of itself)."""
    return text.isidentifier() and not keyword.iskeyword(text)


def literal(value: Any, where: str) -> str:
    """Python source for a number (or nested list of numbers) held in a model field."""
    if isinstance(value, bool) or isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "numpy.array([" + ", ".join(_plain(v, where) for v in value) + "])"
    raise ModelError(
        f"{where}: expected a number or an expression, found {type(value).__name__} {value!r:.60}"
    )


def _plain(value: Any, where: str) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_plain(v, where) for v in value) + "]"
    if isinstance(value, (bool, int, float)):
        return repr(value)
    raise ModelError(f"{where}: a list value must hold numbers, found {value!r:.60}")

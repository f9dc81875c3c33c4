"""Renaming the names an MDF value expression reads (its other text kept as it is)."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from mdf_loops.errors import ModelError

__all__ = ["rename", "names_read", "literal"]


def names_read(expression: Any) -> set[str]:
    """The bare names an expression reads (not attribute names such as ``numpy.exp``)."""
    if isinstance(expression, (list, tuple)):
        return set().union(*(names_read(e) for e in expression)) if expression else set()
    if not isinstance(expression, str):
        return set()
    return {n.id for n in ast.walk(_parse(expression, "expression")) if isinstance(n, ast.Name)}


def rename(expression: Any, mapping: Mapping[str, str], where: str) -> str:
    """``expression`` as text with each name in ``mapping`` replaced (numbers become literals)."""
    if not isinstance(expression, str):
        return literal(expression, where)
    tree = _parse(expression, where)
    text = ast.unparse(_Renamer(mapping).visit(tree))
    if isinstance(tree.body, ast.Tuple) and text.startswith("("):
        # "a[0], b" as written: modeci-mdf's variable search splits the text at each
        # subscript and cannot parse a piece that opens a bracket ("(a")
        text = text[1:-1]
    return text


class _Renamer(ast.NodeTransformer):
    """Replaces each name of ``mapping`` by its expression (one class for every call:
    a class made per call costs more than the renaming)."""

    def __init__(self, mapping: Mapping[str, str]) -> None:
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.mapping:
            return ast.copy_location(ast.parse(self.mapping[node.id], mode="eval").body, node)
        return node


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


def _parse(expression: str, where: str) -> ast.Expression:
    try:
        return ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ModelError(
            f"{where}: {expression!r} is not a Python expression ({exc.msg})"
        ) from None

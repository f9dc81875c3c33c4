"""Edits of Python syntax trees that leave the tree given as it was: a node made or copied
with its location, a statement with one field replaced, every statement of a block passed
through a rewrite (the guard's, :mod:`mdf_loops.safety.guarded_code`).

Nodes are made without ``ast``'s constructors (which look at each keyword): a node is its
class and its ``__dict__`` of fields and location."""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

__all__ = ["LOAD", "LOCATION", "made", "placed", "copied", "replaced", "statements_through"]

_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")
_SIMPLE = (ast.Assign, ast.Expr, ast.Return, ast.Pass, ast.Break, ast.Continue)  # no blocks


def statements_through(nodes: list[Any], guarded: Callable[[ast.stmt], ast.stmt]) -> list[Any]:
    """``nodes`` with every statement among them and in the blocks inside them (the
    bodies of ``except`` handlers and ``case`` clauses too) passed through ``guarded``;
    a node whose block changed is copied, the nodes given stay as they were."""
    out = []
    for node in nodes:
        new = guarded(node) if isinstance(node, ast.stmt) else node
        if isinstance(node, _SIMPLE):
            out.append(new)
            continue
        changed = {}
        for name in _BLOCKS:
            inner = getattr(node, name, None)
            if isinstance(inner, list) and inner:
                changed[name] = statements_through(inner, guarded)
        out.append(copied(new, changed) if changed else new)
    return out


LOAD = ast.Load()  # a context holds nothing: one for every node made here
LOCATION = ("lineno", "end_lineno", "col_offset", "end_col_offset")


def made(cls: type[ast.AST], where: dict[str, Any], fields: dict[str, Any]) -> Any:
    """A node of class ``cls`` holding ``fields``, located ``where`` (what
    ``placed(cls(**fields), where)`` makes, without the constructor's look at each keyword)."""
    fields.update(where)
    node = cls.__new__(cls)
    node.__dict__ = fields
    return node


def placed(new: Any, where: dict[str, Any]) -> Any:
    """``new`` located ``where``."""
    new.__dict__.update(where)
    return new


def copied(node: Any, fields: dict[str, Any]) -> Any:
    """A shallow copy of the syntax-tree node ``node`` with ``fields`` set."""
    copy = node.__class__.__new__(node.__class__)
    copy.__dict__.update(node.__dict__)
    copy.__dict__.update(fields)
    return copy


def replaced(statement: ast.stmt, old: ast.expr, new: ast.AST) -> ast.stmt:
    """``statement`` with its field (or item of a field) ``old`` replaced by ``new``: a copy,
    or ``statement`` where ``old`` is none of its fields."""
    if getattr(statement, "value", None) is old:  # an assignment's value: the common case
        return copied(statement, {"value": new})  # type: ignore[no-any-return]
    for field, value in ast.iter_fields(statement):
        if value is old:
            return copied(statement, {field: new})  # type: ignore[no-any-return]
        if isinstance(value, list) and any(item is old for item in value):
            items = [new if item is old else item for item in value]
            return copied(statement, {field: items})  # type: ignore[no-any-return]
    return statement

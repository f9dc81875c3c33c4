"""Syntax-tree nodes made and copied without ``ast``'s constructors (the one builder of
the python backend's code: writer, simplifier, scalar types and frame).

A constructor looks at each keyword it is given; a step is written on every call of
``simulate``, so its nodes are made as their class and a dict of their fields and
location (:func:`new_node`), and changed as copies made only where a field changed
(:func:`with_fields`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

__all__ = ["LOAD", "NOWHERE", "STORE", "new_node", "place", "with_fields"]

LOAD, STORE = ast.Load(), ast.Store()  # contexts hold nothing: one of each


def place(line: int) -> dict[str, int]:
    """The location of a node on ``line`` (a new dict: a node holds it as its fields)."""
    return {"lineno": line, "end_lineno": line, "col_offset": 0, "end_col_offset": 0}


#: where the writer's nodes are: only a statement's own line matters (``simplify`` gives
#: each statement one, the guard locates the nodes it makes there, and the trusted
#: compile renumbers a copy), so an expression's nodes may stay on line 1
NOWHERE = place(1)


def new_node(cls: type[ast.AST], fields: dict[str, Any]) -> Any:
    """A node of class ``cls`` holding ``fields`` (its fields and location): what
    ``cls(**fields)`` makes, without the constructor's look at each keyword."""
    node = cls.__new__(cls)
    node.__dict__ = fields
    return node


def with_fields(node: ast.AST, visit: Callable[[Any], Any]) -> Any:
    """``node`` with ``visit`` applied to each node among its fields' values (a field
    holding a node, or the nodes of a field holding a list): a copy (located where
    ``node`` is) when one of them changed, else ``node`` itself; so is each list."""
    fields = node.__dict__
    changed: dict[str, Any] | None = None
    for name in node._fields:
        old = fields.get(name)
        if isinstance(old, ast.AST):
            new = visit(old)
        elif old.__class__ is list:
            items = [visit(v) if isinstance(v, ast.AST) else v for v in old]
            new = items if any(a is not b for a, b in zip(items, old, strict=True)) else old
        else:
            continue
        if new is not old:
            if changed is None:
                changed = dict(fields)
            changed[name] = new
    return node if changed is None else new_node(node.__class__, changed)

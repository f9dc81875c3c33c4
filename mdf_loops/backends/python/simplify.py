"""A written-out step made lean: copies, constants in variables and unused values dropped."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from mdf_loops.backends.python.scalar_types import specialize

__all__ = ["carried_types", "simplify", "is_atom", "new_node"]


def simplify(
    statements: list[ast.stmt], env: dict, lines: Iterator[int]
) -> tuple[list[ast.stmt], list[str | None] | None, dict[str, int]]:
    """Straight-line code (a copy of ``statements``) without copies, constants held in
    variables, or unused values, the types of the carried values it returns (None when
    it calls no ``_where``: nothing in it depends on them, and they are not worked out),
    and how many of its statements read each name.

    Every variable of a step is assigned once (the carried values and the condition
    together, last), so a copy or a literal can replace its variable everywhere after.
    ``statements`` are not changed (they may share parts: the copy shares none). Each
    statement of the copy, and everything in it, is located on a line of its own, the
    next of ``lines``: an error's line then names its statement.
    """
    replace: dict[str, ast.expr] = {}
    kept: list[tuple[ast.stmt, set[str]]] = []  # each statement and the names it reads
    for written in statements:
        if (
            isinstance(written, ast.Assign)
            and isinstance(written.targets[0], ast.Name)
            and is_atom(written.value)
        ):  # a copy or a literal: its variable replaced, nothing written
            value = written.value
            atom = replace.get(value.id) if isinstance(value, ast.Name) else None
            replace[written.targets[0].id] = value if atom is None else atom
            continue
        loaded: set[str] = set()
        line = next(lines)
        at = {"lineno": line, "end_lineno": line, "col_offset": 0, "end_col_offset": 0}
        kept.append((_substituted(written, replace, loaded, at), loaded))
    calls_where = [_WHERE in loaded for _, loaded in kept]
    carried = None  # the types matter only to a selection they may specialize
    if any(calls_where):
        carried = carried_types([statement for statement, _ in kept], env, calls_where)
    reads: dict[str, int] = {}
    result = []
    for statement, loaded in reversed(kept):
        assigned = statement.targets[0] if isinstance(statement, ast.Assign) else None
        if (
            isinstance(assigned, ast.Name)
            and assigned.id.startswith("v_")
            and assigned.id not in reads
        ):
            continue
        for name in loaded:
            reads[name] = reads.get(name, 0) + 1
        result.append(statement)
    return result[::-1], carried, reads


def carried_types(
    statements: list[ast.stmt], env: dict, calls_where: list[bool] | None = None
) -> list[str | None]:
    """The types of the carried values (``c0``...) that ``statements`` return
    (:func:`~mdf_loops.backends.python.scalar_types.specialize`, given ``calls_where``;
    by default the statements are only typed)."""
    types = specialize(statements, env, calls_where or [False] * len(statements))
    carried = sorted(
        (k for k in types if k[:1] == "c" and k[1:].isdigit()), key=lambda k: int(k[1:])
    )
    return [types[k] for k in carried]


#: the writer's ``numpy.where``, a name a statement reads when it calls it
_WHERE = "_where"


def _substituted(
    node: ast.AST, replace: dict[str, ast.expr], loaded: set[str], at: dict[str, int]
) -> Any:
    """A copy of ``node`` located ``at`` with each name of ``replace`` that it reads
    replaced by a copy of its atom; the names the copy reads are added to ``loaded``.

    A walk of its own: an ``ast.NodeTransformer`` costs several calls a node, and a step
    is rewritten on every call of ``simulate`` (each node made by :func:`_new`)."""
    cls = node.__class__
    fields = node.__dict__
    if cls is ast.Name:
        name = fields["id"]
        if fields["ctx"].__class__ is ast.Load:
            atom = replace.get(name)
            if atom is not None:
                return _copy_atom(atom, at, loaded)
            loaded.add(name)
        return new_node(ast.Name, {"id": name, "ctx": fields["ctx"], **at})
    if cls is ast.Constant:
        return new_node(ast.Constant, {"value": fields["value"], **at})
    if cls is ast.BinOp:
        left = _substituted(fields["left"], replace, loaded, at)
        right = _substituted(fields["right"], replace, loaded, at)
        return new_node(ast.BinOp, {"left": left, "op": fields["op"], "right": right, **at})
    if not node._fields:
        return node  # an operator or a context: no state, shared
    copied: dict[str, Any] = dict(at) if node._attributes else {}
    for name in node._fields:
        value = fields.get(name)
        if isinstance(value, ast.AST):
            value = _substituted(value, replace, loaded, at)
        elif isinstance(value, list):
            value = [
                _substituted(item, replace, loaded, at) if isinstance(item, ast.AST) else item
                for item in value
            ]
        copied[name] = value
    return new_node(cls, copied)


def new_node(cls: type[ast.AST], fields: dict[str, Any]) -> Any:
    """A node of class ``cls`` holding ``fields`` (its fields and location): what
    ``cls(**fields)`` makes, without the constructor's look at each keyword."""
    node = cls.__new__(cls)
    node.__dict__ = fields
    return node


def _copy_atom(node: ast.expr, at: dict[str, int], loaded: set[str]) -> ast.expr:
    """A fresh copy of an atom located ``at`` (cheaper than ``copy.deepcopy``); a name it
    reads is added to ``loaded``."""
    if isinstance(node, ast.UnaryOp):
        operand = _copy_atom(node.operand, at, loaded)
        return new_node(ast.UnaryOp, {"op": node.op, "operand": operand, **at})  # type: ignore[no-any-return]
    if isinstance(node, ast.Name):
        loaded.add(node.id)
        return new_node(ast.Name, {"id": node.id, "ctx": node.ctx, **at})  # type: ignore[no-any-return]
    return new_node(ast.Constant, {"value": node.value, **at})  # type: ignore[attr-defined,no-any-return]


def is_atom(node: ast.AST) -> bool:
    """A name, a literal, or a negated literal number."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
        return isinstance(node, ast.Constant) and type(node.value) in (int, float)
    return isinstance(node, (ast.Name, ast.Constant))

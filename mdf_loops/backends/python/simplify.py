"""A written-out step made lean: copies, constants in variables and unused values dropped."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any

from mdf_loops.backends.python.nodes import new_node, with_fields
from mdf_loops.backends.python.scalar_types import specialize

__all__ = ["carried_types", "simplify", "is_atom"]


def simplify(
    statements: list[ast.stmt], env: dict, lines: Iterator[int]
) -> tuple[list[ast.stmt], list[str | None] | None, dict[str, int]]:
    """Straight-line code (new statements over ``statements``' expressions) without
    copies, constants held in variables, or unused values, the types of the carried
    values it returns (None when it calls no ``_where``: nothing in it depends on them,
    and they are not worked out), and how many of its statements read each name.

    Every variable of a step is assigned once (the carried values and the condition
    together, last), so a copy or a literal can replace its variable everywhere after.
    ``statements`` are not changed: each statement kept is a new one, located on a line
    of its own, the next of ``lines`` (an error's line then names its statement), and
    an expression in it is a new node only where a name in it was replaced; the rest
    is shared with ``statements`` (and may be shared among the statements made: every
    node is located, but only a statement's line is its own).
    """
    replace: dict[str, ast.expr] = {}
    kept: list[tuple[ast.stmt, set[str]]] = []  # each statement and the names it reads
    for written in statements:
        fields = written.__dict__
        if written.__class__ is ast.Assign and is_atom(fields["value"]):
            target = fields["targets"][0]
            if target.__class__ is ast.Name:  # a copy or a literal: replaced, not written
                value = fields["value"]
                atom = replace.get(value.id) if value.__class__ is ast.Name else None
                replace[target.id] = value if atom is None else atom
                continue
        loaded: set[str] = set()
        line = next(lines)
        statement = _substituted(written, replace, loaded)
        copy = dict(statement.__dict__)  # a statement of its own, on its line
        copy.update(lineno=line, end_lineno=line, col_offset=0, end_col_offset=0)
        kept.append((new_node(written.__class__, copy), loaded))
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


def _substituted(node: Any, replace: dict[str, ast.expr], loaded: set[str]) -> Any:
    """``node`` with each name of ``replace`` that it reads replaced by its atom (shared:
    an atom is a leaf or a negated literal), a node new only where something in it
    changed; the names the result reads are added to ``loaded``.

    A walk of its own: an ``ast.NodeTransformer`` costs several calls a node, and a step
    is rewritten on every call of ``simulate``."""
    cls = node.__class__
    fields = node.__dict__
    if cls is ast.Name:
        name = fields["id"]
        if fields["ctx"].__class__ is ast.Load:
            atom = replace.get(name)
            if atom is not None:
                _add_names(atom, loaded)
                return atom
            loaded.add(name)
        return node
    if cls is ast.Constant:
        return node
    if cls is ast.BinOp:  # the most common operation
        left, right = fields["left"], fields["right"]
        new_left, new_right = (
            _substituted(left, replace, loaded),
            _substituted(right, replace, loaded),
        )
        if new_left is left and new_right is right:
            return node
        return new_node(ast.BinOp, {**fields, "left": new_left, "right": new_right})
    if not node._fields:
        return node  # an operator or a context
    return with_fields(node, lambda child: _substituted(child, replace, loaded))


def _add_names(atom: ast.expr, loaded: set[str]) -> None:
    """Add the name an atom reads (if any) to ``loaded``."""
    if atom.__class__ is ast.Name:
        loaded.add(atom.id)  # type: ignore[attr-defined]


def is_atom(node: ast.AST) -> bool:
    """A name, a literal, or a negated literal number."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
        return isinstance(node, ast.Constant) and type(node.value) in (int, float)
    return isinstance(node, (ast.Name, ast.Constant))

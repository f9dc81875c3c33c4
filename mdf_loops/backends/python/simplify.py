"""A written-out step made lean: copies, constants in variables and unused values dropped."""

from __future__ import annotations

import ast
from typing import Any

from mdf_loops.backends.python.scalar_types import specialize

__all__ = ["simplify", "loaded_names"]


def simplify(statements: list[ast.stmt], env: dict) -> tuple[list[ast.stmt], list[str | None]]:
    """Straight-line code (a copy of ``statements``) without copies, constants held in
    variables, or unused values, and the types of the carried values it returns.

    Every variable of a step is assigned once (the carried values and the condition
    together, last), so a copy or a literal can replace its variable everywhere after.
    ``statements`` are not changed (they may share parts: the copy shares none), and the
    copy has no source locations (whoever compiles it gives them).
    """
    replace: dict[str, ast.expr] = {}
    kept: list[tuple[ast.stmt, set[str]]] = []  # each statement and the names it reads
    for written in statements:
        loaded: set[str] = set()
        statement = _substituted(written, replace, loaded)
        if isinstance(statement, ast.Assign):
            target = statement.targets[0]
            if isinstance(target, ast.Name) and _is_atom(statement.value):
                replace[target.id] = statement.value
                continue
        kept.append((statement, loaded))
    types = specialize(
        [statement for statement, _ in kept], env, [_WHERE in loaded for _, loaded in kept]
    )
    carried = sorted(
        (k for k in types if k[:1] == "c" and k[1:].isdigit()), key=lambda k: int(k[1:])
    )
    used: set[str] = set()
    result = []
    for statement, loaded in reversed(kept):
        assigned = statement.targets[0] if isinstance(statement, ast.Assign) else None
        if (
            isinstance(assigned, ast.Name)
            and assigned.id.startswith("v_")
            and assigned.id not in used
        ):
            continue
        used |= loaded
        result.append(statement)
    return result[::-1], [types[k] for k in carried]


#: the writer's ``numpy.where``, a name a statement reads when it calls it
_WHERE = "_where"


def loaded_names(node: ast.AST, loaded: set[str]) -> set[str]:
    """The names ``node`` reads, added to ``loaded`` (an ``ast.walk`` without its queue)."""
    if isinstance(node, ast.Name):
        if isinstance(node.ctx, ast.Load):
            loaded.add(node.id)
    elif not isinstance(node, ast.Constant):
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, ast.AST):
                loaded_names(value, loaded)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        loaded_names(item, loaded)
    return loaded


def _substituted(node: ast.AST, replace: dict[str, ast.expr], loaded: set[str]) -> Any:
    """A copy of ``node`` (without source locations) with each name of ``replace`` that it
    reads replaced by a copy of its atom; the names the copy reads are added to ``loaded``.

    A walk of its own: an ``ast.NodeTransformer`` costs several calls a node, and a step
    is rewritten on every call of ``simulate``."""
    if isinstance(node, ast.Name):
        if isinstance(node.ctx, ast.Load):
            atom = replace.get(node.id)
            if atom is not None:
                new = _copy_atom(atom)
                if isinstance(new, ast.Name):
                    loaded.add(new.id)
                return new
            loaded.add(node.id)
        return ast.Name(id=node.id, ctx=node.ctx)
    if isinstance(node, ast.Constant):
        return ast.Constant(value=node.value)
    if not node._fields:
        return node  # an operator or a context: no state, shared
    copy = node.__class__.__new__(node.__class__)
    fields = copy.__dict__
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            value = _substituted(value, replace, loaded)
        elif isinstance(value, list):
            value = [
                _substituted(item, replace, loaded) if isinstance(item, ast.AST) else item
                for item in value
            ]
        fields[name] = value
    return copy


def _copy_atom(node: ast.expr) -> ast.expr:
    """A fresh copy of an atom (cheaper than ``copy.deepcopy``)."""
    if isinstance(node, ast.UnaryOp):
        return ast.UnaryOp(op=ast.USub(), operand=_copy_atom(node.operand))
    if isinstance(node, ast.Name):
        return ast.Name(id=node.id, ctx=ast.Load())
    return ast.Constant(value=node.value)  # type: ignore[attr-defined]  # an atom


def _is_atom(node: ast.AST) -> bool:
    """A name, a literal, or a negated literal number."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
        return isinstance(node, ast.Constant) and type(node.value) in (int, float)
    return isinstance(node, (ast.Name, ast.Constant))

"""A written-out step made lean: copies, constants in variables and unused values dropped."""

from __future__ import annotations

import ast

from mdf_loops.backends.python.scalar_types import specialize

__all__ = ["simplify"]


def simplify(lines: list[str], env: dict) -> tuple[list[ast.stmt], list[str | None]]:
    """Straight-line code (its statements) without copies, constants held in variables, or
    unused values, and the types of the carried values it returns.

    Every variable of a step is assigned once (the carried values and the condition
    together, last), so a copy or a literal can replace its variable everywhere after.
    """
    statements = ast.parse("\n".join(lines)).body
    replace: dict[str, ast.expr] = {}

    kept = []
    for statement in statements:
        if isinstance(statement, ast.Assign):
            statement.value = _Substitute(replace).visit(statement.value)
            target = statement.targets[0]
            if isinstance(target, ast.Name) and _is_atom(statement.value):
                replace[target.id] = statement.value
                continue
        else:
            statement = _Substitute(replace).visit(statement)
        kept.append(statement)
    types = specialize(kept, env)
    carried = sorted(
        (k for k in types if k[:1] == "c" and k[1:].isdigit()), key=lambda k: int(k[1:])
    )
    used: set[str] = set()
    result = []
    for statement in reversed(kept):
        assigned = statement.targets[0] if isinstance(statement, ast.Assign) else None
        if (
            isinstance(assigned, ast.Name)
            and assigned.id.startswith("v_")
            and assigned.id not in used
        ):
            continue
        used |= {
            n.id
            for n in ast.walk(statement)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }
        result.append(statement)
    return result[::-1], [types[k] for k in carried]


class _Substitute(ast.NodeTransformer):
    """Replaces each loaded name of ``replace`` by a copy of its atom."""

    def __init__(self, replace: dict[str, ast.expr]) -> None:
        self.replace = replace

    def visit_Name(self, n: ast.Name) -> ast.AST:
        if isinstance(n.ctx, ast.Load) and n.id in self.replace:
            return ast.copy_location(_copy_atom(self.replace[n.id]), n)
        return n


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

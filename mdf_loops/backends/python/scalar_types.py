"""Which values of a written-out step are Python floats, so a selection needs no numpy.

``_where(c, a, b)`` (numpy.where without the 0-d array) returns ``a if c else b`` when
``c`` is a bool and ``a``, ``b`` are scalars of one type. Where the types are known
when the code is written (Python floats from float literals, arithmetic on them,
``math`` functions, comparisons), the call is replaced by that conditional expression.
Unknown types keep the call.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any

from mdf_loops.backends.python.nodes import new_node, with_fields

__all__ = ["specialize", "python_type"]

_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div)
_MATH_FLOAT = {
    "exp",
    "log",
    "sqrt",
    "sin",
    "cos",
    "tan",
    "tanh",
    "sinh",
    "cosh",
    "atan",
    "fabs",
    "log10",
    "log2",
    "expm1",
    "log1p",
}


def python_type(value: object) -> str | None:
    """``"float"``, ``"int"`` or ``"bool"`` for a value of exactly that type, else None."""
    return {float: "float", int: "int", bool: "bool"}.get(type(value))


def specialize(
    statements: list[ast.stmt],
    env: Mapping[str, str | None],
    calls_where: Sequence[bool] | None = None,
) -> dict[str, str | None]:
    """Rewrite ``_where`` calls on known floats (each statement's value replaced, the
    nodes in it not changed); return the types of all variables.

    ``calls_where[k]``: whether statement ``k`` may call ``_where`` (every one when None);
    the others are only typed."""
    types = dict(env)

    for k, statement in enumerate(statements):
        if isinstance(statement, ast.Assign):
            if calls_where is None or calls_where[k]:
                statement.value = _specialized(statement.value, types)
            target = statement.targets[0]
            if isinstance(target, ast.Name):
                types[target.id] = _type(statement.value, types)
            elif isinstance(target, ast.Tuple) and isinstance(statement.value, ast.Tuple):
                values = [_type(v, types) for v in statement.value.elts]
                for name, kind in zip(target.elts, values, strict=True):
                    types[getattr(name, "id", "")] = kind
    return types


def _specialized(value: Any, types: Mapping[str, str | None]) -> Any:
    """``value`` with ``_where(c, a, b)`` -> ``a if c else b`` where all three types are
    known: new nodes where something changed, ``value`` shared where nothing did."""
    if not isinstance(value, ast.AST) or not value._fields or value.__class__ is ast.Name:
        return value
    node = with_fields(value, lambda child: _specialized(child, types))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "_where"
        and len(node.args) == 3
        and _type(node.args[0], types) == "bool"
        and _type(node.args[1], types) == "float"
        and _type(node.args[2], types) == "float"
    ):
        test, body, orelse = node.args
        where = {name: getattr(node, name) for name in node._attributes}
        return new_node(ast.IfExp, {"test": test, "body": body, "orelse": orelse, **where})
    return node


def _type(node: ast.AST, types: Mapping[str, str | None]) -> str | None:
    if isinstance(node, ast.Constant):
        return python_type(node.value)
    if isinstance(node, ast.Name):
        return types.get(node.id)
    if isinstance(node, ast.UnaryOp):
        inner = _type(node.operand, types)
        if isinstance(node.op, (ast.USub, ast.UAdd)) and inner in ("float", "int"):
            return inner
        return "bool" if isinstance(node.op, ast.Not) else None
    if isinstance(node, ast.BinOp):
        left, right = _type(node.left, types), _type(node.right, types)
        if isinstance(node.op, _ARITHMETIC) and {left, right} <= {"float", "int"}:
            if isinstance(node.op, ast.Div) or "float" in (left, right):
                return "float"
            return "int"
        if (
            isinstance(node.op, ast.Pow)
            and left == "float"
            and isinstance(node.right, ast.Constant)
            and type(node.right.value) is int
        ):
            return "float"
        return None
    if isinstance(node, ast.Compare):
        kinds = [_type(node.left, types)] + [_type(c, types) for c in node.comparators]
        return "bool" if len(node.ops) == 1 and set(kinds) <= {"float", "int"} else None
    if isinstance(node, ast.IfExp):
        body, orelse = _type(node.body, types), _type(node.orelse, types)
        return body if body == orelse else None
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "math"
        and node.func.attr in _MATH_FLOAT
        and len(node.args) == 1
        and _type(node.args[0], types) in ("float", "int")
    ):
        return "float"
    return None

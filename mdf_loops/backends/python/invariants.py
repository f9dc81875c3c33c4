"""Values a step makes the same way every time, made once before the loop instead.

modeci-mdf's NeuroML exports give most parameters a list value (``[0.0]``, one per
cell), which a step writes as ``numpy.array([0.0])``: two thirds of a step of
``FN.mdf.json`` (NeuroML) rebuilt the same small arrays, and where the model is not
trusted each went through its guard. A statement of a step that reads no value the
loop changes, and makes its value only from literals with numpy's array constructor and
arithmetic, moves before the loop: made once per call of the function (guarded there as
it was in the loop). The steps share the array: their expressions make new values and
change none in place.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

__all__ = ["hoisted"]

#: ``numpy.array`` as the writer and the models spell it
_CONSTRUCTORS = frozenset({("numpy", "array"), ("np", "array")})
_PURE = (ast.Constant, ast.List, ast.Tuple, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop,
         ast.expr_context)  # fmt: skip


def hoisted(steps: Sequence[ast.stmt]) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """The statements of ``steps`` (the body of the loop, in order) that make the same
    value on every step, and the others, in their order."""
    changed = {"iteration"}
    for statement in steps:
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                changed.add(node.id)
    before: list[ast.stmt] = []
    kept: list[ast.stmt] = []
    for statement in steps:
        target = _assigned(statement)
        if target is not None and _constant(statement.value, changed):  # type: ignore[attr-defined]
            before.append(statement)
            changed.discard(target)  # assigned once a step: the same value on every step
        else:
            kept.append(statement)
    return before, kept


def _assigned(statement: ast.stmt) -> str | None:
    """The step variable a statement assigns (``v_<node>__<name> = ...``), else None."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
        if isinstance(target, ast.Name) and target.id.startswith("v_"):
            return target.id
    return None


def _constant(value: ast.expr, changed: set[str]) -> bool:
    """Whether ``value`` is made of literals, step variables made before the loop,
    arithmetic and ``numpy.array(...)`` alone."""
    for node in ast.walk(value):
        if isinstance(node, ast.Name):
            if node.id in changed or not node.id.startswith("v_"):
                if not _constructor_base(node, value):
                    return False
        elif isinstance(node, ast.Call):
            function = node.func
            if not (
                isinstance(function, ast.Attribute)
                and isinstance(function.value, ast.Name)
                and (function.value.id, function.attr) in _CONSTRUCTORS
                and not node.keywords
            ):
                return False
        elif not isinstance(node, (*_PURE, ast.Attribute)):
            return False
    return True


def _constructor_base(name: ast.Name, value: ast.expr) -> bool:
    """Whether ``name`` is the ``numpy`` of a ``numpy.array`` called in ``value``."""
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.value is name
        and (name.id, node.func.attr) in _CONSTRUCTORS
        for node in ast.walk(value)
    )

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


def hoisted(steps: Sequence[ast.stmt]) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """The statements of ``steps`` (the body of the loop, in order) that make the same
    value on every step, and the others, in their order."""
    changed = {"iteration"}  # what the steps assign (straight-line code: its targets)
    for statement in steps:
        if statement.__class__ is ast.Assign:
            for target in statement.targets:  # type: ignore[attr-defined]
                elements = target.elts if target.__class__ is ast.Tuple else (target,)
                changed.update(e.id for e in elements if e.__class__ is ast.Name)
    before: list[ast.stmt] = []
    kept: list[ast.stmt] = []
    for statement in steps:
        assigned = _assigned(statement)
        if assigned is not None and _constant(statement.value, changed):  # type: ignore[attr-defined]
            before.append(statement)
            changed.discard(assigned)  # assigned once a step: the same value on every step
        else:
            kept.append(statement)
    return before, kept


def _assigned(statement: ast.stmt) -> str | None:
    """The step variable a statement assigns (``v_<node>__<name> = ...``), else None."""
    if statement.__class__ is ast.Assign and len(statement.targets) == 1:  # type: ignore[attr-defined]
        target = statement.targets[0]  # type: ignore[attr-defined]
        if target.__class__ is ast.Name and target.id.startswith("v_"):
            return target.id  # type: ignore[no-any-return]
    return None


def _constant(node: ast.AST, changed: set[str]) -> bool:
    """Whether ``node`` is made of literals, step variables made before the loop,
    arithmetic and ``numpy.array(...)`` alone (a walk that stops at the first other
    piece: most of a step's values read a carried value first)."""
    cls = node.__class__
    if cls is ast.Name:
        name = node.id  # type: ignore[attr-defined]
        return name.startswith("v_") and name not in changed
    if cls is ast.Constant:
        return True
    if cls is ast.BinOp:
        return _constant(node.left, changed) and _constant(node.right, changed)  # type: ignore[attr-defined]
    if cls is ast.UnaryOp:
        return _constant(node.operand, changed)  # type: ignore[attr-defined]
    if cls is ast.List or cls is ast.Tuple:
        return all(_constant(e, changed) for e in node.elts)  # type: ignore[attr-defined]
    if cls is ast.Call:
        function = node.func  # type: ignore[attr-defined]
        return (
            function.__class__ is ast.Attribute
            and function.value.__class__ is ast.Name
            and (function.value.id, function.attr) in _CONSTRUCTORS
            and not node.keywords  # type: ignore[attr-defined]
            and all(_constant(a, changed) for a in node.args)  # type: ignore[attr-defined]
        )
    return False

"""A written-out step made lean: unused values dropped, each statement on a line of its own."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from mdf_loops.backends.python.nodes import new_node
from mdf_loops.backends.python.scalar_types import specialize

__all__ = ["carried_types", "simplify", "is_atom"]


def simplify(
    written: list[tuple[ast.stmt, set[str]]], env: dict, lines: Iterator[int]
) -> tuple[list[ast.stmt], list[str | None] | None, dict[str, int]]:
    """Straight-line code (new statements over ``written``'s expressions) without unused
    values, the types of the carried values it returns (None when it calls no
    ``_where``: nothing in it depends on them, and they are not worked out), and how many
    of its statements read each name.

    ``written``: each statement of a step (:meth:`~mdf_loops.backends.python.writer.
    StepWriter.step`: copies and literals stand for their variables already) and the names
    it reads. The statements are not changed: each one kept is a new one, located on a
    line of its own, the next of ``lines`` (an error's line then names its statement);
    its expressions are shared with ``written`` (every node is located, but only a
    statement's line is its own).
    """
    kept: list[tuple[ast.stmt, set[str]]] = []
    for statement, loaded in written:
        line = next(lines)
        copy = dict(statement.__dict__)  # a statement of its own, on its line
        copy.update(lineno=line, end_lineno=line, col_offset=0, end_col_offset=0)
        kept.append((new_node(statement.__class__, copy), loaded))
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


def is_atom(node: ast.AST) -> bool:
    """A name, a literal, or a negated literal number."""
    cls = node.__class__  # the writer's nodes and the parser's: these classes exactly
    if cls is ast.Name or cls is ast.Constant:
        return True
    if cls is ast.UnaryOp and node.op.__class__ is ast.USub:  # type: ignore[attr-defined]
        node = node.operand  # type: ignore[attr-defined]
        return node.__class__ is ast.Constant and type(node.value) in (int, float)  # type: ignore[attr-defined]
    return False

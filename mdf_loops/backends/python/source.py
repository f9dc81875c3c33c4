"""The ``time_loop`` function: the first step, a loop over the rest, the scans.

The first step is written out separately, so that the selections of the initial values
fold away; the types of the carried values are assumed from the initial values and
kept where every step returns them (:mod:`~mdf_loops.backends.python.scalar_types`).
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator, Sequence

from mdf_loops.backends.python.frame import LoopFrame, loop_function
from mdf_loops.backends.python.invariants import hoisted
from mdf_loops.backends.python.nodes import LOAD, STORE, new_node
from mdf_loops.backends.python.simplify import carried_types, simplify
from mdf_loops.backends.python.writer import APPEND, Written, variable

__all__ = ["function_source"]


def function_source(
    outer: Sequence[str],
    n_carried: int,
    n_scan: int,
    first: Sequence[Written],
    rest: Sequence[Written],
    initial_types: Sequence[str | None],
    indexed: Sequence[int] = (),
    whole: Sequence[int] = (),
) -> tuple[ast.Module, float | None]:
    """The ``time_loop(start, stop, cond, *carried, *series, *scans)`` function (the
    module defining it; each statement located on a line of its own,
    :mod:`~mdf_loops.backends.python.frame`), and the time step when the loop leaves
    the time out (below).

    It runs the steps ``start`` to ``stop`` (the first written out when ``start`` is 0;
    called with ``cond`` true), appends to the scan outputs it is given, and returns
    ``(cond, carried, done)``, ``done`` the number of steps run in all: a long simulation
    runs in chunks, each continuing from the last. ``first``, ``rest``: the written-out
    steps (``StepWriter.step``, not changed here); ``outer``: series; ``indexed``: the
    scan outputs written at their step (``sK[iteration] = x``, into an array made for all
    the steps: :class:`~mdf_loops.backends.python.recording.Recording`), the others
    appended to; ``whole``: those of them that record int64, where a whole-number
    Python float is stored as the int stock's expression gives.

    When the first scan output (the time) is ``iteration * dt`` on every step and the
    loop runs to ``stop`` (no condition can end it), its appends are left out and the
    time step ``dt`` returned: the caller makes the time after the run, as
    ``numpy.arange(done) * dt`` (the same products, one per step).
    """
    lines = itertools.count(1)  # each statement on a line of its own
    (first_code, first_reads), (rest_code, rest_reads) = _lean_steps(
        list(first), list(rest), initial_types, lines
    )
    steady = _without_steady_condition(rest_code)  # the same names read, but ``cond``
    time_step = None
    if steady is not None and n_scan:
        time_step = _time_step(first_code, steady)
        if time_step is not None:
            first_code = _without_time(first_code, first_reads)
            steady = _without_time(steady, rest_reads)
    carried = tuple(f"c{k}" for k in range(n_carried))
    series = tuple(variable("outer", p) for p in outer)
    scans = tuple(f"s{k}" for k in range(n_scan))
    # the other scans' append methods bound once (an attribute lookup a step and value less)
    appended = tuple(k for k in range(time_step is not None, n_scan) if k not in indexed)
    whole = [k for k in whole if k in indexed and not (time_step is not None and k == 0)]
    helpers = tuple(
        h
        for h in ("_where", "_scalar", "_whole")
        if h in first_reads or h in rest_reads or (h == "_whole" and whole)
    )
    frame = LoopFrame((*carried, *series, *scans), carried, appended, helpers)
    invariant, steps = hoisted(rest_code if steady is None else steady)
    if indexed:
        first_code, steps = _stored(first_code, indexed, whole), _stored(steps, indexed, whole)
    module = loop_function(frame, first_code, steps, steady is not None, lines, invariant)
    return module, time_step


def _lean_steps(
    first: list[Written],
    rest: list[Written],
    initial_types: Sequence[str | None],
    lines: Iterator[int],
) -> tuple[tuple[list[ast.stmt], dict[str, int]], tuple[list[ast.stmt], dict[str, int]]]:
    """The first and the later steps simplified, and how many of their statements read
    each name; the carried types assumed from the initial values
    and kept where every step returns them (the later steps simplified again with fewer
    types assumed until they are; where those steps call no ``_where``, no type changes
    them, and they are simplified once)."""
    assumed = list(initial_types)
    first_code, first_out, first_reads = simplify(first, _env(initial_types), lines)
    while True:
        rest_code, rest_out, rest_reads = simplify(rest, _env(assumed), lines)
        if rest_out is None:
            return (first_code, first_reads), (rest_code, rest_reads)
        if first_out is None:  # the types the first step gives, worked out once needed
            first_out = carried_types(first_code, _env(initial_types))
        agreed = [
            a if a == f == r else None for a, f, r in zip(assumed, first_out, rest_out, strict=True)
        ]
        if agreed == assumed:
            return (first_code, first_reads), (rest_code, rest_reads)
        assumed = agreed


def _without_steady_condition(code: list[ast.stmt]) -> list[ast.stmt] | None:
    """The steps after the first without their condition, when a step hands on the
    condition it was given (no termination, no ``until``): ``cond, c0 = (cond, x)``
    becomes ``c0 = x`` and the loop needs no test. None when the condition can change."""
    out: list[ast.stmt] = []
    found = False
    for tree in code:
        if (
            isinstance(tree, ast.Assign)
            and isinstance(tree.targets[0], ast.Tuple)
            and isinstance(tree.value, ast.Tuple)
            and [getattr(t, "id", None) for t in tree.targets[0].elts[:1]] == ["cond"]
        ):
            first = tree.value.elts[0]
            if not (isinstance(first, ast.Name) and first.id == "cond"):
                return None
            found = True
            targets, values = tree.targets[0].elts[1:], tree.value.elts[1:]
            if targets:
                where = {name: getattr(tree, name) for name in _LOCATION}
                target = new_node(ast.Tuple, {"elts": targets, "ctx": STORE, **where})
                value = new_node(ast.Tuple, {"elts": values, "ctx": LOAD, **where})
                fields = {"targets": [target], "value": value, "type_comment": None, **where}
                out.append(new_node(ast.Assign, fields))
            continue
        out.append(tree)
    return out if found else None


def _time_step(first: list[ast.stmt], rest: list[ast.stmt]) -> float | None:
    """``dt`` when both steps append ``iteration * dt`` (``dt`` one float literal, the
    same in both) to the first scan output, else None."""
    found = {_appended_time(first), _appended_time(rest)}
    return found.pop() if len(found) == 1 else None


def _appended_time(code: list[ast.stmt]) -> float | None:
    for statement in code:
        value = _append_of(statement, 0)
        if isinstance(value, ast.Name):  # its one assignment in the step, if any
            name = value.id
            for s in code:
                target = s.targets[0] if s.__class__ is ast.Assign else None  # type: ignore[attr-defined]
                if target.__class__ is ast.Name and target.id == name:  # type: ignore[union-attr]
                    value = s.value  # type: ignore[attr-defined]
                    break
        if (
            isinstance(value, ast.BinOp)
            and isinstance(value.op, ast.Mult)
            and isinstance(value.left, ast.Name)
            and value.left.id == "iteration"
            and isinstance(value.right, ast.Constant)
            and type(value.right.value) is float
        ):
            return value.right.value
    return None


def _append_of(statement: ast.stmt, scan: int) -> ast.expr | None:
    """``x`` of the statement ``_appendK(x)`` (the tail's append to scan ``K``) for
    ``K == scan``, else None."""
    appended = _appended(statement)
    return appended[1] if appended is not None and appended[0] == scan else None


def _appended(statement: ast.stmt) -> tuple[int, ast.expr] | None:
    """``(K, x)`` of the statement ``_appendK(x)`` (the tail's append to scan ``K``), else None."""
    if statement.__class__ is not ast.Expr:
        return None
    call = statement.value  # type: ignore[attr-defined]
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id.startswith(APPEND)
        and call.func.id[len(APPEND) :].isdigit()
        and len(call.args) == 1
    ):
        return int(call.func.id[len(APPEND) :]), call.args[0]
    return None


def _stored(
    code: list[ast.stmt], indexed: Sequence[int], whole: Sequence[int] = ()
) -> list[ast.stmt]:
    """``code`` with each append ``_appendK(x)`` to a scan of ``indexed`` written as
    ``sK[iteration] = x`` (on the append's line), ``sK[iteration] = _whole(x)`` for a
    scan of ``whole`` (an int64 output: a whole-number float is the int stock's
    expression gives, :func:`~mdf_loops.backends.python.compiled._whole`)."""
    out = []
    for statement in code:
        appended = _appended(statement)
        if appended is None or appended[0] not in indexed:
            out.append(statement)
            continue
        k, value = appended
        where = {name: getattr(statement, name) for name in _LOCATION}
        if k in whole and not (value.__class__ is ast.Constant and type(value.value) is int):  # type: ignore[attr-defined]
            func = new_node(ast.Name, {"id": "_whole", "ctx": LOAD, **where})
            value = new_node(ast.Call, {"func": func, "args": [value], "keywords": [], **where})
        target = new_node(
            ast.Subscript,
            {
                "value": new_node(ast.Name, {"id": f"s{k}", "ctx": LOAD, **where}),
                "slice": new_node(ast.Name, {"id": "iteration", "ctx": LOAD, **where}),
                "ctx": STORE,
                **where,
            },
        )
        fields = {"targets": [target], "value": value, "type_comment": None, **where}
        out.append(new_node(ast.Assign, fields))
    return out


_LOCATION = ("lineno", "end_lineno", "col_offset", "end_col_offset")


def _without_time(code: list[ast.stmt], reads: dict[str, int]) -> list[ast.stmt]:
    """``code`` without the append to the first scan output, and without the time's
    variable when nothing else reads it (``reads``: how many statements of ``code``
    read each name)."""
    kept, time = [], None
    for statement in code:
        value = _append_of(statement, 0)
        if value is None:
            kept.append(statement)
        elif isinstance(value, ast.Name) and reads.get(value.id) == 1:
            time = value.id  # read by the append alone
    return [
        s
        for s in kept
        if not (
            isinstance(s, ast.Assign)
            and isinstance(s.targets[0], ast.Name)
            and s.targets[0].id == time
            and time.startswith("v_")
        )
    ]


def _env(carried_types: Sequence[str | None]) -> dict[str, str | None]:
    env: dict[str, str | None] = {"iteration": "int"}
    env.update({f"c{k}": t for k, t in enumerate(carried_types)})
    return env

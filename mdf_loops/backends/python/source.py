"""The ``time_loop`` function: the first step, a loop over the rest, the scans.

The first step is written out separately, so that the selections of the initial values
fold away; the types of the carried values are assumed from the initial values and
kept where every step returns them (:mod:`~mdf_loops.backends.python.scalar_types`).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from modeci_mdf.mdf import Node

from mdf_loops.backends.python.simplify import loaded_names, simplify
from mdf_loops.backends.python.writer import variable
from mdf_loops.timeloop.spec import LOOP_FUNCTION

__all__ = ["function_source", "scan_kinds"]

#: ONNX element type -> array typecode, for one-dimensional float64 and int64 series
_ARRAY_CODES: dict[Any, str] = {1: "d", 11: "d", 7: "q"}


def scan_kinds(loop: Node, n_scan: int) -> list[str | None]:
    """Per scan output: the ``array`` typecode (``'d'``/``'q'``) for float64/int64 scalars,
    else None (a list).

    An ``array`` holds 8 bytes a step where a list of Python numbers holds 32.
    """
    by_index = {}
    for port in loop.output_ports:
        value = (port.value or "").strip()
        if value.startswith(f"{LOOP_FUNCTION}[") and value.endswith("]"):
            by_index[int(value[len(LOOP_FUNCTION) + 1 : -1])] = port
    first = min(by_index) if by_index else 0
    kinds: list[str | None] = []
    for k in range(n_scan):
        port = by_index.get(first + k)
        tensor = (
            (((port.metadata or {}).get("onnx_type") or {}).get("tensorType") or {})
            if port is not None
            else {}
        )
        dims = (tensor.get("shape") or {}).get("dim") or []
        code = _ARRAY_CODES.get(tensor.get("elemType")) if len(dims) == 1 else None
        kinds.append(None if tensor.get("elemType") == 1 else code)
    return kinds


def function_source(
    outer: Sequence[str],
    n_carried: int,
    n_scan: int,
    first: Sequence[ast.stmt],
    rest: Sequence[ast.stmt],
    tail: Sequence[ast.stmt],
    initial_types: Sequence[str | None],
) -> tuple[ast.Module, float | None]:
    """The ``time_loop(start, stop, cond, *carried, *series, *scans)`` function (its
    parsed definition, located: statement ``k`` on line ``k`` of its ``ast.unparse``),
    and the time step when the loop leaves the time out (below).

    It runs the steps ``start`` to ``stop`` (the first written out when ``start`` is 0;
    called with ``cond`` true), appends to the scan outputs it is given, and returns
    ``(cond, carried, done)``, ``done`` the number of steps run in all: a long simulation
    runs in chunks, each continuing from the last. ``first``, ``rest``: the written-out
    steps (``StepWriter.step``, not changed here); ``tail``: their ending
    (``StepWriter.tail``); ``outer``: series.

    When the first scan output (the time) is ``iteration * dt`` on every step and the
    loop runs to ``stop`` (no condition can end it), its appends are left out and the
    time step ``dt`` returned: the caller makes the time after the run, as
    ``numpy.arange(done) * dt`` (the same products, one per step).
    """
    carried = [f"c{k}" for k in range(n_carried)]
    first_code, rest_code = _lean_steps(list(first), list(rest), list(tail), initial_types)
    steady = _without_steady_condition(rest_code)
    time_step = None
    if steady is not None and n_scan:
        time_step = _time_step(first_code, steady)
        if time_step is not None:
            first_code, steady = _without_time(first_code), _without_time(steady)
    # the scans' append methods bound once (an attribute lookup a step and value less)
    lines = [_signature(carried, outer, n_scan), "    iteration = 0"]
    lines += [f"    _append{k} = s{k}.append" for k in range(time_step is not None, n_scan)]
    lines.append("    if start == 0 and stop > 0 and cond:")
    lines.append("        start = 1")  # the first step goes before this line
    if steady is None:
        lines.append("    for iteration in range(max(start, 1), stop):")
        lines.append("        if not cond:")
        lines.append("            stop = iteration")
        lines.append("            break")  # the step goes after the test
        done = "stop if start else 0"
    else:  # the condition is tested once: the first step may have ended the loop
        lines.append("    for iteration in range(max(start, 1), stop if cond else 0):")
        lines.append("        pass")  # the step goes in its place
        done = "stop if cond else start"
    lines.append(f"    return cond, [{', '.join(carried)}], {done}")
    # the loop around the steps is parsed (a few lines); the steps are spliced in
    module = ast.parse("\n".join(lines))
    function = module.body[0]
    first_step, loop = function.body[-3], function.body[-2]  # type: ignore[attr-defined]
    first_step.body[:0] = _bound_appends(first_code)
    if steady is None:
        loop.body += _bound_appends(rest_code)
    else:
        loop.body = _bound_appends(steady)
    _locate(module)
    return module, time_step


def _signature(carried: list[str], outer: Sequence[str], n_scan: int) -> str:
    """The ``def`` line: the steps, the condition, the carried values, series, scans."""
    series = [variable("outer", p) for p in outer]
    scans = [f"s{k}" for k in range(n_scan)]
    args = ["start", "stop", "cond", *carried, *series, *scans, "_where=_where", "_scalar=_scalar"]
    return f"def time_loop({', '.join(args)}):"


def _lean_steps(
    first: list[ast.stmt],
    rest: list[ast.stmt],
    tail: list[ast.stmt],
    initial_types: Sequence[str | None],
) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """The first and the later steps, each with ``tail``, simplified; the carried types
    assumed from the initial values and kept where every step returns them."""
    assumed = list(initial_types)
    while True:
        first_code, first_out = simplify(first + tail, _env(initial_types))
        rest_code, rest_out = simplify(rest + tail, _env(assumed))
        agreed = [
            a if a == f == r else None for a, f, r in zip(assumed, first_out, rest_out, strict=True)
        ]
        if agreed == assumed:
            return first_code, rest_code
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
                out.append(
                    ast.Assign(
                        targets=[ast.Tuple(elts=targets, ctx=ast.Store())],
                        value=ast.Tuple(elts=values, ctx=ast.Load()),
                        lineno=0,
                    )
                )
            continue
        out.append(tree)
    return out if found else None


def _time_step(first: list[ast.stmt], rest: list[ast.stmt]) -> float | None:
    """``dt`` when both steps append ``iteration * dt`` (``dt`` one float literal, the
    same in both) to the first scan output, else None."""
    found = {_appended_time(first), _appended_time(rest)}
    return found.pop() if len(found) == 1 else None


def _appended_time(code: list[ast.stmt]) -> float | None:
    assigned = {
        s.targets[0].id: s.value
        for s in code
        if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)
    }
    for statement in code:
        value = _append_of(statement, 0)
        if isinstance(value, ast.Name):
            value = assigned.get(value.id, value)
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


def _append_of(statement: ast.stmt, scan: int | None) -> ast.expr | None:
    """``x`` of the statement ``sK.append(x)`` (the tail's append to scan ``K``; any scan
    when ``scan`` is None), else None."""
    call = statement.value if isinstance(statement, ast.Expr) else None
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id[:1] == "s"
        and call.func.value.id[1:].isdigit()
        and (scan is None or int(call.func.value.id[1:]) == scan)
        and call.func.attr == "append"
        and len(call.args) == 1
    ):
        return call.args[0]
    return None


def _without_time(code: list[ast.stmt]) -> list[ast.stmt]:
    """``code`` without the append to the first scan output, and without the time's
    variable when nothing else reads it."""
    kept = [s for s in code if _append_of(s, 0) is None]
    read: set[str] = set()
    for statement in kept:
        loaded_names(statement, read)
    return [
        s
        for s in kept
        if not (
            isinstance(s, ast.Assign)
            and isinstance(s.targets[0], ast.Name)
            and s.targets[0].id.startswith("v_")
            and s.targets[0].id not in read
        )
    ]


def _bound_appends(code: list[ast.stmt]) -> list[ast.stmt]:
    """``code`` with its ``sK.append(x)`` statements (the writer's tail) as calls of the
    bound method ``_appendK``."""
    out = []
    for statement in code:
        value = _append_of(statement, None)
        if value is not None:
            call = statement.value  # type: ignore[attr-defined]  # an append, above
            bound = ast.Name(id=f"_append{call.func.value.id[1:]}", ctx=ast.Load())
            statement = ast.Expr(value=ast.Call(func=bound, args=[value], keywords=[]))
        out.append(statement)
    return out


def _locate(module: ast.Module) -> None:
    """Give every statement of ``module`` its own line, in order (the line it has in the
    text ``ast.unparse`` makes of it), and every node in it that line: an error's line
    then names its statement (:func:`~mdf_loops.safety.guarded_code.guarded_function`)."""
    line = 0

    def statements(body: list[ast.stmt]) -> None:
        nonlocal line
        for statement in body:
            line += 1
            inner = [getattr(statement, f, None) for f in ("body", "orelse")]
            blocks = [b for b in inner if isinstance(b, list) and b]
            if not blocks:
                _at_line(statement, line)
                continue
            statement.lineno = statement.end_lineno = line
            statement.col_offset = statement.end_col_offset = 0
            for name in statement._fields:  # the header: a test, a target, an iterable
                value = getattr(statement, name)
                if isinstance(value, ast.expr):
                    _at_line(value, line)
            for block in blocks:
                if block is inner[1]:
                    line += 1  # the ``else:`` line
                statements(block)

    statements(module.body)


def _at_line(node: ast.AST, line: int) -> None:
    """``node`` and everything in it located on ``line``."""
    if node._attributes:
        node.lineno = node.end_lineno = line  # type: ignore[attr-defined]
        node.col_offset = node.end_col_offset = 0  # type: ignore[attr-defined]
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            _at_line(value, line)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, ast.AST):
                    _at_line(item, line)


def _env(carried_types: Sequence[str | None]) -> dict[str, str | None]:
    env: dict[str, str | None] = {"iteration": "int"}
    env.update({f"c{k}": t for k, t in enumerate(carried_types)})
    return env

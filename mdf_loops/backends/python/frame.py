"""The loop around the written-out steps, built as a syntax tree (no text parsed).

:func:`loop_function` makes the module of ``time_loop`` from the lean steps that
:mod:`~mdf_loops.backends.python.source` makes; what it builds reads, as text::

    def time_loop(start, stop, cond, c0, ..., s0, ..., _where=_where, _scalar=_scalar):
        iteration = 0
        _append1 = s1.append                   # the scans' append methods, bound once
        if start == 0 and stop > 0 and cond:
            <the first step>
            start = 1
        for iteration in range(max(start, 1), stop if cond else 0):
            <the steps after the first>        # no condition can end the loop: steady
        return cond, [c0, ...], stop if cond else start

or, where a step can end the loop, ``for iteration in range(max(start, 1), stop):``
whose body begins ``if not cond: stop = iteration; break`` and which returns
``stop if start else 0`` steps done.

Every statement is located on a line of its own (the steps come located), so that an
error's line names its statement; :func:`number_lines` renumbers them as the text
``ast.unparse`` makes reads, for a traceback of the trusted function.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mdf_loops.backends.python.simplify import new_node
from mdf_loops.backends.python.writer import APPEND

__all__ = ["LoopFrame", "loop_function", "number_lines"]


@dataclass(frozen=True)
class LoopFrame:
    """What the loop around the steps needs: the function's arguments after ``start,
    stop, cond`` (carried values, series, scans), the carried values it returns, and
    the scans whose append methods it binds."""

    arguments: tuple[str, ...]
    carried: tuple[str, ...]
    bound_scans: tuple[int, ...]


def loop_function(
    frame: LoopFrame,
    first: list[ast.stmt],
    rest: list[ast.stmt],
    steady: bool,
    lines: Iterator[int],
) -> ast.Module:
    """The module defining ``time_loop`` around ``first`` and ``rest`` (the steps, each
    statement located; ``steady``: no step can change the condition), each statement
    of the frame on the next of ``lines``."""
    at = _Lines(lines)
    names = ["start", "stop", "cond", *frame.arguments, "_where", "_scalar"]
    arguments = ast.arguments(
        posonlyargs=[],
        args=[at.node(ast.arg(arg=n), 1) for n in names],
        vararg=None,
        kwonlyargs=[],
        kw_defaults=[],
        kwarg=None,
        defaults=[at.load("_where", 1), at.load("_scalar", 1)],
    )
    body: list[ast.stmt] = [at.assign("iteration", ast.Constant(0))]
    for k in frame.bound_scans:
        append = ast.Attribute(value=at.load(f"s{k}"), attr="append", ctx=ast.Load())
        body.append(at.assign(f"{APPEND}{k}", append))
    test = ast.BoolOp(
        op=ast.And(),
        values=[
            _compare(at, "start", ast.Eq()),
            _compare(at, "stop", ast.Gt()),
            at.load("cond"),
        ],
    )
    body.append(at.statement(ast.If(test=at.node(test), body=[*first], orelse=[])))
    body[-1].body.append(at.assign("start", ast.Constant(1)))  # type: ignore[attr-defined]
    loop, done = _steps_loop(at, rest, steady)
    body.append(loop)
    carried = ast.List(elts=[at.load(c) for c in frame.carried], ctx=ast.Load())
    result = ast.Tuple(elts=[at.load("cond"), at.node(carried), done], ctx=ast.Load())
    body.append(at.statement(ast.Return(value=at.node(result))))
    function = ast.FunctionDef(
        name="time_loop", args=arguments, body=body, decorator_list=[], returns=None
    )
    function.lineno = function.end_lineno = 1
    function.col_offset = function.end_col_offset = 0
    return ast.Module(body=[function], type_ignores=[])


def _steps_loop(at: _Lines, rest: list[ast.stmt], steady: bool) -> tuple[ast.stmt, ast.expr]:
    """The ``for`` over the steps after the first (``rest``), and what the function
    returns as the number of steps done (``steady``: the condition is tested once)."""
    begin = ast.Call(func=at.load("max"), args=[at.load("start"), at.const(1)], keywords=[])
    if steady:
        stop: ast.expr = _if_else(at, "cond", at.load("stop"), at.const(0))
        steps, done = rest, _if_else(at, "cond", at.load("stop"), at.load("start"))
    else:
        stop = at.load("stop")
        ended = at.node(ast.UnaryOp(op=ast.Not(), operand=at.load("cond")))
        test_end = ast.If(
            test=ended,
            body=[at.assign("stop", at.load("iteration")), at.statement(ast.Break())],
            orelse=[],
        )
        steps, done = (
            [at.statement(test_end), *rest],
            _if_else(at, "start", at.load("stop"), at.const(0)),
        )
    loop = ast.For(
        target=at.store("iteration"),
        iter=at.node(ast.Call(func=at.load("range"), args=[at.node(begin), stop], keywords=[])),
        body=steps,
        orelse=[],
        type_comment=None,
    )
    return at.statement(loop), done


class _Lines:
    """Locates the frame's nodes: each statement on the next line, its parts with it."""

    def __init__(self, lines: Iterator[int]) -> None:
        self.lines, self.line = lines, next(lines)

    def node(self, node, line: int | None = None):  # noqa: ANN001, ANN201  # any node
        line = self.line if line is None else line
        node.lineno = node.end_lineno = line
        node.col_offset = node.end_col_offset = 0
        return node

    def statement(self, statement: ast.stmt) -> ast.stmt:
        """``statement`` on the current line; the next statement on the next line."""
        self.node(statement)
        self.line = next(self.lines)
        return statement

    def at(self, line: int | None = None) -> dict[str, Any]:
        line = self.line if line is None else line
        return {"lineno": line, "end_lineno": line, "col_offset": 0, "end_col_offset": 0}

    def load(self, name: str, line: int | None = None) -> ast.Name:
        return new_node(ast.Name, {"id": name, "ctx": _LOAD, **self.at(line)})  # type: ignore[no-any-return]

    def store(self, name: str) -> ast.Name:
        return new_node(ast.Name, {"id": name, "ctx": _STORE, **self.at()})  # type: ignore[no-any-return]

    def const(self, value: int) -> ast.Constant:
        return new_node(ast.Constant, {"value": value, **self.at()})  # type: ignore[no-any-return]

    def assign(self, name: str, value: ast.expr) -> ast.stmt:
        return self.statement(ast.Assign(targets=[self.store(name)], value=self.node(value)))


_LOAD, _STORE = ast.Load(), ast.Store()  # contexts hold nothing: one of each


def _compare(at: _Lines, name: str, op: ast.cmpop) -> ast.Compare:
    compare = ast.Compare(left=at.load(name), ops=[op], comparators=[at.const(0)])
    return at.node(compare)  # type: ignore[no-any-return]


def _if_else(at: _Lines, test: str, body: ast.expr, orelse: ast.expr) -> ast.IfExp:
    return at.node(ast.IfExp(test=at.load(test), body=body, orelse=orelse))  # type: ignore[no-any-return]


def number_lines(module: ast.Module) -> None:
    """Give every statement of ``module`` the line it has in the text ``ast.unparse``
    makes of it, and every node in it that line (a traceback of the compiled function
    then points into that text)."""
    line = 0

    def statements(body: list[ast.stmt]) -> None:
        nonlocal line
        for statement in body:
            line += 1
            blocks = [getattr(statement, f, None) for f in ("body", "orelse")]
            if not any(blocks):
                _at_line(statement, line)
                continue
            statement.lineno = statement.end_lineno = line
            for name in statement._fields:  # the header: a test, a target, an iterable
                value = getattr(statement, name)
                if isinstance(value, (ast.expr, ast.arguments)):
                    _at_line(value, line)
            for k, block in enumerate(blocks):
                if block:
                    line += k  # an ``else:`` line before the second block
                    statements(block)

    statements(module.body)


def _at_line(node: ast.AST, line: int) -> None:
    """``node`` and everything in it located on ``line``."""
    if node._attributes:
        node.lineno = node.end_lineno = line  # type: ignore[attr-defined]
        node.col_offset = node.end_col_offset = 0  # type: ignore[attr-defined]
    for child in ast.iter_child_nodes(node):
        _at_line(child, line)

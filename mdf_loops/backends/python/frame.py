"""The loop around the written-out steps, built as a syntax tree (no text parsed).

:func:`loop_function` makes the module of ``time_loop`` from the lean steps that
:mod:`~mdf_loops.backends.python.source` makes; what it builds reads, as text::

    def time_loop(start, stop, cond, c0, ..., s0, ..., _where=_where):  # the helpers read
        iteration = 0
        _append1 = s1.append                   # appended scans' methods, bound once
        if start == 0 and stop > 0 and cond:
            <the first step>
            start = 1
        <the values every step makes alike>    # made once (invariants.py)
        for iteration in range(max(start, 1), stop if cond else 0):
            <the steps after the first>        # no condition can end the loop: steady
        return cond, [c0, ...], stop if cond else start

(a float64 or int64 scan is written at its step instead, ``s1[iteration] = x``), or,
where a step can end the loop, ``for iteration in range(max(start, 1), stop):``
whose body begins ``if not cond: stop = iteration; break`` and which returns
``stop if start else 0`` steps done.

Every statement is located on a line of its own (the steps come located), so that an
error's line names its statement (the expressions in them may share nodes, located
anywhere); :func:`number_lines` renumbers a copy as the text ``ast.unparse`` makes
reads, for a traceback of the trusted function.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from mdf_loops.backends.python.nodes import LOAD, STORE, new_node, place
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
    #: the writer's helpers (``_where``, ``_scalar``) the steps call: bound as defaults
    helpers: tuple[str, ...] = ("_where", "_scalar")


def loop_function(
    frame: LoopFrame,
    first: list[ast.stmt],
    rest: list[ast.stmt],
    steady: bool,
    lines: Iterator[int],
    invariant: Sequence[ast.stmt] = (),
) -> ast.Module:
    """The module defining ``time_loop`` around ``first`` and ``rest`` (the steps, each
    statement located; ``steady``: no step can change the condition), each statement
    of the frame on the next of ``lines``; ``invariant``: the statements of the steps
    that make the same value each time, made before the loop."""
    at = _Lines(lines)
    names = ["start", "stop", "cond", *frame.arguments, *frame.helpers]
    header = place(1)
    arguments = new_node(
        ast.arguments,
        {
            "posonlyargs": [],
            "args": [_argument(n, header) for n in names],
            "vararg": None,
            "kwonlyargs": [],
            "kw_defaults": [],
            "kwarg": None,
            "defaults": [_load_at(n, header) for n in frame.helpers],
        },
    )
    body: list[ast.stmt] = [at.assign("iteration", at.const(0))]
    for k in frame.bound_scans:
        append = at.node(ast.Attribute, {"value": at.load(f"s{k}"), "attr": "append", "ctx": LOAD})
        body.append(at.assign(f"{APPEND}{k}", append))
    test = at.node(
        ast.BoolOp,
        {
            "op": _AND,
            "values": [_compare(at, "start", _EQ), _compare(at, "stop", _GT), at.load("cond")],
        },
    )
    first_step = at.statement(ast.If, {"test": test, "body": [*first], "orelse": []})
    first_step.body.append(at.assign("start", at.const(1)))
    body.append(first_step)
    body += invariant
    loop, done = _steps_loop(at, rest, steady)
    body.append(loop)
    carried = at.node(ast.List, {"elts": [at.load(c) for c in frame.carried], "ctx": LOAD})
    result = at.node(ast.Tuple, {"elts": [at.load("cond"), carried, done], "ctx": LOAD})
    body.append(at.statement(ast.Return, {"value": result}))
    function = new_node(
        ast.FunctionDef,
        {
            "name": "time_loop",
            "args": arguments,
            "body": body,
            "decorator_list": [],
            "returns": None,
            "type_comment": None,
            **header,
        },
    )
    return new_node(ast.Module, {"body": [function], "type_ignores": []})  # type: ignore[no-any-return]


def _steps_loop(at: _Lines, rest: list[ast.stmt], steady: bool) -> tuple[ast.stmt, ast.expr]:
    """The ``for`` over the steps after the first (``rest``), and what the function
    returns as the number of steps done (``steady``: the condition is tested once)."""
    begin = _call(at, "max", [at.load("start"), at.const(1)])
    if steady:
        stop: ast.expr = _if_else(at, "cond", at.load("stop"), at.const(0))
        steps, done = rest, _if_else(at, "cond", at.load("stop"), at.load("start"))
    else:
        stop = at.load("stop")
        ended = at.node(ast.UnaryOp, {"op": _NOT, "operand": at.load("cond")})
        test_end = at.statement(ast.If, {"test": ended, "body": [], "orelse": []})
        test_end.body += [at.assign("stop", at.load("iteration")), at.statement(ast.Break, {})]  # type: ignore[attr-defined]
        steps, done = [test_end, *rest], _if_else(at, "start", at.load("stop"), at.const(0))
    fields = {
        "target": at.store("iteration"),
        "iter": _call(at, "range", [begin, stop]),
        "body": steps,
        "orelse": [],
        "type_comment": None,
    }
    return at.statement(ast.For, fields), done


def _load_at(name: str, where: dict[str, int]) -> ast.Name:
    return new_node(ast.Name, {"id": name, "ctx": LOAD, **where})  # type: ignore[no-any-return]


def _argument(name: str, where: dict[str, int]) -> ast.arg:
    fields = {"arg": name, "annotation": None, "type_comment": None, **where}
    return new_node(ast.arg, fields)  # type: ignore[no-any-return]


class _Lines:
    """Makes the frame's nodes (:func:`new_node`, no constructor's look at each keyword),
    located: each statement on the next line, its parts with it."""

    def __init__(self, lines: Iterator[int]) -> None:
        self.lines, self.where = lines, place(next(lines))

    def node(self, cls: type[ast.AST], fields: dict[str, Any]) -> Any:
        """A node of ``cls`` holding ``fields``, on the current line."""
        fields.update(self.where)
        return new_node(cls, fields)

    def statement(self, cls: type[ast.AST], fields: dict[str, Any]) -> Any:
        """A statement on the current line; the next statement goes on the next line
        (a block's statements made after it, a header's parts before it)."""
        statement = self.node(cls, fields)
        self.where = place(next(self.lines))
        return statement

    def load(self, name: str) -> ast.Name:
        return self.node(ast.Name, {"id": name, "ctx": LOAD})  # type: ignore[no-any-return]

    def store(self, name: str) -> ast.Name:
        return self.node(ast.Name, {"id": name, "ctx": STORE})  # type: ignore[no-any-return]

    def const(self, value: int) -> ast.Constant:
        return self.node(ast.Constant, {"value": value, "kind": None})  # type: ignore[no-any-return]

    def assign(self, name: str, value: ast.expr) -> ast.stmt:
        fields = {"targets": [self.store(name)], "value": value, "type_comment": None}
        return self.statement(ast.Assign, fields)  # type: ignore[no-any-return]


_AND, _NOT, _EQ, _GT = ast.And(), ast.Not(), ast.Eq(), ast.Gt()  # hold nothing: one of each


def _compare(at: _Lines, name: str, op: ast.cmpop) -> ast.Compare:
    fields = {"left": at.load(name), "ops": [op], "comparators": [at.const(0)]}
    return at.node(ast.Compare, fields)  # type: ignore[no-any-return]


def _call(at: _Lines, function: str, args: list[ast.expr]) -> ast.Call:
    return at.node(ast.Call, {"func": at.load(function), "args": args, "keywords": []})  # type: ignore[no-any-return]


def _if_else(at: _Lines, test: str, body: ast.expr, orelse: ast.expr) -> ast.IfExp:
    fields = {"test": at.load(test), "body": body, "orelse": orelse}
    return at.node(ast.IfExp, fields)  # type: ignore[no-any-return]


def number_lines(module: ast.Module) -> ast.Module:
    """A copy of ``module`` with every statement on the line it has in the text
    ``ast.unparse`` makes of it, and every node in it on that line (a traceback of the
    compiled function then points into that text). ``module`` is not changed (its
    statements may share nodes)."""
    line = 0

    def statements(body: list[ast.stmt]) -> list[ast.stmt]:
        nonlocal line
        out = []
        for statement in body:
            line += 1
            if not (getattr(statement, "body", None) or getattr(statement, "orelse", None)):
                out.append(_at_line(statement, line))
                continue
            fields = {**statement.__dict__, **place(line)}
            for name in statement._fields:  # the header: a test, a target, an iterable
                value = fields.get(name)
                if isinstance(value, (ast.expr, ast.arguments)):
                    fields[name] = _at_line(value, line)
            for k, name in enumerate(("body", "orelse")):
                if fields.get(name):
                    line += k  # an ``else:`` line before the second block
                    fields[name] = statements(fields[name])
            out.append(new_node(statement.__class__, fields))
        return out

    return new_node(ast.Module, {**module.__dict__, "body": statements(module.body)})  # type: ignore[no-any-return]


def _at_line(node: Any, line: int) -> Any:
    """A copy of ``node`` and everything in it, located on ``line``."""
    if not isinstance(node, ast.AST):
        return [_at_line(item, line) for item in node] if node.__class__ is list else node
    if not node._fields:
        return node  # an operator or a context: no location, shared
    fields = dict(node.__dict__)
    for name in node._fields:
        if name in fields:
            fields[name] = _at_line(fields[name], line)
    if node._attributes:
        fields.update(place(line))
    return new_node(node.__class__, fields)

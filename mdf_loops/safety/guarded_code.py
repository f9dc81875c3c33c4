"""Python code over an untrusted model's values, with the interpreter's rules compiled in.

A backend that writes a model's expressions out as Python (the time loops of
``simulate``'s python backend) would give them Python's semantics: ``p % 1`` formats
text, ``big ** 9999`` makes an integer of millions of digits, ``a * b`` broadcasts to
any size. :func:`guarded_function` compiles such generated code for a model that is
not trusted so that every operation of the model's expressions is the one
:mod:`mdf_loops.safety.interpreter` would perform (:mod:`~mdf_loops.safety.untrusted_values`):

* ``a + b`` becomes ``_add(a, b)`` (``untrusted_values.binary``: numbers and numeric
  arrays only, the result's size planned first); comparisons, unary operators and
  subscripts likewise;
* ``numpy.f``, ``math.f`` and the allowed builtins are resolved once, to the
  size-planned functions the interpreter calls; nothing else can be called;
* constants are checked once (an integer of more than ``MAX_INTEGER_BITS`` bits is refused).

Only the statements the caller names as the model's (``is_model_statement``) are
rewritten; the rest is the caller's own scaffolding (its loop over the steps, the
appends to its outputs) and stays as written. A piece of a model statement that the
interpreter does not know is refused here, before anything runs. The rewriting is
done once; a step then costs one Python call per operation, like the interpreter's
walk but without its dispatch.
"""

from __future__ import annotations

import ast
import builtins
import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from mdf_loops.errors import EvaluationError, MdfLoopsError
from mdf_loops.ops.common import check_elements
from mdf_loops.safety.allowlist import SAFE_BUILTINS
from mdf_loops.safety.guarded_numpy import untrusted_expressions
from mdf_loops.safety.interpreter import resolve_function
from mdf_loops.safety.proven_kinds import NUMBERS, ORDERS, ArrayKind, Kind
from mdf_loops.safety.tree_edits import (
    LOAD,
    LOCATION,
    copied,
    made,
    placed,
    replaced,
    statements_through,
)
from mdf_loops.safety.untrusted_values import (
    BINARY,
    BUILTINS,
    COMPARE,
    FLOATS,
    UNARY,
    binary,
    broadcast_shape,
    check_comparison,
    checked_integer,
    numeric,
    unpacked,
)

__all__ = ["guarded_function", "GUARDED_HELPERS"]


def _compare(ops: tuple[type, ...], *values: Any) -> Any:
    """``values[0] <ops[0]> values[1] ...`` as the interpreter compares (each pair checked)."""
    result: Any = True
    for k, op in enumerate(ops):
        left, right = values[k], values[k + 1]
        check_comparison(op, left, right)
        result = COMPARE[op](left, right)
        if not isinstance(result, np.ndarray) and not result:
            return result
    return result


def _binary(op: type) -> Callable[[Any, Any], Any]:
    """``binary`` for ``op``, with its first test (two floats: a float) made here."""
    function = BINARY[op]

    def apply(left: Any, right: Any) -> Any:
        if type(left) in FLOATS and type(right) in FLOATS:
            return function(left, right)
        return binary(op, left, right)

    return apply


def _unary(op: type) -> Callable[[Any], Any]:
    function, symbol = UNARY[op], op.__name__

    def apply(value: Any) -> Any:
        numeric(value, symbol)
        return function(value)

    return apply


def _subscript(container: Any, index: Any) -> Any:
    if isinstance(container, np.ndarray):
        shape = np.empty(container.shape, dtype=np.dtype([]))[index].shape  # no bytes
        check_elements(math.prod(shape), "a subscript")
    return container[index]


def _call(function: Callable, *args: Any, **kwargs: Any) -> Any:
    return checked_integer(function(*args, **kwargs))


def _where(condition: Any, a: Any, b: Any) -> Any:
    """``numpy.where`` (the writer's ``_where``), its broadcast size planned first."""
    check_elements(math.prod(broadcast_shape(condition, a, b)), "the result of numpy.where(...)")
    if type(condition) in (bool, np.bool_) and np.ndim(a) == 0 and np.ndim(b) == 0:
        return a if condition else b
    return np.where(condition, a, b)


#: the helpers a guarded function's rewritten statements call, by name
GUARDED_HELPERS: dict[str, Any] = {
    "_mdf_call": _call,
    "_mdf_compare": _compare,
    "_mdf_subscript": _subscript,
    "_mdf_unpacked": unpacked,
    "_mdf_slice": slice,
    "_where": _where,
    # the writer's _where on arrays whose shapes a proof knows (their size checked before)
    "_mdf_sized_where": np.where,
}


#: operators whose float-with-int form converts the int to a float first, then computes
#: what the float-with-float form computes (``float.__add__``, numpy's float64 scalars)
_FLOAT_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)
_EXACT_INTEGERS = 2**53  # every integer up to this size is a double exactly


class _Rewrite(ast.NodeTransformer):
    """A model statement's expression with every operation through the helpers above."""

    def __init__(
        self,
        known_calls: frozenset[str],
        constants: dict[str, Any],
        kinds: Mapping[int, Kind],
    ):
        self.known_calls = known_calls  # the caller's own helpers a statement may call
        self.constants = constants  # resolved functions and their names
        self.kinds = kinds  # id(expression) -> "float"/"int"/"bool" where proven
        self._methods: dict[type, Callable[[Any], Any] | None] = {}  # visit_<class>
        self.statement: ast.stmt | None = None  # the statement being rewritten
        self._where: dict[str, Any] | None = None

    def start(self, statement: ast.stmt) -> None:
        """Rewrite the expressions of ``statement`` next."""
        self.statement, self._where = statement, None

    @property
    def where(self) -> dict[str, Any]:
        """Where the statement being rewritten is: every node made here is located there
        (the line of an error names the statement; the nodes kept are located anywhere).
        Worked out when a node is first made for the statement."""
        if self._where is None:
            at = self.statement.__dict__
            self._where = {name: at.get(name) for name in LOCATION}
        return self._where

    def visit(self, node: ast.AST) -> Any:
        cls = node.__class__
        if cls is ast.Name and node.ctx.__class__ is ast.Load:  # type: ignore[attr-defined]
            return node  # the most common node: nothing to rewrite
        if cls is ast.Constant:  # a literal: checked once, here, and kept
            checked_integer(node.value)  # type: ignore[attr-defined]
            return node
        if cls is ast.BinOp:
            return self.visit_BinOp(node)  # type: ignore[arg-type]
        method = self._methods.get(cls)
        if method is None:
            method = self._methods[cls] = getattr(self, f"visit_{cls.__name__}", None)
        return self.generic_visit(node) if method is None else method(node)

    def generic_visit(self, node: ast.AST) -> ast.AST:
        """``node`` with its children visited: a copy when one changed (the tree
        visited stays as it was), else ``node``."""
        if not isinstance(node, _KNOWN):
            raise EvaluationError(f"`{ast.unparse(node):.60}` is not part of MDF expressions")
        changed: dict[str, Any] = {}
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, ast.AST):
                new = self.visit(value)
                if new is not value:
                    changed[field] = new
            elif isinstance(value, list):
                items = [self.visit(v) if isinstance(v, ast.AST) else v for v in value]
                if any(a is not b for a, b in zip(items, value, strict=True)):
                    changed[field] = items
        return copied(node, {**changed, **self.where}) if changed else node

    def helper(self, name: str, args: list, node: ast.AST, keywords=()) -> ast.Call:
        function = made(ast.Name, self.where, {"id": name, "ctx": LOAD})
        return made(
            ast.Call, self.where, {"func": function, "args": args, "keywords": list(keywords)}
        )

    def resolved(self, value: Any, node: ast.AST) -> ast.Name:
        name = f"_mdf_f{len(self.constants)}"
        self.constants[name] = value
        return made(ast.Name, self.where, {"id": name, "ctx": LOAD})  # type: ignore[no-any-return]

    def _array(self, node: ast.AST) -> bool:
        """Whether ``node`` is proven a numeric array of a known shape: its operands are
        proven numeric arrays or numbers, and the caller checks its size before it runs."""
        return isinstance(self.kinds.get(id(node)), ArrayKind)

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        left_kind, right_kind = self.kinds.get(id(node.left)), self.kinds.get(id(node.right))
        if (
            (left_kind == "float" and right_kind in NUMBERS)
            or (right_kind == "float" and left_kind in NUMBERS)
            or self._array(node)
        ):  # a float and a number (binary()'s first case), or arrays of known sizes: inline
            left, right = self.visit(node.left), self.visit(node.right)
            if node.op.__class__ in _FLOAT_OPERATORS:
                if left_kind == "float":
                    right = self._as_float(right)
                if right_kind == "float":
                    left = self._as_float(left)
            if left is node.left and right is node.right:
                return node  # nothing inside rewritten: shared, as generic_visit does
            return made(ast.BinOp, self.where, {"left": left, "op": node.op, "right": right})
        op = f"_mdf_{type(node.op).__name__}"
        self.constants.setdefault(op, _binary(type(node.op)))
        return self.helper(op, [self.visit(node.left), self.visit(node.right)], node)

    def _as_float(self, node: ast.AST) -> ast.AST:
        """An integer literal beside a proven float, as the float the operator converts it
        to first (Python's and numpy's float arithmetic alike): the same double for
        ``|k| <= 2**53``, and CPython runs float-with-float arithmetic faster."""
        if node.__class__ is ast.Constant:
            value = node.value  # type: ignore[attr-defined]
            if value.__class__ is int and -_EXACT_INTEGERS <= value <= _EXACT_INTEGERS:
                return made(ast.Constant, self.where, {"value": float(value), "kind": None})
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        if isinstance(node.op, ast.Not):
            return self.generic_visit(node)
        if isinstance(node.op, (ast.USub, ast.UAdd)) and (
            self.kinds.get(id(node.operand)) in NUMBERS or self._array(node)
        ):
            operand = self.visit(node.operand)
            if operand is node.operand:
                return node
            return placed(ast.UnaryOp(node.op, operand), self.where)
        op = f"_mdf_{type(node.op).__name__}"
        self.constants.setdefault(op, _unary(type(node.op)))
        return self.helper(op, [self.visit(node.operand)], node)

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        values = [node.left, *node.comparators]
        if self._array(node) or (
            all(self.kinds.get(id(v)) in NUMBERS for v in values)
            and all(isinstance(op, ORDERS) for op in node.ops)
        ):  # numbers of fixed size compared (a bool, as _compare gives), or arrays of known sizes
            inline = ast.Compare(
                self.visit(node.left), node.ops, [self.visit(c) for c in node.comparators]
            )
            return placed(inline, self.where)
        ops = self.resolved(tuple(type(op) for op in node.ops), node)
        values = [self.visit(node.left), *(self.visit(c) for c in node.comparators)]
        return self.helper("_mdf_compare", [ops, *values], node)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        if not isinstance(node.ctx, ast.Load):
            raise EvaluationError(f"`{ast.unparse(node):.60}`: only reading a subscript")
        return self.helper("_mdf_subscript", [self.visit(node.value), self.visit(node.slice)], node)

    def visit_Slice(self, node: ast.Slice) -> ast.AST:
        bounds = (node.lower, node.upper, node.step)
        none = placed(ast.Constant(None), self.where)
        parts = [none if p is None else self.visit(p) for p in bounds]
        return self.helper("_mdf_slice", parts, node)

    def visit_Starred(self, node: ast.Starred) -> ast.AST:
        inner = self.helper("_mdf_unpacked", [self.visit(node.value)], node)
        return placed(ast.Starred(inner, ast.Load()), self.where)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        return self.resolved(resolve_function(node), node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if any(k.arg is None for k in node.keywords):
            raise EvaluationError("`**` in a call is not part of MDF expressions")
        args = [self.visit(a) for a in node.args]
        keywords = [
            placed(ast.keyword(k.arg, self.visit(k.value)), self.where) for k in node.keywords
        ]
        func = node.func
        if isinstance(func, ast.Name) and func.id == "_where" and self._array(node):
            func = made(ast.Name, self.where, {"id": "_mdf_sized_where", "ctx": LOAD})
            return placed(ast.Call(func, args, keywords), self.where)  # its size is known
        if isinstance(func, ast.Name) and func.id in self.known_calls:
            return placed(ast.Call(func, args, keywords), self.where)
        if isinstance(func, ast.Name) and func.id in SAFE_BUILTINS:
            target: ast.AST = self.resolved(BUILTINS[func.id], func)
        elif isinstance(func, ast.Attribute):
            target = self.visit(func)
        else:
            raise EvaluationError(f"`{ast.unparse(func):.60}` cannot be called")
        return self.helper("_mdf_call", [target, *args], node, keywords)


_KNOWN = (
    ast.Name, ast.Load, ast.Constant, ast.BoolOp, ast.And, ast.Or, ast.Not, ast.IfExp,
    ast.List, ast.Tuple, ast.Set, ast.Dict, ast.Call, ast.keyword, ast.UnaryOp,
)  # fmt: skip


def guarded_function(
    source: str | ast.Module,
    name: str,
    namespace: Mapping[str, Any],
    model_parts: Callable[[ast.stmt], tuple[list[ast.expr], str]],
    known_calls: frozenset[str] = frozenset(),
    kinds_of: Callable[[ast.Module], Mapping[int, Kind]] | None = None,
) -> Callable[..., Any]:
    """The function ``name`` defined by ``source`` (its text, or the module parsed), its
    model statements guarded.

    ``model_parts(statement)`` gives the expressions of a statement that come from
    the model (rewritten; ``[]`` for the caller's own statements, kept) and the model
    element they belong to (``"node 'n' parameter 'p'"``), which an error raised
    there names, with the value of the function's local ``iteration``.
    ``known_calls`` are names of the caller's helpers (in ``namespace``) that a model
    expression may call as written. ``namespace`` gives the globals the caller's own
    statements use; the model's expressions see only their local variables and the
    functions resolved here. Raises :class:`EvaluationError` for a piece the
    interpreter does not know.

    A parsed ``source`` is not changed (the guarded function is compiled from a copy of
    what it rewrites; its nodes may be shared among its statements) and must have each
    statement on a line of its own, as ``ast.parse`` locates a text: every node made
    here is located on its statement's line, so the line of an error names the
    statement (the expressions kept as they are may be located anywhere).

    ``kinds_of(tree)`` may prove expressions of the parsed ``source`` to be floats
    (``{id(expression): "float"}``; ``"int"``, ``"bool"`` likewise, and ``"number"``: a
    float or a bounded int): an operator on a proven float and a proven number runs
    inline, as its guard would run it (a float with a number makes a number of fixed
    size), and so do a proven number negated and proven numbers compared; so does an
    operation proven to make a numeric array of a known shape (:class:`~mdf_loops.safety.
    proven_kinds.ArrayKind`), the caller checking the arrays it gives and their sizes
    against ``max_elements`` before the function runs. The caller answers for the proof.
    """
    tree = ast.parse(source) if isinstance(source, str) else source
    kinds = kinds_of(tree) if kinds_of is not None else {}
    constants: dict[str, Any] = {}
    places: dict[int, str] = {}
    with untrusted_expressions():
        rewrite = _Rewrite(known_calls, constants, kinds)

        def guarded(statement: ast.stmt) -> ast.stmt:
            expressions, where = model_parts(statement)
            rewrite.start(statement)
            for expression in expressions:
                places[statement.lineno] = where
                new = rewrite.visit(expression)
                if new is not expression:  # else nothing in it to guard: kept as it is
                    statement = replaced(statement, expression, new)
            return statement

        module = ast.Module(body=statements_through(tree.body, guarded), type_ignores=[])
    scope = {**namespace, **GUARDED_HELPERS, **constants}
    scope["__builtins__"] = {"range": range, "max": builtins.max, "len": builtins.len}
    filename = f"<guarded {name}>"
    exec(compile(module, filename, "exec"), scope)  # noqa: S102
    return functools.partial(_located, scope[name], filename, places)


def _located(function: Callable[..., Any], filename: str, places: dict[int, str], *args: Any):
    """``function(*args)``; an error of ours raised in a model statement names its element
    and the step (the ``iteration`` of the frame)."""
    try:
        return function(*args)
    except MdfLoopsError as exc:
        traceback, found = exc.__traceback__, None
        while traceback is not None:
            if traceback.tb_frame.f_code.co_filename == filename:
                found = (traceback.tb_lineno, traceback.tb_frame.f_locals.get("iteration"))
            traceback = traceback.tb_next
        if found is not None and found[0] in places:
            exc.args = (f"{places[found[0]]}, iteration {found[1]}: {exc}",)
        raise

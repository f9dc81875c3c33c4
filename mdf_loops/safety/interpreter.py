"""Evaluating the expressions of a model that is not trusted, over numbers and numeric arrays.

Python's ``eval`` gives an expression Python's semantics for every value it meets:
``'%02500000000d' % 1`` formats 2.5 GB of text, ``[0] * 10000 * 10000`` builds a
list of 10^8 items, ``(10**9999)**9999`` an integer of 10^8 digits, and each piece
of such an expression is harmless on its own. :func:`evaluate_untrusted` walks the
parsed expression itself instead, and every result is planned before it is made:

* arithmetic, comparison and unary operators take numbers (bool, int, float,
  complex, numpy scalars) and numeric arrays only, never text, lists, tuples, dicts
  or sets; an array result's broadcast (or ``@``) shape is checked against
  ``max_elements``, an integer result's size (in bits) against :data:`MAX_INTEGER_BITS`;
* subscripts of arrays are sized on an array of no bytes before indexing;
* calls go to the builtins of :data:`~mdf_loops.safety.allowlist.SAFE_BUILTINS`
  (``sum`` adds numbers and arrays only), ``math.<function>`` and the size-planned
  numpy of :mod:`mdf_loops.safety.guarded_numpy`; nothing else can be called;
* list, tuple, dict and set literals and text literals are data: they can be made,
  indexed, compared and passed to functions, never computed with.

Anything else in the tree is refused: the interpreter knows no other node, so an
expression the allow-list let through by mistake still cannot reach Python.
"""

from __future__ import annotations

import ast
import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from mdf_loops.errors import EvaluationError
from mdf_loops.ops.common import check_elements
from mdf_loops.safety.allowlist import MATH_FUNCTIONS, SAFE_BUILTINS
from mdf_loops.safety.guarded_numpy import expression_numpy
from mdf_loops.safety.untrusted_values import (
    BUILTINS,
    COMPARE,
    MAX_INTEGER_BITS,
    UNARY,
    binary,
    check_comparison,
    checked_integer,
    math_function,
    may_call,
    numeric,
    unpacked,
)

__all__ = ["evaluate_untrusted", "resolve_function", "MAX_INTEGER_BITS"]


def evaluate_untrusted(expression: str, scope: Mapping[str, Any]) -> Any:
    """The value of ``expression`` with the names of ``scope``.

    Raises:
        NameError: a name neither ``scope`` nor the allowed functions hold.
        EvaluationError: a piece the interpreter refuses (text or list arithmetic),
            or one that fails.
        SizeLimitError: a result over ``max_elements`` or an integer over
            :data:`MAX_INTEGER_BITS` bits, before it is made.
    """
    return _Interpreter(scope).value(_parsed(expression).body)


@functools.lru_cache(maxsize=4096)
def _parsed(expression: str) -> ast.Expression:
    try:
        return ast.parse(expression.lstrip(" \t"), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise EvaluationError(f"{expression!r:.80} is not a valid expression ({exc})") from None


def resolve_function(node: ast.Attribute) -> Any:
    """What ``numpy.<name>``, ``numpy.linalg.<name>`` or ``math.<name>`` stands for in an
    untrusted expression (the size-planned functions); anything else is refused."""
    owner = node.value
    if isinstance(owner, ast.Name) and owner.id == "math" and node.attr in MATH_FUNCTIONS:
        return math_function(node.attr)
    numpy = expression_numpy()
    if isinstance(owner, ast.Name) and owner.id == "numpy":
        found = getattr(numpy, node.attr, None)
    elif (
        isinstance(owner, ast.Attribute)
        and owner.attr == "linalg"
        and isinstance(owner.value, ast.Name)
        and owner.value.id == "numpy"
    ):
        found = getattr(numpy.linalg, node.attr, None)
    else:
        found = None
    if found is None or node.attr.startswith("_"):
        raise EvaluationError(f"`{ast.unparse(node):.60}` is not an allowed function")
    return found


class _Interpreter:
    def __init__(self, scope: Mapping[str, Any]):
        self.scope = scope

    def value(self, node: ast.AST) -> Any:
        handler = _HANDLERS.get(type(node))
        if handler is None:
            raise EvaluationError(f"`{ast.unparse(node):.60}` is not part of MDF expressions")
        return handler(self, node)

    def constant(self, node: ast.Constant) -> Any:
        return checked_integer(node.value)

    def name(self, node: ast.Name) -> Any:
        if node.id in self.scope:
            return self.scope[node.id]
        if node.id in SAFE_BUILTINS:
            return BUILTINS[node.id]
        raise NameError(node.id)

    def attribute(self, node: ast.Attribute) -> Any:
        return resolve_function(node)

    def binary(self, node: ast.BinOp) -> Any:
        left, right = self.value(node.left), self.value(node.right)
        return binary(type(node.op), left, right)

    def unary(self, node: ast.UnaryOp) -> Any:
        operand = self.value(node.operand)
        if not isinstance(node.op, ast.Not):
            numeric(operand, type(node.op).__name__)
        return UNARY[type(node.op)](operand)

    def boolean(self, node: ast.BoolOp) -> Any:
        result = None
        for item in node.values:
            result = self.value(item)
            if bool(result) is isinstance(node.op, ast.Or):
                return result
        return result

    def compare(self, node: ast.Compare) -> Any:
        left = self.value(node.left)
        result: Any = True
        for op, item in zip(node.ops, node.comparators, strict=True):
            right = self.value(item)
            check_comparison(type(op), left, right)
            result = COMPARE[type(op)](left, right)
            if not isinstance(result, np.ndarray) and not result:
                return result
            left = right
        return result

    def conditional(self, node: ast.IfExp) -> Any:
        return self.value(node.body) if self.value(node.test) else self.value(node.orelse)

    def subscript(self, node: ast.Subscript) -> Any:
        container, index = self.value(node.value), self.value(node.slice)
        if isinstance(container, np.ndarray):
            shape = np.empty(container.shape, dtype=np.dtype([]))[index].shape  # no bytes
            check_elements(math.prod(shape), f"`{ast.unparse(node):.60}`")
        return container[index]

    def slice(self, node: ast.Slice) -> slice:
        parts = (node.lower, node.upper, node.step)
        return slice(*(None if part is None else self.value(part) for part in parts))

    def items(self, nodes: list[ast.expr]) -> list:
        values: list = []
        for item in nodes:
            if isinstance(item, ast.Starred):
                values.extend(unpacked(self.value(item.value)))
            else:
                values.append(self.value(item))
        return values

    def list_(self, node: ast.List) -> list:
        return self.items(node.elts)

    def tuple_(self, node: ast.Tuple) -> tuple:
        return tuple(self.items(node.elts))

    def set_(self, node: ast.Set) -> set:
        return set(self.items(node.elts))

    def dict_(self, node: ast.Dict) -> dict:
        if any(key is None for key in node.keys):
            raise EvaluationError("`**` in a dict is not part of MDF expressions")
        result = {}
        for key, item in zip(node.keys, node.values, strict=True):
            result[self.value(key)] = self.value(item)  # type: ignore[arg-type]
        return result

    def call(self, node: ast.Call) -> Any:
        function = self.value(node.func)
        if not may_call(function):
            raise EvaluationError(f"`{ast.unparse(node.func):.60}` cannot be called")
        args = self.items(node.args)
        if any(k.arg is None for k in node.keywords):
            raise EvaluationError("`**` in a call is not part of MDF expressions")
        kwargs = {str(k.arg): self.value(k.value) for k in node.keywords}
        return checked_integer(function(*args, **kwargs))


_HANDLERS: dict[type, Callable[[_Interpreter, Any], Any]] = {
    ast.Constant: _Interpreter.constant,
    ast.Name: _Interpreter.name,
    ast.Attribute: _Interpreter.attribute,
    ast.BinOp: _Interpreter.binary,
    ast.UnaryOp: _Interpreter.unary,
    ast.BoolOp: _Interpreter.boolean,
    ast.Compare: _Interpreter.compare,
    ast.IfExp: _Interpreter.conditional,
    ast.Subscript: _Interpreter.subscript,
    ast.Slice: _Interpreter.slice,
    ast.List: _Interpreter.list_,
    ast.Tuple: _Interpreter.tuple_,
    ast.Set: _Interpreter.set_,
    ast.Dict: _Interpreter.dict_,
    ast.Call: _Interpreter.call,
}

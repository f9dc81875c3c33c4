"""Translate MDF value expressions (Python syntax) into ONNX nodes.

An expression such as ``x * w + b``, ``tanh(a) * 2`` or ``numpy.maximum(a, 0)`` is
parsed with :mod:`ast` and each operation becomes an ONNX node. Names resolve in
the node's environment (ports, parameters, functions). Literals and constant
parameters stay *weak* (:class:`~mdf_loops.onnx.builder.Weak`): combined in
Python among themselves, and cast to the element type of the tensor they meet,
as numpy does with Python numbers. Calls of numpy, math and builtin functions
are in :mod:`mdf_loops.onnx.expression_calls`, indexing and tuple or list displays in
:mod:`mdf_loops.onnx.expression_indexing`; which operator each Python
operator and function becomes, in :mod:`mdf_loops.onnx.expression_tables`.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from mdf_loops.errors import ExpressionError
from mdf_loops.model.references import id_refusal, referenced_id
from mdf_loops.model.values import promoted_dtype
from mdf_loops.onnx.builder import GraphBuilder, Weak, onnx_dtype
from mdf_loops.onnx.expression_calls import translate_call
from mdf_loops.onnx.expression_indexing import Items, stack_items, translate_subscript
from mdf_loops.onnx.expression_tables import (
    BINARY,
    BITWISE,
    BOOL_ARITHMETIC,
    COMPARE,
    MODULES,
    PY_BINARY,
    PY_COMPARE,
)

__all__ = ["translate", "ExpressionError", "Items", "Operand", "onnx_dtype", "stacked"]

Operand = "str | Weak"


def translate(
    expression: Any,
    env: Mapping[str, Any],
    builder: GraphBuilder,
    where: str,
    *,
    keep_items: bool = False,
) -> Any:
    """ONNX value name (or :class:`Weak`) computing ``expression`` from ``env``.

    ``where`` names the model element (``node 'x' port 'y'``) for errors. With
    ``keep_items``, a tuple or list display comes back as :class:`Items` (a parameter's
    value that later expressions index), not stacked.
    """
    if not isinstance(expression, str):
        return Weak(np.asarray(expression))
    reference = referenced_id(expression, env)  # exactly an id: that value, as stock reads it
    if reference is not None:
        value = env[reference]
        return value if keep_items else stacked(value, builder, where)
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        advice = id_refusal(expression, env)  # an id that is no Python name, inside
        raise ExpressionError(
            f"{where}: cannot parse expression {expression!r}: {exc.msg}"
            + (f"; {advice}" if advice else "")
        ) from None
    translator = ExpressionTranslator(env, builder, where, expression)
    return translator.evaluate(tree.body) if keep_items else translator.visit(tree.body)


def stacked(value: Any, builder: GraphBuilder, where: str) -> Any:
    """``value`` as one ONNX value (or :class:`Weak`): :class:`Items` stacked on a new
    first axis (numpy's ``array``); ``where`` names it for errors."""
    if not isinstance(value, Items):
        return value
    return ExpressionTranslator({}, builder, where, "").stack(value, None)


class ExpressionTranslator:
    """One expression's AST walked into ONNX nodes on ``builder``.

    Operators, comparisons, ``and``/``or``, conditional expressions and indexing are
    translated here; calls in :mod:`mdf_loops.onnx.expression_calls`, which uses
    :meth:`binary`, :meth:`pair`, :meth:`common` and :meth:`as_bool`.
    """

    def __init__(self, env, builder: GraphBuilder, where: str, source: str):
        self.env, self.b, self.where, self.source = env, builder, where, source

    def fail(self, node: ast.AST | None, why: str) -> ExpressionError:
        if node is None:
            return ExpressionError(f"{self.where}: {why}")
        piece = ast.get_source_segment(self.source, node) or ast.dump(node)
        return ExpressionError(f"{self.where}: {why} in {self.source!r} (at {piece!r})")

    def visit(self, node: ast.AST) -> Any:
        """The ONNX value (or :class:`Weak`) of ``node``; a tuple or list is stacked."""
        value = self.evaluate(node)
        return self.stack(value, node) if isinstance(value, Items) else value

    def evaluate(self, node: ast.AST) -> Any:
        """The value of ``node``, a tuple or list kept as :class:`Items`."""
        method = getattr(self, f"visit_{type(node).__name__}", None)
        if method is None:
            raise self.fail(node, f"{type(node).__name__} has no ONNX translation")
        return method(node)

    # -- leaves
    def visit_Constant(self, node: ast.Constant) -> Weak:
        if isinstance(node.value, (bool, int, float)):
            return Weak(node.value)
        raise self.fail(node, "only numeric literals can be exported")

    def visit_Name(self, node: ast.Name) -> Any:
        if node.id in self.env:
            return self.env[node.id]
        raise self.fail(node, f"unknown name '{node.id}'")

    def visit_List(self, node: ast.List | ast.Tuple) -> Any:
        items = [self.visit(e) for e in node.elts]
        if all(isinstance(i, Weak) for i in items):
            return Weak(np.array([i.value for i in items]))
        return Items(tuple(items))

    visit_Tuple = visit_List

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        if isinstance(node.value, ast.Name) and node.value.id in MODULES:
            if node.attr in ("pi", "e", "inf", "nan"):
                return Weak(getattr(math, node.attr))
        elif node.attr == "T":
            value = self.visit(node.value)
            if isinstance(value, Weak):
                return Weak(value.array().T)
            return self.b.op("Transpose", [value])[0]
        raise self.fail(node, "attribute access other than numpy/math constants and .T")

    # -- operators
    def visit_BinOp(self, node: ast.BinOp) -> Any:
        return self.binary(node, type(node.op), self.visit(node.left), self.visit(node.right))

    def binary(self, node: ast.AST, kind: type, left: Any, right: Any) -> Any:
        if isinstance(left, Weak) and isinstance(right, Weak):
            if kind not in PY_BINARY:
                raise self.fail(node, f"operator {kind.__name__}")
            return Weak(PY_BINARY[kind](left.value, right.value))
        a, c = self.pair(left, right)
        dtype = self.b.dtype(a)
        integral = dtype is not None and dtype.kind in "iub"
        if dtype == np.dtype(bool) and kind not in BITWISE and kind is not ast.Div:
            if kind in BOOL_ARITHMETIC:  # numpy's True * False: a logical and, a boolean
                return self.b.op(BOOL_ARITHMETIC[kind], [a, c])[0]
            raise self.fail(  # numpy refuses -, or makes int8 (**, //, %), bool matrices (@)
                node, f"operator {kind.__name__} on two boolean values (cast one to a number)"
            )
        if kind is ast.Div:
            if integral:  # Python's / always gives floats
                a, c = (self.b.op("Cast", [v], to=onnx_dtype(np.float64))[0] for v in (a, c))
            return self.b.op("Div", [a, c])[0]
        if kind is ast.Mod:
            if integral:
                return self.b.op("Mod", [a, c], fmod=0)[0]  # the sign of the divisor, as Python
            quotient = self.b.op("Floor", [self.b.op("Div", [a, c])[0]])[0]
            return self.b.op("Sub", [a, self.b.op("Mul", [quotient, c])[0]])[0]
        if kind is ast.FloorDiv:
            if integral:  # (a - a mod c) / c is exact: no rounding direction to get wrong
                remainder = self.b.op("Mod", [a, c], fmod=0)[0]
                return self.b.op("Div", [self.b.op("Sub", [a, remainder])[0], c])[0]
            return self.b.op("Floor", [self.b.op("Div", [a, c])[0]])[0]
        if kind in BITWISE:
            logical, bitwise = BITWISE[kind]
            if dtype == np.dtype(bool):
                return self.b.op(logical, [a, c])[0]
            if integral and self.b.opset >= 18:
                return self.b.op(bitwise, [a, c])[0]
            raise self.fail(node, f"operator {kind.__name__} on {dtype} values")
        if kind not in BINARY:
            raise self.fail(node, f"operator {kind.__name__}")
        return self.b.op(BINARY[kind], [a, c])[0]

    def pair(self, left: Any, right: Any) -> tuple[str, str]:
        """Two ONNX values of one element type (numpy's promotion)."""
        a, c = self.common([left, right])
        return a, c

    def common(self, operands: list) -> list[str]:
        """ONNX values of one element type for ``operands``, promoted as numpy promotes them.

        Tensors and constant arrays (list parameters, list literals) promote among
        themselves; a scalar constant (a literal or a number parameter, a Python number
        in the engine) takes their type unless it is of a higher kind (a float meeting
        integers): numpy's rules for Python scalars.
        """
        tensors = [o for o in operands if isinstance(o, str)]
        weak = [o for o in operands if isinstance(o, Weak)]
        if not tensors:
            common = np.result_type(*[w.array() for w in weak])
            return [self.b.constant(w.array().astype(common)) for w in weak]
        dtypes = [self.b.dtype(t) for t in tensors]
        if any(d is None for d in dtypes):
            like = next(
                (t for t, d in zip(tensors, dtypes, strict=True) if d is not None), tensors[0]
            )
            return [self.b.strong(o, like) for o in operands]
        # a 0-d constant is a Python number (weak); a constant array is strong
        common = promoted_dtype(
            *dtypes, *[w.array().item() if not w.array().ndim else w.array().dtype for w in weak]
        )
        result = []
        for operand in operands:
            if isinstance(operand, Weak):
                result.append(self.b.constant(operand.array().astype(common)))
            elif self.b.dtype(operand) != common:
                result.append(self.b.op("Cast", [operand], to=onnx_dtype(common))[0])
            else:
                result.append(operand)
        return result

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        operand = self.visit(node.operand)
        if isinstance(node.op, ast.UAdd):
            return operand
        if isinstance(operand, Weak):
            fn = {ast.USub: np.negative, ast.Not: np.logical_not, ast.Invert: np.invert}
            return Weak(fn[type(node.op)](operand.value))
        if isinstance(node.op, ast.USub):
            return self.b.op("Neg", [operand])[0]
        if isinstance(node.op, ast.Not):
            return self.b.op("Not", [self.as_bool(operand)])[0]
        dtype = self.b.dtype(operand)
        if dtype == np.dtype(bool):
            return self.b.op("Not", [operand])[0]
        if dtype is not None and dtype.kind in "iu" and self.b.opset >= 18:
            return self.b.op("BitwiseNot", [operand])[0]
        raise self.fail(node, f"operator ~ on {dtype} values")

    def visit_Compare(self, node: ast.Compare) -> Any:
        results: list[Any] = []
        left = self.visit(node.left)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = self.visit(comparator)
            kind = type(op)
            if isinstance(left, Weak) and isinstance(right, Weak):
                results.append(Weak(PY_COMPARE[kind](left.value, right.value)))
            elif kind is ast.NotEq:
                a, c = self.pair(left, right)
                results.append(self.b.op("Not", [self.b.op("Equal", [a, c])[0]])[0])
            elif kind in COMPARE:
                a, c = self.pair(left, right)
                results.append(self.b.op(COMPARE[kind], [a, c])[0])
            else:
                raise self.fail(node, f"comparison {kind.__name__}")
            left = right
        result = results[0]
        for value in results[1:]:  # a < b < c: both comparisons hold
            result = self.binary(node, ast.BitAnd, result, value)
        return result

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        """``and``/``or`` as Python evaluates them: ``a and b`` is ``b if a else a``."""
        is_and = isinstance(node.op, ast.And)
        result = self.visit(node.values[0])
        for item in node.values[1:]:
            value = self.visit(item)
            if isinstance(result, Weak) and isinstance(value, Weak):
                try:
                    result = value if bool(result.array()) == is_and else result
                except ValueError:
                    raise self.fail(node, "the truth value of an array") from None
            elif self._is_bool(result) and self._is_bool(value):
                result = self.b.op(
                    "And" if is_and else "Or", [self.as_bool(result), self.as_bool(value)]
                )[0]
            else:
                taken, other = (value, result) if is_and else (result, value)
                a, c = self.pair(taken, other)
                result = self.b.op("Where", [self.as_bool(result), a, c])[0]
        return result

    def _is_bool(self, operand: Any) -> bool:
        if isinstance(operand, Weak):
            return operand.array().dtype == np.dtype(bool)
        return self.b.dtype(operand) == np.dtype(bool)

    def as_bool(self, operand: Any) -> str:
        if isinstance(operand, Weak):
            return self.b.constant(operand.array().astype(bool))
        if self.b.dtype(operand) != np.dtype(bool):
            return self.b.op("Cast", [operand], to=onnx_dtype(np.bool_))[0]
        return operand

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.visit(node.test)
        if isinstance(cond, Weak):
            return self.visit(node.body if bool(cond.value) else node.orelse)
        a, c = self.pair(self.visit(node.body), self.visit(node.orelse))
        return self.b.op("Where", [self.as_bool(cond), a, c])[0]

    # -- indexing
    def visit_Subscript(self, node: ast.Subscript) -> Any:
        return translate_subscript(self, node)

    def stack(self, items: Items, node: ast.AST | None) -> str:
        """The items as one tensor on a new first axis; they must have one shape."""
        return stack_items(self, items, node)

    # -- calls
    def visit_Call(self, node: ast.Call) -> Any:
        return translate_call(self, node)

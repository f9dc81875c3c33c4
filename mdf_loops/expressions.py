"""Translate MDF value expressions (Python syntax) into ONNX nodes.

An expression such as ``x * w + b``, ``tanh(a) * 2`` or ``numpy.maximum(a, 0)`` is
parsed with :mod:`ast` and each operation becomes an ONNX node. Names resolve in
the node's environment (ports, parameters, functions). Literals and constant
parameters stay *weak* (:class:`~mdf_loops.onnx_builder.Weak`): combined in
Python among themselves, and cast to the element type of the tensor they meet,
as numpy does with Python numbers.
"""

from __future__ import annotations

import ast
import math
from typing import Any, Callable, Mapping

import numpy as np

from .errors import ModelError
from .onnx_builder import GraphBuilder, Weak

__all__ = ["translate", "ExpressionError", "Operand"]

Operand = "str | Weak"


class ExpressionError(ModelError):
    """An expression uses something ONNX cannot express (or that is not understood)."""


_BINARY = {ast.Add: "Add", ast.Sub: "Sub", ast.Mult: "Mul", ast.Div: "Div", ast.Pow: "Pow",
           ast.MatMult: "MatMul"}
_PY_BINARY: dict[type, Callable] = {
    ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.true_divide,
    ast.Pow: np.power, ast.MatMult: np.matmul, ast.Mod: np.mod, ast.FloorDiv: np.floor_divide,
}
_COMPARE = {ast.Lt: "Less", ast.LtE: "LessOrEqual", ast.Gt: "Greater", ast.GtE: "GreaterOrEqual",
            ast.Eq: "Equal"}
_PY_COMPARE = {ast.Lt: np.less, ast.LtE: np.less_equal, ast.Gt: np.greater,
               ast.GtE: np.greater_equal, ast.Eq: np.equal, ast.NotEq: np.not_equal}

#: numpy/math function name -> ONNX operator, for element-wise functions of one argument
_UNARY_FUNCTIONS = {
    "tanh": "Tanh", "exp": "Exp", "log": "Log", "sin": "Sin", "cos": "Cos", "tan": "Tan",
    "arcsin": "Asin", "arccos": "Acos", "arctan": "Atan", "asin": "Asin", "acos": "Acos",
    "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh", "sqrt": "Sqrt", "abs": "Abs",
    "fabs": "Abs", "absolute": "Abs", "negative": "Neg", "floor": "Floor", "ceil": "Ceil",
    "sign": "Sign", "logical_not": "Not", "round": "Round", "rint": "Round",
    "reciprocal": "Reciprocal", "erf": "Erf", "isnan": "IsNaN",
}
#: numpy function name -> ONNX operator, for element-wise functions of two arguments
_BINARY_FUNCTIONS = {
    "maximum": "Max", "minimum": "Min", "power": "Pow", "add": "Add", "subtract": "Sub",
    "multiply": "Mul", "divide": "Div", "true_divide": "Div", "dot": "MatMul",
    "matmul": "MatMul", "greater": "Greater", "less": "Less", "equal": "Equal",
    "greater_equal": "GreaterOrEqual", "less_equal": "LessOrEqual",
    "logical_and": "And", "logical_or": "Or", "logical_xor": "Xor",
}
_REDUCTIONS = {"sum": "ReduceSum", "mean": "ReduceMean", "max": "ReduceMax", "min": "ReduceMin",
               "amax": "ReduceMax", "amin": "ReduceMin", "prod": "ReduceProd"}
_MODULES = {"numpy", "np", "math"}


def translate(expression: Any, env: Mapping[str, Any], builder: GraphBuilder, where: str) -> Any:
    """ONNX value name (or :class:`Weak`) computing ``expression`` from ``env``.

    ``where`` names the model element (``node 'x' port 'y'``) for errors.
    """
    if not isinstance(expression, str):
        return Weak(np.asarray(expression))
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"{where}: cannot parse expression {expression!r}: {exc.msg}") from None
    return _Translator(env, builder, where, expression).visit(tree.body)


class _Translator:
    def __init__(self, env, builder: GraphBuilder, where: str, source: str):
        self.env, self.b, self.where, self.source = env, builder, where, source

    def fail(self, node: ast.AST, why: str) -> ExpressionError:
        piece = ast.get_source_segment(self.source, node) or ast.dump(node)
        return ExpressionError(f"{self.where}: {why} in {self.source!r} (at {piece!r})")

    def visit(self, node: ast.AST) -> Any:
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
        if node.id in ("True", "False"):
            return Weak(node.id == "True")
        raise self.fail(node, f"unknown name '{node.id}'")

    def visit_List(self, node: ast.List) -> Any:
        items = [self.visit(e) for e in node.elts]
        if all(isinstance(i, Weak) for i in items):
            return Weak(np.array([i.value for i in items]))
        like = next(i for i in items if isinstance(i, str))
        axes = self.b.constant(np.array([0], dtype=np.int64))
        parts = [self.b.op("Unsqueeze", [self.b.strong(i, like), axes])[0] for i in items]
        return self.b.op("Concat", parts, axis=0)[0]

    visit_Tuple = visit_List

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        if isinstance(node.value, ast.Name) and node.value.id in _MODULES:
            if node.attr in ("pi", "e", "inf", "nan"):
                return Weak(getattr(math, node.attr))
        raise self.fail(node, "attribute access other than numpy/math constants")

    # -- operators
    def visit_BinOp(self, node: ast.BinOp) -> Any:
        left, right = self.visit(node.left), self.visit(node.right)
        kind = type(node.op)
        if isinstance(left, Weak) and isinstance(right, Weak):
            if kind not in _PY_BINARY:
                raise self.fail(node, "operator")
            return Weak(_PY_BINARY[kind](left.value, right.value))
        if kind is ast.Mod:
            return self._python_mod(left, right)
        if kind is ast.FloorDiv:
            return self.b.op("Floor", [self._divide(left, right)])[0]
        if kind is ast.Div:
            return self._divide(left, right)
        if kind not in _BINARY:
            raise self.fail(node, f"operator {type(node.op).__name__}")
        a, c = self._pair(left, right, allow_mixed=kind is ast.Pow)
        return self.b.op(_BINARY[kind], [a, c])[0]

    def _divide(self, left: Any, right: Any) -> str:
        a, c = self._pair(left, right)
        dtype = self.b.dtype(a)
        if dtype is not None and dtype.kind in "iub":  # Python's / always gives floats
            a = self.b.op("Cast", [a], to=onnx_dtype(np.float64))[0]
            c = self.b.op("Cast", [c], to=onnx_dtype(np.float64))[0]
        return self.b.op("Div", [a, c])[0]

    def _python_mod(self, left: Any, right: Any) -> str:
        a, c = self._pair(left, right)
        dtype = self.b.dtype(a)
        if dtype is not None and dtype.kind in "iu":
            return self.b.op("Mod", [a, c], fmod=0)[0]
        quotient = self.b.op("Floor", [self.b.op("Div", [a, c])[0]])[0]
        return self.b.op("Sub", [a, self.b.op("Mul", [quotient, c])[0]])[0]

    def _pair(self, left: Any, right: Any, allow_mixed: bool = False) -> tuple[str, str]:
        """Two ONNX values of one element type (numpy's promotion for two tensors)."""
        if isinstance(left, Weak) and isinstance(right, Weak):
            common = np.result_type(left.array(), right.array())
            return (self.b.constant(left.array().astype(common)),
                    self.b.constant(right.array().astype(common)))
        if isinstance(left, Weak):
            return self.b.strong(left, right), right
        if isinstance(right, Weak):
            return left, self.b.strong(right, left)
        if allow_mixed:
            return left, right
        ta, tc = self.b.dtype(left), self.b.dtype(right)
        if ta is not None and tc is not None and ta != tc:
            common = np.result_type(ta, tc)
            if ta != common:
                left = self.b.op("Cast", [left], to=onnx_dtype(common))[0]
            if tc != common:
                right = self.b.op("Cast", [right], to=onnx_dtype(common))[0]
        return left, right

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
            return self.b.op("Not", [operand])[0]
        raise self.fail(node, "operator ~")

    def visit_Compare(self, node: ast.Compare) -> Any:
        results = []
        left = self.visit(node.left)
        for op, comparator in zip(node.ops, node.comparators):
            right = self.visit(comparator)
            kind = type(op)
            if isinstance(left, Weak) and isinstance(right, Weak):
                results.append(Weak(_PY_COMPARE[kind](left.value, right.value)))
            elif kind is ast.NotEq:
                a, c = self._pair(left, right)
                results.append(self.b.op("Not", [self.b.op("Equal", [a, c])[0]])[0])
            elif kind in _COMPARE:
                a, c = self._pair(left, right)
                results.append(self.b.op(_COMPARE[kind], [a, c])[0])
            else:
                raise self.fail(node, f"comparison {kind.__name__}")
            left = right
        return self._all(results)

    def _all(self, values: list) -> Any:
        result = values[0]
        for v in values[1:]:
            if isinstance(result, Weak) and isinstance(v, Weak):
                result = Weak(np.logical_and(result.value, v.value))
            else:
                result = self.b.op("And", [self.b.strong(result, v if isinstance(v, str) else None),
                                           self.b.strong(v, result if isinstance(result, str) else None)])[0]
        return result

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        values = [self.visit(v) for v in node.values]
        op = "And" if isinstance(node.op, ast.And) else "Or"
        result = values[0]
        for v in values[1:]:
            if isinstance(result, Weak) and isinstance(v, Weak):
                fn = np.logical_and if op == "And" else np.logical_or
                result = Weak(fn(result.value, v.value))
            else:
                a = self._as_bool(result)
                c = self._as_bool(v)
                result = self.b.op(op, [a, c])[0]
        return result

    def _as_bool(self, operand: Any) -> str:
        if isinstance(operand, Weak):
            return self.b.constant(operand.array().astype(bool))
        if self.b.dtype(operand) != np.dtype(bool):
            return self.b.op("Cast", [operand], to=onnx_dtype(np.bool_))[0]
        return operand

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.visit(node.test)
        if isinstance(cond, Weak):
            return self.visit(node.body if bool(cond.value) else node.orelse)
        a, c = self._pair(self.visit(node.body), self.visit(node.orelse))
        return self.b.op("Where", [self._as_bool(cond), a, c])[0]

    # -- indexing
    def visit_Subscript(self, node: ast.Subscript) -> Any:
        value = self.visit(node.value)
        index = node.slice
        items = list(index.elts) if isinstance(index, ast.Tuple) else [index]
        if isinstance(value, Weak):
            return Weak(value.array()[self._python_index(items, node)])
        squeeze: list[int] = []
        starts, ends, axes, steps = [], [], [], []
        for axis, item in enumerate(items):
            if isinstance(item, ast.Slice):
                lo = self._int(item.lower, 0)
                hi = self._int(item.upper, None)
                step = self._int(item.step, 1)
                if hi is None:
                    hi = -(2 ** 63) if step < 0 else 2 ** 63 - 1
                starts.append(lo if item.lower is not None else (-1 if step < 0 else 0))
                ends.append(hi)
                axes.append(axis)
                steps.append(step)
            else:
                position = self.visit(item)
                if not isinstance(position, Weak):
                    if len(items) != 1:
                        raise self.fail(node, "a computed index among several indices")
                    idx = self.b.op("Cast", [position], to=onnx_dtype(np.int64))[0]
                    return self.b.op("Gather", [value, idx], axis=0)[0]
                k = int(position.value)
                starts.append(k)
                ends.append(k + 1 if k != -1 else 2 ** 63 - 1)
                axes.append(axis)
                steps.append(1)
                squeeze.append(axis)
        const = self.b.constant
        out = self.b.op("Slice", [value, const(np.array(starts, np.int64)), const(np.array(ends, np.int64)),
                                  const(np.array(axes, np.int64)), const(np.array(steps, np.int64))])[0]
        if squeeze:
            out = self.b.op("Squeeze", [out, const(np.array(squeeze, np.int64))])[0]
        return out

    def _int(self, node: ast.AST | None, default: Any) -> Any:
        if node is None:
            return default
        value = self.visit(node)
        if not isinstance(value, Weak):
            raise self.fail(node, "a computed slice bound")
        return int(value.value)

    def _python_index(self, items: list, node: ast.AST) -> Any:
        out = []
        for item in items:
            if isinstance(item, ast.Slice):
                out.append(slice(self._int(item.lower, None), self._int(item.upper, None),
                                 self._int(item.step, None)))
            else:
                out.append(self._int(item, None))
        return tuple(out)

    # -- calls
    def visit_Call(self, node: ast.Call) -> Any:
        name = _function_name(node.func)
        if name is None:
            raise self.fail(node, "call of something that is not a numpy/math function")
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise self.fail(node, "starred arguments")
        args = [self.visit(a) for a in node.args]
        kwargs = {k.arg: self.visit(k.value) for k in node.keywords}
        if all(isinstance(a, Weak) for a in args + list(kwargs.values())):
            fn = getattr(np, name, None) or getattr(math, name, None)
            if fn is None:
                raise self.fail(node, f"unknown function '{name}'")
            return Weak(fn(*[a.value for a in args], **{k: v.value for k, v in kwargs.items()}))
        if name in _UNARY_FUNCTIONS and len(args) == 1 and not kwargs:
            return self.b.op(_UNARY_FUNCTIONS[name], [self.b.strong(args[0])])[0]
        if name in _BINARY_FUNCTIONS and len(args) == 2 and not kwargs:
            a, c = self._pair(args[0], args[1])
            return self.b.op(_BINARY_FUNCTIONS[name], [a, c])[0]
        if name == "where" and len(args) == 3:
            a, c = self._pair(args[1], args[2])
            return self.b.op("Where", [self._as_bool(args[0]), a, c])[0]
        if name == "clip" and len(args) == 3:
            x = self.b.strong(args[0])
            return self.b.op("Clip", [x, self.b.strong(args[1], x), self.b.strong(args[2], x)])[0]
        if name in ("exp2",) and len(args) == 1:
            two = self.b.strong(Weak(2.0), args[0])
            return self.b.op("Pow", [two, args[0]])[0]
        if name in _REDUCTIONS and len(args) >= 1:
            return self._reduce(node, _REDUCTIONS[name], args, kwargs)
        if name in ("zeros_like", "ones_like") and len(args) == 1:
            x = self.b.strong(args[0])
            shape = self.b.op("Shape", [x])[0]
            fill = self.b.op("ConstantOfShape", [shape])[0]
            zeros = self.b.op("CastLike", [fill, x])[0]
            if name == "zeros_like":
                return zeros
            return self.b.op("Add", [zeros, self.b.strong(Weak(1), x)])[0]
        if name == "transpose" and len(args) == 1:
            return self.b.op("Transpose", [self.b.strong(args[0])])[0]
        raise self.fail(node, f"function '{name}' has no ONNX translation here")

    def _reduce(self, node, op_type: str, args: list, kwargs: dict) -> str:
        x = self.b.strong(args[0])
        axis = kwargs.get("axis", args[1] if len(args) > 1 else None)
        inputs = [x]
        if axis is not None:
            if not isinstance(axis, Weak):
                raise self.fail(node, "a computed axis")
            inputs.append(self.b.constant(np.asarray(axis.value, dtype=np.int64).reshape(-1)))
        # ReduceSum takes axes as an input from opset 13, the others from opset 18
        if len(inputs) == 2 and op_type != "ReduceSum" and self.b.opset < 18:
            axes = [int(v) for v in np.asarray(axis.value).reshape(-1)]
            return self.b.op(op_type, [x], keepdims=0, axes=axes)[0]
        return self.b.op(op_type, inputs, keepdims=0)[0]


def _function_name(func: ast.AST) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in _MODULES:
        return func.attr
    return None


def onnx_dtype(dtype: Any) -> int:
    from onnx import helper

    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))

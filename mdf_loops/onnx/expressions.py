"""Translate MDF value expressions (Python syntax) into ONNX nodes.

An expression such as ``x * w + b``, ``tanh(a) * 2`` or ``numpy.maximum(a, 0)`` is
parsed with :mod:`ast` and each operation becomes an ONNX node. Names resolve in
the node's environment (ports, parameters, functions). Literals and constant
parameters stay *weak* (:class:`~mdf_loops.onnx.builder.Weak`): combined in
Python among themselves, and cast to the element type of the tensor they meet,
as numpy does with Python numbers.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from mdf_loops.errors import ExpressionError
from mdf_loops.model.values import promoted_dtype
from mdf_loops.onnx.builder import GraphBuilder, Weak

__all__ = ["translate", "ExpressionError", "Operand"]

Operand = "str | Weak"


_BINARY = {ast.Add: "Add", ast.Sub: "Sub", ast.Mult: "Mul", ast.Pow: "Pow", ast.MatMult: "MatMul"}
_PY_BINARY: dict[type, Callable] = {
    ast.Add: np.add,
    ast.Sub: np.subtract,
    ast.Mult: np.multiply,
    ast.Div: np.true_divide,
    ast.Pow: np.power,
    ast.MatMult: np.matmul,
    ast.Mod: np.mod,
    ast.FloorDiv: np.floor_divide,
    ast.BitAnd: np.bitwise_and,
    ast.BitOr: np.bitwise_or,
    ast.BitXor: np.bitwise_xor,
}
#: ``&``, ``|``, ``^``: logical on booleans, bitwise on integers (numpy's meaning)
_BITWISE = {
    ast.BitAnd: ("And", "BitwiseAnd"),
    ast.BitOr: ("Or", "BitwiseOr"),
    ast.BitXor: ("Xor", "BitwiseXor"),
}
_COMPARE = {
    ast.Lt: "Less",
    ast.LtE: "LessOrEqual",
    ast.Gt: "Greater",
    ast.GtE: "GreaterOrEqual",
    ast.Eq: "Equal",
}
_PY_COMPARE = {
    ast.Lt: np.less,
    ast.LtE: np.less_equal,
    ast.Gt: np.greater,
    ast.GtE: np.greater_equal,
    ast.Eq: np.equal,
    ast.NotEq: np.not_equal,
}

#: numpy/math function name -> ONNX operator, for element-wise functions of one argument
_UNARY_FUNCTIONS = {
    "tanh": "Tanh",
    "exp": "Exp",
    "log": "Log",
    "sin": "Sin",
    "cos": "Cos",
    "tan": "Tan",
    "arcsin": "Asin",
    "arccos": "Acos",
    "arctan": "Atan",
    "asin": "Asin",
    "acos": "Acos",
    "atan": "Atan",
    "sinh": "Sinh",
    "cosh": "Cosh",
    "sqrt": "Sqrt",
    "abs": "Abs",
    "fabs": "Abs",
    "absolute": "Abs",
    "negative": "Neg",
    "floor": "Floor",
    "ceil": "Ceil",
    "sign": "Sign",
    "logical_not": "Not",
    "round": "Round",
    "rint": "Round",
    "reciprocal": "Reciprocal",
    "erf": "Erf",
    "isnan": "IsNaN",
}
#: ONNX operators of one argument that take floating-point tensors only: numpy turns
#: integers and booleans into float64 first
_FLOAT_ONLY = {
    "Tanh",
    "Exp",
    "Log",
    "Sin",
    "Cos",
    "Tan",
    "Asin",
    "Acos",
    "Atan",
    "Sinh",
    "Cosh",
    "Sqrt",
    "Floor",
    "Ceil",
    "Round",
    "Erf",
    "IsNaN",
}
#: numpy function name -> ONNX operator, for element-wise functions of two arguments
_BINARY_FUNCTIONS = {
    "maximum": "Max",
    "minimum": "Min",
    "power": "Pow",
    "add": "Add",
    "subtract": "Sub",
    "multiply": "Mul",
    "dot": "MatMul",
    "matmul": "MatMul",
    "greater": "Greater",
    "less": "Less",
    "equal": "Equal",
    "greater_equal": "GreaterOrEqual",
    "less_equal": "LessOrEqual",
    "logical_and": "And",
    "logical_or": "Or",
    "logical_xor": "Xor",
}
#: numpy function name -> the Python operator it computes (so both share one translation)
_OPERATOR_FUNCTIONS = {
    "divide": ast.Div,
    "true_divide": ast.Div,
    "floor_divide": ast.FloorDiv,
    "mod": ast.Mod,
    "remainder": ast.Mod,
}
_REDUCTIONS = {
    "sum": "ReduceSum",
    "mean": "ReduceMean",
    "max": "ReduceMax",
    "min": "ReduceMin",
    "amax": "ReduceMax",
    "amin": "ReduceMin",
    "prod": "ReduceProd",
}
#: Python builtins a bare name calls (``sum(x)`` is Python's sum over the first axis)
_PY_BUILTINS: dict[str, Callable] = {
    "abs": abs,
    "round": round,
    "sum": sum,
    "max": max,
    "min": min,
    "float": float,
    "int": int,
    "bool": bool,
}
#: float64 forms, from operators onnxruntime has float64 kernels for, of the element-wise
#: functions it has only float32 kernels for; each is a list of (name, expression) steps over
#: ``x`` ending in ``y`` (atan: the Cephes library's rational approximation, to 1 ulp)
_FLOAT64_FORMS = {
    "Tan": [("y", "numpy.sin(x) / numpy.cos(x)")],
    "Cosh": [("e", "numpy.exp(x)"), ("y", "(e + 1 / e) / 2")],
    "Sinh": [("e", "numpy.exp(x)"), ("y", "numpy.tanh(x) * ((e + 1 / e) / 2)")],
    "Asin": [("y", "numpy.arctan(x / numpy.sqrt((1 - x) * (1 + x)))")],
    "Acos": [("y", "2 * numpy.arctan(numpy.sqrt((1 - x) / (1 + x)))")],
    "Atan": [
        ("a", "numpy.abs(x)"),
        ("big", "a > 2.414213562373095"),
        ("mid", "a > 0.66"),
        ("r", "numpy.where(big, -1 / a, numpy.where(mid, (a - 1) / (a + 1), a))"),
        ("z", "r * r"),
        (
            "p",
            "(((-0.8750608600031904 * z - 16.157537187333652) * z - 75.00855792314705) * z"
            " - 122.88666844901361) * z - 64.85021904942025",
        ),
        (
            "q",
            "((((z + 24.858464901423062) * z + 165.02700983169885) * z + 432.88106049129027) * z"
            " + 485.3903996359137) * z + 194.5506571482614",
        ),
        (
            "low",
            "r * (z * p / q) + r + numpy.where(big, 6.123233995736766e-17,"
            " numpy.where(mid, 3.061616997868383e-17, 0.0))",
        ),
        (
            "y",
            "numpy.sign(x) * (numpy.where(big, 1.5707963267948966,"
            " numpy.where(mid, 0.7853981633974483, 0.0)) + low)",
        ),
    ],
}
_CASTS = {"float": np.float64, "int": np.int64, "bool": np.bool_}
_MODULES = {"numpy", "np", "math"}
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def translate(expression: Any, env: Mapping[str, Any], builder: GraphBuilder, where: str) -> Any:
    """ONNX value name (or :class:`Weak`) computing ``expression`` from ``env``.

    ``where`` names the model element (``node 'x' port 'y'``) for errors.
    """
    if not isinstance(expression, str):
        return Weak(np.asarray(expression))
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(
            f"{where}: cannot parse expression {expression!r}: {exc.msg}"
        ) from None
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
        raise self.fail(node, f"unknown name '{node.id}'")

    def visit_List(self, node: ast.List) -> Any:
        items = [self.visit(e) for e in node.elts]
        if all(isinstance(i, Weak) for i in items):
            return Weak(np.array([i.value for i in items]))
        items = self._common(items)
        axes = self.b.constant(np.array([0], dtype=np.int64))
        parts = [self.b.op("Unsqueeze", [i, axes])[0] for i in items]
        return self.b.op("Concat", parts, axis=0)[0]

    visit_Tuple = visit_List

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        if isinstance(node.value, ast.Name) and node.value.id in _MODULES:
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
        return self._binary(node, type(node.op), self.visit(node.left), self.visit(node.right))

    def _binary(self, node: ast.AST, kind: type, left: Any, right: Any) -> Any:
        if isinstance(left, Weak) and isinstance(right, Weak):
            if kind not in _PY_BINARY:
                raise self.fail(node, f"operator {kind.__name__}")
            return Weak(_PY_BINARY[kind](left.value, right.value))
        a, c = self._pair(left, right)
        dtype = self.b.dtype(a)
        integral = dtype is not None and dtype.kind in "iub"
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
        if kind in _BITWISE:
            logical, bitwise = _BITWISE[kind]
            if dtype == np.dtype(bool):
                return self.b.op(logical, [a, c])[0]
            if integral and self.b.opset >= 18:
                return self.b.op(bitwise, [a, c])[0]
            raise self.fail(node, f"operator {kind.__name__} on {dtype} values")
        if kind not in _BINARY:
            raise self.fail(node, f"operator {kind.__name__}")
        return self.b.op(_BINARY[kind], [a, c])[0]

    def _pair(self, left: Any, right: Any) -> tuple[str, str]:
        """Two ONNX values of one element type (numpy's promotion)."""
        a, c = self._common([left, right])
        return a, c

    def _common(self, operands: list) -> list[str]:
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
            like = next((t for t, d in zip(tensors, dtypes) if d is not None), tensors[0])
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
            return self.b.op("Not", [self._as_bool(operand)])[0]
        dtype = self.b.dtype(operand)
        if dtype == np.dtype(bool):
            return self.b.op("Not", [operand])[0]
        if dtype is not None and dtype.kind in "iu" and self.b.opset >= 18:
            return self.b.op("BitwiseNot", [operand])[0]
        raise self.fail(node, f"operator ~ on {dtype} values")

    def visit_Compare(self, node: ast.Compare) -> Any:
        results: list[Any] = []
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
        result = results[0]
        for value in results[1:]:  # a < b < c: both comparisons hold
            result = self._binary(node, ast.BitAnd, result, value)
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
                    "And" if is_and else "Or", [self._as_bool(result), self._as_bool(value)]
                )[0]
            else:
                taken, other = (value, result) if is_and else (result, value)
                a, c = self._pair(taken, other)
                result = self.b.op("Where", [self._as_bool(result), a, c])[0]
        return result

    def _is_bool(self, operand: Any) -> bool:
        if isinstance(operand, Weak):
            return operand.array().dtype == np.dtype(bool)
        return self.b.dtype(operand) == np.dtype(bool)

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
        if isinstance(index, ast.Tuple) and not index.elts:  # x[()]: x itself (numpy: a scalar)
            return value
        items = list(index.elts) if isinstance(index, ast.Tuple) else [index]
        parts = [
            self._slice(item) if isinstance(item, ast.Slice) else self.visit(item) for item in items
        ]
        computed = [p for p in parts if not isinstance(p, (slice, Weak))]
        if isinstance(value, Weak) and not computed:
            return Weak(
                value.array()[tuple(p if isinstance(p, slice) else int(p.value) for p in parts)]
            )
        value = self.b.strong(value)
        if computed:
            if len(parts) != 1:
                raise self.fail(node, "a computed index among several indices")
            position = self.b.op("Cast", [computed[0]], to=onnx_dtype(np.int64))[0]
            return self.b.op("Gather", [value, position], axis=0)[0]
        squeeze: list[int] = []
        starts, ends, steps = [], [], []
        for axis, part in enumerate(parts):
            if isinstance(part, slice):
                step = 1 if part.step is None else part.step
                if step == 0:
                    raise self.fail(node, "a slice step of zero")
                first, past = (_INT64_MAX, _INT64_MIN) if step < 0 else (0, _INT64_MAX)
                starts.append(first if part.start is None else part.start)
                ends.append(past if part.stop is None else part.stop)
                steps.append(step)
            else:
                k = int(part.value)
                starts.append(k)
                ends.append(k + 1 if k != -1 else _INT64_MAX)
                steps.append(1)
                squeeze.append(axis)
        const = self.b.constant
        out = self.b.op(
            "Slice",
            [
                value,
                const(np.array(starts, np.int64)),
                const(np.array(ends, np.int64)),
                const(np.arange(len(parts), dtype=np.int64)),
                const(np.array(steps, np.int64)),
            ],
        )[0]
        if squeeze:
            out = self.b.op("Squeeze", [out, const(np.array(squeeze, np.int64))])[0]
        return out

    def _slice(self, item: ast.Slice) -> slice:
        return slice(
            *(
                None if part is None else self._int(part)
                for part in (item.lower, item.upper, item.step)
            )
        )

    def _int(self, node: ast.AST) -> int:
        value = self.visit(node)
        if not isinstance(value, Weak):
            raise self.fail(node, "a computed slice bound")
        return int(value.value)

    # -- calls
    def visit_Call(self, node: ast.Call) -> Any:
        name, bare = _function_name(node.func)
        if name is None:
            raise self.fail(node, "call of something that is not a numpy/math function")
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
            k.arg is None for k in node.keywords
        ):
            raise self.fail(node, "starred arguments")
        args = [self.visit(a) for a in node.args]
        kwargs = {k.arg: self.visit(k.value) for k in node.keywords}
        builtin = bare and name in _PY_BUILTINS
        if all(isinstance(a, Weak) for a in args + list(kwargs.values())):
            return self._fold(node, name, builtin, args, kwargs)
        if builtin and name in ("sum", "max", "min") and not kwargs:
            return self._builtin_reduce(node, name, args, kwargs)
        if name in _REDUCTIONS and args:
            return self._reduce(node, _REDUCTIONS[name], args, kwargs)
        if kwargs:
            raise self.fail(node, f"keyword arguments of '{name}'")
        if builtin and name in _CASTS and len(args) == 1:
            return self.b.op("Cast", [args[0]], to=onnx_dtype(_CASTS[name]))[0]
        if name in _UNARY_FUNCTIONS and len(args) == 1:
            return self._unary(_UNARY_FUNCTIONS[name], args[0])
        if name in _BINARY_FUNCTIONS and len(args) == 2:
            return self.b.op(_BINARY_FUNCTIONS[name], list(self._pair(args[0], args[1])))[0]
        if name in _OPERATOR_FUNCTIONS and len(args) == 2:
            return self._binary(node, _OPERATOR_FUNCTIONS[name], args[0], args[1])
        if name == "where" and len(args) == 3:
            a, c = self._pair(args[1], args[2])
            return self.b.op("Where", [self._as_bool(args[0]), a, c])[0]
        if name == "clip" and len(args) == 3:
            x, low, high = self._common(args)
            return self.b.op("Min", [self.b.op("Max", [x, low])[0], high])[0]
        if name == "exp2" and len(args) == 1:
            return self._binary(node, ast.Pow, Weak(2.0), args[0])
        if name in ("zeros_like", "ones_like") and len(args) == 1:
            x = self.b.strong(args[0])
            shape = self.b.op("Shape", [x])[0]
            zeros = self.b.op("CastLike", [self.b.op("ConstantOfShape", [shape])[0], x])[0]
            if name == "zeros_like":
                return zeros
            return self.b.op("Add", [zeros, self.b.strong(Weak(1), x)])[0]
        if name == "transpose" and len(args) == 1:
            return self.b.op("Transpose", [self.b.strong(args[0])])[0]
        raise self.fail(node, f"function '{name}' has no ONNX translation here")

    def _unary(self, op_type: str, operand: Any) -> str:
        x = self.b.strong(operand)
        dtype = self.b.dtype(x)
        if op_type == "Not":
            return self.b.op("Not", [self._as_bool(x)])[0]
        if op_type in _FLOAT_ONLY and dtype is not None and dtype.kind in "iub":
            x = self.b.op("Cast", [x], to=onnx_dtype(np.float64))[0]
            dtype = np.dtype(np.float64)
        if op_type in _FLOAT64_FORMS and dtype == np.dtype(np.float64):
            env = {"x": x}
            for name, text in _FLOAT64_FORMS[op_type]:
                env[name] = _Translator(env, self.b, self.where, text).visit(
                    ast.parse(text, mode="eval").body
                )
            return env["y"]
        return self.b.op(op_type, [x])[0]

    def _builtin_reduce(self, node, name: str, args: list, kwargs: dict) -> str:
        """Python's ``sum``/``max``/``min``: over the first axis, or of several values.

        (With keyword arguments, which Python's do not take, they are numpy's.)
        """
        if name == "sum" and len(args) > 1:
            raise self.fail(node, "the start value of Python's sum()")
        if len(args) > 1:  # max(a, b): element-wise, as it is for the scalars it is meant for
            return self.b.op("Max" if name == "max" else "Min", self._common(args))[0]
        return self._reduce(node, _REDUCTIONS[name], args, {"axis": Weak(0)})

    def _fold(self, node, name: str, builtin: bool, args: list, kwargs: dict) -> Weak:
        """Compute a call on constants now, if its result is no larger than its arguments.

        Only element-wise functions and reductions fold: a constant call such as
        ``numpy.zeros(10**9)`` from a model file must not allocate at export time.
        """
        foldable = (
            set(_UNARY_FUNCTIONS) | set(_BINARY_FUNCTIONS) | set(_REDUCTIONS) | {"where", "clip"}
        )
        if name not in foldable and not builtin:
            raise self.fail(
                node,
                f"'{name}' of constants is not computed at export time; "
                "give the value as a literal or a parameter",
            )
        fn = _PY_BUILTINS[name] if builtin else getattr(np, name, None) or getattr(math, name, None)
        if fn is None:
            raise self.fail(node, f"unknown function '{name}'")
        try:
            return Weak(fn(*[a.value for a in args], **{k: v.value for k, v in kwargs.items()}))
        except Exception as exc:  # numpy's errors on constant arguments
            raise self.fail(node, f"{type(exc).__name__}: {exc}") from exc

    def _reduce(self, node, op_type: str, args: list, kwargs: dict) -> str:
        unknown = set(kwargs) - {"axis", "keepdims"}
        if unknown or len(args) > 2:
            raise self.fail(node, f"arguments {sorted(unknown) or args[2:]} of a reduction")
        x = self.b.strong(args[0])
        dtype = self.b.dtype(x)
        if dtype is not None and dtype.kind in "iub":
            if op_type == "ReduceMean":
                x = self.b.op("Cast", [x], to=onnx_dtype(np.float64))[0]
            elif dtype.kind == "b" or dtype.itemsize < 8:  # numpy sums small integers in int64
                x = self.b.op(
                    "Cast", [x], to=onnx_dtype(np.int64 if dtype.kind != "u" else np.uint64)
                )[0]
        axis = kwargs.get("axis", args[1] if len(args) > 1 else None)
        keepdims = kwargs.get("keepdims", Weak(False))
        if not isinstance(keepdims, Weak) or (axis is not None and not isinstance(axis, Weak)):
            raise self.fail(node, "a computed axis or keepdims")
        keep = int(bool(keepdims.value))
        if axis is None:
            return self.b.op(op_type, [x], keepdims=keep)[0]
        axes = np.asarray(axis.value, dtype=np.int64).reshape(-1)
        # ReduceSum takes axes as an input from opset 13, the others from opset 18
        if op_type != "ReduceSum" and self.b.opset < 18:
            return self.b.op(op_type, [x], keepdims=keep, axes=[int(a) for a in axes])[0]
        return self.b.op(op_type, [x, self.b.constant(axes)], keepdims=keep)[0]


def _function_name(func: ast.AST) -> tuple[str | None, bool]:
    """The called function's name, and whether it is a bare name (a Python builtin or an
    MDF standard function's numpy name) rather than ``numpy.<name>``/``math.<name>``."""
    if isinstance(func, ast.Name):
        return func.id, True
    if (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id in _MODULES
    ):
        return func.attr, False
    return None, False


def onnx_dtype(dtype: Any) -> int:
    from onnx import helper

    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))

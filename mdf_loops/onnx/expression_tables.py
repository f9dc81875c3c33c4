"""Which Python operators and numpy, math and builtin functions have which ONNX operator.

The tables :mod:`mdf_loops.onnx.expressions` translates MDF value expressions with:
operators and comparisons, element-wise functions of one and two arguments,
reductions, casts, and float64 forms of the functions onnxruntime computes in
float32 only.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

import numpy as np

__all__ = [
    "BINARY",
    "PY_BINARY",
    "BITWISE",
    "BOOL_ARITHMETIC",
    "COMPARE",
    "PY_COMPARE",
    "UNARY_FUNCTIONS",
    "FLOAT_ONLY",
    "BINARY_FUNCTIONS",
    "OPERATOR_FUNCTIONS",
    "REDUCTIONS",
    "PY_BUILTINS",
    "FLOAT64_FORMS",
    "CASTS",
    "MODULES",
    "INT64_MIN",
    "INT64_MAX",
]

BINARY = {ast.Add: "Add", ast.Sub: "Sub", ast.Mult: "Mul", ast.Pow: "Pow", ast.MatMult: "MatMul"}
PY_BINARY: dict[type, Callable] = {
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
#: ``+`` and ``*`` of two booleans: numpy's logical or and and (a boolean result)
BOOL_ARITHMETIC = {ast.Add: "Or", ast.Mult: "And"}
#: ``&``, ``|``, ``^``: logical on booleans, bitwise on integers (numpy's meaning)
BITWISE = {
    ast.BitAnd: ("And", "BitwiseAnd"),
    ast.BitOr: ("Or", "BitwiseOr"),
    ast.BitXor: ("Xor", "BitwiseXor"),
}
COMPARE = {
    ast.Lt: "Less",
    ast.LtE: "LessOrEqual",
    ast.Gt: "Greater",
    ast.GtE: "GreaterOrEqual",
    ast.Eq: "Equal",
}
PY_COMPARE = {
    ast.Lt: np.less,
    ast.LtE: np.less_equal,
    ast.Gt: np.greater,
    ast.GtE: np.greater_equal,
    ast.Eq: np.equal,
    ast.NotEq: np.not_equal,
}

#: numpy/math function name -> ONNX operator, for element-wise functions of one argument
UNARY_FUNCTIONS = {
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
FLOAT_ONLY = {
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
BINARY_FUNCTIONS = {
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
OPERATOR_FUNCTIONS = {
    "divide": ast.Div,
    "true_divide": ast.Div,
    "floor_divide": ast.FloorDiv,
    "mod": ast.Mod,
    "remainder": ast.Mod,
}
REDUCTIONS = {
    "sum": "ReduceSum",
    "mean": "ReduceMean",
    "max": "ReduceMax",
    "min": "ReduceMin",
    "amax": "ReduceMax",
    "amin": "ReduceMin",
    "prod": "ReduceProd",
}
#: Python builtins a bare name calls (``sum(x)`` is Python's sum over the first axis)
PY_BUILTINS: dict[str, Callable] = {
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
FLOAT64_FORMS = {
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
CASTS = {"float": np.float64, "int": np.int64, "bool": np.bool_}
MODULES = {"numpy", "np", "math"}
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

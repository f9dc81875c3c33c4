"""Calls in MDF value expressions as ONNX nodes: numpy, math and Python builtin functions.

Element-wise functions, reductions (numpy's and Python's ``sum``/``max``/``min``),
casts and a few array functions (``where``, ``clip``, ``zeros_like``...). A call
whose arguments are all known at export time is computed then, if its result is
no larger than its arguments.
"""

from __future__ import annotations

import ast
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from mdf_loops.onnx.builder import Weak, onnx_dtype
from mdf_loops.onnx.expression_tables import (
    BINARY_FUNCTIONS,
    CASTS,
    FLOAT64_FORMS,
    FLOAT_ONLY,
    MODULES,
    OPERATOR_FUNCTIONS,
    PY_BUILTINS,
    REDUCTIONS,
    UNARY_FUNCTIONS,
)

if TYPE_CHECKING:
    from mdf_loops.onnx.expressions import ExpressionTranslator

__all__ = ["translate_call"]


def translate_call(translator: ExpressionTranslator, node: ast.Call) -> Any:
    """ONNX value name (or :class:`Weak`, when computed now) of the call ``node``."""
    name, bare = _function_name(node.func)
    if name is None:
        raise translator.fail(node, "call of something that is not a numpy/math function")
    if any(isinstance(a, ast.Starred) for a in node.args) or any(
        k.arg is None for k in node.keywords
    ):
        raise translator.fail(node, "starred arguments")
    args = [translator.visit(a) for a in node.args]
    kwargs = {k.arg: translator.visit(k.value) for k in node.keywords}
    builtin = bare and name in PY_BUILTINS
    if all(isinstance(a, Weak) for a in args + list(kwargs.values())):
        return _fold(translator, node, name, builtin, args, kwargs)
    if builtin and name in ("sum", "max", "min") and not kwargs:
        return _builtin_reduce(translator, node, name, args, kwargs)
    if name in REDUCTIONS and args:
        return _reduce(translator, node, REDUCTIONS[name], args, kwargs)
    if kwargs:
        raise translator.fail(node, f"keyword arguments of '{name}'")
    if builtin and name in CASTS and len(args) == 1:
        return translator.b.op("Cast", [args[0]], to=onnx_dtype(CASTS[name]))[0]
    if name in UNARY_FUNCTIONS and len(args) == 1:
        return _unary(translator, UNARY_FUNCTIONS[name], args[0])
    if name in BINARY_FUNCTIONS and len(args) == 2:
        return translator.b.op(BINARY_FUNCTIONS[name], list(translator.pair(args[0], args[1])))[0]
    if name in OPERATOR_FUNCTIONS and len(args) == 2:
        return translator.binary(node, OPERATOR_FUNCTIONS[name], args[0], args[1])
    if name == "where" and len(args) == 3:
        a, c = translator.pair(args[1], args[2])
        return translator.b.op("Where", [translator.as_bool(args[0]), a, c])[0]
    if name == "clip" and len(args) == 3:
        x, low, high = translator.common(args)
        return translator.b.op("Min", [translator.b.op("Max", [x, low])[0], high])[0]
    if name == "exp2" and len(args) == 1:
        return translator.binary(node, ast.Pow, Weak(2.0), args[0])
    if name in ("zeros_like", "ones_like") and len(args) == 1:
        x = translator.b.strong(args[0])
        shape = translator.b.op("Shape", [x])[0]
        zeros = translator.b.op("CastLike", [translator.b.op("ConstantOfShape", [shape])[0], x])[0]
        if name == "zeros_like":
            return zeros
        return translator.b.op("Add", [zeros, translator.b.strong(Weak(1), x)])[0]
    if name == "transpose" and len(args) == 1:
        return translator.b.op("Transpose", [translator.b.strong(args[0])])[0]
    raise translator.fail(node, f"function '{name}' has no ONNX translation here")


def _unary(translator: ExpressionTranslator, op_type: str, operand: Any) -> str:
    x = translator.b.strong(operand)
    dtype = translator.b.dtype(x)
    if op_type == "Not":
        return translator.b.op("Not", [translator.as_bool(x)])[0]
    if op_type in FLOAT_ONLY and dtype is not None and dtype.kind in "iub":
        x = translator.b.op("Cast", [x], to=onnx_dtype(np.float64))[0]
        dtype = np.dtype(np.float64)
    if op_type in FLOAT64_FORMS and dtype == np.dtype(np.float64):
        env = {"x": x}
        for name, text in FLOAT64_FORMS[op_type]:
            env[name] = type(translator)(env, translator.b, translator.where, text).visit(
                ast.parse(text, mode="eval").body
            )
        return env["y"]
    return translator.b.op(op_type, [x])[0]


def _builtin_reduce(
    translator: ExpressionTranslator, node, name: str, args: list, kwargs: dict
) -> str:
    """Python's ``sum``/``max``/``min``: over the first axis, or of several values.

    (With keyword arguments, which Python's do not take, they are numpy's.)
    """
    if name == "sum" and len(args) > 1:
        raise translator.fail(node, "the start value of Python's sum()")
    if len(args) > 1:  # max(a, b): element-wise, as it is for the scalars it is meant for
        return translator.b.op("Max" if name == "max" else "Min", translator.common(args))[0]
    return _reduce(translator, node, REDUCTIONS[name], args, {"axis": Weak(0)})


def _fold(
    translator: ExpressionTranslator, node, name: str, builtin: bool, args: list, kwargs: dict
) -> Weak:
    """Compute a call on constants now, if its result is no larger than its arguments.

    Only element-wise functions and reductions fold: a constant call such as
    ``numpy.zeros(10**9)`` from a model file must not allocate at export time.
    """
    foldable = set(UNARY_FUNCTIONS) | set(BINARY_FUNCTIONS) | set(REDUCTIONS) | {"where", "clip"}
    if name not in foldable and not builtin:
        raise translator.fail(
            node,
            f"'{name}' of constants is not computed at export time; "
            "give the value as a literal or a parameter",
        )
    fn = PY_BUILTINS[name] if builtin else getattr(np, name, None) or getattr(math, name, None)
    if fn is None:
        raise translator.fail(node, f"unknown function '{name}'")
    try:
        return Weak(fn(*[a.value for a in args], **{k: v.value for k, v in kwargs.items()}))
    except Exception as exc:  # numpy's errors on constant arguments
        raise translator.fail(node, f"{type(exc).__name__}: {exc}") from exc


def _reduce(translator: ExpressionTranslator, node, op_type: str, args: list, kwargs: dict) -> str:
    unknown = set(kwargs) - {"axis", "keepdims"}
    if unknown or len(args) > 2:
        raise translator.fail(node, f"arguments {sorted(unknown) or args[2:]} of a reduction")
    x = translator.b.strong(args[0])
    dtype = translator.b.dtype(x)
    if dtype is not None and dtype.kind in "iub":
        if op_type == "ReduceMean":
            x = translator.b.op("Cast", [x], to=onnx_dtype(np.float64))[0]
        elif dtype.kind == "b" or dtype.itemsize < 8:  # numpy sums small integers in int64
            x = translator.b.op(
                "Cast", [x], to=onnx_dtype(np.int64 if dtype.kind != "u" else np.uint64)
            )[0]
    axis = kwargs.get("axis", args[1] if len(args) > 1 else None)
    keepdims = kwargs.get("keepdims", Weak(False))
    if not isinstance(keepdims, Weak) or (axis is not None and not isinstance(axis, Weak)):
        raise translator.fail(node, "a computed axis or keepdims")
    keep = int(bool(keepdims.value))
    if axis is None:
        return translator.b.op(op_type, [x], keepdims=keep)[0]
    axes = np.asarray(axis.value, dtype=np.int64).reshape(-1)
    # ReduceSum takes axes as an input from opset 13, the others from opset 18
    if op_type != "ReduceSum" and translator.b.opset < 18:
        return translator.b.op(op_type, [x], keepdims=keep, axes=[int(a) for a in axes])[0]
    return translator.b.op(op_type, [x, translator.b.constant(axes)], keepdims=keep)[0]


def _function_name(func: ast.AST) -> tuple[str | None, bool]:
    """The called function's name, and whether it is a bare name (a Python builtin or an
    MDF standard function's numpy name) rather than ``numpy.<name>``/``math.<name>``."""
    if isinstance(func, ast.Name):
        return func.id, True
    if (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id in MODULES
    ):
        return func.attr, False
    return None, False

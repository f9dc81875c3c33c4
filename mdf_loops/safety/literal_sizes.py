"""What the literals of an expression would allocate, checked before it is evaluated.

A numpy constructor with literal sizes (``numpy.zeros((10**6, 10**6))``) is
refused when it asks for more than ``max_elements`` elements; a literal
exponent or shift that would make a giant Python integer, arithmetic on a
literal list, tuple, dict, set or text (``'%0999999d' % 1``, ``[0] * 10``: the
interpreter of :mod:`mdf_loops.safety.interpreter` refuses them at run time, this
says so before), and a dtype whose one element
may be of any size (a sub-array dtype) are refused too.
:mod:`mdf_loops.safety.allowlist` calls these on the pieces of an expression;
sizes computed at run time are checked by :mod:`mdf_loops.safety.guarded_numpy`.
"""

from __future__ import annotations

import ast
import math
from typing import Any

import numpy as np

from mdf_loops.ops.common import current_limits, how_to_raise

__all__ = [
    "SIZED_CONSTRUCTORS",
    "LIKE_CONSTRUCTORS",
    "allocation_refusal",
    "literal_operation_refusal",
    "dtype_refusal",
]

#: numpy functions that allocate as many elements as their arguments ask for
SIZED_CONSTRUCTORS = frozenset(
    {"zeros", "ones", "empty", "full", "eye", "identity", "arange", "linspace"}
)
#: numpy functions as large as their first argument, unless shape= asks for any size
LIKE_CONSTRUCTORS = frozenset({"zeros_like", "ones_like", "full_like"})

_MAX_EXPONENT = 10_000  # a literal exponent or shift above this is refused (Python ints)
_MAX_ITEMSIZE = 32  # bytes of one element: complex256 at most


def allocation_refusal(function: str, node: ast.Call) -> str | None:
    """Why the call ``numpy.<function>(...)`` may not be evaluated: literal sizes over the limit."""
    if function not in SIZED_CONSTRUCTORS | LIKE_CONSTRUCTORS:
        return None
    count = _sized_count(function, node)
    limit = current_limits().max_elements
    if count is not None and count > limit:
        return (
            f"it asks for {count} elements, over the limit of {limit} (max_elements; "
            f"{how_to_raise('max_elements')})"
        )
    return None


def literal_operation_refusal(node: ast.BinOp) -> str | None:
    """Why a binary operation may not be evaluated: a giant literal exponent, or an operand
    that is a literal list, tuple, dict, set or text."""
    if isinstance(node.op, (ast.Pow, ast.LShift)):
        right = _literal_int(node.right)
        if right is not None and abs(right) > _MAX_EXPONENT:
            return f"a literal exponent or shift above {_MAX_EXPONENT}"
    if _is_literal_data(node.left) or _is_literal_data(node.right):
        return (
            "arithmetic on a literal list, tuple, dict, set or text (an untrusted model's "
            "values are numbers and numeric arrays: use numpy.array, numpy.concatenate)"
        )
    return None


def _is_literal_data(node: ast.AST) -> bool:
    """A list, tuple, dict or set display or a text literal: data, never an operand."""
    if isinstance(node, (ast.List, ast.Tuple, ast.Dict, ast.Set, ast.JoinedStr)):
        return True
    return isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))


def _literal_int(node: ast.AST, depth: int = 0) -> int | None:
    """The value of an integer literal expression (``10**9``, ``-3``, ``2*4``), else None."""
    if depth > 20:
        return None
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _literal_int(node.operand, depth + 1)
        return None if value is None else (-value if isinstance(node.op, ast.USub) else value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Pow)):
        a, b = _literal_int(node.left, depth + 1), _literal_int(node.right, depth + 1)
        if a is None or b is None or abs(a).bit_length() * max(abs(b), 1) > 4096:
            return None
        if isinstance(node.op, ast.Pow):
            return a**b if b >= 0 else None
        return (
            a + b
            if isinstance(node.op, ast.Add)
            else a - b
            if isinstance(node.op, ast.Sub)
            else a * b
        )
    return None


def _sized_count(function: str, node: ast.Call) -> int | None:
    """Elements a numpy constructor call with literal sizes allocates (None: not literal)."""
    args = list(node.args)
    keywords = {k.arg: k.value for k in node.keywords if k.arg}
    if function in LIKE_CONSTRUCTORS:
        if "shape" not in keywords:
            return None  # as large as its first argument
        args = [keywords["shape"]]
        function = "zeros"
    if function in ("zeros", "ones", "empty", "full"):
        shape = args[0] if args else keywords.get("shape")
        dims = shape.elts if isinstance(shape, (ast.Tuple, ast.List)) else [shape]
        values = [_literal_int(d) for d in dims if d is not None]
        known = [v for v in values if v is not None]
        return math.prod(abs(v) for v in known) if values and len(known) == len(values) else None
    if function in ("eye", "identity"):
        n = _literal_int(args[0]) if args else None
        m = _literal_int(args[1]) if function == "eye" and len(args) > 1 else n
        return abs(n * m) if n is not None and m is not None else None
    if function == "linspace":
        num = args[2] if len(args) > 2 else keywords.get("num")
        return 50 if num is None else _literal_int(num)
    numbers = [_literal_number(a) for a in args[:3]]  # arange
    given = [n for n in numbers if n is not None]
    if not numbers or len(given) != len(numbers):
        return None
    start, stop, step = (
        (0, given[0], 1) if len(given) == 1 else (*given[:2], 1) if len(given) == 2 else given
    )
    return max(math.ceil((stop - start) / step), 0) if step else 0


def _literal_number(node: ast.AST) -> float | None:
    value = _literal_int(node)
    if value is not None:
        return value
    if isinstance(node, ast.Constant) and type(node.value) is float and math.isfinite(node.value):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _literal_number(node.operand)
        return None if inner is None else -inner
    return None


def dtype_refusal(value: Any) -> str | None:
    """Why ``value`` may not be the dtype of a numpy call in an expression, or None.

    A sub-array dtype (``('u1', (46000, 46000))``) makes one element of any size,
    so an element count says nothing about the memory; structured, object and
    void dtypes and dtype objects have no use in an MDF expression, nor have dates and
    times (``numpy.arange('1000-01-01', '9999-12-31', dtype='datetime64[s]')`` counts
    2.8e11 seconds from two texts that no size plan reads as numbers).
    """
    if value is None:
        return None
    if isinstance(value, (tuple, list, dict, np.dtype)):
        return f"dtype {value!r:.60} is refused: only plain element types (float64, 'int32')"
    try:
        dtype = np.dtype(value)
    except (TypeError, ValueError):
        return None  # numpy reports it
    if (
        dtype.subdtype is not None
        or dtype.fields is not None
        or dtype.kind in "OVMm"
        or dtype.itemsize > _MAX_ITEMSIZE
    ):
        return f"dtype {value!r:.60} is refused: only plain element types (float64, 'int32')"
    return None

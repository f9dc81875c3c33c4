"""What an untrusted model's values may go through: operators, builtins and math functions.

Operands are numbers (bool, int, float, complex, numpy scalars) and numeric
arrays; text, lists, tuples, dicts and sets are data that no operator computes
with. Each result is sized before it is made: an array's broadcast (or ``@``)
shape against ``max_elements``, a Python integer's bits against
:data:`MAX_INTEGER_BITS`. :mod:`mdf_loops.safety.interpreter` applies these
rules node by node.
"""

from __future__ import annotations

import ast
import builtins
import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from mdf_loops.errors import EvaluationError, SizeLimitError
from mdf_loops.model.documents import MAX_INTEGER_BITS  # the same bound as a file's integers
from mdf_loops.ops.common import check_elements
from mdf_loops.safety.allowlist import SAFE_BUILTINS
from mdf_loops.safety.guarded_numpy import bounded_decimals, expression_numpy
from mdf_loops.safety.numpy_sizes import plan_for, planned_elements

__all__ = [
    "MAX_INTEGER_BITS",
    "UNARY",
    "BINARY",
    "FLOATS",
    "COMPARE",
    "BUILTINS",
    "binary",
    "broadcast_shape",
    "numeric",
    "check_comparison",
    "checked_integer",
    "unpacked",
    "may_call",
    "math_function",
]


_NUMBERS = (bool, int, float, complex, np.generic)
BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.MatMult: operator.matmul,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
}
UNARY: dict[type, Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
    ast.Invert: operator.invert,
    ast.Not: operator.not_,
}
COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: operator.contains(b, a),
    ast.NotIn: lambda a, b: not operator.contains(b, a),
}
_SYMBOLS: dict[type, str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Pow: "**", ast.MatMult: "@", ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&",
    ast.BitOr: "|", ast.BitXor: "^",
}  # fmt: skip


# ---------------------------------------------------------------- values and their sizes


def numeric(value: Any, what: str) -> None:
    """Refuse a value that is not a number or a numeric array as an operand of ``what``."""
    if isinstance(value, _NUMBERS) and not isinstance(value, (np.str_, np.bytes_, np.void)):
        return
    if isinstance(value, np.ndarray) and value.dtype.kind in "biufc":
        return
    raise EvaluationError(
        f"`{what}` on {_kind(value)} is not allowed in a model that is not trusted: its "
        "values are numbers and numeric arrays (use numpy.array, numpy.concatenate)"
    )


def _kind(value: Any) -> str:
    if isinstance(value, (str, np.str_)):
        return "text"
    if isinstance(value, np.ndarray):
        return f"an array of {value.dtype}"
    return f"a {type(value).__name__}"


def binary(op: type, left: Any, right: Any) -> Any:
    """``left <op> right`` for numbers and numeric arrays, its size planned first."""
    left_kind, right_kind = type(left), type(right)
    if left_kind in _SCALARS and right_kind in _SCALARS:
        if not (left_kind in _FIXED_SIZE or right_kind in _FIXED_SIZE):
            # two Python integers or bools (a counter): their bits first
            _check_bits(_integer_bits(op, left, right), _SYMBOLS[op])
        # else a float or fixed-width number beside: a number of fixed size
        return BINARY[op](left, right)
    elements = _elementwise(left, right) if op is not ast.MatMult else None
    if elements is not None:  # the commonest array operation: its size known at once
        check_elements(elements, f"the result of `{_SYMBOLS[op]}`")
        return BINARY[op](left, right)
    symbol = _SYMBOLS[op]
    left, right = _numpy_operands(left, right)
    numeric(left, symbol)
    numeric(right, symbol)
    if _is_python_int(left) and _is_python_int(right):
        _check_bits(_integer_bits(op, left, right), symbol)
    elif isinstance(left, np.ndarray) or isinstance(right, np.ndarray):
        plan = _matmul_elements if op is ast.MatMult else _broadcast_elements
        check_elements(plan(left, right), f"the result of `{symbol}`")
    return BINARY[op](left, right)


def _elementwise(a: Any, b: Any) -> int | None:
    """The elements of ``a <op> b`` (element by element) for a numeric array and a number
    or a numeric array of the same shape; None for any other pair (planned in full)."""
    if type(a) is np.ndarray:
        if a.dtype.kind not in "biufc":
            return None
        if type(b) is np.ndarray:
            return a.size if b.shape == a.shape and b.dtype.kind in "biufc" else None
        return a.size if type(b) in _SCALARS else None
    if type(b) is np.ndarray and type(a) in _SCALARS and b.dtype.kind in "biufc":
        return b.size
    return None


def _numpy_operands(left: Any, right: Any) -> tuple[Any, Any]:
    """A list or tuple that Python hands to numpy as the array numpy makes of it: the right
    operand of a numpy array, or the left one of an array of rank 1 or more (``[1, 2] + x``:
    the list refuses and numpy's reflected operator runs). Anywhere else it stays a list,
    refused (Python repeats the list in ``numpy.int64(3) * [0]`` and ``[0] * numpy.int64(3)``)."""
    if isinstance(right, (list, tuple)) and isinstance(left, np.ndarray):
        return left, np.asarray(right)
    if isinstance(left, (list, tuple)) and isinstance(right, np.ndarray) and right.ndim:
        return np.asarray(left), right
    return left, right


_NUMPY_VALUES = (np.ndarray, np.generic)
#: numbers whose results are numbers of a fixed size (floats, numpy scalars of fixed width)
_FIXED_SIZE = frozenset({float, complex, np.float64, np.float32, np.float16, np.int64, np.int32,
                         np.int16, np.int8, np.uint64, np.uint32, np.uint16, np.uint8,
                         np.bool_, np.complex128, np.complex64})  # fmt: skip
_SCALARS = _FIXED_SIZE | {int, bool}
#: numbers any two of which give a float of fixed size under every operator
FLOATS = frozenset({float, np.float64})


def _is_python_int(value: Any) -> bool:
    return isinstance(value, int)


def _integer_bits(op: type, a: int, b: int) -> int:
    """An upper bound of the bits of ``a <op> b`` for Python integers."""
    bits = max(abs(a).bit_length(), abs(b).bit_length())
    if op in (ast.Add, ast.Sub):
        return bits + 1
    if op is ast.Mult:
        return abs(a).bit_length() + abs(b).bit_length()
    if op is ast.Pow:
        return 1 if abs(a) <= 1 or b < 0 else abs(a).bit_length() * b
    if op is ast.LShift:
        return abs(a).bit_length() + max(b, 0)
    return bits


def _check_bits(bits: int, what: str) -> None:
    if bits > MAX_INTEGER_BITS:
        raise SizeLimitError(
            f"the result of `{what}` would be an integer of up to {bits} bits, over "
            f"{MAX_INTEGER_BITS} bits (about 4,300 digits); nothing was computed"
        )


def checked_integer(value: Any) -> Any:
    if isinstance(value, int) and abs(value).bit_length() > MAX_INTEGER_BITS:
        _check_bits(abs(value).bit_length(), "an integer")
    return value


def broadcast_shape(*values: Any) -> tuple[int, ...]:
    """``numpy.broadcast_shapes`` of the values' shapes (a ValueError, as numpy's, where
    they do not broadcast). Values of one shape beside numbers, the commonest case in a
    step, are answered here: numpy's function makes arrays to find it, a few microseconds
    per call."""
    found: tuple[int, ...] = ()
    for value in values:
        kind = type(value)
        shape = value.shape if kind is np.ndarray else () if kind in _SCALARS else np.shape(value)
        if shape and shape != found:
            if found:
                return tuple(np.broadcast_shapes(*(np.shape(v) for v in values)))
            found = shape
    return found


def _broadcast_elements(a: Any, b: Any) -> int:
    try:
        return math.prod(broadcast_shape(a, b))
    except ValueError:
        return 0  # numpy reports shapes that do not broadcast


def _matmul_elements(a: Any, b: Any) -> int:
    return planned_elements(plan_for("matmul"), (a, b), {})


def check_comparison(op: type, left: Any, right: Any) -> None:
    if op in (ast.Is, ast.IsNot):
        return
    if op in (ast.In, ast.NotIn):
        items = right if isinstance(right, (list, tuple, set)) else [right]
        for item in items:
            check_comparison(ast.Eq, left, item)
        return
    if isinstance(left, _NUMPY_VALUES) or isinstance(right, _NUMPY_VALUES):
        # numpy compares element-wise, a list beside an array included
        check_elements(_broadcast_elements(left, right), "the result of a comparison")
        return
    containers = (list, tuple, dict, set)
    if isinstance(left, containers) or isinstance(right, containers):
        if any(isinstance(x, np.ndarray) for x in _flat(left) + _flat(right)):
            raise EvaluationError("comparing lists or tuples that hold arrays is not allowed")


def _flat(value: Any) -> list:
    if isinstance(value, dict):
        value = list(value.values())
    return list(value) if isinstance(value, (list, tuple, set)) else [value]


def unpacked(value: Any) -> list:
    if isinstance(value, np.ndarray):
        check_elements(32 * value.shape[0] if value.ndim else 0, "`*` of an array (32 per item)")
    if not isinstance(value, (list, tuple, np.ndarray)):
        raise EvaluationError(f"`*` of {_kind(value)} is not allowed")
    return list(value)


def may_call(function: Any) -> bool:
    """Builtins and math functions of this module, guarded numpy functions, numpy types."""
    if getattr(function, "_mdf_loops_callable", False):
        return True
    if isinstance(function, type):
        return issubclass(function, np.generic)  # numpy.float64(x)
    return getattr(function, "__wrapped__", None) is not None and expression_numpy() is not np


# ---------------------------------------------------------------- builtins and math


def _callable(function: Callable) -> Callable:
    function._mdf_loops_callable = True  # type: ignore[attr-defined]
    return function


def _sum(values: Any, start: Any = 0) -> Any:
    """``sum`` of numbers and numeric arrays only (no lists or tuples added together)."""
    if isinstance(values, np.ndarray) and type(start) in _SCALARS:  # rows added: a row's size
        check_elements(values[0].size if values.ndim and len(values) else 1, "the result of sum")
        return builtins.sum(values, start)
    total = start  # each sum planned (an array start broadcasts with the rows)
    for item in values:
        total = binary(ast.Add, total, item)
    return total


def _plain(name: str) -> Callable:
    function = getattr(builtins, name)

    def call(*args: Any, **kwargs: Any) -> Any:
        if kwargs:
            raise EvaluationError(f"{name}(): keyword arguments are not allowed")
        return function(*args)

    call.__name__ = name
    return _callable(call)


def _divmod(a: Any, b: Any) -> tuple[Any, Any]:
    """``divmod``: ``(a // b, a % b)``, as Python and numpy define it, each planned (two
    arrays broadcast, as ``divmod(a, x)`` does)."""
    return binary(ast.FloorDiv, a, b), binary(ast.Mod, a, b)


def _round(number: Any, ndigits: Any = None) -> Any:
    """``round``: an integer rounded to more digits than it has is 0, given without Python's
    computing ``10 ** -ndigits`` first (``round(7, -10**9)``: hours and gigabytes); a
    numpy number's digits bounded as numpy's rounding needs (:func:`bounded_decimals`)."""
    if ndigits is not None and isinstance(number, _NUMPY_VALUES):
        ndigits = bounded_decimals(ndigits)
    if isinstance(number, int) and ndigits is not None and hasattr(ndigits, "__index__"):
        digits = operator.index(ndigits)
        if -digits > (abs(number).bit_length() + 1) * math.log10(2) + 1:  # 10**-digits > 2|n|
            return 0
    return builtins.round(number) if ndigits is None else builtins.round(number, ndigits)


def _extreme(name: str) -> Callable:
    """``max``, ``min``: Python compares each item with the best so far (any earlier one),
    so each comparison of arrays is planned first (``max(a, x)`` of a (n, 1) and a (n,)
    makes n x n booleans before it finds their truth ambiguous)."""
    function = _plain(name)

    def call(*args: Any, **kwargs: Any) -> Any:
        items = args if len(args) > 1 else args[0] if args else ()
        if isinstance(items, (list, tuple)):
            seen: dict[tuple, Any] = {}  # one item of each shape
            for item in items:
                for earlier in seen.values():
                    check_comparison(ast.Gt, item, earlier)
                seen.setdefault(np.shape(item) if isinstance(item, _NUMPY_VALUES) else (), item)
        return function(*args, **kwargs)

    call.__name__ = name
    return _callable(call)


BUILTINS: dict[str, Callable] = {name: _plain(name) for name in SAFE_BUILTINS}
BUILTINS["round"] = _callable(_round)
BUILTINS["max"] = _extreme("max")
BUILTINS["min"] = _extreme("min")
BUILTINS["sum"] = _callable(_sum)
BUILTINS["divmod"] = _callable(_divmod)


def math_function(name: str) -> Any:
    member = getattr(math, name)
    if not callable(member):
        return member  # math.pi

    def call(*args: Any) -> Any:
        if name == "prod" and len(args) == 1:  # start * e1 * e2 ..., each product planned
            result: Any = 1  # (numpy arrays broadcast: math.prod([a, x]) is a * x)
            try:
                for factor in list(args[0]):
                    result = binary(ast.Mult, result, factor)
            except SizeLimitError as exc:
                raise SizeLimitError(f"math.prod: {exc}") from None
            return result
        if name == "lcm":  # an integer product: plan its size (numpy integers too: *array)
            integers = (int, np.integer)
            bits = sum(abs(int(n)).bit_length() for n in args if isinstance(n, integers))
            _check_bits(bits, "math.lcm")
        return member(*args)

    return _callable(call)

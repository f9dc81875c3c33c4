"""The ``numpy`` that expressions of a model that is not trusted see.

Inside :func:`untrusted_expressions`, ``numpy.`` in an expression is a namespace
holding only the functions of :data:`~mdf_loops.safety.allowlist.NUMPY_FUNCTIONS`;
every function checks the size of its result (planned by
:mod:`mdf_loops.safety.numpy_sizes`) against ``max_elements`` before computing it,
refuses ``out=``, and refuses dtypes whose elements have no bounded size (sub-array, structured,
object dtypes, dtype objects).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import operator
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from mdf_loops.errors import EvaluationError, SizeLimitError
from mdf_loops.ops.common import check_elements
from mdf_loops.safety.allowlist import _NUMPY_LINALG, NUMPY_FUNCTIONS, dtype_refusal
from mdf_loops.safety.numpy_sizes import LINALG_PLANS, Plan, plan_for, planned_elements

__all__ = ["expression_numpy", "untrusted_expressions", "expressions_untrusted", "bounded_decimals"]


_UNTRUSTED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "mdf_loops_untrusted_expressions", default=False
)


@contextmanager
def untrusted_expressions() -> Iterator[None]:
    """Evaluate expressions in the block with :func:`expression_numpy`'s guarded numpy."""
    token = _UNTRUSTED.set(True)
    try:
        yield
    finally:
        _UNTRUSTED.reset(token)


def expressions_untrusted() -> bool:
    """Whether expressions evaluated now belong to a model that is not trusted."""
    return _UNTRUSTED.get()


def expression_numpy() -> Any:
    """The ``numpy`` an expression's ``numpy.<function>`` reads.

    Inside :func:`untrusted_expressions`: a namespace holding only the allowed
    functions, whose constructors (``numpy.zeros(n)``, ``numpy.ones_like(x,
    shape=s)``, ...) raise :class:`~mdf_loops.errors.SizeLimitError` before
    allocating more than ``max_elements`` elements. Elsewhere: numpy itself.
    """
    return _guarded_numpy() if _UNTRUSTED.get() else np


#: where a numpy function takes its dtype positionally (every function: also ``dtype=``)
_DTYPE_POSITION = {
    "zeros": 1,
    "ones": 1,
    "empty": 1,
    "full": 2,
    "eye": 3,
    "identity": 1,
    "arange": 3,
    "linspace": 5,
    "array": 1,
    "asarray": 1,
    "zeros_like": 1,
    "ones_like": 1,
    "full_like": 2,
}


def _check_dtype(name: str, args: tuple, kwargs: dict) -> None:
    position = _DTYPE_POSITION.get(name)
    given = [kwargs.get("dtype")]
    if position is not None and len(args) > position:
        given.append(args[position])
    for value in given:
        reason = dtype_refusal(value)
        if reason:
            raise SizeLimitError(f"numpy.{name}(...): {reason}")


#: arguments that make a function write into its input: (name, position, the value that
#: does) (``numpy.nan_to_num(x, False)`` replaces x's NaNs in x itself)
_IN_PLACE = {"nan_to_num": ("copy", 1, False), "median": ("overwrite_input", 3, True)}


#: where the functions of numpy's C core take ``out`` positionally: numpy before 2.4 gives
#: them no signature to read (``dot(a, b, out)``, ``concatenate(arrays, axis, out)``)
_OUT_WITHOUT_SIGNATURE = {"dot": 2, "concatenate": 2}


def _out_position(function: Callable) -> int | None:
    """Where ``out`` may be given positionally (``numpy.add(x, x, x)`` writes into x)."""
    if isinstance(function, np.ufunc):
        return function.nin
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return _OUT_WITHOUT_SIGNATURE.get(getattr(function, "__name__", ""))
    for position, parameter in enumerate(parameters):
        if parameter.kind not in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            return None  # after *operands (einsum): out only by keyword
        if parameter.name == "out":
            return position
    return None


def _check_no_writes(name: str, out_at: int | None, args: tuple, kwargs: dict) -> None:
    """Refuse ``out`` (by keyword or position) and an argument that writes in place: an
    expression computes new values, it never changes the model's."""
    written = "out" in kwargs or (out_at is not None and len(args) > out_at)
    if name in _IN_PLACE:
        argument, position, writes = _IN_PLACE[name]
        given = kwargs.get(argument, args[position] if len(args) > position else None)
        written = written or (given is not None and bool(np.asarray(given).any()) == writes)
    if written:
        raise EvaluationError(
            f"numpy.{name}(...): writing into an argument (out=, a positional out, or "
            f"{'/'.join(f'{a}={w}' for a, _, w in _IN_PLACE.values())}) is not allowed in "
            "a model that is not trusted; use the result the call returns"
        )


def _item_width(name: str, values: Any) -> int:
    """float64-sized elements one item of the result may take, read from the arguments
    ``values`` (lists and tuples at any depth) in one pass: 1, or for a text its bytes as
    numpy stores it, 4 a character, as the ONNX plans count text (``numpy.full(1000, t)``
    of a text of 10,000 characters is 40 MB); words of up to 9 characters (options:
    ``mode='wrap'``, ``casting='same_kind'``) count as one.

    Refuses a Python integer that no numpy integer holds and an object array: numpy would
    compute with an array of Python integers, whose every product is larger
    (``numpy.square`` nested k times makes 2**k times the bits), beyond the integer limit
    of the expression's operators."""
    widest = 8
    for value in values:
        kind = type(value)
        if kind is np.ndarray:
            if value.dtype.kind in "US":
                widest = max(widest, value.dtype.itemsize)
            elif value.dtype.kind == "O":
                raise EvaluationError(f"numpy.{name}(...): an array of Python objects is refused")
        elif kind is int and not -(2**63) <= value < 2**64:
            raise EvaluationError(
                f"numpy.{name}(...): an integer of {value.bit_length()} bits is no numpy "
                "number (int64 and uint64 hold 64 bits); numpy would make an array of "
                "Python integers, whose arithmetic no limit bounds. Compute with it "
                "outside numpy (+, *, math.prod are sized) or as a float (float(n))"
            )
        elif kind is list or kind is tuple:
            widest = max(widest, 8 * _item_width(name, value))
        elif isinstance(value, (str, bytes)) and len(value) > 9:
            widest = max(widest, len(value) * (4 if isinstance(value, str) else 1))
    return -(-widest // 8)


def _planned(name: str, function: Callable, plan: Plan) -> Callable:
    """``function`` that refuses a dtype of unbounded size, writing into an argument
    (``out``), and a result of more than ``max_elements`` elements (by ``plan``, before it
    is computed)."""
    out_at = _out_position(function)
    in_place = name in _IN_PLACE

    @functools.wraps(function)
    def checked(*args: Any, **kwargs: Any) -> Any:
        _check_dtype(name, args, kwargs)
        if kwargs or in_place or (out_at is not None and len(args) > out_at):
            _check_no_writes(name, out_at, args, kwargs)
        planned = planned_elements(plan, args, kwargs, f"numpy.{name}(...)")
        planned *= _item_width(name, (*args, *kwargs.values()) if kwargs else args)
        check_elements(planned, f"the result of numpy.{name}(...)")
        return function(*args, **kwargs)

    return checked


#: decimals past which numpy's rounding of any dtype gives what it gives at this many:
#: a float's ``10**decimals`` is infinite (long double's too), an integer's wraps to 0
SATURATED_DECIMALS = 5000


def bounded_decimals(decimals: Any) -> Any:
    """``decimals`` for numpy's rounding, cut to :data:`SATURATED_DECIMALS` (same sign)
    where it is larger: numpy computes ``10**decimals`` one multiplication at a time, about
    0.7 s for ``round(x, -10**9)``, and gives the same result as at the cut. Decimals that
    numpy refuses (no C int) or that are no integer are left for numpy to refuse."""
    if isinstance(decimals, (bool, np.bool_)) or not hasattr(decimals, "__index__"):
        return decimals
    value = operator.index(decimals)
    if SATURATED_DECIMALS < abs(value) < 2**31:
        return SATURATED_DECIMALS if value > 0 else -SATURATED_DECIMALS
    return decimals


def _bounded_rounding(function: Callable) -> Callable:
    """numpy's ``round``/``around`` with :func:`bounded_decimals`."""

    @functools.wraps(function)
    def rounded(a: Any, *args: Any, **kwargs: Any) -> Any:
        if args:
            args = (bounded_decimals(args[0]), *args[1:])
        if "decimals" in kwargs:
            kwargs["decimals"] = bounded_decimals(kwargs["decimals"])
        return function(a, *args, **kwargs)

    return rounded


#: the numpy functions that take decimals
_ROUNDING = frozenset({"round", "around"})


@functools.lru_cache(maxsize=1)
def _guarded_numpy() -> types.SimpleNamespace:
    members = {}
    for name in NUMPY_FUNCTIONS:
        member = getattr(np, name)
        if name in _ROUNDING:
            member = _bounded_rounding(member)
        if callable(member) and not isinstance(member, type):  # types (float64) stay types
            member = _planned(name, member, plan_for(name))
        members[name] = member
    members["linalg"] = types.SimpleNamespace(
        **{
            name: _planned(f"linalg.{name}", getattr(np.linalg, name), LINALG_PLANS[name])
            for name in _NUMPY_LINALG
        }
    )
    return types.SimpleNamespace(**members)

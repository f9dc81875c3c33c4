"""The ``numpy`` that expressions of a model that is not trusted see.

Inside :func:`untrusted_expressions`, ``numpy.`` in an expression is a namespace
holding only the functions of :data:`~mdf_loops.safety.allowlist.NUMPY_FUNCTIONS`;
its constructors check ``max_elements`` before allocating, and every function
refuses dtypes whose elements have no bounded size (sub-array, structured,
object dtypes, dtype objects).
"""

from __future__ import annotations

import contextvars
import functools
import math
import operator
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from mdf_loops.errors import SizeLimitError
from mdf_loops.ops.common import check_elements
from mdf_loops.safety.allowlist import _NUMPY_LINALG, NUMPY_FUNCTIONS, dtype_refusal

__all__ = ["expression_numpy", "untrusted_expressions", "expressions_untrusted"]


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


def _dims(shape: Any) -> int:
    if isinstance(shape, (int, np.integer)):
        return abs(operator.index(shape))
    return math.prod(abs(operator.index(d)) for d in shape)


def _arange_count(start: Any, stop: Any = None, step: Any = None, *args: Any, **kw: Any) -> int:
    start, stop = (0, start) if stop is None else (start, stop)
    step = 1 if step is None else step
    return max(math.ceil((float(stop) - float(start)) / float(step)), 0) if step else 0


def _like_count(a: Any, *args: Any, shape: Any = None, **kwargs: Any) -> int:
    return np.size(a) if shape is None else _dims(shape)


#: numpy constructor -> elements a call will allocate, from the call's arguments
_CALL_SIZE: dict[str, Callable[..., int]] = {
    "zeros": lambda shape, *a, **k: _dims(shape),
    "ones": lambda shape, *a, **k: _dims(shape),
    "empty": lambda shape, *a, **k: _dims(shape),
    "full": lambda shape, *a, **k: _dims(shape),
    "eye": lambda N, M=None, *a, **k: abs(int(N)) * abs(int(N if M is None else M)),
    "identity": lambda n, *a, **k: abs(int(n)) ** 2,
    "arange": _arange_count,
    "linspace": lambda start, stop, num=50, *a, **k: abs(int(num)),
    "zeros_like": _like_count,
    "ones_like": _like_count,
    "full_like": _like_count,
}


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


def _dtype_checked(name: str, function: Callable) -> Callable:
    @functools.wraps(function)
    def checked(*args: Any, **kwargs: Any) -> Any:
        _check_dtype(name, args, kwargs)
        return function(*args, **kwargs)

    return checked


def _size_checked(name: str, function: Callable) -> Callable:
    count = _CALL_SIZE[name]

    @functools.wraps(function)
    def checked(*args: Any, **kwargs: Any) -> Any:
        _check_dtype(name, args, kwargs)
        try:
            elements = count(*args, **kwargs)
        except (TypeError, ValueError, OverflowError):
            elements = 0  # malformed arguments: numpy reports them
        check_elements(elements, f"numpy.{name}(...)")
        return function(*args, **kwargs)

    return checked


@functools.lru_cache(maxsize=1)
def _guarded_numpy() -> types.SimpleNamespace:
    members = {
        name: _dtype_checked(name, getattr(np, name))
        if callable(getattr(np, name)) and not isinstance(getattr(np, name), type)
        else getattr(np, name)
        for name in NUMPY_FUNCTIONS
    }
    members.update({name: _size_checked(name, getattr(np, name)) for name in _CALL_SIZE})
    members["linalg"] = types.SimpleNamespace(
        **{name: getattr(np.linalg, name) for name in _NUMPY_LINALG}
    )
    return types.SimpleNamespace(**members)

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
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from mdf_loops.errors import SizeLimitError
from mdf_loops.ops.common import check_elements
from mdf_loops.safety.allowlist import _NUMPY_LINALG, NUMPY_FUNCTIONS, dtype_refusal
from mdf_loops.safety.numpy_sizes import LINALG_PLANS, Plan, plan_for, planned_elements

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


def _planned(name: str, function: Callable, plan: Plan) -> Callable:
    """``function`` that refuses a dtype of unbounded size, ``out=``, and a result of more
    than ``max_elements`` elements (by ``plan``, before it is computed)."""

    @functools.wraps(function)
    def checked(*args: Any, **kwargs: Any) -> Any:
        _check_dtype(name, args, kwargs)
        if "out" in kwargs:
            raise SizeLimitError(f"numpy.{name}(...): out= is not allowed in a model not trusted")
        check_elements(planned_elements(plan, args, kwargs), f"the result of numpy.{name}(...)")
        return function(*args, **kwargs)

    return checked


@functools.lru_cache(maxsize=1)
def _guarded_numpy() -> types.SimpleNamespace:
    members = {}
    for name in NUMPY_FUNCTIONS:
        member = getattr(np, name)
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

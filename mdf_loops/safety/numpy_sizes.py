"""How many elements each numpy function an untrusted expression may call will make.

Every function of :data:`~mdf_loops.safety.allowlist.NUMPY_FUNCTIONS` (and
``numpy.linalg``'s) has a plan here: a function of the call's arguments giving
the elements of its result, computed from shapes and literal sizes alone, so that
:mod:`mdf_loops.safety.guarded_numpy` can refuse a call over ``max_elements``
before numpy allocates anything. The plans are:

* element-wise functions (ufuncs, ``where``, ``clip``, ...): the broadcast shape of
  their arguments (``a * numpy.transpose(a)`` with ``a`` of shape (46000, 1) is
  46000 x 46000);
* products (``matmul``, ``dot``, ``inner``, ``outer``, ``tensordot``, ``einsum``)
  and ``diag``/``tril``/``triu`` of a vector (a matrix): the shape their rules give;
* constructors (``zeros``, ``arange``, ``ones_like(x, shape=...)``, positional or not):
  the size asked for;
* everything else returns no more elements than its arguments hold together,
  counted with multiplicity (``numpy.concatenate([x, x, x])`` is three times ``x``).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from mdf_loops.errors import EvaluationError, SizeLimitError
from mdf_loops.ops.common import current_limits, how_to_raise
from mdf_loops.safety.operator_sizes import planned_elements as onnx_planned_elements

__all__ = ["planned_elements", "plan_for", "held_elements", "LINALG_PLANS", "Plan"]

Plan = Callable[..., int]


def held_elements(value: Any) -> int:
    """Elements ``value`` holds: an array's size, a list's items counted at every depth."""
    if isinstance(value, np.ndarray):
        return value.size
    if isinstance(value, (list, tuple)):
        return sum(held_elements(item) for item in value)
    return 1


def _shape(value: Any) -> tuple[int, ...]:
    if isinstance(value, np.ndarray | np.generic):
        return value.shape
    if isinstance(value, (list, tuple)):
        return np.shape(value)
    return ()


def _dims(shape: Any) -> int:
    if isinstance(shape, (int, np.integer)):
        return abs(operator.index(shape))
    return math.prod(abs(operator.index(d)) for d in shape)


# ---------------------------------------------------------------- plans


def _inputs(*args: Any, **kwargs: Any) -> int:
    """No more than the arguments hold together."""
    return sum(held_elements(a) for a in args) + sum(held_elements(v) for v in kwargs.values())


def _broadcast(*args: Any, **kwargs: Any) -> int:
    """The broadcast shape of the array arguments (keywords such as ``where=`` too)."""
    shapes = [_shape(a) for a in (*args, *kwargs.values()) if not isinstance(a, (str, type))]
    try:
        return math.prod(np.broadcast_shapes(*shapes))
    except ValueError:
        return 0  # shapes that do not broadcast: numpy reports them


def _dot(a: Any, b: Any, *args: Any, **kwargs: Any) -> int:
    sa, sb = _shape(a), _shape(b)
    if not sa or not sb:
        return math.prod(sa) * math.prod(sb)
    if len(sb) == 1:
        return math.prod(sa[:-1])
    return math.prod(sa[:-1]) * math.prod(sb[:-2]) * sb[-1]


def _inner(a: Any, b: Any, *args: Any, **kwargs: Any) -> int:
    sa, sb = _shape(a), _shape(b)
    if not sa or not sb:
        return math.prod(sa) * math.prod(sb)
    return math.prod(sa[:-1]) * math.prod(sb[:-1])


def _outer(a: Any, b: Any, *args: Any, **kwargs: Any) -> int:
    return held_elements(a) * held_elements(b)


def _tensordot(a: Any, b: Any, axes: Any = 2, *args: Any, **kwargs: Any) -> int:
    sa, sb = _shape(a), _shape(b)
    if isinstance(axes, (int, np.integer)):
        n = operator.index(axes)
        return math.prod(sa[: len(sa) - n]) * math.prod(sb[n:])
    first, second = axes
    first = [first] if isinstance(first, (int, np.integer)) else list(first)
    second = [second] if isinstance(second, (int, np.integer)) else list(second)
    kept_a = [d for k, d in enumerate(sa) if k not in {x % max(len(sa), 1) for x in first}]
    kept_b = [d for k, d in enumerate(sb) if k not in {x % max(len(sb), 1) for x in second}]
    return math.prod(kept_a) * math.prod(kept_b)


def _square_of_vector(m: Any, *args: Any, **kwargs: Any) -> int:
    """``tril``, ``triu``: a vector of n makes an n x n matrix (``k`` moves the diagonal)."""
    shape = _shape(m)
    return shape[0] ** 2 if len(shape) == 1 else math.prod(shape)


def _diag(v: Any, k: Any = 0, *args: Any, **kwargs: Any) -> int:
    """``diag``: a vector of n makes an (n + |k|) x (n + |k|) matrix (``numpy.diag(x, 10**4)``
    is 10**8 elements), a matrix gives a diagonal of it."""
    shape = _shape(v)
    return (shape[0] + abs(operator.index(k))) ** 2 if len(shape) == 1 else math.prod(shape)


def _take(a: Any, indices: Any, axis: Any = None, *args: Any, **kwargs: Any) -> int:
    """``take``: the indices' shape in place of the axis taken (``numpy.take(m, i, axis=0)``
    makes a row of ``m`` per index), or the indices' shape along the flattened array."""
    taken = math.prod(_shape(indices))
    if axis is None:
        return taken
    shape = _shape(a)
    axis = operator.index(axis) % max(len(shape), 1)
    return math.prod(shape[:axis]) * taken * math.prod(shape[axis + 1 :])


def _cross(
    a: Any, b: Any, axisa: Any = -1, axisb: Any = -1, axisc: Any = -1, axis: Any = None
) -> int:
    """``cross``: the broadcast of the operands without their vector axes, 3 a vector (a
    2-vector beside a 3-vector broadcasts too, where the shapes of the two do not)."""
    axisa, axisb = (axisa, axisb) if axis is None else (axis, axis)
    rest = [_without(_shape(v), w) for v, w in ((a, axisa), (b, axisb))]
    return 3 * math.prod(np.broadcast_shapes(*rest))


def _without(shape: tuple[int, ...], axis: Any) -> tuple[int, ...]:
    axis = operator.index(axis) % max(len(shape), 1)
    return shape[:axis] + shape[axis + 1 :]


def _first(a: Any, *args: Any, **kwargs: Any) -> int:
    """As many elements as the first argument (``nan_to_num``: its values replaced)."""
    return held_elements(a)


def _where(condition: Any, *args: Any, **kwargs: Any) -> int:
    """``where(c, x, y)``: their broadcast; ``where(c)``: an index array per dimension."""
    if args:
        return _broadcast(condition, *args, **kwargs)
    return max(len(_shape(condition)), 1) * math.prod(_shape(condition))


def _with_mean(a: Any, *args: Any, mean: Any = None, **kwargs: Any) -> int:
    """``std``, ``var``: a reduction, but ``a - mean`` is computed first, broadcast."""
    return max(_inputs(a, *args, **kwargs), 0 if mean is None else _broadcast(a, mean))


def _diff(a: Any, n: Any = 1, axis: Any = -1, *args: Any, **kwargs: Any) -> int:
    """``diff``: no more than its arguments; ``n`` differences beyond the axis's length
    would only loop (``numpy.diff(x, 10**9)``: minutes for an empty result), so refused."""
    shape = _shape(a)
    if not shape:
        return _inputs(a, *args, **kwargs)  # numpy refuses a 0-d array
    length = shape[operator.index(axis)]
    extra = sum(math.prod(_shape(v)) or 1 for k, v in kwargs.items() if k in ("prepend", "append"))
    if operator.index(n) > max(length + extra, 1):
        raise EvaluationError(
            f"numpy.diff(..., n={operator.index(n)}): n is more than the {length + extra} "
            "values along the axis (every difference after them is empty); use an n no "
            "larger than the axis"
        )
    return _inputs(a, *args, **kwargs)


#: operands of an einsum whose contraction order numpy may search exhaustively
_OPTIMAL_OPERANDS = 6


def _einsum(subscripts: Any, *operands: Any, optimize: Any = False, **kwargs: Any) -> int:
    """``numpy.einsum``: the ONNX Einsum plan (the same equation language). Unoptimized
    (numpy's default), numpy loops over every combination of the indices, whatever the
    result's size (``numpy.einsum('i,j,k,l,m->', x, x, x, x, x)`` of 150 values: 10**11
    steps for one number), so that loop is refused over ``max_elements`` steps."""
    if not isinstance(subscripts, str):
        raise EvaluationError("numpy.einsum: write the subscripts as text ('ij,jk->ik')")
    strategy = optimize[0] if isinstance(optimize, (list, tuple)) and optimize else optimize
    if strategy == "optimal" and len(operands) > _OPTIMAL_OPERANDS:
        raise EvaluationError(
            f"numpy.einsum(..., optimize='optimal') of {len(operands)} operands: its search "
            "tries every order of contraction (10 operands: half a minute, each more one "
            f"many times that); use optimize=True (greedy) above {_OPTIMAL_OPERANDS} operands"
        )
    terms = subscripts.replace(" ", "").partition("->")[0]
    every = "".join(sorted({c for c in terms if c.isalpha()}))
    loop = f"{terms}->{'...' if '...' in terms else ''}{every}"
    steps = onnx_planned_elements("Einsum", list(operands), {"equation": loop}) or 0
    limit = current_limits().max_elements
    if not optimize and steps > limit:
        raise SizeLimitError(
            f"numpy.einsum('{subscripts}', ...) loops over {steps} combinations of its "
            f"indices, over the limit of {limit} (max_elements); pass optimize=True (numpy "
            f"then contracts two operands at a time), or {how_to_raise('max_elements')}"
        )
    return onnx_planned_elements("Einsum", list(operands), {"equation": subscripts}) or 0


def _solve(a: Any, b: Any, *args: Any, **kwargs: Any) -> int:
    sa, sb = _shape(a), _shape(b)
    if len(sa) <= 2 and len(sb) <= 2:
        return math.prod(sb)
    try:
        return math.prod(np.broadcast_shapes(sa[:-2], sb[:-2])) * math.prod(sb[-2:])
    except ValueError:
        return 0


# constructors: the size asked for


def _arange(
    start: Any = None, stop: Any = None, step: Any = None, *args: Any, **kwargs: Any
) -> int:
    """``arange(stop)``, ``arange(start, stop, step)``, by position or keyword
    (``numpy.arange(stop=n)``)."""
    start, stop = (0, start) if stop is None else (start or 0, stop)
    step = 1 if step is None else step
    return max(math.ceil((float(stop) - float(start)) / float(step)), 0) if step else 0


def _like(
    a: Any,
    dtype: Any = None,
    order: Any = None,
    subok: Any = None,
    shape: Any = None,
    **kwargs: Any,
) -> int:
    return held_elements(a) if shape is None else _dims(shape)


def _full_like(
    a: Any,
    fill_value: Any = None,
    dtype: Any = None,
    order: Any = None,
    subok: Any = None,
    shape: Any = None,
    **kwargs: Any,
) -> int:
    return max(_like(a, shape=shape), held_elements(fill_value))


_CONSTRUCTORS: dict[str, Plan] = {
    "zeros": lambda shape, *a, **k: _dims(shape),
    "ones": lambda shape, *a, **k: _dims(shape),
    "empty": lambda shape, *a, **k: _dims(shape),
    "full": lambda shape, fill_value=None, *a, **k: max(_dims(shape), held_elements(fill_value)),
    "eye": lambda N, M=None, *a, **k: abs(int(N)) * abs(int(N if M is None else M)),
    "identity": lambda n, *a, **k: abs(int(n)) ** 2,
    "arange": _arange,
    # num points of the broadcast shape of the ends (array ends: a row of each per point)
    "linspace": lambda start, stop, num=50, *a, **k: (
        abs(int(num)) * max(_broadcast(start, stop), 1)
    ),
    "zeros_like": _like,
    "ones_like": _like,
    "full_like": _full_like,
}

# allclose: a reduction, but of isclose's broadcast, computed first
_BROADCASTING = {"clip", "isclose", "allclose", "around", "round"}
_OTHERS: dict[str, Plan] = {
    "where": _where,
    "cross": _cross,
    "nan_to_num": _first,
    "take": _take,
    "std": _with_mean,
    "var": _with_mean,
    "diff": _diff,
}
_PRODUCTS: dict[str, Plan] = {
    "dot": _dot,
    "inner": _inner,
    "vdot": _inputs,
    "outer": _outer,
    "tensordot": _tensordot,
    "einsum": _einsum,
    "diag": _diag,
    "tril": _square_of_vector,
    "triu": _square_of_vector,
}
#: numpy.linalg functions
LINALG_PLANS: dict[str, Plan] = {"norm": _inputs, "det": _inputs, "inv": _inputs, "solve": _solve}


def plan_for(name: str) -> Plan:
    """The plan of ``numpy.<name>``."""
    if name in _CONSTRUCTORS:
        return _CONSTRUCTORS[name]
    if name in _PRODUCTS:
        return _PRODUCTS[name]
    if name in _OTHERS:
        return _OTHERS[name]
    function = getattr(np, name, None)
    if isinstance(function, np.ufunc) and function.signature:  # matmul, matvec, vecdot
        return _generalized(function.signature)
    if isinstance(function, np.ufunc) and function.nout > 1:  # modf, frexp, divmod
        return _outputs(function.nout, _broadcast)
    if name in _BROADCASTING or isinstance(function, np.ufunc):
        return _broadcast
    return _inputs


def _outputs(count: int, plan: Plan) -> Plan:
    """``count`` results, each of ``plan``'s elements."""
    return lambda *args, **kwargs: count * plan(*args, **kwargs)


def _generalized(signature: str) -> Plan:
    """The plan of a generalized ufunc (``matvec``: ``(m,n),(n)->(m)``): the broadcast of
    its inputs' loop dimensions times each output's core dimensions, as its signature
    binds them (``n?``: a dimension that may be missing; ``3``: a fixed one)."""
    inputs, outputs = (
        [[d for d in core.split(",") if d] for core in re.findall(r"\(([^)]*)\)", side)]
        for side in signature.replace(" ", "").split("->")
    )

    def plan(*args: Any, axes: Any = None, axis: Any = None, **kwargs: Any) -> int:
        sizes: dict[str, int] = {}
        loops = []
        for k, (value, core) in enumerate(zip(args[: len(inputs)], inputs, strict=False)):
            shape = _core_last(_shape(value), core, axes[k] if axes is not None else axis)
            # an operand of fewer dimensions lacks its optional ones (matmul's vector)
            names = core if len(shape) >= len(core) else [d for d in core if d[-1:] != "?"]
            loops.append(shape[: len(shape) - len(names)])
            for name, size in zip(names, shape[len(shape) - len(names) :], strict=True):
                sizes[name.rstrip("?")] = size
        loop = math.prod(np.broadcast_shapes(*loops))
        return sum(
            loop * math.prod(int(d) if d.isdigit() else sizes.get(d.rstrip("?"), 1) for d in core)
            for core in outputs
        )

    return plan


def _core_last(shape: tuple[int, ...], core: list[str], where: Any) -> tuple[int, ...]:
    """``shape`` with the core dimensions that ``axes=`` / ``axis=`` name moved to the end,
    where the ufunc reads them (``matmul(r, r, axes=[(1, 0), ...])`` of r (1, n) is n x n)."""
    if where is None or not core:
        return shape
    picked = [operator.index(where)] if isinstance(where, (int, np.integer)) else list(where)
    picked = [operator.index(d) % max(len(shape), 1) for d in picked]
    return tuple(d for k, d in enumerate(shape) if k not in picked) + tuple(
        shape[k] for k in picked
    )


def planned_elements(plan: Plan, args: tuple, kwargs: dict, what: str = "a numpy call") -> int:
    """Elements the call will make by ``plan``; 0 when the arguments are malformed (numpy
    then reports them in its own words).

    Raises:
        EvaluationError: arguments spelled in a way the plan does not read (a keyword
            it does not name): the call is refused rather than run unplanned.
    """
    try:
        return plan(*args, **kwargs)
    except TypeError as exc:
        raise EvaluationError(
            f"{what}: the size of its result cannot be planned from these arguments ({exc}), so "
            "the call is not made in a model that is not trusted; pass them as numpy "
            "documents them (by position)"
        ) from None
    except (ValueError, OverflowError, IndexError, KeyError):
        return 0

"""64-bit types in JAX: on while mdf-loops traces and runs, and only where a model has them.

JAX computes in 32 bits unless ``jax_enable_x64`` is set. mdf-loops sets it only inside
its own calls, as a context (``jax.enable_x64``, thread-local: the caller's setting is
restored), never for the caller. Entering and leaving that context costs tens of
microseconds when the CPU caches are cold, as much as a short loop, so
:meth:`~mdf_loops.backends.jax.compiled.JaxModel.run` enters it only when the model's
traced program (traced with 64-bit types on) holds a 64-bit value somewhere: an input,
a constant, an intermediate, a loop carry, in any body. A program without one is the
same program with 64-bit types off.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

__all__ = ["x64", "uses_64_bits"]


def x64() -> contextlib.AbstractContextManager:
    """64-bit types on for the block (thread-local; the caller's setting is restored)."""
    import jax

    return jax.enable_x64(True)


def uses_64_bits(closed_jaxpr: Any) -> bool:
    """Whether a traced program (a ``jax.make_jaxpr`` result) holds a 64-bit value
    anywhere, its sub-programs (loop bodies, branches) included. A value of a type it
    cannot read counts as 64-bit."""
    stack = [closed_jaxpr]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        jaxpr = getattr(item, "jaxpr", item)  # a ClosedJaxpr holds a Jaxpr
        variables = [*jaxpr.invars, *jaxpr.outvars, *jaxpr.constvars]
        for eqn in jaxpr.eqns:
            variables += [*eqn.invars, *eqn.outvars]
            stack.extend(_programs_in(eqn.params.values()))
        if any(_is_64_bit(getattr(v, "aval", None)) for v in variables):
            return True
    return False


def _programs_in(values) -> list:
    """The traced programs among an equation's parameters (``jaxpr``, ``branches``...)."""
    found = []
    for value in values:
        if isinstance(value, (tuple, list)):
            found += _programs_in(value)
        elif hasattr(value, "eqns") or hasattr(getattr(value, "jaxpr", None), "eqns"):
            found.append(value)
    return found


def _is_64_bit(aval: Any) -> bool:
    dtype = getattr(aval, "dtype", None)
    if dtype is None:  # a token, or something new: not read here
        return aval is not None
    try:
        dtype = np.dtype(dtype)
    except TypeError:  # an extended type (a PRNG key): not read here
        return True
    return dtype.itemsize >= 8 and dtype.kind in "iufc"

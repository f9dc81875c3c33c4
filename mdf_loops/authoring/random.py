"""Theano's ``RandomStreams``: reproducible random numbers from integer arithmetic.

ONNX's random operators give different numbers on different runtimes, so each
draw here is computed from a counter with integer operations every backend
runs alike. Each draw site (each call of :meth:`RandomStreams.uniform`,
``binomial`` or ``normal``) owns a shared int64 state ``s``. Entry ``k`` of a
draw (counting in C order) is::

    x = (s * 1103515245 + k * 2654435761 % 2**31) % 2**31
    repeat 3 times:
        x = (x * 1103515245 + 12345) % 2**31
        x = x ^ (x // 2**16)
    u = x / 2**31                                  # uniform in [0, 1)

and the state then advances to ``s * 48271 % (2**31 - 1)`` (MINSTD), as a
*default update*: inside a scan's ``fn`` the scan carries it (and returns the
final state in its updates, so ``function(..., updates=updates)`` moves the
stream on); at the top level :func:`~mdf_loops.authoring.function` applies it
after each call. A draw site starts at ``(seed * 7919 + site * 104729) %
(2**31 - 1) + 1``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mdf_loops.authoring.config import config
from mdf_loops.authoring.errors import AuthoringError
from mdf_loops.authoring.functions import cast, concatenate, cos, log, prod, sqrt, where
from mdf_loops.authoring.shared import SharedVariable, shared
from mdf_loops.authoring.symbolic import Symbol, apply, as_symbol, current_scope

__all__ = ["RandomStreams"]

_MODULUS = 2**31
_MINSTD = 2**31 - 1


class RandomStreams:
    """Theano's ``shared_randomstreams.RandomStreams(seed)``.

    Draws ``uniform``, ``binomial`` and ``normal`` values.
    """

    def __init__(self, seed: int = 0):
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise AuthoringError(f"RandomStreams: seed must be an integer, got {seed!r}")
        self.seed = int(seed)
        self.state_updates: list[SharedVariable] = []

    def _state(self) -> SharedVariable:
        site = len(self.state_updates)
        start = (self.seed * 7919 + site * 104729) % _MINSTD + 1
        state = shared(np.int64(start), name=f"random_state_{site}")
        self.state_updates.append(state)
        return state

    def _uniform01(self, shape: Symbol, copies: int = 1) -> Symbol:
        """``copies`` stacked draws of uniforms in [0, 1) of ``shape``; advances the stream."""
        state = self._state()
        count = apply("Unsqueeze", [prod(shape) * copies, np.array([0], np.int64)])
        index = apply(
            "Range", [np.array(0, np.int64), apply("Squeeze", [count]), np.array(1, np.int64)]
        )
        x = (state * 1103515245 + index * 2654435761 % _MODULUS) % _MODULUS
        for _ in range(3):
            x = (x * 1103515245 + 12345) % _MODULUS
            x = x ^ (x // 65536)
        current_scope().default_updates[state] = state * 48271 % _MINSTD
        full = concatenate([np.array([copies], np.int64), shape]) if copies > 1 else shape
        return apply("Reshape", [cast(x, np.float64) / float(_MODULUS), full])

    def uniform(
        self, size: Any = None, low: Any = 0.0, high: Any = 1.0, ndim: Any = None, dtype: Any = None
    ) -> Symbol:
        """Uniform numbers in ``[low, high)`` of shape ``size`` (default: that of low/high)."""
        shape = _shape(size, [low, high])
        low, high = as_symbol(low), as_symbol(high)
        values = low + (high - low) * self._uniform01(shape)
        return cast(values, dtype or config.floatX)

    def binomial(
        self, size: Any = None, n: int = 1, p: Any = 0.5, ndim: Any = None, dtype: Any = "int64"
    ) -> Symbol:
        """Counts of successes in ``n`` trials of probability ``p``, of shape ``size``."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise AuthoringError(f"RandomStreams.binomial: n must be a positive int, got {n!r}")
        shape = _shape(size, [p])
        successes = cast(self._uniform01(shape, int(n)) < as_symbol(p), np.int64)
        counts = successes.sum(axis=0) if n > 1 else successes
        return cast(counts, dtype)

    def normal(
        self, size: Any = None, avg: Any = 0.0, std: Any = 1.0, ndim: Any = None, dtype: Any = None
    ) -> Symbol:
        """Normal numbers of mean ``avg`` and deviation ``std`` (Box-Muller), of shape ``size``."""
        shape = _shape(size, [avg, std])
        pair = self._uniform01(shape, 2)
        radius = sqrt(-2.0 * log(1.0 - pair[0]))
        values = as_symbol(avg) + as_symbol(std) * radius * cos((2 * math.pi) * pair[1])
        return cast(values, dtype or config.floatX)


def _shape(size: Any, parameters: list[Any]) -> Symbol:
    """``size`` as an int64 vector: a shape symbol, ints and scalar symbols, or the parameters'."""
    if size is None:
        broadcast = parameters[0]
        for other in parameters[1:]:
            broadcast = where(True, broadcast, other)
        return apply("Shape", [as_symbol(broadcast)])
    if isinstance(size, Symbol):
        if size.ndim != 1:
            raise AuthoringError(f"size must be a shape (a vector), got {size.describe()}")
        return cast(size, np.int64)
    items = [size] if isinstance(size, (int, np.integer)) else list(size)
    if all(isinstance(d, (int, np.integer)) for d in items):
        return as_symbol(np.array(items, np.int64))
    parts = [
        apply("Unsqueeze", [cast(as_symbol(d), np.int64), np.array([0], np.int64)]) for d in items
    ]
    return concatenate(parts)

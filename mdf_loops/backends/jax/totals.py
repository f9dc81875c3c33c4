"""Iterations of all loops of a run together, counted inside the traced JAX program.

The scheduler counts every iteration of every loop of a run against
``max_total_iterations`` (:class:`~mdf_loops.ops.common.IterationGuard`); the JAX
lowering threads one count through the trace, as
:mod:`mdf_loops.backends.onnxruntime.totals` does through the ONNX graph:

* the count is a Python integer while every loop so far ran a number of iterations
  known while tracing, and a traced ``int64`` from the first loop that stops at run
  time; a count known while tracing that passes the limit raises at once, naming the
  loop node and the iteration;
* a loop whose body holds no loop adds its iterations at once (a Scan its length, a
  Loop of a fixed trip count its trips), and its work is skipped (``lax.cond``) when
  that passes the limit, so no loop runs past it;
* a loop whose body holds loops carries the count through ``lax.scan`` or
  ``lax.while_loop``: each iteration adds one, then the loops in its body add theirs;
  a while loop does not go on past the limit;
* the iteration that passes the limit sets the flag the compiled function returns
  (:data:`~mdf_loops.backends.jax.values.BUFFER_FULL`, ``LIMIT_PASSED`` and
  ``SIZE_PASSED`` in the low bits) to a code above them, ``1 + site + SITES * iteration`` as in
  :mod:`~mdf_loops.backends.onnxruntime.limit_codes` (the count only grows, so one
  iteration passes it and the flags' OR is its code); :func:`limits_error` turns it back
  into the loop node and the iteration.

The count is the scheduler's to the iteration: a run passes at ``max_total_iterations``
equal to its iterations and fails one below. A trusted run counts nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from mdf_loops.backends.jax.values import label
from mdf_loops.backends.onnxruntime.limit_codes import SITES
from mdf_loops.errors import IterationLimitError, LimitError, SizeLimitError
from mdf_loops.onnx.builder import all_nodes
from mdf_loops.ops.common import Limits, how_to_raise

__all__ = [
    "Counter",
    "LoopSite",
    "loop_sites",
    "holds_loops",
    "run_counted",
    "limits_error",
    "SHIFT",
]

#: flag bits below a total code (BUFFER_FULL, LIMIT_PASSED, SIZE_PASSED)
SHIFT = 3

_LOOPS = ("Loop", "Scan")


@dataclass(frozen=True)
class LoopSite:
    """A loop node as a total code names it: its index among the model's loops."""

    index: int
    where: str  # its label, as errors name it
    kind: str  # "Loop" or "Scan"


def loop_sites(graph: onnx.GraphProto) -> dict[str, LoopSite]:
    """Each loop node's label -> its site in a total code (the same for every trace)."""
    sites: dict[str, LoopSite] = {}
    for node in all_nodes(graph):
        if node.op_type in _LOOPS and node.domain in ("", "ai.onnx"):
            where = label(node)
            sites.setdefault(where, LoopSite(len(sites), where, node.op_type))
    return sites


def holds_loops(*graphs: onnx.GraphProto) -> bool:
    """Whether a Loop or Scan is among the nodes of ``graphs``, at any depth."""
    return any(n.op_type in _LOOPS for g in graphs for n in all_nodes(g))


def passed_error(site: LoopSite, iteration: int, limit: int) -> IterationLimitError:
    """The scheduler's words for the loop whose ``iteration`` passed the limit."""
    return IterationLimitError(
        f"{site.kind} stopped at iteration {iteration}: the loops of this run have run "
        f"{limit} iterations together, the limit (max_total_iterations); "
        f"{how_to_raise('max_total_iterations')}",
        location=f"{site.where} (jax backend)",
    )


def limits_error(flag: int, graph: onnx.GraphProto, limits: Limits) -> LimitError:
    """The error a returned flag holds: the loop whose iteration passed
    ``max_total_iterations``, or a Loop whose scan outputs would pass ``max_elements``."""
    code = int(flag) >> SHIFT
    if not code:  # SIZE_PASSED (a Loop stopped at run time: its node is not in the flag)
        return SizeLimitError(
            f"a Loop's scan outputs, stacked, would pass max_elements={limits.max_elements} "
            "(jax backend); run it with backend='scheduler' to see the loop and the "
            f"iteration; if the model needs values this large, {how_to_raise('max_elements')}"
        )
    iteration, index = divmod(code - 1, SITES)
    sites = list(loop_sites(graph).values())
    site = sites[index] if index < len(sites) else LoopSite(index, "a loop", "loop")
    return passed_error(site, iteration, limits.max_total_iterations)


def _static(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) or (
        isinstance(value, np.ndarray) and value.ndim == 0
    )


class Counter:
    """The count of one trace: :attr:`total` at the point being traced."""

    def __init__(self, limit: int, sites: dict[str, LoopSite]):
        self.limit = limit
        self.sites = sites
        #: iterations so far (saturated at limit + 1): an int, or a traced int64
        self.total: Any = 0
        #: > 0 inside a branch that may not run, or a probe: a passed limit flags, never raises
        self.speculative = 0

    def add(self, raise_flag: Callable[[Any], None], n: Any, where: str, first: Any) -> Any:
        """Count ``n`` iterations of the loop at ``where``, its iterations ``first``,
        ``first + 1``, ...; True (or a traced boolean) when the run's loops have then
        passed the limit: the caller may skip the work, the run fails."""
        before, limit = self.total, self.limit
        site = self.sites.get(where) or LoopSite(0, where, "loop")
        if _static(before) and _static(n) and _static(first):
            before, n, first = int(before), int(n), int(first)
            self.total = min(before + n, limit + 1)
            if before <= limit < before + n:
                iteration = first + limit - before
                if not self.speculative:
                    raise passed_error(site, iteration, limit)
                raise_flag(np.int64((1 + site.index + SITES * iteration) << SHIFT))
            return before + n > limit
        import jax.numpy as jnp

        before = jnp.asarray(before, jnp.int64)
        after = before + n
        crossed = (before <= limit) & (after > limit)
        iteration = jnp.asarray(first, jnp.int64) + limit - before
        code = (1 + site.index + SITES * iteration) << SHIFT
        raise_flag(jnp.where(crossed, code, 0).astype(jnp.int64))
        self.total = jnp.minimum(after, limit + 1)
        return after > limit

    def past(self) -> Any:
        """True (or a traced boolean) when the run's loops have passed the limit."""
        if _static(self.total):
            return int(self.total) > self.limit
        return self.total > self.limit


def run_or_skip(over: Any, run: Callable[[], Any]) -> Any:
    """``run()``, or zeros of its shapes where ``over`` (the limit is passed: the run fails
    and nothing it computes is read); ``lax.cond`` when ``over`` is traced."""
    import jax
    import jax.numpy as jnp

    def zeros() -> Any:
        shapes = jax.eval_shape(run)
        return jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

    if isinstance(over, (bool, np.bool_)):
        return zeros() if over else run()
    return jax.lax.cond(over, zeros, run)


def run_counted(
    ev: Any, where: str, run: Callable[[], Any], iterations: int, carried: bool, *, loop: bool
):
    """``run()`` of the loop at ``where``, of ``iterations`` fixed iterations, returning
    ``(final, (produced, flag))``. Unless its body ``carried`` the count, the iterations are
    counted at once and the loop skipped if that passes the limit (its body holds no
    loop, so it raises no flag). A ``loop`` (a Loop, not a Scan) is traced first: one whose
    condition decides how long it runs raises there, before anything is counted."""
    if ev.counter is None or carried:
        return run()
    import jax

    if loop:
        jax.eval_shape(run)
    over = ev.count(iterations, where)

    def unflagged() -> Any:
        final, (produced, _) = run()
        return final, produced

    final, produced = run_or_skip(over, unflagged)
    return final, (produced, np.int32(0))

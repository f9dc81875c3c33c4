"""A ``Loop`` whose number of iterations is decided at run time (a condition, a traced trip count).

Equivalent to (``rows`` is static: the trip count if known, else ``max_iterations``,
at most the evaluator's ``buffer_rows`` when the loop has scan outputs or is to be
differentiated)::

    i, keep, values, buffers = 0, cond, carried, zeros(rows, ...)
    while i < rows and keep and i < trip_count:
        keep, *values, *elements = body(i, keep, *values)
        buffers[:, i] = elements
        i += 1
    return values, Ragged(buffers, count=i)

In evaluator mode ``"run"`` this is ``lax.while_loop``. In mode ``"grad"`` it is a
``lax.scan`` over all ``rows`` whose steps after the loop stopped leave the values
unchanged (``where``), so reverse-mode differentiation works; it costs ``rows``
body evaluations. A loop that would go on past ``rows`` raises a flag:
:data:`BUFFER_FULL` (compile again with more rows), :data:`LIMIT_PASSED`, or, in a model
that is not trusted whose scan outputs would pass ``max_elements`` past ``rows``,
:data:`SIZE_PASSED`.
"""

from __future__ import annotations

import numpy as np

from mdf_loops.backends.jax.totals import holds_loops
from mdf_loops.backends.jax.values import (
    BUFFER_FULL,
    LIMIT_PASSED,
    SIZE_PASSED,
    Ragged,
    is_concrete,
    one_boolean,
    same_types,
    structured,
)

__all__ = ["loop_bounded"]


def loop_bounded(call, trip, cond, carried: list) -> list:
    import jax.numpy as jnp

    ev, body, n = call.evaluator, call.attrs["body"], len(carried)
    n_scan = len(body.output) - 1 - n
    trips = int(np.asarray(trip).reshape(())) if trip is not None and is_concrete(trip) else None
    bound = min(trips, ev.max_iterations) if trips is not None else ev.max_iterations
    # buffers need static rows, and so does the differentiable form, which runs them all
    rows = min(bound, ev.buffer_rows) if n_scan or ev.mode == "grad" else bound
    dynamic_trips = (
        None if trip is None or trips is not None else jnp.reshape(trip, ()).astype(jnp.int64)
    )
    keep0 = jnp.asarray(True) if cond is None else jnp.reshape(cond, ()).astype(bool)
    values0 = tuple(jnp.asarray(v) for v in carried)
    counter = ev.counter
    carries, total0, starts = _counting(counter, body, dynamic_trips)

    def run_body(i, keep, values, total):
        count = (call.where, i) if carries else None
        outputs, flag, end = ev.body(
            body, [i, keep] + list(values), call.scope, total=total, count=count
        )
        outputs = structured(outputs, call.where)
        same_types(call.where, outputs[1 : 1 + n], values)
        one_boolean(outputs[0], call.where, "body condition output")
        keep_out = jnp.reshape(outputs[0], ()).astype(bool)  # decides also without cond
        end = end if carries else None
        return keep_out, tuple(outputs[1 : 1 + n]), tuple(outputs[1 + n :]), flag, end

    def active(i, keep, total):
        go = keep & (i < rows)
        if carries:  # not past max_total_iterations
            go = go & (total <= counter.limit)
        return go if starts is None else go & (i < starts)

    i0 = jnp.asarray(0, jnp.int64)
    state0 = (i0, keep0, values0, total0)
    shapes = _shapes(ev, run_body, state0) if n_scan else ()
    fits = _rows_that_fit(ev, shapes)  # stacked outputs within max_elements (untrusted)
    capped, rows = fits < rows, min(rows, fits)
    (i, keep, values, total), produced, flag = _iterate(ev.mode, run_body, active, state0,
                                                         rows, shapes)  # fmt: skip
    if carries:
        counter.total = total
    elif counter is not None:
        ev.count(i, call.where)
    wants_more = keep if dynamic_trips is None else keep & (i < dynamic_trips)
    if trips is not None:
        wants_more = wants_more & (i < trips)
    stopped_at_rows = wants_more & (i >= rows)
    if rows < bound:  # a longer buffer, unless the outputs would pass max_elements
        passed = SIZE_PASSED if capped else BUFFER_FULL
        flag = flag | jnp.where(stopped_at_rows, passed, 0).astype(jnp.int64)
    elif trips is None or trips > ev.max_iterations:
        flag = flag | jnp.where(stopped_at_rows, LIMIT_PASSED, 0).astype(jnp.int64)
    ev.raise_flag(flag)
    why = _why_run_time(trip, trips, call.where)
    return list(values) + [Ragged(y, i, why) for y in produced]


def _why_run_time(trip, trips: int | None, where: str) -> str:
    """Why the loop at ``where`` has a length known only at run time, and the fix that fits."""
    if trip is None:
        return (
            f"{where} has no trip count, only a condition; give it a constant trip count "
            "and a body condition that is always true"
        )
    if trips is None:
        return (
            f"{where} takes its trip count from a run-time value; make the trip count a "
            "constant of the model"
        )
    return (
        f"{where} may stop before its trip count of {trips} (its body's condition output, "
        "or its cond input, is decided at run time); make the body's condition output "
        "always true and leave out the cond input, so that the trip count decides"
    )


def _iterate(mode: str, run_body, active, state0, rows: int, shapes) -> tuple:
    """``(final state, scan outputs, flag)`` of at most ``rows`` iterations."""
    import jax.numpy as jnp

    if rows == 0:  # a trip count of 0 (or max_iterations=0): no iteration can run
        produced = tuple(jnp.zeros((0,) + s.shape, s.dtype) for s in shapes)
        return state0, produced, jnp.int64(0)
    if mode == "grad":
        return _masked_scan(run_body, active, state0, rows)
    buffers = tuple(jnp.zeros((rows,) + s.shape, s.dtype) for s in shapes)
    return _while(run_body, active, state0, buffers)


def _counting(counter, body, dynamic_trips) -> tuple:
    """How the loop counts the run's iterations (:mod:`.totals`): ``(carries, total0,
    starts)``. A body that holds loops carries the count from ``total0``; else the loop
    starts no iteration past the one that passes the limit and is counted after it.
    ``starts``: the iterations it may start, known at run time (with its trip count: one
    bound, one test an iteration), or None."""
    import jax.numpy as jnp

    carries = counter is not None and holds_loops(body)
    total0 = jnp.asarray(counter.total, jnp.int64) if carries else None
    starts = dynamic_trips
    if counter is not None and not carries:
        allowed = jnp.asarray(counter.limit - counter.total + 1, jnp.int64)
        starts = allowed if starts is None else jnp.minimum(starts, allowed)
    return carries, total0, starts


def _rows_that_fit(ev, shapes) -> int:
    """Iterations whose scan outputs, stacked, stay within ``max_elements`` (any number
    for a trusted model, or a loop without scan outputs)."""
    if ev.limits is None or not shapes:
        return 1 << 62
    largest = max(max(int(np.prod(s.shape)), 1) for s in shapes)
    return ev.limits.max_elements // largest


def _shapes(ev, run_body, state0) -> tuple:
    """The shapes of one iteration's scan-output elements (a probe: nothing counted)."""
    import jax

    i0, keep0, values0, total0 = state0
    with ev.probing():
        return jax.eval_shape(lambda v: run_body(i0, keep0, v, total0)[2], values0)


def _while(run_body, active, state0, buffers0):
    import jax
    import jax.numpy as jnp

    def go_on(state):
        i, keep, _, total, _, _ = state
        return active(i, keep, total)

    def step(state):
        i, keep, values, total, buffers, flag = state
        keep, values, elements, inner, total = run_body(i, keep, values, total)
        buffers = tuple(b.at[i].set(e) for b, e in zip(buffers, elements, strict=True))
        return i + 1, keep, values, total, buffers, flag | inner

    i, keep, values, total, buffers, flag = jax.lax.while_loop(
        go_on, step, (*state0, buffers0, jnp.int64(0))
    )
    return (i, keep, values, total), buffers, flag


def _masked_scan(run_body, active, state0, rows):
    import jax
    import jax.numpy as jnp

    def step(state, _):
        (i, keep, values, total), flag = state
        on = active(i, keep, total)
        keep_out, new, elements, inner, end = run_body(i, keep, values, total)
        values = tuple(jnp.where(on, a, b) for a, b in zip(new, values, strict=True))
        state = (
            i + on.astype(i.dtype),
            jnp.where(on, keep_out, keep),
            values,
            None if total is None else jnp.where(on, end, total),
        )
        return (state, flag | jnp.where(on, inner, 0).astype(jnp.int64)), elements

    (state, flag), produced = jax.lax.scan(step, (state0, jnp.int64(0)), None, length=rows)
    return state, produced, flag

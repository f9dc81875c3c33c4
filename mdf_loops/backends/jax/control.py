"""``Scan``, ``Loop`` and ``If`` lowered to ``lax.scan``, ``lax.while_loop`` and ``lax.cond``.

The semantics are :mod:`mdf_loops.ops` (``scan``, ``loop``, ``if_``); this module
only chooses how JAX runs them:

* when the loop's control and every value its body reads are concrete, or a
  loop-carried value is a sequence or an optional, the loop runs in Python while
  tracing (its iterations are unrolled into the trace, or computed by numpy);
* ``Scan``, and a ``Loop`` with a concrete trip count and no condition, become
  ``lax.scan``;
* any other ``Loop`` becomes ``lax.while_loop`` (evaluator mode ``"run"``) or a
  ``lax.scan`` over the bound that freezes its values once the loop has stopped
  (mode ``"grad"``: reverse-mode differentiable). Its scan outputs go into a
  buffer of a static number of rows and come out as
  :class:`~mdf_loops.backends.jax.values.Ragged`; a flag tells the compiler when the
  buffer was too short or the loop passed ``max_iterations``;
* ``If`` with a concrete condition evaluates one branch, else ``lax.cond``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from mdf_loops.backends.jax.registry import op
from mdf_loops.backends.jax.totals import holds_loops, run_counted
from mdf_loops.backends.jax.values import (
    NeedsStatic,
    Opt,
    concrete,
    is_concrete,
    one_boolean,
    same_types,
    structured,
    xp_of,
)
from mdf_loops.backends.jax.while_loop import loop_bounded
from mdf_loops.errors import CompileError
from mdf_loops.ops.scan import ScanAttributes, scan_per_entry


def free_names(graph: onnx.GraphProto) -> frozenset:
    """Names ``graph`` (or a graph inside it) reads from its enclosing scope."""
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    used: set[str] = {o.name for o in graph.output}
    for node in graph.node:
        used |= set(node.input)
        for attr in node.attribute:
            for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                used |= free_names(sub)
        defined |= set(node.output)
    return frozenset(used - defined - {""})


def _reads_only_concrete(call, body: onnx.GraphProto, values: list) -> bool:
    if not all(is_concrete(v) for v in values):
        return False
    return all(is_concrete(call.scope.get(name)) for name in free_names(body) if name in call.scope)


def _stack(values: list):
    return xp_of(*values).stack(values)


# ---------------------------------------------------------------- If


@op("If")
def _if(call, cond):
    ev = call.evaluator
    then_branch, else_branch = call.attrs["then_branch"], call.attrs["else_branch"]
    one_boolean(cond, call.where, "If condition")
    if is_concrete(cond):
        taken = then_branch if bool(np.asarray(cond).reshape(())) else else_branch
        return tuple(ev.graph(taken, [], call.scope))
    import jax
    import jax.numpy as jnp

    counter = ev.counter if holds_loops(then_branch, else_branch) else None

    def branch(graph):
        def run():
            if counter is None:
                outputs, flag, _ = ev.body(graph, [], call.scope)
                return structured(outputs, call.where), jnp.asarray(flag, jnp.int32), None
            counter.speculative += 1  # the branch may not run: a passed limit only flags
            try:
                outputs, flag, end = ev.body(graph, [], call.scope, total=counter.total)
            finally:
                counter.speculative -= 1
            typed = jnp.asarray(flag, jnp.int64), jnp.asarray(end, jnp.int64)
            return (structured(outputs, call.where), *typed)

        return run

    try:
        outputs, flag, total = jax.lax.cond(
            jnp.reshape(cond, ()).astype(bool), branch(then_branch), branch(else_branch)
        )
    except TypeError as exc:  # the branches give different shapes or dtypes
        raise NeedsStatic(
            call.where,
            f"its branches differ ({exc}); JAX needs one type "
            "unless the condition is known at compile time",
        ) from None
    ev.raise_flag(flag)
    if counter is not None:
        counter.total = total
    return tuple(outputs)


# ---------------------------------------------------------------- Scan


@op("Scan")
def _scan(call, *inputs):
    if call.opset < 9:
        return _scan_batched(call, list(inputs))
    return tuple(_scan9(call, list(inputs)))


def _scan9(call, inputs: list) -> list:
    ev, body = call.evaluator, call.attrs["body"]
    m = int(call.attr("num_scan_inputs"))
    n = len(inputs) - m
    n_out = len(body.output) - n
    in_axes = list(call.attr("scan_input_axes") or [0] * m)
    directions = "scan_input_directions" if call.opset >= 9 else "directions"  # opset 8's name
    in_back = list(call.attr(directions) or [0] * m)
    out_axes = list(call.attr("scan_output_axes") or [0] * n_out)
    out_back = list(call.attr("scan_output_directions") or [0] * n_out)
    _check_counts(call, m, in_axes, in_back, n_out, out_axes, out_back)
    states, sequences = inputs[:n], []
    for x, axis, backward in zip(inputs[n:], in_axes, in_back, strict=True):
        xp = xp_of(x)
        x = xp.moveaxis(x, axis + x.ndim if axis < 0 else axis, 0)
        sequences.append(xp.flip(x, 0) if backward else x)
    lengths = {int(x.shape[0]) for x in sequences}
    if len(lengths) != 1:
        raise CompileError(f"{call.where}: scan inputs of different lengths {sorted(lengths)}")
    length = lengths.pop()
    ev.check_trips(length, call.where)
    python = any(isinstance(s, (list, Opt)) for s in states) or _reads_only_concrete(
        call, body, states + sequences
    )
    if python:
        final, produced = _scan_python(call, states, sequences, length)
    else:
        mark = ev.mark()
        try:
            final, produced = _scan_lax(call, states, sequences, length)
        except NeedsStatic:
            ev.rewind(mark)  # what it counted is counted again, step by step
            final, produced = _scan_python(call, states, sequences, length)
    outputs = []
    for y, axis, backward in zip(produced, out_axes, out_back, strict=True):
        xp = xp_of(y)
        y = xp.flip(y, 0) if backward else y
        outputs.append(xp.moveaxis(y, 0, axis + y.ndim if axis < 0 else axis))
    return list(final) + outputs


def _check_counts(call, m: int, in_axes, in_back, n_out: int, out_axes, out_back) -> None:
    """A CompileError when a Scan's axes or directions do not give one entry per scan
    input or output."""
    for name, values, expected in (
        ("scan_input_axes", in_axes, m),
        ("scan_input_directions", in_back, m),
        ("scan_output_axes", out_axes, n_out),
        ("scan_output_directions", out_back, n_out),
    ):
        if len(values) != expected:
            raise CompileError(
                f"{call.where}: {name} has {len(values)} entries, expected {expected} "
                "(one per scan input or output)"
            )


def _scan_lax(call, states, sequences, length):
    import jax
    import jax.numpy as jnp

    ev, body, n = call.evaluator, call.attrs["body"], len(states)
    counter = ev.counter
    carries_count = counter is not None and holds_loops(body)  # else counted at once

    def step(carry, xs):
        (values, total), (elements, t) = carry if carries_count else (carry, None), xs
        count = (call.where, t) if carries_count else None
        outputs, inner, end = ev.body(
            body, list(values) + list(elements), call.scope, total=total, count=count
        )
        outputs = structured(outputs, call.where)
        new = tuple(o.astype(v.dtype) for o, v in zip(outputs[:n], values, strict=True))
        return ((new, end) if carries_count else new), (tuple(outputs[n:]), inner)

    init: Any = tuple(jnp.asarray(s) for s in states)
    steps = jnp.arange(length, dtype=jnp.int64) if carries_count else None
    if carries_count:
        init = (init, jnp.asarray(counter.total, jnp.int64))

    def run():
        try:
            return with_flags(jax.lax.scan, step, init, (tuple(sequences), steps), length=length)
        except TypeError as exc:  # a state changed shape
            raise CompileError(f"{call.where}: {exc}") from None

    final, (produced, flags) = run_counted(ev, call.where, run, length, carries_count, loop=False)
    if carries_count:
        final, counter.total = final
    ev.raise_flag(flags)
    ev.check_stacked([int(np.prod(y.shape)) for y in produced], call.where)
    return list(final), list(produced)


def with_flags(primitive, step, init, xs, **kwargs):
    """``primitive`` (``lax.scan``) of ``step(carry, x) -> (carry, (ys, flag))``, the flags OR-ed.

    A body that raises no flag (no condition-stopped loop inside) gets no flag
    carried from step to step: the loop compiles as if written by hand.
    """
    import jax.numpy as jnp

    raised = []

    def probe(carry, x):
        carry, (ys, flag) = step(carry, x)
        if not is_concrete(flag):
            raised.append(flag.dtype)
        return carry, ys

    def flagged(state, x):
        carry, flag = state
        carry, (ys, inner) = step(carry, x)
        return (carry, flag | inner), ys

    final, ys = primitive(probe, init, xs, **kwargs)
    if not raised:
        return final, (ys, np.int32(0))
    (final, flag), ys = primitive(flagged, (init, jnp.zeros((), raised[0])), xs, **kwargs)
    return final, (ys, flag)


def _scan_python(call, states, sequences, length):
    ev, body, n = call.evaluator, call.attrs["body"], len(states)
    values = list(states)
    columns: list[list[Any]] | None = None
    for t in range(length):
        ev.count(1, call.where, t)
        outputs = ev.graph(body, values + [x[t] for x in sequences], call.scope)
        values = outputs[:n]
        columns = columns or [[] for _ in outputs[n:]]
        for column, y in zip(columns, outputs[n:], strict=True):
            column.append(y)
    if columns is None:  # zero steps: the element shapes from one probe of the body
        with ev.probing():
            probe = ev.graph(
                body, values + [np.zeros(x.shape[1:], x.dtype) for x in sequences], call.scope
            )
        return values, [np.zeros((0,) + np.shape(y), np.asarray(y).dtype) for y in probe[n:]]
    ev.check_stacked([sum(int(np.size(y)) for y in c) for c in columns], call.where)
    return values, [_stack(c) for c in columns]


def _scan_batched(call, inputs: list) -> tuple:
    """Opset 8 (:func:`mdf_loops.ops.scan.scan_per_entry`); ``sequence_lens`` must be
    absent or full, so every entry scans the whole length and none needs padding."""
    sequence_lens, inputs = inputs[0], inputs[1:]
    length = int(inputs[-1].shape[1])
    if sequence_lens is not None:
        lens = concrete(sequence_lens, call.where, "sequence_lens")
        if np.any(lens != length):
            raise CompileError(
                f"{call.where}: sequence_lens shorter than the scan inputs "
                "are not lowered to JAX; run it with backend='onnxruntime'"
            )
    attributes, full = ScanAttributes(int(call.attr("num_scan_inputs"))), lambda x, _: x
    return tuple(
        scan_per_entry(lambda xs, _: _scan9(call, xs), None, inputs, attributes, _stack, full)
    )


# ---------------------------------------------------------------- Loop


@op("Loop")
def _loop(call, trip=None, cond=None, *initial):
    body, carried = call.attrs["body"], list(initial)
    if cond is not None:
        one_boolean(cond, call.where, "cond input")
    control_known = (trip is None or is_concrete(trip)) and (cond is None or is_concrete(cond))
    containers = any(isinstance(v, (list, Opt)) for v in carried)
    if control_known and (containers or _reads_only_concrete(call, body, carried)):
        return tuple(_loop_python(call, trip, cond, carried))
    if containers:
        raise NeedsStatic(
            call.where,
            "it carries a sequence or an optional, so its trip count "
            "and condition must be known at compile time",
        )
    ev, mark = call.evaluator, call.evaluator.mark()
    try:
        starts = cond is None or (is_concrete(cond) and bool(np.asarray(cond).reshape(())))
        if trip is not None and is_concrete(trip) and starts:
            try:
                return tuple(_loop_counted(call, int(np.asarray(trip).reshape(())), carried))
            except _ConditionDecides:
                ev.rewind(mark)
        return tuple(loop_bounded(call, trip, cond, carried))
    except NeedsStatic:
        ev.rewind(mark)
        if control_known:
            return tuple(_loop_python(call, trip, cond, carried))
        raise


def _loop_python(call, trip, cond, carried) -> list:
    ev, body, n = call.evaluator, call.attrs["body"], len(carried)
    trips = None if trip is None else int(np.asarray(trip).reshape(()))
    keep = True if cond is None else bool(np.asarray(cond).reshape(()))
    values, i = list(carried), 0
    columns: list[list[Any]] | None = None
    while (trips is None or i < trips) and keep:
        if i >= ev.max_iterations:
            ev.check_trips(i + 1, call.where)
        ev.count(1, call.where, i)
        outputs = ev.graph(body, [np.asarray(i, np.int64), np.asarray(keep)] + values, call.scope)
        # the body's condition decides, also without a cond input (mdf_loops.ops.loop)
        condition = one_boolean(outputs[0], call.where, "body condition output", i)
        keep = bool(concrete(condition, call.where, "the loop condition").reshape(()))
        values = outputs[1 : 1 + n]
        columns = columns or [[] for _ in outputs[1 + n :]]
        for column, y in zip(columns, outputs[1 + n :], strict=True):
            column.append(y)
        i += 1
    if columns is None:
        return values + _empty_scan_outputs(call, values)
    ev.check_stacked([sum(int(np.size(y)) for y in c) for c in columns], call.where)
    return values + [_stack(c) for c in columns]


def _empty_scan_outputs(call, values) -> list:
    n = len(values)
    try:
        with call.evaluator.probing():
            probe = call.evaluator.graph(
                call.attrs["body"], [np.asarray(0, np.int64), np.asarray(True)] + values, call.scope
            )
    except Exception:  # noqa: BLE001 - the body cannot run on the initial values
        return []
    return [np.zeros((0,) + np.shape(y), np.asarray(y).dtype) for y in probe[1 + n :]]


class _ConditionDecides(Exception):
    """The body's condition output may stop the loop before its trip count."""


def _loop_counted(call, trips: int, carried) -> list:
    """A trip count and a body condition that is always true: ``lax.scan`` over the
    iteration numbers (else :class:`_ConditionDecides`)."""
    import jax
    import jax.numpy as jnp

    ev, body, n = call.evaluator, call.attrs["body"], len(carried)
    ev.check_trips(trips, call.where)
    counter = ev.counter
    carries_count = counter is not None and holds_loops(body)  # else counted at once

    def step(carry, i):
        values, total = carry if carries_count else (carry, None)
        count = (call.where, i) if carries_count else None
        outputs, inner, end = ev.body(
            body, [i, np.asarray(True)] + list(values), call.scope, total=total, count=count
        )
        one_boolean(outputs[0], call.where, "body condition output")
        if not (is_concrete(outputs[0]) and bool(np.asarray(outputs[0]).reshape(()))):
            raise _ConditionDecides()
        outputs = structured(outputs, call.where)
        same_types(call.where, outputs[1 : 1 + n], values)
        new = tuple(outputs[1 : 1 + n])
        return ((new, end) if carries_count else new), (tuple(outputs[1 + n :]), inner)

    init: Any = tuple(jnp.asarray(v) for v in carried)
    if carries_count:
        init = (init, jnp.asarray(counter.total, jnp.int64))

    def run():
        # int64 where 64-bit types are on (a trace that finds the condition deciding may not)
        numbers = jnp.arange(trips, dtype=jax.dtypes.canonicalize_dtype(np.int64))
        return with_flags(jax.lax.scan, step, init, numbers)

    final, (produced, flag) = run_counted(ev, call.where, run, trips, carries_count, loop=True)
    if carries_count:
        final, counter.total = final
    ev.raise_flag(flag)
    ev.check_stacked([int(np.prod(y.shape)) for y in produced], call.where)
    return list(final) + list(produced)

"""``Scan``, ``Loop`` and ``If`` run as Python loops over torch values, at any length.

The semantics are :mod:`mdf_loops.ops` (``scan``, ``loop``, ``if_``, stated there once
as plain loops); this module writes the same loops over torch tensors, so autograd
sees every iteration, with the same iteration guard (``max_iterations``,
:class:`~mdf_loops.ops.common.IterationGuard`), nesting limit and errors. A body is
bound to its enclosing scope once per loop (:meth:`.interpreter.Program.bind`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from mdf_loops.backends.torch.limits import check_loop_values, located
from mdf_loops.backends.torch.registry import op
from mdf_loops.errors import LimitError, LoopError
from mdf_loops.ops.common import IterationGuard, check_same_type, loop_scope, normalize_axis
from mdf_loops.ops.loop import body_outputs_error, not_one_boolean
from mdf_loops.ops.scan import ScanAttributes, scan_per_entry, split_inputs


def _truth(value: Any, what: str, iteration: int | None, where: str) -> bool:
    if not isinstance(value, torch.Tensor) or value.numel() != 1:
        is_tensor = isinstance(value, torch.Tensor)
        found = f"shape {tuple(value.shape)}" if is_tensor else type(value).__name__
        raise not_one_boolean(what, found, iteration, where)
    return bool(value.reshape(()))


def _stack(elements: list, axis: int, backward: bool, j: int) -> torch.Tensor:
    stacked = torch.stack(elements[::-1] if backward else elements)
    axis = normalize_axis(axis, stacked.dim(), f"scan_output_axes[{j}]", f"scan output {j}")
    return stacked.movedim(0, axis) if axis else stacked


# ---------------------------------------------------------------- If


@op("If", scoped=True)
def _if(call, frame, cond):
    taken = "then_branch" if _truth(cond, "If condition", None, call.where) else "else_branch"
    try:
        with loop_scope("If"):
            return tuple(call.bodies[taken].bind(frame)([]))
    except LimitError as exc:
        raise located(exc, call.where, taken) from None


# ---------------------------------------------------------------- Scan


def _attributes(call) -> ScanAttributes:
    def axes(name):
        value = call.attr(name)
        return tuple(value) if value is not None else None

    return ScanAttributes(
        call.attr("num_scan_inputs"),
        axes("scan_input_axes" if call.opset >= 9 else "axes"),
        axes("scan_input_directions" if call.opset >= 9 else "directions"),
        axes("scan_output_axes"),
        axes("scan_output_directions"),
    )


@op("Scan", scoped=True)
def _scan(call, frame, *inputs):
    attributes = _attributes(call)
    body = call.bodies["body"].bind(frame)
    try:
        with loop_scope("Scan"):
            if call.opset < 9:
                return tuple(_scan_batched(call, body, inputs[0], list(inputs[1:]), attributes))
            return tuple(_scan_one(call, body, list(inputs), attributes))
    except LimitError as exc:
        raise located(exc, call.where) from None


def _scan_one(call, body, inputs: list, attributes: ScanAttributes) -> list:
    states, xs = split_inputs(inputs, attributes)
    axes = [
        normalize_axis(
            attributes.input_axis(k), x.dim(), f"scan_input_axes[{k}]", f"scan input {k}"
        )
        for k, x in enumerate(xs)
    ]
    lengths = [x.shape[a] for x, a in zip(xs, axes, strict=True)]
    if len(set(lengths)) > 1:
        raise LoopError(
            "scan inputs differ in length along their scan axes: "
            + ", ".join(f"input {k}: {L}" for k, L in enumerate(lengths))
        )
    length = lengths[0]
    guard = IterationGuard(kind="Scan")
    guard.check_planned(length)
    slices = [
        (x.flip(a) if attributes.input_backward(k) else x).unbind(a)
        for k, (x, a) in enumerate(zip(xs, axes, strict=True))
    ]
    states, produced = _iterate(call, body, states, slices, guard)
    if length == 0:  # zero iterations: the element shapes from one probe run
        return states + _empty_scan_outputs(body, states, xs, axes, attributes)
    return states + [
        _stack(column, attributes.output_axis(j), attributes.output_backward(j), j)
        for j, column in enumerate(produced)
    ]


def _iterate(call, body, states: list, slices: list, guard) -> tuple[list, list]:
    """The Scan's iterations: the final states and each scan output's elements."""
    n = len(states)
    produced: list[list] = []
    appends: list[Callable[[Any], None]] = []
    forms = [(s.shape, s.dtype) if isinstance(s, torch.Tensor) else None for s in states]
    step = guard.step
    stacked: list[int] | None = [] if call.sized else None
    # a state keeps its shape (check_same_type below): only sequences can grow
    grows = [i for i, form in enumerate(forms) if form is None]
    for t, elements in enumerate(zip(*slices, strict=True)):
        step(t)
        try:
            outs = body([*states, *elements])
            if stacked is not None:  # a model that is not trusted: its values held
                check_loop_values([(i, outs[i]) for i in grows], stacked, outs[n:], t)
        except LimitError as exc:
            raise located(exc, call.where, f"iteration {t}") from None
        if len(outs) < n:
            raise LoopError(f"body returned {len(outs)} outputs but the scan carries {n} states")
        for i in range(n):
            form = forms[i]  # a change of shape or element type raises, naming it
            if form is not None and (outs[i].shape != form[0] or outs[i].dtype != form[1]):
                check_same_type(states[i], outs[i], f"state {i}", t, torch.Tensor)
        states = outs[:n]
        if not appends:
            produced = [[] for _ in outs[n:]]
            appends = [column.append for column in produced]
        for append, y in zip(appends, outs[n:], strict=True):
            append(y)
    return list(states), produced


def _empty_scan_outputs(body, states: list, xs: list, axes: list, attributes) -> list:
    """The scan outputs of zero iterations: empty, shaped by one probe run of the body."""
    elements = [x.new_zeros(x.shape[:a] + x.shape[a + 1 :]) for x, a in zip(xs, axes, strict=True)]
    probe = body(states + elements)
    results = []
    for j, y in enumerate(probe[len(states) :]):
        empty = y.new_zeros((0,) + tuple(y.shape))
        axis = attributes.output_axis(j)
        axis = normalize_axis(axis, empty.dim(), f"scan_output_axes[{j}]", f"scan output {j}")
        results.append(empty.movedim(0, axis) if axis else empty)
    return results


def _scan_batched(call, body, sequence_lens, inputs: list, attributes: ScanAttributes) -> list:
    """Opset 8 (:func:`mdf_loops.ops.scan.scan_per_entry`) on tensors."""
    return scan_per_entry(
        lambda items, shifted: _scan_one(call, body, items, shifted),
        sequence_lens,
        inputs,
        attributes,
        torch.stack,
        _zero_padded,
    )


def _zero_padded(x, length: int):
    return torch.cat([x, x.new_zeros((length - x.shape[0],) + tuple(x.shape[1:]))])


# ---------------------------------------------------------------- Loop


@op("Loop", scoped=True)
def _loop(call, frame, trip_count=None, condition=None, *initial):
    body = call.bodies["body"].bind(frame)
    max_trips = None if trip_count is None else int(trip_count.reshape(()))
    keep_going = True if condition is None else _truth(condition, "cond input", None, call.where)
    values = list(initial)
    device = values[0].device if values and isinstance(values[0], torch.Tensor) else None
    stacked: list[int] | None = [] if call.sized else None
    try:
        with loop_scope("Loop"):  # the run's iteration count starts here, if not before
            guard = IterationGuard(kind="Loop")
            if max_trips is not None:
                guard.expect_at_most(max_trips)
            values, produced, i = _loop_iterations(
                call, body, guard, values, max_trips, keep_going, device, stacked
            )
    except LimitError as exc:
        raise located(exc, call.where) from None
    if i == 0:
        return tuple(values + _zero_trips(body, values, device))
    return tuple(values + [torch.stack(column) for column in produced])


def _loop_iterations(call, body, guard, values, max_trips, keep_going, device, stacked):
    """The Loop's iterations: its final values, each scan output's elements, the count."""
    n, i = len(values), 0
    produced: list[list] = []
    while (max_trips is None or i < max_trips) and keep_going:
        guard.step(i)
        counter = torch.tensor(i, dtype=torch.int64, device=device)
        try:
            outs = body([counter, torch.tensor(keep_going, device=device)] + values)
            if stacked is not None:  # a model that is not trusted: its values held
                check_loop_values(enumerate(outs[1 : 1 + n]), stacked, outs[1 + n :], i)
        except LimitError as exc:
            raise located(exc, call.where, f"iteration {i}") from None
        if len(outs) < 1 + n:
            raise body_outputs_error(len(outs), n, call.where)
        keep_going = _truth(outs[0], "body condition output", i, call.where)
        values = list(outs[1 : 1 + n])
        if not produced:
            produced = [[] for _ in outs[1 + n :]]
        for column, y in zip(produced, outs[1 + n :], strict=True):
            column.append(y)
        i += 1
    return values, produced, i


def _zero_trips(body, values: list, device) -> list:
    """Scan outputs of a loop that ran zero times: length 0, element shape from a probe."""
    try:
        zero = torch.tensor(0, dtype=torch.int64, device=device)
        probe = body([zero, torch.tensor(True, device=device)] + values)
    except Exception:  # the body cannot run on the initial values: shape unknown
        return []
    return [
        torch.zeros((0,) + tuple(y.shape), dtype=y.dtype, device=y.device)
        for y in probe[1 + len(values) :]
    ]

"""Theano's ``scan``: canonicalise its arguments, trace ``fn`` once, record a :class:`LoopOp`.

``scan(fn, sequences, outputs_info, non_sequences, n_steps)`` is, in plain Python
(one tap per sequence and per output, forward)::

    states = list(outputs_info)
    results = [[] for _ in outputs]
    for t in range(n_steps if n_steps is not None else min(len(s) for s in sequences)):
        outs = fn(*[s[t] for s in sequences], *states, *non_sequences)
        states = [o for o, info in zip(outs, outputs_info) if info is not None]
        for acc, o in zip(results, outs):
            acc.append(o)
        if fn returned until(cond) and cond:
            break
    return [stack(r) for r in results], updates

Taps follow the reference docs: a sequence tap ``k`` passes ``seq[t + k]`` (time
``t`` starts where every tap is valid); output taps ``-k`` pass the output ``k``
steps back, the first steps reading the initial state (``(k,) + shape`` when
``k > 1``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mdf_loops.authoring.arguments import (
    INT64_MAX,
    OutputArg,
    PreparedSequences,
    SequenceArg,
    as_list,
    check_no_effect_options,
    n_steps_arg,
    output_args,
    prepare_sequences,
    sequence_args,
    slice_rows,
    tap_hint,
)
from mdf_loops.authoring.canonical import LoopOp, LoopState, SequenceInput, StackedOutput
from mdf_loops.authoring.errors import ScanError
from mdf_loops.authoring.shared import SharedOp
from mdf_loops.authoring.symbolic import (
    ROOT,
    FormalOp,
    Scope,
    Symbol,
    apply,
    as_symbol,
    current_scope,
    tracing,
    user_location,
)
from mdf_loops.authoring.types import onnx_elem_type

__all__ = ["scan", "until", "Until"]


class Until:
    """A stop condition returned by ``fn``: the scan ends after the step where it holds."""

    def __init__(self, condition: Any):
        self.condition = condition


def until(condition: Any) -> Until:
    """Wrap a boolean scalar so that ``fn`` can return it: ``return x, until(x > 50)``."""
    return Until(condition)


def scan(
    fn: Callable,
    sequences: Any = None,
    outputs_info: Any = None,
    non_sequences: Any = None,
    n_steps: Any = None,
    truncate_gradient: int = -1,
    go_backwards: bool = False,
    mode: Any = None,
    name: str | None = None,
    profile: Any = False,
    allow_gc: bool | None = None,
    strict: bool = False,
    return_list: bool = False,
    return_updates: bool = True,
) -> Any:
    """Loop ``fn`` over ``sequences`` and/or ``n_steps`` steps, as Theano's ``scan`` does.

    Args: PyTensor's, in its order. ``fn`` receives every tap of every sequence,
        every tap of every recurrent output, then ``non_sequences``; it returns
        the step's outputs, optionally an updates dict and an :func:`until`.
        ``truncate_gradient`` (only -1), ``mode``, ``profile``, ``allow_gc``: no effect.
    Returns: ``(outputs, updates)`` (only ``outputs`` with ``return_updates=False``):
        each output stacks all steps; ``updates[v]`` is ``v`` after the last step.

    Example: ``powers, _ = scan(lambda p, a: p * a, outputs_info=one, non_sequences=a,
    n_steps=k)``. Taps, ``until``, ``strict``, lowering: docs/authoring.md.
    """
    label = f"scan '{name}'" if name else f"the scan at {user_location()}"
    check_no_effect_options(
        label, truncate_gradient=truncate_gradient, profile=profile, allow_gc=allow_gc
    )
    seq_args = sequence_args(sequences, label)
    out_args = output_args(outputs_info, label)
    non_seqs = [as_symbol(v) for v in as_list(non_sequences)]
    steps, steps_static = n_steps_arg(n_steps, label)
    prepared = prepare_sequences(seq_args, steps, steps_static, go_backwards)
    traced = _trace_body(fn, prepared, out_args, non_seqs, label)
    if not seq_args and steps is None and traced.until is None:
        raise ScanError(
            f"{label}: with no sequences, n_steps (or an until condition) is "
            "needed to know how many steps to run"
        )
    loop = _loop_op(name or "scan", traced, prepared, steps is not None and not steps_static)
    if strict:
        _check_strict(loop, non_seqs, seq_args, label)
    final_updates = OrderedDict(
        (key, state.final)
        for key, state in zip(traced.replacements, traced.update_states, strict=True)
    )
    _advance_enclosing_streams(traced.scope, final_updates)
    return _returned(
        [out.result for out in traced.stacked], final_updates, return_list, return_updates, label
    )


def _loop_op(
    name: str, traced: _TracedBody, prepared: PreparedSequences, steps_may_be_zero: bool
) -> LoopOp:
    """The scan in canonical form, recorded in the enclosing scope."""
    return LoopOp(
        name,
        traced.scope,
        traced.sequences,
        traced.states + traced.update_states,
        traced.stacked,
        prepared.trip_count,
        prepared.steps_known,
        traced.until,
        traced.replacements,
        steps_may_be_zero=steps_may_be_zero,
    )


def _advance_enclosing_streams(body: Scope, final_updates: OrderedDict) -> None:
    """Pass the body's implicit updates (random streams) on to an enclosing scan.

    At the top level only function(updates=...) applies them, as in Theano.
    """
    if current_scope() is ROOT:
        return
    for key in body.default_updates:
        final = final_updates[key]
        assert final is not None, "LoopOp sets every state's final value"
        current_scope().default_updates[key] = final


def _returned(
    results: list[Symbol | None],
    updates: OrderedDict,
    return_list: bool,
    return_updates: bool,
    label: str,
) -> Any:
    """scan's answer: the outputs (one, or a list), with the updates unless return_updates=False."""
    if return_list or len(results) > 1:
        outputs: Any = results
    else:
        outputs = results[0] if results else None
    if return_updates:
        return outputs, updates
    if updates:
        raise ScanError(
            f"{label}: return_updates=False, but fn updates "
            f"{[key.name or key.describe() for key in updates]}; carry that state "
            "in outputs_info instead, or use return_updates=True"
        )
    return outputs


# ---------------------------------------------------------------- the body


@dataclass(frozen=True)
class _TracedBody:
    """What one call of ``fn`` recorded in the body scope."""

    scope: Scope
    sequences: list[SequenceInput]
    states: list[LoopState]  # the recurrent outputs
    stacked: list[StackedOutput]
    replacements: dict[Symbol, Symbol]  # updated outer values -> the body's state for them
    update_states: list[LoopState]
    until: Symbol | None


def _trace_body(
    fn: Callable,
    prepared: PreparedSequences,
    out_args: list[OutputArg],
    non_seqs: list[Symbol],
    label: str,
) -> _TracedBody:
    """Call ``fn`` once on formal inputs in a new body scope; check what it returns."""
    body = Scope(current_scope(), label)
    with tracing(body):
        seq_inputs = [
            SequenceInput(_formal(s.rows.type.element(), s.role, s.hint), s.rows)
            for s in prepared.slices
        ]
        tap_args, carried = _output_formals(out_args)
        returned = fn(*[s.formal for s in seq_inputs], *tap_args, *non_seqs)
        outputs, updates, condition = _split_return(returned, label)
        updates = {**body.default_updates, **updates}  # a random stream advances each step
        outputs = [as_symbol(o) for o in outputs]
        if not out_args:
            out_args = [OutputArg(None, (), f"output {i}") for i in range(len(outputs))]
            carried = [None] * len(outputs)
        elif len(out_args) != len(outputs):
            raise ScanError(
                f"{label}: fn returns {len(outputs)} outputs but outputs_info describes "
                f"{len(out_args)}; give one entry per output (None for an output that "
                "is not fed back)"
            )
        states, stacked = _recurrent_states(outputs, out_args, carried, label)
        replacements, update_states = _update_states(updates, label)
        until_condition = _condition(condition, label)
    return _TracedBody(
        body, seq_inputs, states, stacked, replacements, update_states, until_condition
    )


def _formal(tensor_type, role: str, hint: str) -> Symbol:
    return FormalOp(tensor_type, role, hint).outputs[0]


def _output_formals(args: list[OutputArg]) -> tuple[list[Symbol], list[Symbol | None]]:
    """fn's arguments for the output taps, and per output the state the body carries."""
    tap_args: list[Symbol] = []
    carried: list[Symbol | None] = []
    for i, arg in enumerate(args):
        if not arg.taps:
            carried.append(None)
            continue
        initial = arg.initial
        assert initial is not None, "taps need an initial state (checked when parsed)"
        base = initial.name or f"output{i}"
        if arg.depth == 1:
            state = _formal(initial.type, f"output {i} at t-1", tap_hint(base, -1))
            tap_args.extend(state for _ in arg.taps)
        else:
            if initial.ndim == 0:
                raise ScanError(
                    f"{arg.where}: taps {list(arg.taps)} need an initial state of "
                    f"shape ({arg.depth},) + the output's shape, got a scalar"
                )
            state = _formal(initial.type, f"output {i}, steps t-{arg.depth}..t-1", f"{base}_window")
            for tap in arg.taps:
                row = apply(
                    "Gather",
                    [state, np.array(arg.depth + tap, np.int64)],
                    {"axis": 0},
                    name=tap_hint(base, tap),
                )
                tap_args.append(row)
        carried.append(state)
    return tap_args, carried


def _split_return(returned: Any, label: str) -> tuple[list, dict, Any]:
    """fn's outputs, updates and stop condition, in whatever order fn returned them."""
    items = (
        list(returned)
        if isinstance(returned, (list, tuple)) and not _is_pairs(returned)
        else [returned]
    )
    outputs: list = []
    updates: dict = {}
    condition = None
    for item in items:
        if isinstance(item, Until):
            if condition is not None:
                raise ScanError(f"{label}: fn returned more than one until(...) condition")
            condition = item.condition
        elif isinstance(item, dict):
            updates.update(item)
        elif _is_pairs(item):
            updates.update(dict(item))
        elif isinstance(item, (list, tuple)):
            outputs.extend(item)
        elif item is not None:
            outputs.append(item)
    return outputs, updates, condition


def _is_pairs(value: Any) -> bool:
    return (
        isinstance(value, (list, tuple))
        and len(value) > 0
        and all(isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], Symbol) for v in value)
    )


def _recurrent_states(
    outputs: list[Symbol], args: list[OutputArg], carried: list[Symbol | None], label: str
):
    states: list[LoopState] = []
    stacked: list[StackedOutput] = []
    for i, (out, arg, state) in enumerate(zip(outputs, args, carried, strict=True)):
        if state is None:
            stacked.append(StackedOutput(out))
            continue
        initial = arg.initial
        assert initial is not None, "taps need an initial state (checked when parsed)"
        if arg.depth == 1:
            if not initial.type.compatible(out.type):
                raise ScanError(
                    f"{arg.where} is {initial.type} but fn returns {out.type} for output "
                    f"{i}; the initial state must have the output's type and shape (scan "
                    "does not cast it)"
                )
            loop_state = LoopState(state, initial, out, role=f"output {i}")
            stacked.append(StackedOutput(out, loop_state))
        else:
            expected = out.type.stacked(arg.depth)
            if not initial.type.compatible(expected):
                raise ScanError(
                    f"{arg.where}: for taps {list(arg.taps)} the initial state must be "
                    f"{expected} ((depth,) + output {i}'s type), got {initial.type}"
                )
            older = slice_rows(state, 1, INT64_MAX)
            newest = apply("Unsqueeze", [out, np.array([0], np.int64)])
            window = apply("Concat", [older, newest], {"axis": 0})
            loop_state = LoopState(state, initial, window, role=f"output {i}")
            stacked.append(StackedOutput(out, loop_state, state_is_window=True))
        states.append(loop_state)
    return states, stacked


def _update_states(updates: dict, label: str) -> tuple[dict[Symbol, Symbol], list[LoopState]]:
    replacements: dict[Symbol, Symbol] = {}
    states: list[LoopState] = []
    body = current_scope()
    for key, value in updates.items():
        if not isinstance(key, Symbol) or key.op.scope is body or not body.within(key.op.scope):
            raise ScanError(
                f"{label}: an updates key must be a value made outside fn (e.g. "
                f"shared(...)); got {key!r}"
            )
        value = as_symbol(value)
        if not key.type.compatible(value.type):
            raise ScanError(
                f"{label}: the update of {key.describe()} is {value.type}; it must "
                "keep the value's type and shape"
            )
        formal = _formal(
            key.type,
            f"current value of {key.name or 'an updated value'}",
            f"{key.name or 'updated'}_state",
        )
        replacements[key] = formal
        states.append(LoopState(formal, key, value, role=f"update of {key.name or 'a value'}"))
    return replacements, states


def _condition(condition: Any, label: str) -> Symbol | None:
    if condition is None:
        return None
    condition = as_symbol(condition)
    shape = condition.static_shape
    if shape is not None and (None in shape or int(np.prod(shape)) != 1):
        raise ScanError(f"{label}: until(...) needs one boolean, got {condition.describe()}")
    if condition.dtype != np.bool_:
        condition = apply("Cast", [condition], {"to": onnx_elem_type(np.dtype(np.bool_))})
    if shape:
        condition = apply("Reshape", [condition, np.zeros(0, np.int64)])
    return condition


def _check_strict(
    loop: LoopOp, non_seqs: Sequence[Symbol], sequences: list[SequenceArg], label: str
) -> None:
    """PyTensor's strict: every shared value ``fn`` reads is passed in ``non_sequences``."""
    allowed = set(non_seqs) | {arg.symbol for arg in sequences}
    for value in loop.free_variables():
        if value in allowed or not isinstance(value.op, SharedOp):
            continue
        raise ScanError(
            f"{label}: strict=True, but fn uses {value.describe()}, which is not "
            "passed in non_sequences; add it to non_sequences"
        )

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
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from .canonical import LoopOp, LoopState, SequenceInput, StackedOutput
from .errors import ScanError
from .symbolic import (ConstantOp, FormalOp, Scope, Symbol, _user_location, apply, as_symbol,
                       constant, current_scope, tracing)
from .types import onnx_elem_type

__all__ = ["scan", "until", "Until"]

_INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min


class Until:
    """A stop condition returned by ``fn``: the scan ends after the step where it holds."""

    def __init__(self, condition: Any):
        self.condition = condition


def until(condition: Any) -> Until:
    """Wrap a boolean scalar so that ``fn`` can return it: ``return x, until(x > 50)``."""
    return Until(condition)


@dataclass
class _SequenceArg:
    symbol: Symbol
    taps: tuple[int, ...]
    argument: str  # "sequences[i]"
    where: str  # "<scan label>: sequences[i]"


@dataclass
class _OutputArg:
    initial: Symbol | None
    taps: tuple[int, ...]  # empty: not recurrent (map-like)
    where: str

    @property
    def depth(self) -> int:
        return -min(self.taps)


def scan(
    fn: Callable,
    sequences: Any = None,
    outputs_info: Any = None,
    non_sequences: Any = None,
    n_steps: Any = None,
    go_backwards: bool = False,
    strict: bool = False,
    name: str | None = None,
    return_list: bool = False,
):
    """Loop ``fn`` over ``sequences`` and/or ``n_steps`` steps, as Theano's ``scan`` does.

    ``fn`` receives, in order, every tap of every sequence, every tap of every
    recurrent output, then the ``non_sequences``; it returns the outputs of one
    step, optionally an updates dict ``{outer value: new value}`` and an
    :func:`until` condition. Returns ``(outputs, updates)``: each output stacks
    all steps along a new first axis (``outputs[-1]`` is the last step); each
    update maps its key to the value after the last step.
    """
    label = f"scan '{name}'" if name else f"the scan at {_user_location()}"
    sequence_args = _sequences(sequences, label)
    output_args = _outputs_info(outputs_info, label)
    non_seqs = [as_symbol(v) for v in _as_list(non_sequences)]
    steps, steps_static = _n_steps(n_steps, label)
    sources, trip_count, steps_known = _prepare_sequences(
        sequence_args, steps, steps_static, go_backwards, label)

    body = Scope(current_scope(), label)
    with tracing(body):
        seq_inputs = [SequenceInput(_formal(s.type.element(), role, hint), s)
                      for s, role, hint in sources]
        tap_args, carried = _output_formals(output_args)
        returned = fn(*[s.formal for s in seq_inputs], *tap_args, *non_seqs)
        outputs, updates, condition = _split_return(returned, label)
        outputs = [as_symbol(o) for o in outputs]
        if not output_args:
            output_args = [_OutputArg(None, (), f"output {i}") for i in range(len(outputs))]
        elif len(output_args) != len(outputs):
            raise ScanError(
                f"{label}: fn returns {len(outputs)} outputs but outputs_info describes "
                f"{len(output_args)}; give one entry per output (None for an output that "
                "is not fed back)"
            )
        states, stacked = _recurrent_states(outputs, output_args, carried, label)
        replacements, update_states = _update_states(updates, label)
        until_condition = _condition(condition, label)

    if not sequence_args and steps is None and until_condition is None:
        raise ScanError(f"{label}: with no sequences, n_steps (or an until condition) is "
                        "needed to know how many steps to run")
    loop = LoopOp(name or "scan", body, seq_inputs, states + update_states, stacked,
                  trip_count, steps_known, until_condition, replacements,
                  steps_may_be_zero=steps is not None and not steps_static)
    if strict:
        _check_strict(loop, non_seqs, sequence_args, label)
    results = [out.result for out in stacked]
    if return_list or len(results) > 1:
        out_value: Any = results
    else:
        out_value = results[0] if results else None
    return out_value, OrderedDict((key, state.final) for key, state in
                                  zip(replacements, update_states))


# ---------------------------------------------------------------- arguments


def _as_list(value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _taps(value: Any, where: str) -> tuple[int, ...]:
    taps = [value] if isinstance(value, (int, np.integer)) else list(value)
    if not taps or not all(isinstance(t, (int, np.integer)) and not isinstance(t, bool)
                           for t in taps):
        raise ScanError(f"{where}: taps must be a non-empty list of integers, got {value!r}")
    return tuple(int(t) for t in taps)


def _sequences(sequences: Any, label: str) -> list[_SequenceArg]:
    args = []
    for i, item in enumerate(_as_list(sequences)):
        where = f"{label}: sequences[{i}]"
        if isinstance(item, dict):
            unknown = set(item) - {"input", "taps"}
            if unknown or "input" not in item:
                raise ScanError(f"{where} must be a value or dict(input=..., taps=[...]); "
                                f"got keys {sorted(item)}")
            symbol = as_symbol(item["input"])
            taps = _taps(item.get("taps") if item.get("taps") is not None else [0], where)
        else:
            symbol, taps = as_symbol(item), (0,)
        if symbol.ndim == 0:
            raise ScanError(f"{where} is a scalar ({symbol.describe()}); scan iterates over "
                            "the first axis of each sequence")
        args.append(_SequenceArg(symbol, taps, f"sequences[{i}]", where))
    return args


def _outputs_info(outputs_info: Any, label: str) -> list[_OutputArg]:
    args = []
    for i, item in enumerate(_as_list(outputs_info)):
        where = f"{label}: outputs_info[{i}]"
        if item is None:
            args.append(_OutputArg(None, (), where))
            continue
        if not isinstance(item, dict):
            args.append(_OutputArg(as_symbol(item), (-1,), where))
            continue
        unknown = set(item) - {"initial", "taps"}
        if unknown:
            raise ScanError(f"{where}: unknown keys {sorted(unknown)}; a dict takes 'initial' "
                            "and 'taps'")
        initial = item.get("initial")
        if initial is None:
            if item.get("taps") is not None:
                raise ScanError(f"{where}: taps {item['taps']} need an initial state "
                                "('initial') to read before the first steps")
            args.append(_OutputArg(None, (), where))
            continue
        if "taps" in item and item["taps"] is None:
            args.append(_OutputArg(None, (), where))  # an initial value but no taps: map-like
            continue
        taps = _taps(item.get("taps", [-1]), where)
        if any(t >= 0 for t in taps):
            raise ScanError(f"{where}: output taps must be negative (steps back), got "
                            f"{list(taps)}")
        args.append(_OutputArg(as_symbol(initial), taps, where))
    return args


def _n_steps(n_steps: Any, label: str) -> tuple[Symbol | None, int | None]:
    if n_steps is None:
        return None, None
    if isinstance(n_steps, Symbol):
        if n_steps.dtype.kind not in "iu" or n_steps.ndim not in (0, None):
            raise ScanError(f"{label}: n_steps must be an integer scalar, got "
                            f"{n_steps.describe()}")
        static = None
        if isinstance(n_steps.op, ConstantOp):
            static = _check_steps(int(n_steps.op.value), label)
        if n_steps.dtype != np.int64:
            n_steps = apply("Cast", [n_steps], {"to": onnx_elem_type(np.dtype(np.int64))})
        return n_steps, static
    if isinstance(n_steps, (int, np.integer)) and not isinstance(n_steps, bool):
        count = _check_steps(int(n_steps), label)
        return constant(np.array(count, np.int64)), count
    raise ScanError(f"{label}: n_steps must be an integer or an integer scalar symbol, "
                    f"got {n_steps!r}")


def _check_steps(count: int, label: str) -> int:
    if count < 0:
        raise ScanError(f"{label}: n_steps = {count}; negative n_steps are not supported "
                        "(use go_backwards=True to run backwards)")
    return count


# ---------------------------------------------------------------- sequences


def _slice(x: Symbol, start: int, stop: Any, step: int = 1) -> Symbol:
    stop = stop if isinstance(stop, Symbol) else np.array([stop], np.int64)
    return apply("Slice", [x, np.array([start], np.int64), stop,
                           np.array([0], np.int64), np.array([step], np.int64)])


def _head(x: Symbol, count: Symbol) -> Symbol:
    """The first ``count`` entries of ``x`` (fewer if it is shorter)."""
    return _slice(x, 0, apply("Unsqueeze", [count, np.array([0], np.int64)]))


def _tap_hint(base: str, tap: int) -> str:
    return f"{base}_t" if tap == 0 else f"{base}_t{'m' if tap < 0 else 'p'}{abs(tap)}"


def _prepare_sequences(args: list[_SequenceArg], steps: Symbol | None, steps_static: int | None,
                       go_backwards: bool, label: str):
    """One slice per tap, shifted so that step ``i`` reads its row ``i``, then truncated.

    Returns ``[(slice, role, name hint)]``, the trip count symbol and the number
    of steps when it is known before the model runs.
    """
    prepared: list[tuple[Symbol, str, str, _SequenceArg]] = []
    lengths: list[int | None] = []
    for i, arg in enumerate(args):
        u = arg.symbol
        low, high = min(min(arg.taps), 0), max(max(arg.taps), 0)
        span = high - low
        size = u.static_shape[0] if u.static_shape else None
        if size is not None and span > 0 and size <= span:
            raise ScanError(
                f"{arg.where} has {size} entries, but its taps {list(arg.taps)} reach "
                f"{span} steps apart, so it needs more than {span}"
            )
        lengths.append(None if size is None else size - span)
        base = u.name or f"seq{i}"
        for tap in arg.taps:
            piece = u if span == 0 else _slice(
                u, tap - low, -(high - tap) if high > tap else _INT64_MAX)
            if go_backwards:
                piece = _slice(piece, -1, _INT64_MIN, -1)
            role = f"{arg.argument} at t{tap:+d}" if tap else f"{arg.argument} at t"
            prepared.append((piece, role, _tap_hint(base, tap), arg))
    if not prepared:
        return [], steps, steps_static

    known = all(n is not None for n in lengths)
    if steps is not None:
        for n, arg in zip(lengths, args):
            if n is not None and steps_static is not None and n < steps_static:
                raise ScanError(f"{arg.where} gives {n} steps (after its taps), fewer than "
                                f"n_steps = {steps_static}")
        pieces = [(p if steps_static is not None and n == steps_static else _head(p, steps))
                  for (p, *_), n in zip(prepared, _per_piece(lengths, args))]
        return _with_roles(pieces, prepared), steps, steps_static
    if known:
        shortest = min(lengths)
        count = constant(np.array(shortest, np.int64))
        pieces = [p if n == shortest else _head(p, count)
                  for (p, *_), n in zip(prepared, _per_piece(lengths, args))]
        return _with_roles(pieces, prepared), count, shortest
    if len(args) == 1:
        first = prepared[0][0]
        count = apply("Gather", [apply("Shape", [first]), np.array(0, np.int64)])
        return _with_roles([p for p, *_ in prepared], prepared), count, None
    firsts = {id(arg): p for p, _, _, arg in reversed(prepared)}
    sizes = [apply("Gather", [apply("Shape", [p]), np.array(0, np.int64)])
             for p in firsts.values()]
    count = apply("Min", sizes)
    pieces = [_head(p, count) for p, *_ in prepared]
    return _with_roles(pieces, prepared), count, None


def _per_piece(lengths: list[int | None], args: list[_SequenceArg]) -> list[int | None]:
    return [n for n, arg in zip(lengths, args) for _ in arg.taps]


def _with_roles(pieces: list[Symbol], prepared: list) -> list[tuple[Symbol, str, str]]:
    return [(p, role, hint) for p, (_, role, hint, _) in zip(pieces, prepared)]


# ---------------------------------------------------------------- body


def _formal(tensor_type, role: str, hint: str) -> Symbol:
    return FormalOp(tensor_type, role, hint).outputs[0]


def _output_formals(args: list[_OutputArg]) -> tuple[list[Symbol], list[Symbol | None]]:
    """fn's arguments for the output taps, and per output the state the body carries."""
    tap_args: list[Symbol] = []
    carried: list[Symbol | None] = []
    for i, arg in enumerate(args):
        if not arg.taps:
            carried.append(None)
            continue
        base = arg.initial.name or f"output{i}"
        if arg.depth == 1:
            state = _formal(arg.initial.type, f"output {i} at t-1", _tap_hint(base, -1))
            tap_args.extend(state for _ in arg.taps)
        else:
            if arg.initial.ndim == 0:
                raise ScanError(f"{arg.where}: taps {list(arg.taps)} need an initial state of "
                                f"shape ({arg.depth},) + the output's shape, got a scalar")
            state = _formal(arg.initial.type, f"output {i}, steps t-{arg.depth}..t-1",
                            f"{base}_window")
            for tap in arg.taps:
                row = apply("Gather", [state, np.array(arg.depth + tap, np.int64)], {"axis": 0},
                            name=_tap_hint(base, tap))
                tap_args.append(row)
        carried.append(state)
    return tap_args, carried


def _split_return(returned: Any, label: str) -> tuple[list, dict, Any]:
    """fn's outputs, updates and stop condition, in whatever order fn returned them."""
    items = list(returned) if isinstance(returned, (list, tuple)) and not _is_pairs(returned) \
        else [returned]
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
    return (isinstance(value, (list, tuple)) and len(value) > 0 and all(
        isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], Symbol) for v in value))


def _recurrent_states(outputs: list[Symbol], args: list[_OutputArg],
                      carried: list[Symbol | None], label: str):
    states: list[LoopState] = []
    stacked: list[StackedOutput] = []
    for i, (out, arg, state) in enumerate(zip(outputs, args, carried)):
        if state is None:
            stacked.append(StackedOutput(out))
            continue
        if arg.depth == 1:
            if not arg.initial.type.compatible(out.type):
                raise ScanError(
                    f"{arg.where} is {arg.initial.type} but fn returns {out.type} for output "
                    f"{i}; the initial state must have the output's type and shape (scan "
                    "does not cast it)")
            loop_state = LoopState(state, arg.initial, out, role=f"output {i}")
            stacked.append(StackedOutput(out, loop_state))
        else:
            expected = out.type.stacked(arg.depth)
            if not arg.initial.type.compatible(expected):
                raise ScanError(
                    f"{arg.where}: for taps {list(arg.taps)} the initial state must be "
                    f"{expected} ((depth,) + output {i}'s type), got {arg.initial.type}")
            older = _slice(state, 1, _INT64_MAX)
            newest = apply("Unsqueeze", [out, np.array([0], np.int64)])
            window = apply("Concat", [older, newest], {"axis": 0})
            loop_state = LoopState(state, arg.initial, window, role=f"output {i}")
            stacked.append(StackedOutput(out, loop_state, state_is_window=True))
        states.append(loop_state)
    return states, stacked


def _update_states(updates: dict, label: str) -> tuple[dict[Symbol, Symbol], list[LoopState]]:
    replacements: dict[Symbol, Symbol] = {}
    states: list[LoopState] = []
    body = current_scope()
    for key, value in updates.items():
        if not isinstance(key, Symbol) or key.op.scope is body or not body.within(key.op.scope):
            raise ScanError(f"{label}: an updates key must be a value made outside fn (e.g. "
                            f"shared(...)); got {key!r}")
        value = as_symbol(value)
        if not key.type.compatible(value.type):
            raise ScanError(f"{label}: the update of {key.describe()} is {value.type}; it must "
                            "keep the value's type and shape")
        formal = _formal(key.type, f"current value of {key.name or 'an updated value'}",
                         f"{key.name or 'updated'}_state")
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


def _check_strict(loop: LoopOp, non_seqs: Sequence[Symbol], sequences: list[_SequenceArg],
                  label: str) -> None:
    allowed = set(non_seqs) | {arg.symbol for arg in sequences}
    for value in loop.free_variables():
        if value in allowed or isinstance(value.op, ConstantOp):
            continue
        raise ScanError(f"{label}: strict=True, but fn uses {value.describe()}, which is not "
                        "passed in non_sequences; add it to non_sequences")

"""Canonical form of scan's arguments (Theano's ``canonical_arguments``).

``sequences``, ``outputs_info`` and ``n_steps`` in any of the forms the reference
docs allow become :class:`SequenceArg` / :class:`OutputArg` lists and an int64
step count. :func:`prepare_sequences` then turns every sequence tap into its own
slice, shifted so that step ``i`` reads row ``i`` (time starts where every tap
of the sequence is valid, as if tap 0 were used too), reversed for
``go_backwards``, and truncated to ``n_steps`` or to the shortest sequence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import ScanError
from .symbolic import ConstantOp, Symbol, apply, as_symbol, constant
from .types import onnx_elem_type

__all__ = ["SequenceArg", "OutputArg", "as_list", "sequence_args", "output_args", "n_steps_arg",
           "prepare_sequences", "slice_rows", "tap_hint", "INT64_MAX"]

INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min


@dataclass
class SequenceArg:
    symbol: Symbol
    taps: tuple[int, ...]
    argument: str  # "sequences[i]"
    where: str  # "<scan label>: sequences[i]"


@dataclass
class OutputArg:
    initial: Symbol | None
    taps: tuple[int, ...]  # empty: not recurrent (map-like)
    where: str

    @property
    def depth(self) -> int:
        return -min(self.taps)


def as_list(value: Any) -> list:
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


def sequence_args(sequences: Any, label: str) -> list[SequenceArg]:
    args = []
    for i, item in enumerate(as_list(sequences)):
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
        args.append(SequenceArg(symbol, taps, f"sequences[{i}]", where))
    return args


def output_args(outputs_info: Any, label: str) -> list[OutputArg]:
    args = []
    for i, item in enumerate(as_list(outputs_info)):
        where = f"{label}: outputs_info[{i}]"
        if item is None:
            args.append(OutputArg(None, (), where))
            continue
        if not isinstance(item, dict):
            args.append(OutputArg(as_symbol(item), (-1,), where))
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
            args.append(OutputArg(None, (), where))
            continue
        if "taps" in item and item["taps"] is None:
            args.append(OutputArg(None, (), where))  # an initial value but no taps: map-like
            continue
        taps = _taps(item.get("taps", [-1]), where)
        if any(t >= 0 for t in taps):
            raise ScanError(f"{where}: output taps must be negative (steps back), got "
                            f"{list(taps)}")
        args.append(OutputArg(as_symbol(initial), taps, where))
    return args


def n_steps_arg(n_steps: Any, label: str) -> tuple[Symbol | None, int | None]:
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


def slice_rows(x: Symbol, start: int, stop: Any, step: int = 1) -> Symbol:
    stop = stop if isinstance(stop, Symbol) else np.array([stop], np.int64)
    return apply("Slice", [x, np.array([start], np.int64), stop,
                           np.array([0], np.int64), np.array([step], np.int64)])


def _head(x: Symbol, count: Symbol) -> Symbol:
    """The first ``count`` entries of ``x`` (fewer if it is shorter)."""
    return slice_rows(x, 0, apply("Unsqueeze", [count, np.array([0], np.int64)]))


def tap_hint(base: str, tap: int) -> str:
    return f"{base}_t" if tap == 0 else f"{base}_t{'m' if tap < 0 else 'p'}{abs(tap)}"


def prepare_sequences(args: list[SequenceArg], steps: Symbol | None, steps_static: int | None,
                       go_backwards: bool, label: str):
    """One slice per tap, shifted so that step ``i`` reads its row ``i``, then truncated.

    Returns ``[(slice, role, name hint)]``, the trip count symbol and the number
    of steps when it is known before the model runs.
    """
    prepared: list[tuple[Symbol, str, str, SequenceArg]] = []
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
            piece = u if span == 0 else slice_rows(
                u, tap - low, -(high - tap) if high > tap else INT64_MAX)
            if go_backwards:
                piece = slice_rows(piece, -1, _INT64_MIN, -1)
            role = f"{arg.argument} at t{tap:+d}" if tap else f"{arg.argument} at t"
            prepared.append((piece, role, tap_hint(base, tap), arg))
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


def _per_piece(lengths: list[int | None], args: list[SequenceArg]) -> list[int | None]:
    return [n for n, arg in zip(lengths, args) for _ in arg.taps]


def _with_roles(pieces: list[Symbol], prepared: list) -> list[tuple[Symbol, str, str]]:
    return [(p, role, hint) for p, (_, role, hint, _) in zip(pieces, prepared)]


# ---------------------------------------------------------------- body

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

from mdf_loops.authoring.errors import ScanError
from mdf_loops.authoring.symbolic import ConstantOp, Symbol, apply, as_symbol, constant
from mdf_loops.authoring.types import onnx_elem_type

__all__ = [
    "SequenceArg",
    "OutputArg",
    "SequenceSlice",
    "PreparedSequences",
    "as_list",
    "sequence_args",
    "output_args",
    "n_steps_arg",
    "prepare_sequences",
    "slice_rows",
    "tap_hint",
    "INT64_MAX",
    "check_no_effect_options",
]

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
    if not taps or not all(
        isinstance(t, (int, np.integer)) and not isinstance(t, bool) for t in taps
    ):
        raise ScanError(f"{where}: taps must be a non-empty list of integers, got {value!r}")
    return tuple(int(t) for t in taps)


def sequence_args(sequences: Any, label: str) -> list[SequenceArg]:
    args = []
    for i, item in enumerate(as_list(sequences)):
        where = f"{label}: sequences[{i}]"
        if isinstance(item, dict):
            unknown = set(item) - {"input", "taps"}
            if unknown or "input" not in item:
                raise ScanError(
                    f"{where} must be a value or dict(input=..., taps=[...]); "
                    f"got keys {sorted(item)}"
                )
            symbol = as_symbol(item["input"])
            taps = _taps(item.get("taps") if item.get("taps") is not None else [0], where)
        else:
            symbol, taps = as_symbol(item), (0,)
        if symbol.ndim == 0:
            raise ScanError(
                f"{where} is a scalar ({symbol.describe()}); scan iterates over "
                "the first axis of each sequence"
            )
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
        unknown = set(item) - {"initial", "taps", "inplace"}  # inplace: PyTensor's, no effect
        if unknown:
            raise ScanError(
                f"{where}: unknown keys {sorted(unknown)}; a dict takes 'initial' "
                "and 'taps' (and 'inplace', which has no effect)"
            )
        initial = item.get("initial")
        if initial is None:
            if item.get("taps") is not None:
                raise ScanError(
                    f"{where}: taps {item['taps']} need an initial state "
                    "('initial') to read before the first steps"
                )
            args.append(OutputArg(None, (), where))
            continue
        if "taps" in item and item["taps"] is None:
            args.append(OutputArg(None, (), where))  # an initial value but no taps: map-like
            continue
        taps = _taps(item.get("taps", [-1]), where)
        if any(t >= 0 for t in taps):
            raise ScanError(f"{where}: output taps must be negative (steps back), got {list(taps)}")
        args.append(OutputArg(as_symbol(initial), taps, where))
    return args


def check_no_effect_options(
    label: str, *, truncate_gradient: Any = -1, profile: Any = False, allow_gc: Any = None
) -> None:
    """PyTensor's compilation options: accepted when they ask for nothing this package lacks.

    ``mode``, ``profile`` and ``allow_gc`` change how PyTensor compiles and runs
    a scan, never its values, so any value is accepted (and ignored);
    ``truncate_gradient`` other than -1 asks for truncated gradients, which an
    MDF model does not compute.
    """
    if isinstance(truncate_gradient, bool) or truncate_gradient != -1:
        raise ScanError(
            f"{label}: truncate_gradient={truncate_gradient!r}; only -1 (no truncation) is "
            "supported, because MDF models compute no gradients. Drop the argument (note "
            "that PyTensor's 6th positional parameter of scan, 4th of map, is "
            "truncate_gradient, not go_backwards)"
        )
    if not isinstance(profile, (bool, str)) and profile is not None:
        raise ScanError(f"{label}: profile must be a bool or a name, got {profile!r}")
    if allow_gc not in (None, True, False):
        raise ScanError(f"{label}: allow_gc must be None, True or False, got {allow_gc!r}")


def n_steps_arg(n_steps: Any, label: str) -> tuple[Symbol | None, int | None]:
    if n_steps is None:
        return None, None
    if isinstance(n_steps, Symbol):
        if n_steps.dtype.kind not in "iu" or n_steps.ndim not in (0, None):
            raise ScanError(f"{label}: n_steps must be an integer scalar, got {n_steps.describe()}")
        static = None
        if isinstance(n_steps.op, ConstantOp):
            static = _check_steps(int(n_steps.op.value), label)
        if n_steps.dtype != np.int64:
            n_steps = apply("Cast", [n_steps], {"to": onnx_elem_type(np.dtype(np.int64))})
        return n_steps, static
    if isinstance(n_steps, (int, np.integer)) and not isinstance(n_steps, bool):
        count = _check_steps(int(n_steps), label)
        return constant(np.array(count, np.int64)), count
    raise ScanError(
        f"{label}: n_steps must be an integer or an integer scalar symbol, got {n_steps!r}"
    )


def _check_steps(count: int, label: str) -> int:
    if count < 0:
        raise ScanError(
            f"{label}: n_steps = {count}; negative n_steps are not supported "
            "(use go_backwards=True to run backwards)"
        )
    return count


def slice_rows(x: Symbol, start: int, stop: Any, step: int = 1) -> Symbol:
    stop = stop if isinstance(stop, Symbol) else np.array([stop], np.int64)
    return apply(
        "Slice",
        [x, np.array([start], np.int64), stop, np.array([0], np.int64), np.array([step], np.int64)],
    )


def _head(x: Symbol, count: Symbol) -> Symbol:
    """The first ``count`` entries of ``x`` (fewer if it is shorter)."""
    return slice_rows(x, 0, apply("Unsqueeze", [count, np.array([0], np.int64)]))


def tap_hint(base: str, tap: int) -> str:
    return f"{base}_t" if tap == 0 else f"{base}_t{'m' if tap < 0 else 'p'}{abs(tap)}"


@dataclass
class SequenceSlice:
    """One tap of one sequence as the scan reads it: row ``i`` at step ``i``."""

    rows: Symbol
    role: str  # what fn receives, e.g. "sequences[0] at t-4"
    hint: str  # a name for it, e.g. "u_tm4"
    length: int | None  # rows, when known before the model runs


@dataclass
class PreparedSequences:
    """Every sequence tap as a slice of equal length, and the number of steps."""

    slices: list[SequenceSlice]
    trip_count: Symbol | None  # int64 scalar
    steps_known: int | None


def prepare_sequences(
    args: list[SequenceArg], steps: Symbol | None, steps_static: int | None, go_backwards: bool
) -> PreparedSequences:
    """One slice per tap, shifted so that step ``i`` reads its row ``i``, then truncated.

    Tap ``k`` of a sequence ``u`` whose taps span ``[low, high]`` (0 always
    included, as Theano's internals do) reads ``u[k - low : len(u) - (high - k)]``;
    ``go_backwards`` reverses it; all slices are then cut to ``n_steps``, or to the
    shortest of them.
    """
    slices = [piece for i, arg in enumerate(args) for piece in _tap_slices(i, arg, go_backwards)]
    if not slices:
        return PreparedSequences([], steps, steps_static)
    lengths = [piece.length for piece in slices]
    if steps is not None:
        for arg, piece in zip(_per_slice(args), slices, strict=True):
            if (
                piece.length is not None
                and steps_static is not None
                and piece.length < steps_static
            ):
                raise ScanError(
                    f"{arg.where} gives {piece.length} steps (after its taps), "
                    f"fewer than n_steps = {steps_static}"
                )
        return PreparedSequences(_cut(slices, steps, steps_static), steps, steps_static)
    known = [n for n in lengths if n is not None]
    if len(known) == len(lengths):
        shortest = min(known)
        return PreparedSequences(
            _cut(slices, constant(np.array(shortest, np.int64)), shortest),
            constant(np.array(shortest, np.int64)),
            shortest,
        )
    firsts = {id(arg): piece.rows for arg, piece in zip(_per_slice(args), slices, strict=True)}
    sizes = [
        apply("Gather", [apply("Shape", [rows]), np.array(0, np.int64)]) for rows in firsts.values()
    ]
    if len(sizes) == 1:  # the taps of one sequence have equal lengths by construction
        return PreparedSequences(slices, sizes[0], None)
    count = apply("Min", sizes)
    return PreparedSequences(_cut(slices, count, None), count, None)


def _tap_slices(index: int, arg: SequenceArg, go_backwards: bool) -> list[SequenceSlice]:
    u = arg.symbol
    low, high = min(min(arg.taps), 0), max(max(arg.taps), 0)
    span = high - low
    size = u.static_shape[0] if u.static_shape else None
    if size is not None and span > 0 and size <= span:
        raise ScanError(
            f"{arg.where} has {size} entries, but its taps {list(arg.taps)} reach "
            f"{span} steps apart, so it needs more than {span}"
        )
    base = u.name or f"seq{index}"
    pieces = []
    for tap in arg.taps:
        rows = (
            u if span == 0 else slice_rows(u, tap - low, -(high - tap) if high > tap else INT64_MAX)
        )
        if go_backwards:
            rows = slice_rows(rows, -1, _INT64_MIN, -1)
        role = f"{arg.argument} at t{tap:+d}" if tap else f"{arg.argument} at t"
        pieces.append(
            SequenceSlice(rows, role, tap_hint(base, tap), None if size is None else size - span)
        )
    return pieces


def _per_slice(args: list[SequenceArg]) -> list[SequenceArg]:
    return [arg for arg in args for _ in arg.taps]


def _cut(slices: list[SequenceSlice], count: Symbol, known: int | None) -> list[SequenceSlice]:
    """The slices cut to their first ``count`` rows (left alone when they have just as many)."""
    return [
        piece
        if known is not None and piece.length == known
        else SequenceSlice(_head(piece.rows, count), piece.role, piece.hint, known)
        for piece in slices
    ]

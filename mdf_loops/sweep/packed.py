"""A batch's results as they travel from a worker back to the sweep: whole columns, not one
object per setting.

A worker runs many settings of one compiled model; their outputs come back as one array
per output (the settings along the first axis) when every setting has it in one shape,
else as one flat array with each setting's shape. Dask sends every array as a frame of
its own and reads each back at a cost, and the sweep's table takes a whole column at
once (:meth:`mdf_loops.sweep.results.ResultTable.record_packed`), so a batch costs the
client a few operations per output, not a few per setting.

What counts as a failed setting is stated here once (:func:`pack`): its run raised an
:class:`~mdf_loops.MdfLoopsError` (the error is given), or one of its outputs is not a
tensor (an empty optional, a sequence) or holds NaN (its values are kept).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["SettingResult", "PackedResults", "Steps", "pack"]

Shape = tuple[int, ...]


@dataclass
class SettingResult:
    """The outputs of one setting, or why it failed (``error`` is empty when it did not)."""

    index: int
    outputs: dict[str, np.ndarray]
    error: str = ""


@dataclass(frozen=True)
class PackedResults:
    """The results of a batch of settings (``indices``), each output as one column."""

    indices: np.ndarray  # the setting numbers, int64
    errors: tuple[str, ...]  # "" where the setting ran
    #: outputs every setting has, in one shape: the settings along the first axis
    stacked: dict[str, np.ndarray] = field(default_factory=dict)
    #: the others: the values of every setting that has it, flat, and each one's shape or None
    ragged: dict[str, tuple[np.ndarray, tuple[Shape | None, ...]]] = field(default_factory=dict)
    #: outputs of one batched call whose lengths differ: padded, as the call gave them
    steps: dict[str, Steps] = field(default_factory=dict)

    @classmethod
    def of(cls, results: Sequence[SettingResult]) -> PackedResults:
        """Pack results made one setting at a time (their errors and NaN checks done)."""
        names = sorted({name for result in results for name in result.outputs})
        columns = {name: [r.outputs.get(name) for r in results] for name in names}
        return _packed([r.index for r in results], [r.error for r in results], columns)

    def unpack(self) -> list[SettingResult]:
        """One :class:`SettingResult` per setting (its arrays views of the columns)."""
        results = [
            SettingResult(int(i), {}, e) for i, e in zip(self.indices, self.errors, strict=True)
        ]
        for name, column in self.stacked.items():
            for k, result in enumerate(results):
                result.outputs[name] = column[k]
        for name in self.ragged:
            for result, value in zip(results, self.ragged_values(name), strict=True):
                if value is not None:
                    result.outputs[name] = value
        for name, steps in self.steps.items():
            for result, own, length in zip(results, steps.block, steps.lengths, strict=True):
                result.outputs[name] = own[:length]
        return results

    def ragged_values(self, name: str) -> list[np.ndarray | None]:
        """Each setting's value of the ragged output ``name`` (None where it has none)."""
        flat, shapes = self.ragged[name]
        values: list[np.ndarray | None] = []
        start = 0
        for shape in shapes:
            if shape is None:
                values.append(None)
                continue
            size = math.prod(shape)
            values.append(flat[start : start + size].reshape(shape))
            start += size
        return values

    def padded(self, name: str) -> tuple[np.ndarray, np.ndarray] | None:
        """A ragged output of vectors as (the positions of the settings that have it, their
        values stacked, NaN after the end of each, integers and booleans then float), in a
        few whole-array operations; None for values of other ranks."""
        flat, shapes = self.ragged[name]
        positions = [k for k, shape in enumerate(shapes) if shape is not None]
        if not positions or any(len(shapes[k]) != 1 for k in positions):  # type: ignore[arg-type]
            return None
        lengths = np.array([shapes[k][0] for k in positions], dtype=np.int64)  # type: ignore[index]
        width = int(lengths.max())
        dtype = flat.dtype
        if dtype.kind not in "fc" and (lengths < width).any():
            dtype = np.result_type(dtype, np.float64)
        block = np.full((len(positions), width), np.nan if dtype.kind in "fc" else 0, dtype)
        rows = np.repeat(np.arange(len(positions)), lengths)
        starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
        block[rows, np.arange(len(flat)) - starts] = flat
        return np.array(positions, dtype=np.int64), block


@dataclass(frozen=True)
class Steps:
    """An output whose length differs between settings, as one batched call gives it:
    every setting's values padded to the longest along the second axis (``block``, the
    settings first), and each setting's own length (``lengths``)."""

    block: np.ndarray
    lengths: np.ndarray

    @classmethod
    def of(cls, values: Sequence[Any]) -> Steps | None:
        """``values`` (arrays of one dtype whose shapes differ in their first axis only) as
        one block, in a few whole-array operations; None for any other list."""
        first = values[0] if len(values) else None
        if not isinstance(first, np.ndarray) or first.ndim == 0:
            return None
        rest, dtype = first.shape[1:], first.dtype
        for value in values:
            if type(value) is not np.ndarray or value.shape[1:] != rest or value.dtype != dtype:
                return None
        lengths = np.array([len(value) for value in values], dtype=np.int64)
        block = np.zeros((len(values), int(lengths.max()), *rest), dtype)
        block[np.arange(block.shape[1]) < lengths[:, None]] = np.concatenate(values)
        return cls(block, lengths)

    def _mask(self) -> np.ndarray:
        return np.arange(self.block.shape[1]) < self.lengths[:, None]

    def rows_with_nan(self) -> list[int]:
        """The settings whose own values hold NaN (the padding not counted)."""
        if self.block.dtype.kind not in "fc" or self.block.size == 0:
            return []
        nan = np.isnan(self.block.reshape(*self.block.shape[:2], -1)).any(axis=2)
        return np.flatnonzero((nan & self._mask()).any(axis=1)).tolist()

    def padded(self) -> np.ndarray:
        """The block with NaN after each setting's own values, as the dataset pads them
        (integers and booleans become float where the lengths differ)."""
        after = ~self._mask()
        if not after.any():
            return self.block
        dtype = self.block.dtype
        if dtype.kind not in "fc":
            dtype = np.result_type(dtype, np.float64)
        block = self.block.astype(dtype)  # a copy: the block may be a view of the call's output
        block[after] = np.nan
        return block


def pack(
    indices: Sequence[int],
    columns: Mapping[str, np.ndarray | Steps | Sequence[Any]],
    errors: Sequence[str],
) -> PackedResults:
    """The results of a batch from its outputs, with the sweep's verdict on each setting.

    ``columns`` holds each wanted output of every setting, in the order of ``indices``:
    stacked along a first axis, as :class:`Steps` (lengths that differ), or listed
    (``None`` where the run failed, its ``errors`` entry saying why). A setting whose
    output is not a tensor (``None``, a list) or holds NaN is failed, with every such
    problem in its error, in the order of ``columns``; an output with NaN is kept as
    computed.
    """
    errors = list(errors)
    problems: list[list[str]] = [[] for _ in errors]
    kept: dict[str, np.ndarray | Steps | list[np.ndarray | None]] = {}
    for name, column in columns.items():
        if not isinstance(column, (np.ndarray, Steps)) and not any(errors):
            column = _uniform(column)
        if isinstance(column, Steps):
            kept[name] = column
            for k in column.rows_with_nan():
                problems[k].append(f"output '{name}' has NaN values")
            continue
        if isinstance(column, np.ndarray):
            kept[name] = column
            for k in _rows_with_nan(column):
                problems[k].append(f"output '{name}' has NaN values")
            continue
        values: list[np.ndarray | None] = []
        for k, value in enumerate(column):
            if errors[k]:
                values.append(None)
            elif value is None or isinstance(value, list):
                kind = "an empty optional" if value is None else "a sequence"
                problems[k].append(f"output '{name}' is {kind}; a sweep stores tensors only")
                values.append(None)
            else:
                array = np.asarray(value)
                if array.dtype.kind in "fc" and np.isnan(array).any():
                    problems[k].append(f"output '{name}' has NaN values")
                values.append(array)
        kept[name] = values
    for k, found in enumerate(problems):
        if found:
            errors[k] = "; ".join(found)
    return _packed(indices, errors, kept)


def _uniform(column: Sequence[Any]) -> np.ndarray | Steps | Sequence[Any]:
    """``column`` stacked, or as :class:`Steps` where the values' lengths differ (a loop
    that stops), when it holds numpy arrays of one dtype; else as it is."""
    stacked = _stacked_if_uniform(column)
    if isinstance(stacked, np.ndarray):
        return stacked
    return Steps.of(column) or column


def _stacked_if_uniform(column: Sequence[Any]) -> np.ndarray | Sequence[Any]:
    """``column`` stacked when it holds numpy arrays of one shape and dtype, else as it is."""
    first = column[0] if len(column) else None
    if not isinstance(first, np.ndarray):
        return column
    shape, dtype = first.shape, first.dtype
    for value in column:
        if type(value) is not np.ndarray or value.shape != shape or value.dtype != dtype:
            return column
    return np.stack(column)


def _rows_with_nan(column: np.ndarray) -> list[int]:
    """The positions along the first axis of ``column`` whose values hold NaN."""
    if column.dtype.kind not in "fc" or column.size == 0:
        return []
    return np.flatnonzero(np.isnan(column.reshape(len(column), -1)).any(axis=1)).tolist()


def _packed(
    indices: Sequence[int],
    errors: Sequence[str],
    columns: Mapping[str, np.ndarray | Steps | Sequence[np.ndarray | None]],
) -> PackedResults:
    """``columns`` as :class:`PackedResults`: stacked where every setting has the output in
    one shape, as :class:`Steps` where a batched call padded it, else flat."""
    stacked: dict[str, np.ndarray] = {}
    ragged: dict[str, tuple[np.ndarray, tuple[Shape | None, ...]]] = {}
    steps: dict[str, Steps] = {}
    for name, column in columns.items():
        if isinstance(column, np.ndarray):
            stacked[name] = column
            continue
        if isinstance(column, Steps):
            steps[name] = column
            continue
        arrays = [None if a is None else np.asarray(a) for a in column]
        shapes = {a.shape for a in arrays if a is not None}
        if arrays and all(a is not None for a in arrays) and len(shapes) == 1:
            stacked[name] = np.stack(arrays)  # type: ignore[arg-type]
            continue
        present = [np.ravel(a) for a in arrays if a is not None]
        flat = np.concatenate(present) if present else np.zeros(0)
        ragged[name] = (flat, tuple(None if a is None else a.shape for a in arrays))
    numbers = np.asarray(indices, dtype=np.int64)
    return PackedResults(numbers, tuple(errors), stacked, ragged, steps)

"""The settings of a sweep: a grid (every combination) or a list of samples.

Settings are numbered ``0 .. len(space) - 1``: a grid in C order (the last name
varies fastest), samples in the order given. The dataset of results has one
dimension per grid name, or one ``sample`` dimension.

A name whose values share one shape keeps them as one array, the values along its
first axis (:data:`Column`): typing, hashing and cutting them into batches are then a
few whole-array operations, not a few per value, which a sweep of tens of thousands
of settings of a millisecond each would feel.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mdf_loops.ops.common import current_limits
from mdf_loops.sweep.errors import SweepError

__all__ = ["SweepSpace", "grid_space", "sample_space", "check_setting_count"]

SAMPLE_DIM = "sample"

#: the values of one name: stacked along a first axis where they share one shape, else listed
Column = np.ndarray | list[np.ndarray]


@dataclass(frozen=True)
class SweepSpace:
    """Swept names, their values, and the dataset dimensions the settings span."""

    names: tuple[str, ...]
    values: dict[str, Column]  # grid: the axis values; samples: one per sample
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    is_grid: bool

    def __len__(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def setting(self, index: int) -> dict[str, np.ndarray]:
        """``{name: value}`` of setting number ``index``."""
        if self.is_grid:
            position = np.unravel_index(index, self.shape)
            return {
                name: _row(self.values[name], int(k))
                for name, k in zip(self.names, position, strict=True)
            }
        return {name: _row(self.values[name], index) for name in self.names}

    def columns(self, indices: Sequence[int] | np.ndarray) -> dict[str, Column]:
        """Each name's values in the settings numbered ``indices``, in that order: one
        array (the values along its first axis) where the name's values share one shape."""
        indices = np.asarray(indices, dtype=np.int64)
        if self.is_grid:
            positions = np.unravel_index(indices, self.shape)
        else:
            positions = (indices,) * len(self.names)
        columns: dict[str, Column] = {}
        for name, position in zip(self.names, positions, strict=True):
            values = self.values[name]
            if isinstance(values, np.ndarray):
                columns[name] = values[_as_slice(position)]
            else:
                columns[name] = [values[k] for k in position.tolist()]
        return columns

    def coords(self) -> dict[str, tuple[tuple[str, ...], np.ndarray]]:
        """Coordinate variables: each scalar-valued name along its dimension."""
        coords: dict[str, tuple[tuple[str, ...], np.ndarray]] = {}
        if not self.is_grid:
            coords[SAMPLE_DIM] = ((SAMPLE_DIM,), np.arange(self.shape[0]))
        for name in self.names:
            dim = name if self.is_grid else SAMPLE_DIM
            values = self.values[name]
            if values.ndim == 1 if isinstance(values, np.ndarray) else values[0].ndim == 0:
                coords[name] = ((dim,), np.array(self.values[name]))
            elif self.is_grid:  # array values (e.g. input sequences): numbered
                coords[name] = ((dim,), np.arange(len(self.values[name])))
        return coords

    def fingerprint(self) -> str:
        """A hash of the names and every value: equal for the same settings (each value's
        dtype, shape and bytes, in order; a stacked name's in one buffer)."""
        digest = hashlib.sha256(repr((self.is_grid, self.names, self.shape)).encode())
        for name in self.names:
            values = self.values[name]
            if isinstance(values, np.ndarray):
                digest.update(_framed(values).data)
                continue
            for value in values:
                digest.update(f"{value.dtype.str}{value.shape}".encode())
                digest.update(np.ascontiguousarray(value).tobytes())
        return digest.hexdigest()


def _as_slice(positions: np.ndarray) -> slice | np.ndarray:
    """``positions`` as a slice where they are consecutive (a view, not a copy), else as
    they are."""
    if len(positions) and positions[-1] - positions[0] == len(positions) - 1:
        if len(positions) == 1 or (np.diff(positions) == 1).all():
            return slice(int(positions[0]), int(positions[-1]) + 1)
    return positions


def _row(values: Column, k: int) -> np.ndarray:
    """Value number ``k`` of a name, as an array (a 0-d array for a number)."""
    return values[k, ...] if isinstance(values, np.ndarray) else values[k]


def _framed(stacked: np.ndarray) -> np.ndarray:
    """The bytes the fingerprint hashes for the values ``stacked`` along the first axis,
    in one buffer: each value's dtype and shape, then its bytes, one value after another."""
    header = np.frombuffer(f"{stacked.dtype.str}{stacked.shape[1:]}".encode(), dtype=np.uint8)
    width = stacked[0].nbytes if len(stacked) else 0
    frames = np.empty((len(stacked), len(header) + width), dtype=np.uint8)
    frames[:, : len(header)] = header
    frames[:, len(header) :] = np.ascontiguousarray(stacked).view(np.uint8).reshape(-1, width)
    return frames


def grid_space(grid: Mapping[str, Sequence[Any]]) -> SweepSpace:
    """Every combination of the values of ``grid`` (``{name: values}``).

    The number of settings is checked against ``max_sweep_settings`` (see
    :class:`mdf_loops.safety.Limits`) from the lengths alone, before any value is
    converted or anything the size of the sweep is built.
    """
    if not isinstance(grid, Mapping) or not grid:
        raise SweepError(
            "grid must map at least one parameter or input name to its values, "
            "e.g. grid={'node.rate': [0.1, 0.2]}"
        )
    axes = {str(name): _sequence(name, axis) for name, axis in grid.items()}
    check_setting_count({name: len(axis) for name, axis in axes.items()})
    values = {name: _column(name, list(axis)) for name, axis in axes.items()}
    names = tuple(values)
    return SweepSpace(names, values, names, tuple(len(values[n]) for n in names), True)


def sample_space(samples: Sequence[Mapping[str, Any]]) -> SweepSpace:
    """One setting per mapping of ``samples``; all name the same parameters or inputs."""
    if isinstance(samples, Mapping) or not isinstance(samples, Sequence) or not samples:
        raise SweepError("samples must be a non-empty list of {name: value} mappings")
    check_setting_count({"samples": len(samples)})
    first = samples[0]
    if not isinstance(first, Mapping) or not first:
        raise SweepError("sample 0 must map parameter or input names to values")
    names = tuple(str(n) for n in first)
    expected = set(names)
    for k, sample in enumerate(samples):
        if type(sample) is dict and sample.keys() == expected:
            continue  # the common case, without an abstract-class check per sample
        if not isinstance(sample, Mapping) or set(map(str, sample)) != expected:
            found = (
                sorted(map(str, sample)) if isinstance(sample, Mapping) else type(sample).__name__
            )
            raise SweepError(
                f"sample {k} sets {found}; every sample must set the same names "
                f"as sample 0: {sorted(names)}"
            )
    values = {name: _column(name, [sample[name] for sample in samples]) for name in names}
    if SAMPLE_DIM in names:
        raise SweepError(f"'{SAMPLE_DIM}' names the dimension of the samples; rename that input")
    return SweepSpace(names, values, (SAMPLE_DIM,), (len(samples),), False)


def check_setting_count(lengths: Mapping[str, int]) -> int:
    """The number of settings ``lengths`` (values per name) make, or :class:`SweepError`
    when it passes the limit ``max_sweep_settings``."""
    limit = current_limits().max_sweep_settings
    total = 1
    for length in lengths.values():
        total *= length  # Python integers: 10**5 names of 10**5 values do not wrap
        if total > limit:
            shown = " x ".join(f"{n:,} ({name})" for name, n in lengths.items())
            raise SweepError(
                f"the sweep has {shown} settings, more than the limit of {limit:,} "
                "(max_sweep_settings); sweep fewer values, or raise the limit with "
                "`with mdf_loops.safety.limits(max_sweep_settings=N):`"
            )
    return total


def _sequence(name: Any, axis: Any) -> Sequence[Any] | np.ndarray:
    """The values of one grid name: a list, tuple, range or array (not a scalar or text)."""
    if isinstance(axis, (str, bytes, Mapping)) or not isinstance(axis, (Sequence, np.ndarray)):
        raise SweepError(f"grid '{name}': expected a list of values, got {axis!r:.60}")
    if isinstance(axis, np.ndarray) and axis.ndim == 0:
        raise SweepError(f"grid '{name}': expected a list of values, got {axis!r:.60}")
    if len(axis) == 0:
        raise SweepError(f"grid '{name}': no values; give at least one")
    return axis


def _column(name: str, values: list[Any]) -> Column:
    """The values of one name as arrays of one dtype (so one compiled model serves all):
    one array when they share one shape (typed in one operation), else a list.

    The values may differ in shape (input sequences of different lengths) but not in
    their number of dimensions; each must be a rectangular numeric array.
    """
    stacked = _stacked(values)
    if stacked is not None:
        return stacked
    arrays = [_value(name, k, v) for k, v in enumerate(values)]
    ranks = sorted({a.ndim for a in arrays})
    if len(ranks) > 1:
        first = {rank: next(k for k, a in enumerate(arrays) if a.ndim == rank) for rank in ranks}
        shown = ", ".join(f"value {k} has shape {arrays[k].shape}" for k in sorted(first.values()))
        raise SweepError(
            f"'{name}': the values have different numbers of dimensions ({shown}); "
            "every value of one name must have the same number of dimensions"
        )
    dtype = np.result_type(*arrays)
    return [a.astype(dtype, copy=False) for a in arrays]


def _stacked(values: list[Any]) -> np.ndarray | None:
    """``values`` as one numeric array, the values along its first axis, when they share
    one shape, else None. ``np.stack`` gives them the dtype the value-by-value path
    gives (the result type of each value as an array); a value it cannot take (ragged,
    text, another rank) leaves them to that path and its errors."""
    try:
        stacked = np.stack(values)
    except (ValueError, TypeError):  # shapes that differ, ragged values, types that do not mix
        return None
    if type(stacked) is not np.ndarray or stacked.dtype.kind not in "biufc":
        return None
    return stacked


def _value(name: str, k: int, value: Any) -> np.ndarray:
    """Value number ``k`` of ``name`` as a numeric array."""
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as exc:  # ragged nesting: numpy's "inhomogeneous shape"
        raise SweepError(
            f"'{name}': value {k} is not a rectangular array of numbers "
            f"({str(exc).split('.')[0].lower()}); give each value as one array"
        ) from None
    if array.dtype.kind not in "biufc":
        raise SweepError(
            f"'{name}': a swept value must be numeric; value {k} is {array.dtype} ({value!r:.60})"
        )
    return array

"""Results of a sweep: collected setting by setting, as an ``xarray.Dataset``, in a file.

The dataset has one dimension per swept grid name (or one ``sample`` dimension)
and, for each output, that output's own dimensions (``<output>_dim0``, ...).
Outputs whose shape differs between settings (a loop that stops early) are padded
with NaN to the largest shape; a setting that failed or has not run yet holds NaN
(integer and boolean outputs then become float). Two more variables:
``error`` (empty for a setting that ran, else why it failed) and ``completed``
(the settings a resumed sweep skips).
"""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from mdf_loops.files import check_folder, read_file
from mdf_loops.sweep.errors import SweepError
from mdf_loops.sweep.packed import PackedResults, SettingResult
from mdf_loops.sweep.space import SweepSpace

__all__ = ["ResultTable", "save_dataset", "load_dataset"]

log = logging.getLogger(__name__)

#: the attribute holding the hash that says which sweep a file holds
FINGERPRINT = "mdf_loops_sweep"


class ResultTable:
    """The outputs and errors of every setting of a sweep, as they arrive.

    Each output is kept as the blocks that arrived: (setting numbers, their values
    stacked along a first axis), a whole batch at a time where its settings share the
    output's shape (:meth:`record_packed`), one setting at a time otherwise.
    """

    def __init__(self, space: SweepSpace, outputs: tuple[str, ...], attrs: dict[str, Any]):
        self.space = space
        self.outputs = outputs
        self.attrs = attrs
        self.completed = np.zeros(len(space), dtype=bool)
        self.errors = np.full(len(space), "", dtype=object)
        self.blocks: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {n: [] for n in outputs}

    def record(self, result: SettingResult) -> bool:
        """Keep ``result``; False (and nothing changes) when its setting is already recorded."""
        return self.record_packed(PackedResults.of([result])) == 0

    def record_packed(self, packed: PackedResults) -> int:
        """Keep a batch's results; returns how many of its settings were already recorded
        (those are left as they were)."""
        new = ~self.completed[packed.indices]
        new &= _first_occurrences(packed.indices)
        errors = np.array(packed.errors, dtype=object)
        kept = packed.indices[new]
        every = np.arange(len(new))
        for name, column in packed.stacked.items():
            self._record_block(name, packed.indices, every, column, new, errors)
        for name, steps in packed.steps.items():  # padded with NaN, whole arrays
            self._record_block(name, packed.indices, every, steps.padded(), new, errors)
        for name in packed.ragged:
            padded = packed.padded(name)
            if padded is None:  # values of rank other than 1: one setting at a time
                self._record_each(name, packed, new, errors)
                continue
            positions, block = padded
            self._record_block(name, packed.indices, positions, block, new, errors)
        self.errors[kept] = errors[new]
        self.completed[kept] = True
        return int(len(new) - new.sum())

    def _record_block(
        self,
        name: str,
        indices: np.ndarray,
        positions: np.ndarray,
        block: np.ndarray,
        new: np.ndarray,
        errors: np.ndarray,
    ) -> None:
        """Keep the values ``block`` of output ``name`` of the settings at ``positions`` of
        a batch (setting numbers ``indices``), those that are ``new``; a rank other
        settings do not have goes into their ``errors`` instead."""
        fresh = new[positions]
        problem = self._rank_problem(name, block.ndim - 1)
        if problem:
            errors[positions[fresh]] = [_joined(e, problem) for e in errors[positions[fresh]]]
        elif fresh.all():  # the common case: the block as it came, not a copy
            self.blocks[name].append((indices[positions], block))
        elif fresh.any():
            self.blocks[name].append((indices[positions][fresh], block[fresh]))

    def _record_each(
        self, name: str, packed: PackedResults, new: np.ndarray, errors: np.ndarray
    ) -> None:
        """Keep the ragged output ``name`` of the ``new`` settings of ``packed`` one by one."""
        values = packed.ragged_values(name)
        for k in np.flatnonzero(new):
            value = values[k]
            if value is None:
                continue
            problem = self._rank_problem(name, value.ndim)
            if problem:
                errors[k] = _joined(errors[k], problem)
            else:
                self.blocks[name].append((packed.indices[k : k + 1], value[np.newaxis]))

    def _rank_problem(self, name: str, ndim: int) -> str:
        """Why values of ``ndim`` dimensions cannot join output ``name``'s, or ""."""
        known = self.blocks[name][0][1].ndim - 1 if self.blocks[name] else ndim
        if known == ndim:
            return ""
        return f"output '{name}' has {ndim} dimensions, other settings {known}"

    @property
    def pending(self) -> list[int]:
        """The settings not recorded yet, in order."""
        return np.flatnonzero(~self.completed).tolist()

    def to_dataset(self):
        """The results as an ``xarray.Dataset`` (settings not run yet are NaN)."""
        import xarray as xr

        shape, dims = self.space.shape, self.space.dims
        data_vars: dict[str, Any] = {}
        for name in self.outputs:
            data_vars[name] = _stacked(name, self.blocks[name], len(self.space), shape, dims)
        errors = self.errors.copy()  # variable-length text: every entry is a str
        data_vars["error"] = (dims, errors.reshape(shape))
        data_vars["completed"] = (dims, self.completed.reshape(shape))
        return xr.Dataset(data_vars, coords=self.space.coords(), attrs=dict(self.attrs))

    def resume_from(self, dataset) -> int:
        """Take the completed settings of ``dataset`` (a file of this sweep); returns how many."""
        if dataset.attrs.get(FINGERPRINT) != self.attrs[FINGERPRINT]:
            raise SweepError(
                "the output file holds another sweep (a different model, settings, "
                "outputs or run options); choose another file, or delete it to "
                "start again"
            )
        completed = np.asarray(dataset["completed"].values, dtype=bool).reshape(-1)
        errors = np.asarray(dataset["error"].values, dtype=object).reshape(-1)
        settings = len(self.space.dims)
        arrays = {name: np.asarray(dataset[name].values) for name in self.outputs}
        arrays = {
            name: a.reshape(len(self.space), *a.shape[settings:]) for name, a in arrays.items()
        }
        for index in np.flatnonzero(completed):
            outputs = {}
            if not errors[index]:
                outputs = {name: array[index] for name, array in arrays.items()}
            self.record(SettingResult(int(index), outputs, str(errors[index])))
        return int(completed.sum())


def _first_occurrences(indices: np.ndarray) -> np.ndarray:
    """True at the first place each setting number occurs in ``indices``."""
    first = np.zeros(len(indices), dtype=bool)
    first[np.unique(indices, return_index=True)[1]] = True
    return first


def _joined(error: str, problem: str) -> str:
    return "; ".join(filter(None, [error, problem]))


def _stacked(name: str, blocks: list[tuple[np.ndarray, np.ndarray]], count: int, shape, dims):
    """One output of every setting as one array, padded with NaN where needed."""
    if not blocks:
        return dims, np.full(shape, np.nan)
    ndim = blocks[0][1].ndim - 1
    largest = tuple(max(values.shape[k + 1] for _, values in blocks) for k in range(ndim))
    dtype = np.result_type(*{values.dtype for _, values in blocks})
    ragged = any(values.shape[1:] != largest for _, values in blocks)
    if ragged or sum(len(indices) for indices, _ in blocks) < count:
        dtype = np.result_type(dtype, np.float64) if dtype.kind not in "fc" else dtype
    stacked = np.empty((count, *largest), dtype=dtype)  # each value written once
    covered = np.zeros(count, dtype=bool)
    for indices, values in blocks:
        covered[indices] = True
        if values.shape[1:] != largest:
            stacked[indices] = np.nan  # what the block does not reach
        region: tuple[np.ndarray | slice, ...] = (indices, *(slice(0, n) for n in values.shape[1:]))
        stacked[region] = values
    if not covered.all():
        stacked[~covered] = np.nan if dtype.kind in "fc" else 0
    own_dims = tuple(f"{name}_dim{k}" for k in range(ndim))
    return dims + own_dims, stacked.reshape(*shape, *largest)


def fingerprint_attrs(
    model_key: str,
    space: SweepSpace,
    outputs: tuple[str, ...],
    graph: str | None,
    run_options: dict[str, Any],
    names: dict[str, str],
    model_id: str,
) -> dict[str, Any]:
    """The dataset attributes: what was swept, and a hash telling this sweep from others."""
    import hashlib

    identity = json.dumps(
        [
            model_key,
            space.fingerprint(),
            list(outputs),
            graph,
            sorted(
                (k, repr(v)) for k, v in run_options.items() if v is not None and v is not False
            ),
        ]
    )
    return {
        FINGERPRINT: hashlib.sha256(identity.encode()).hexdigest(),
        "model": model_id,
        "swept": json.dumps(names),
    }


def save_dataset(dataset, path: str | os.PathLike) -> None:
    """Write ``dataset`` to ``path`` (``.nc``: netCDF; ``.zarr``: a zarr store), replacing
    the earlier content only once the new content is complete."""
    target = Path(path)
    folder = target.parent
    if not folder.is_dir():
        raise SweepError(f"{target}: folder '{folder}' does not exist")
    if target.suffix == ".zarr":
        _save_zarr(dataset, target)
        return
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=folder)
    os.close(handle)
    try:
        with _without_cluster():
            dataset.to_netcdf(temporary)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


@contextmanager
def _without_cluster() -> Iterator[None]:
    """Writing and reading here need no Dask cluster: xarray otherwise takes its file lock
    from the default Dask client's scheduler, which may be the one that just went away."""
    import dask

    with dask.config.set(scheduler="synchronous"):
        yield


def _save_zarr(dataset, target: Path) -> None:
    try:
        import zarr  # noqa: F401
    except ImportError:
        raise SweepError(
            f"{target}: writing zarr needs the zarr package (pip install zarr), or write a .nc file"
        ) from None
    temporary = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        with _without_cluster():
            dataset.to_zarr(temporary, mode="w", consolidated=False)
        if target.exists():
            old = target.with_name(f".{target.name}.old")
            os.replace(target, old)
            os.replace(temporary, target)
            shutil.rmtree(old)
        else:
            os.replace(temporary, target)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise


def load_dataset(path: str | os.PathLike, settings: int):
    """A dataset written by :func:`save_dataset` for a sweep of ``settings`` settings, read
    fully into memory once its header has been checked: it must be a regular file (a
    folder for zarr, holding only files and folders; a file is read by
    :func:`mdf_loops.files.read_file`, a store checked by :func:`mdf_loops.files.check_folder`,
    each at most ``8 * max_elements`` bytes, checked before reading), its ``completed``
    variable must hold ``settings`` values, and its variables together at most
    ``max_elements`` values (nothing is read before that)."""
    import xarray as xr

    path = Path(path)
    zarr = path.suffix == ".zarr"
    if not (path.is_dir() if zarr else path.is_file()):
        kind = "a folder (a zarr store)" if zarr else "a regular file"
        raise SweepError(f"{path}: the sweep's output must be {kind}; choose another output")
    if zarr:
        check_folder(path, SweepError)  # the gate read_file is for a file
    try:
        opened = (
            xr.open_zarr(path, consolidated=False)
            if zarr
            else xr.open_dataset(io.BytesIO(read_file(path, SweepError)))  # the one reader
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SweepError(
            f"{path}: cannot read it as sweep results ({exc}); choose another output file"
        ) from None
    with opened as dataset, _without_cluster():
        _check_declared_sizes(path, dataset, settings)
        try:
            return dataset.load()
        except (OSError, ValueError) as exc:
            raise SweepError(
                f"{path}: cannot read it as sweep results ({exc}); choose another output file"
            ) from None


def _check_declared_sizes(path: Path, dataset, settings: int) -> None:
    """Refuse a results file whose header declares more values than this sweep can have."""
    from mdf_loops.ops.common import current_limits

    if "completed" not in dataset.variables or "error" not in dataset.variables:
        raise SweepError(
            f"{path}: not a sweep's results (no 'completed' or 'error' variable); "
            "choose another output file"
        )
    declared = int(dataset["completed"].size)
    if declared != settings:
        raise SweepError(
            f"{path}: holds {declared:,} settings, this sweep has {settings:,}: another "
            "sweep's results; choose another file, or delete it to start again"
        )
    limit = current_limits().max_elements
    total = sum(int(variable.size) for variable in dataset.variables.values())
    if total > limit:
        raise SweepError(
            f"{path}: its header declares {total:,} values, over the limit of {limit:,} "
            "(max_elements); nothing was read. Choose another output file, or raise the "
            "limit with `with mdf_loops.safety.limits(max_elements=N):`"
        )


def check_output_path(path: str | os.PathLike) -> None:
    """Refuse an output file of a format a sweep does not write."""
    if Path(path).suffix not in (".nc", ".zarr"):
        raise SweepError(f"{path}: sweep results go to a netCDF (.nc) or zarr (.zarr) file")

"""Results files of a sweep (mdf_loops/sweep/results.py): a resume file is checked by its
header before anything in it is read."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

h5netcdf = pytest.importorskip("h5netcdf")
pytest.importorskip("xarray")

import mdf_loops  # noqa: E402
from mdf_loops.sweep import SweepError  # noqa: E402
from mdf_loops.sweep.results import load_dataset  # noqa: E402

DDM = Path(__file__).resolve().parents[2] / "examples" / "drift_diffusion.json"
GRID = {"accumulate.drift": [0.5, 1.0]}


def declared_file(path: Path, settings: int, extra: int) -> None:
    """A netCDF file with the variables of a sweep's results, one of which declares
    ``settings * extra`` values it never stores (HDF5 keeps unwritten chunks off disk)."""
    with h5netcdf.File(path, "w") as f:
        f.dimensions = {"accumulate.drift": settings, "ddm.trace_dim0": extra}
        f.create_variable("completed", ("accumulate.drift",), "i1")
        f.create_variable("error", ("accumulate.drift",), "i1")
        f.create_variable("ddm.trace", ("accumulate.drift", "ddm.trace_dim0"), "f8",
                          chunks=(1, min(extra, 1024)))


def test_a_resume_file_declaring_ten_billion_values_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "huge.nc"
    declared_file(path, 2, 5 * 10**9)
    assert os.path.getsize(path) < 10**6
    tracemalloc.start()
    try:
        with pytest.raises(SweepError, match=r"header declares 10,000,000,00\d values, over "
                                             r"the limit of 100,000,000 \(max_elements\); "
                                             r"nothing was read"):
            mdf_loops.sweep(DDM, grid=GRID, inputs={"noise": np.zeros(10)}, output=path,
                            client="tcp://127.0.0.1:1")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10**9  # reading it would take 80 GB


def test_a_resume_file_of_another_size_or_kind_is_refused(tmp_path):
    path = tmp_path / "other.nc"
    declared_file(path, 3, 4)
    with pytest.raises(SweepError, match="holds 3 settings, this sweep has 2"):
        load_dataset(path, 2)
    with h5netcdf.File(path, "w") as f:
        f.dimensions = {"x": 2}
        f.create_variable("values", ("x",), "f8")
    with pytest.raises(SweepError, match="not a sweep's results"):
        load_dataset(path, 2)
    path.write_bytes(b"not a netCDF file")
    with pytest.raises(SweepError, match="cannot read it as sweep results"):
        load_dataset(path, 2)


def test_a_resume_path_that_is_not_a_regular_file_is_refused(tmp_path):
    fifo = tmp_path / "results.nc"
    os.mkfifo(fifo)  # reading it would block forever
    with pytest.raises(SweepError, match="must be a regular file"):
        load_dataset(fifo, 2)
    (tmp_path / "folder.nc").mkdir()
    with pytest.raises(SweepError, match="must be a regular file"):
        load_dataset(tmp_path / "folder.nc", 2)

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


def zarr_store(folder: Path) -> Path:
    """A folder laid out as a zarr store (metadata and one chunk file); nothing reads it
    unless the gate lets it through."""
    (folder / "completed" / "c").mkdir(parents=True)
    (folder / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group"}')
    (folder / "completed" / "zarr.json").write_text('{"zarr_format": 3}')
    return folder


@pytest.fixture
def opened_stores(monkeypatch):
    """The stores xarray was asked to open: none may be, for a store the gate refuses."""
    import xarray as xr

    opened: list = []

    def open_zarr(path, **_):
        opened.append(path)
        raise OSError("not a real store")

    monkeypatch.setattr(xr, "open_zarr", open_zarr)
    return opened


def test_a_zarr_store_holding_a_link_is_refused_before_anything_in_it_is_read(
    tmp_path, opened_stores
):
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET")
    store = zarr_store(tmp_path / "results.zarr")
    (store / "completed" / "c" / "0").symlink_to(secret)
    with pytest.raises(SweepError, match=r"c/0: is a link; .*results.zarr may hold only files"):
        load_dataset(store, 2)
    assert opened_stores == []


def test_a_zarr_store_holding_a_fifo_or_a_linked_folder_is_refused(tmp_path, opened_stores):
    store = zarr_store(tmp_path / "results.zarr")
    os.mkfifo(store / "completed" / "c" / "0")  # reading it would block forever
    with pytest.raises(SweepError, match=r"c/0: is a FIFO \(named pipe\); "):
        load_dataset(store, 2)
    os.unlink(store / "completed" / "c" / "0")
    (store / "error").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(SweepError, match=r"error: is a link"):
        load_dataset(store, 2)
    assert opened_stores == []


def test_a_zarr_store_larger_than_the_reader_allows_is_refused_before_it_is_read(
    tmp_path, opened_stores
):
    store = zarr_store(tmp_path / "results.zarr")
    (store / "completed" / "c" / "0").write_bytes(b"\0" * 1000)
    with mdf_loops.safety.limits(max_elements=100), pytest.raises(
        mdf_loops.errors.SizeLimitError, match=r"results.zarr: reading it means 10\d\d bytes, "
        r"over the limit of 800 bytes"
    ):
        load_dataset(store, 2)
    assert opened_stores == []
    with pytest.raises(SweepError, match="not a real store"):
        load_dataset(store, 2)  # within the default limits the gate lets xarray open it
    assert opened_stores == [store]


def test_the_table_takes_whole_batches_keeps_the_first_of_a_duplicate_and_pads():
    from mdf_loops.sweep.packed import pack
    from mdf_loops.sweep.results import ResultTable
    from mdf_loops.sweep.space import sample_space

    space = sample_space([{"x": np.float64(k)} for k in range(5)])
    table = ResultTable(space, ("y", "z"), {})
    first = pack([3, 1], {"y": np.array([[1.0, 2.0], [3.0, 4.0]]), "z": np.array([5, 6])},
                 ["", ""])
    assert table.record_packed(first) == 0
    again = pack([1, 0], {"y": [np.array([9.0]), np.array([7.0, 8.0, 9.0])],
                          "z": [np.array([1, 2]), np.int64(7)]}, ["", ""])
    assert table.record_packed(again) == 1  # setting 1 arrived twice: the first is kept
    assert table.pending == [2, 4]
    dataset = table.to_dataset()
    y = dataset["y"].values
    np.testing.assert_array_equal(y[[3, 1, 0]], [[1, 2, np.nan], [3, 4, np.nan], [7, 8, 9]])
    assert np.isnan(y[[2, 4]]).all()
    assert dataset["z"].values.tolist()[:2] == [7.0, 6.0] and np.isnan(dataset["z"].values[2])
    assert dataset["error"].values.tolist() == ["", "", "", "", ""]
    ranked = pack([2], {"y": [np.ones((1, 1))], "z": [np.int64(1)]}, [""])
    table.record_packed(ranked)
    assert table.errors[2] == "output 'y' has 2 dimensions, other settings 1"


def test_the_table_takes_a_batched_calls_steps_whole_and_pads_them_as_settings_one_by_one():
    from mdf_loops.sweep.packed import Steps, pack
    from mdf_loops.sweep.results import ResultTable
    from mdf_loops.sweep.space import sample_space

    space = sample_space([{"x": np.float64(k)} for k in range(4)])
    table = ResultTable(space, ("t",), {})
    block = np.arange(12.0).reshape(2, 3, 2)  # two settings of 1 and 3 steps of pairs
    table.record_packed(pack([2, 0], {"t": Steps(block, np.array([1, 3]))}, ["", ""]))
    table.record_packed(pack([3], {"t": [np.full((4, 2), 7.0)]}, [""]))  # a longer one
    t = table.to_dataset()["t"].values
    assert t.shape == (4, 4, 2)
    expected = np.full((4, 4, 2), np.nan)  # numpy: each setting's own steps, NaN after
    expected[2, :1], expected[0, :3], expected[3] = block[0, :1], block[1], 7.0
    np.testing.assert_array_equal(t, expected)
    assert table.pending == [1]

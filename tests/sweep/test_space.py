"""The settings of a sweep (mdf_loops/sweep/space.py): values of different shapes, values
that are not arrays, and counts refused before anything is built."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import mdf_loops
from mdf_loops.safety import limits
from mdf_loops.sweep import SweepError
from mdf_loops.sweep.space import grid_space, sample_space

RNN = Path(__file__).resolve().parents[2] / "examples" / "elman_rnn.json"


def test_values_of_different_shapes_and_one_rank_are_kept_as_given():
    xs = [np.ones((30, 3)), np.zeros((20, 3)), np.full((25, 3), 2.0)]
    space = grid_space({"x": xs, "rate": [1, 2.5]})
    assert len(space) == 6 and space.shape == (3, 2)
    setting = space.setting(5)  # C order: the last name fastest
    np.testing.assert_array_equal(setting["x"], xs[2])
    assert setting["rate"] == 2.5 and setting["rate"].dtype == np.float64
    assert [v.shape for v in space.values["x"]] == [(30, 3), (20, 3), (25, 3)]


@pytest.mark.parametrize("values, message", [
    ([np.zeros((3, 3)), np.zeros(3)], r"'x': the values have different numbers of dimensions "
                                      r"\(value 0 has shape \(3, 3\), value 1 has shape \(3,\)\)"),
    ([[[1.0, 2.0], [3.0]]], r"'x': value 0 is not a rectangular array of numbers"),
    ([np.zeros(2), "abc"], r"'x': a swept value must be numeric; value 1 is <U3"),
    ([{"a": 1}], r"'x': a swept value must be numeric; value 0 is object"),
])
def test_values_that_cannot_be_one_column_name_the_name_and_value(values, message):
    with pytest.raises(SweepError, match=message):
        grid_space({"x": values})
    with pytest.raises(SweepError, match=message):
        sample_space([{"x": v} for v in values])


def test_a_value_the_model_cannot_take_is_refused_before_anything_runs():
    with pytest.raises(SweepError, match=r"swept input 'x', value 1: input 'x': expected shape "
                                         r"\[\?, 3\] \(as the model declares\), got \[4, 4\]"):
        mdf_loops.sweep(RNN, grid={"x": [np.zeros((4, 3)), np.zeros((4, 4))]},
                        inputs={"h0": np.zeros(5)}, client="tcp://127.0.0.1:1")


@pytest.mark.parametrize("grid", [
    {"a": range(10**9)},
    {"a": range(10**5), "b": range(10**5)},
    {"a": range(10**5), "b": range(10**5), "c": range(10)},  # 10**11
])
def test_grids_past_the_settings_limit_are_refused_before_they_are_built(grid):
    tracemalloc.start()
    try:
        with pytest.raises(SweepError, match=r"more than the limit of 10,000,000 "
                                             r"\(max_sweep_settings\)"):
            grid_space(grid)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10**6  # nothing the size of the grid was built


def test_the_settings_limit_can_be_changed():
    with limits(max_sweep_settings=5):
        assert len(grid_space({"a": [1, 2], "b": [1, 2]})) == 4
        with pytest.raises(SweepError, match=r"2 \(a\) x 3 \(b\) settings, more than the limit "
                                             r"of 5"):
            grid_space({"a": [1, 2], "b": [1, 2, 3]})
        with pytest.raises(SweepError, match="6 \\(samples\\)"):
            sample_space([{"a": 1}] * 6)


def test_columns_give_the_values_of_the_settings_asked_in_their_order():
    space = grid_space({"a": [1.0, 2.0], "b": [10, 20, 30]})  # C order: b fastest
    columns = space.columns([5, 0, 4])
    assert [float(v) for v in columns["a"]] == [2.0, 1.0, 2.0]
    assert [int(v) for v in columns["b"]] == [30, 10, 20]
    samples = sample_space([{"x": np.full(2, k)} for k in range(4)])
    assert [v.tolist() for v in samples.columns([3, 1])["x"]] == [[3, 3], [1, 1]]


@pytest.mark.parametrize("values", [
    [1, 2.5, np.float32(3)],  # Python and numpy numbers
    [np.int8(1), 300, True],  # numpy's promotion of each value as an array
    [[1, 2], np.array([3, 4], dtype=np.int16), (5.0, 6)],
])
def test_values_of_one_shape_are_one_array_typed_as_value_by_value(values):
    arrays = [np.asarray(v) for v in values]  # the oracle: numpy, value by value
    dtype = np.result_type(*arrays)
    column = sample_space([{"x": v} for v in values]).values["x"]
    assert isinstance(column, np.ndarray) and column.dtype == dtype
    np.testing.assert_array_equal(column, np.stack([a.astype(dtype) for a in arrays]))
    grid = grid_space({"x": values, "y": [0]})
    assert grid.values["x"].dtype == dtype
    assert isinstance(grid.setting(1)["x"], np.ndarray)  # a 0-d array, as given before


def test_a_value_that_is_not_a_number_in_a_column_of_one_shape_is_named():
    with pytest.raises(SweepError, match=r"'x': a swept value must be numeric; value 2 is <U"):
        sample_space([{"x": 1.0}, {"x": 2.0}, {"x": "3"}, {"x": 4.0}])


def test_the_fingerprint_hashes_each_value_s_type_shape_and_bytes_in_order():
    import hashlib

    values = [np.arange(3.0) + k for k in range(4)]
    space = sample_space([{"x": v} for v in values])
    digest = hashlib.sha256(repr((False, ("x",), (4,))).encode())  # the oracle: by hand
    for value in values:
        digest.update(f"{value.dtype.str}{value.shape}".encode() + value.tobytes())
    assert space.fingerprint() == digest.hexdigest()
    ragged = sample_space([{"x": np.arange(k + 1.0)} for k in range(3)])
    digest = hashlib.sha256(repr((False, ("x",), (3,))).encode())
    for k in range(3):
        digest.update(f"<f8({k + 1},)".encode() + np.arange(k + 1.0).tobytes())
    assert ragged.fingerprint() == digest.hexdigest()


@pytest.mark.parametrize("indices", [[2, 3, 4], [4], [5, 1, 7], [3, 4, 6], list(range(10))])
def test_columns_of_stacked_values_are_the_settings_asked(indices):
    values = [np.arange(3.0) + 10 * k for k in range(10)]
    columns = sample_space([{"x": v, "y": k} for k, v in enumerate(values)]).columns(indices)
    np.testing.assert_array_equal(columns["x"], np.stack([values[k] for k in indices]))
    assert columns["y"].tolist() == indices

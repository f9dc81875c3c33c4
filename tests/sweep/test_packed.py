"""A batch's results as columns (mdf_loops/sweep/packed.py): which settings failed and
why, stacked and flat columns, and each setting's values given back unchanged.

Oracle: the expected errors and values are written out here from the inputs.
"""

from __future__ import annotations

import numpy as np

from mdf_loops.sweep.packed import PackedResults, SettingResult, pack


def test_a_stacked_column_fails_only_the_settings_whose_row_holds_nan():
    values = np.array([[1.0, 2.0], [np.nan, 0.0], [3.0, 4.0]])
    choice = np.array([1, -1, 0])
    packed = pack([7, 3, 5], {"trace": values, "choice": choice}, ["", "", ""])
    assert packed.errors == ("", "output 'trace' has NaN values", "")
    assert packed.indices.tolist() == [7, 3, 5] and not packed.ragged
    np.testing.assert_array_equal(packed.stacked["trace"], values)  # NaN kept as computed
    results = packed.unpack()
    assert [r.index for r in results] == [7, 3, 5]
    assert results[2].outputs["choice"] == 0 and results[0].outputs["trace"].tolist() == [1, 2]


def test_listed_values_name_every_problem_of_a_setting_in_output_order():
    columns = {
        "a": [np.float64(1.0), None, [np.ones(2)], np.array(np.nan)],
        "b": [np.ones(3), None, np.array([np.nan, 1.0]), None],
    }
    errors = ["", "IterationLimitError: too long", "", ""]
    packed = pack([0, 1, 2, 3], columns, errors)
    assert packed.errors == (
        "",
        "IterationLimitError: too long",  # a failed run: no output problems added
        "output 'a' is a sequence; a sweep stores tensors only; output 'b' has NaN values",
        "output 'a' has NaN values; output 'b' is an empty optional; a sweep stores tensors only",
    )
    results = packed.unpack()
    assert results[1].outputs == {} and sorted(results[2].outputs) == ["b"]
    assert np.isnan(results[3].outputs["a"])
    np.testing.assert_array_equal(results[0].outputs["b"], np.ones(3))


def test_outputs_of_one_shape_are_stacked_and_the_others_flat():
    rng = np.random.default_rng(2)
    results = [SettingResult(4, {"trace": rng.normal(size=7), "choice": np.int64(1)}),
               SettingResult(9, {}, "IterationLimitError: too long"),
               SettingResult(2, {"trace": rng.normal(size=3), "choice": np.int64(-1)})]
    packed = PackedResults.of(results)
    assert packed.ragged["trace"][0].shape == (10,)  # one flat array for the batch
    assert packed.ragged["choice"][0].tolist() == [1, -1]  # a setting lacks it: flat
    whole = PackedResults.of([results[0], results[2]])
    assert whole.stacked["choice"].tolist() == [1, -1]
    for got, given in zip(packed.unpack(), results):
        assert (got.index, got.error, sorted(got.outputs)) == (
            given.index, given.error, sorted(given.outputs))
        for name, value in given.outputs.items():
            np.testing.assert_array_equal(got.outputs[name], value)
            assert got.outputs[name].shape == np.shape(value)


def test_ragged_vectors_pad_in_whole_arrays_as_the_dataset_pads_them():
    results = [SettingResult(0, {"t": np.array([1, 2, 3])}), SettingResult(1, {}, "failed"),
               SettingResult(2, {"t": np.array([4])}), SettingResult(3, {"t": np.array([5, 6])})]
    positions, block = PackedResults.of(results).padded("t")
    assert positions.tolist() == [0, 2, 3]
    np.testing.assert_array_equal(block, [[1, 2, 3], [4, np.nan, np.nan], [5, 6, np.nan]])
    assert block.dtype == np.float64  # integers padded with NaN become float, as in the dataset
    matrices = [SettingResult(0, {"m": np.ones((2, 2))}), SettingResult(1, {"m": np.ones((1, 2))})]
    assert PackedResults.of(matrices).padded("m") is None  # other ranks: one by one


def test_steps_of_a_batched_call_fail_only_settings_with_nan_in_their_own_steps():
    from mdf_loops.sweep.packed import Steps

    block = np.array([[1.0, 2.0, np.nan], [3.0, np.nan, 9.0], [4.0, 5.0, 6.0]])
    lengths = np.array([2, 3, 1])  # setting 0's NaN is padding; setting 1's is its own
    packed = pack([0, 1, 2], {"trace": Steps(block, lengths)}, ["", "", ""])
    assert packed.errors == ("", "output 'trace' has NaN values", "")
    values = [r.outputs["trace"] for r in packed.unpack()]
    expected = [[1.0, 2.0], [3.0, np.nan, 9.0], [4.0]]
    for got, want in zip(values, expected):
        np.testing.assert_array_equal(got, want)
    assert set(packed.steps) == {"trace"} and not packed.ragged  # sent as the call gave it
    assert Steps(np.zeros((2, 0)), np.array([0, 0])).rows_with_nan() == []


def test_steps_are_padded_with_nan_as_the_dataset_pads_them():
    from mdf_loops.sweep.packed import Steps

    matrices = Steps(np.arange(24.0).reshape(2, 3, 2, 2), np.array([1, 3]))
    padded = matrices.padded()
    expected = np.arange(24.0).reshape(2, 3, 2, 2)
    expected[0, 1:] = np.nan
    np.testing.assert_array_equal(padded, expected)
    assert not np.isnan(matrices.block).any()  # the call's block is left as it was
    counts = Steps(np.array([[1, 2, 0], [3, 4, 5]], dtype=np.int32), np.array([2, 3]))
    np.testing.assert_array_equal(counts.padded(), [[1, 2, np.nan], [3, 4, 5]])
    assert counts.padded().dtype == np.float64  # integers padded with NaN become float
    full = Steps(np.ones((2, 3), dtype=np.float32), np.array([3, 3]))
    assert full.padded().dtype == np.float32  # nothing to pad: as computed
    values = [r.outputs["m"] for r in pack([5, 6], {"m": matrices}, ["", ""]).unpack()]
    np.testing.assert_array_equal(values[0], np.arange(4.0).reshape(1, 2, 2))
    np.testing.assert_array_equal(values[1], np.arange(12.0, 24.0).reshape(3, 2, 2))


def test_listed_values_whose_lengths_differ_travel_as_one_padded_block():
    values = [np.array([1.0, 2.0]), np.array([3.0, np.nan, 5.0]), np.array([], dtype=float)]
    packed = pack([4, 5, 6], {"t": values}, ["", "", ""])
    assert set(packed.steps) == {"t"} and not packed.ragged
    assert packed.errors == ("", "output 't' has NaN values", "")  # its own NaN, not padding
    for got, want in zip((r.outputs["t"] for r in packed.unpack()), values):
        np.testing.assert_array_equal(got, want)
    matrices = [np.ones((2, 3), dtype=np.int32), np.zeros((1, 3), dtype=np.int32)]
    block = pack([0, 1], {"m": matrices}, ["", ""]).steps["m"].padded()
    expected = np.stack([np.ones((2, 3)), np.vstack([np.zeros((1, 3)), np.full((1, 3), np.nan)])])
    np.testing.assert_array_equal(block, expected)  # numpy, by hand: NaN after the end
    mixed = [np.ones(2), np.ones(3, dtype=np.float32)]  # two dtypes: listed, as before
    assert "x" in pack([0, 1], {"x": mixed}, ["", ""]).ragged

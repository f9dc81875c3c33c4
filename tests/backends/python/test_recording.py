"""The recorded values of a python time loop (mdf_loops/backends/python/recording.py):
float64 and int64 values written at their step into one numpy array per scan output,
other values appended to a list and stacked."""

from __future__ import annotations

import numpy as np
import pytest

from mdf_loops.backends.python.recording import Recording


def test_typed_values_are_written_at_their_step_and_others_appended():
    recording = Recording(("d", "q", None), steps=5)
    floats, ints, others = recording.scans
    for step, (x, n, row) in enumerate([(0.5, 1, [1.0, 2.0]), (np.float64(1.5), 2, [3.0, 4.0])]):
        floats[step], ints[step] = x, n  # as the loop writes them: sK[iteration] = x
        others.append(np.array(row))
    chunk = recording.move(0, 2)
    assert recording.scans[2] == []  # the list is emptied for the next chunk
    np.testing.assert_array_equal(chunk[0], [0.5, 1.5])
    np.testing.assert_array_equal(chunk[1], [1, 2])
    np.testing.assert_array_equal(chunk[2], [[1.0, 2.0], [3.0, 4.0]])
    floats[2], ints[2] = np.nan, 3
    others.append(np.array([5.0, 6.0]))
    chunk = recording.move(2, 3)  # the last chunk: only the steps it ran
    np.testing.assert_array_equal(chunk[0], [np.nan])
    out = recording.arrays(3)
    assert [a.dtype for a in out] == [np.float64, np.int64, np.float64]
    np.testing.assert_array_equal(out[0], [0.5, 1.5, np.nan])
    np.testing.assert_array_equal(out[1], [1, 2, 3])
    np.testing.assert_array_equal(out[2], [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    assert out[0].base is None  # a run that stopped early keeps no room for the rest
    full = Recording(("d",), steps=2)
    full.scans[0][0], full.scans[0][1] = 1.0, 2.0
    assert full.arrays(2)[0].tolist() == [1.0, 2.0]


def test_a_time_made_after_the_run_is_not_recorded_and_no_steps_give_empty_floats():
    recording = Recording(("d", "d"), steps=4, time_made=True)
    assert recording.scans[0] == []  # the time is made after the run: nothing written
    for step in range(4):
        recording.scans[1][step] = step + 1.0
    recording.move(0, 4)
    time, values = recording.arrays(4)
    assert time.shape == (0,) and time.dtype == np.float64
    np.testing.assert_array_equal(values, [1.0, 2.0, 3.0, 4.0])
    empty = Recording(("d", None), steps=0).arrays(0)
    assert [(a.shape, a.dtype) for a in empty] == [((0,), np.float64)] * 2


@pytest.mark.parametrize("value", [2.5, np.float64(2.0), np.array(4.0), "x", None])
def test_what_is_no_int64_is_refused_in_an_int64_output_not_cut(value):
    # written as an array('q') takes values: a float (even a whole one) is no int64
    recording = Recording(("q",), steps=2)
    recording.scans[0][0] = np.int64(1)
    with pytest.raises(TypeError):
        recording.scans[0][1] = value
    assert recording.arrays(1)[0].tolist() == [1]


def test_a_float64_output_takes_what_a_float_array_takes():
    recording = Recording(("d",), steps=4)
    for step, value in enumerate([1, True, np.float32(0.5), np.int64(-3)]):
        recording.scans[0][step] = value
    assert recording.arrays(4)[0].tolist() == [1.0, 1.0, 0.5, -3.0]
    with pytest.raises(TypeError):  # an array of two values is no float on any numpy
        recording.scans[0][0] = np.array([1.0, 2.0])

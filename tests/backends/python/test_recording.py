"""The recorded values of a python time loop (mdf_loops/backends/python/recording.py):
chunks of appended Python numbers moved into one numpy array per scan output."""

from __future__ import annotations

import numpy as np
import pytest

from mdf_loops.backends.python.recording import Recording


def test_chunks_move_into_one_typed_array_per_scan_output():
    recording = Recording(("d", "q", None), steps=5)
    floats, ints, others = recording.scans
    floats += [0.5, np.float64(1.5)]
    ints += [1, 2]
    others += [np.array([1.0, 2.0]), np.array([3.0, 4.0])]
    chunk = recording.move(0, 2)
    assert recording.scans == [[], [], []]  # the lists are emptied for the next chunk
    np.testing.assert_array_equal(chunk[0], [0.5, 1.5])
    np.testing.assert_array_equal(chunk[2], [[1.0, 2.0], [3.0, 4.0]])
    floats.append(np.nan)
    ints.append(3)
    others.append(np.array([5.0, 6.0]))
    chunk = recording.move(2, 3)  # the last chunk: only the steps it ran
    np.testing.assert_array_equal(chunk[0], [np.nan])
    out = recording.arrays(3)
    assert [a.dtype for a in out] == [np.float64, np.int64, np.float64]
    np.testing.assert_array_equal(out[0], [0.5, 1.5, np.nan])
    np.testing.assert_array_equal(out[1], [1, 2, 3])
    np.testing.assert_array_equal(out[2], [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    assert out[0].base is None  # a run that stopped early keeps no room for the rest


def test_a_time_made_after_the_run_is_not_moved_and_no_steps_give_empty_floats():
    recording = Recording(("d", "d"), steps=4, time_made=True)
    recording.scans[1] += [1.0, 2.0, 3.0, 4.0]
    recording.move(0, 4)
    time, values = recording.arrays(4)
    assert time.shape == (0,) and time.dtype == np.float64
    np.testing.assert_array_equal(values, [1.0, 2.0, 3.0, 4.0])
    empty = Recording(("d", None), steps=0).arrays(0)
    assert [(a.shape, a.dtype) for a in empty] == [((0,), np.float64)] * 2


def test_a_float_in_an_int64_output_is_refused_not_cut():
    # the loop's values are converted as an array('q') would take them: 2.5 is no int64
    recording = Recording(("q",), steps=2)
    recording.scans[0] += [1, 2.5]
    with pytest.raises(TypeError):
        recording.move(0, 2)

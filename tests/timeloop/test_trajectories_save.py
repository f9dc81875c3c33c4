"""Trajectories.save to CSV: one row per step, read back with the csv module (the oracle is the
arrays written); values of another number of steps than time are refused, not truncated."""

from __future__ import annotations

import csv

import numpy as np
import pytest

import mdf_loops
from mdf_loops.timeloop import Trajectories


def test_a_csv_row_per_step_with_one_column_per_element(tmp_path):
    time = np.array([0.0, 0.5, 1.0])
    x, v = np.array([1.0, 2.0, 3.0]), np.arange(6.0).reshape(3, 2)
    path = tmp_path / "t.csv"
    Trajectories(time, {"n.x": x, "n.v": v}).save(path)
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["time", "n.x", "n.v[0]", "n.v[1]"]
    np.testing.assert_allclose(np.array(rows[1:], float), np.column_stack([time, x, v]))


def test_values_of_another_number_of_steps_are_refused(tmp_path):
    traces = Trajectories(np.arange(3.0), {"n.x": np.arange(2.0)})
    path = tmp_path / "t.csv"
    with pytest.raises(mdf_loops.MdfLoopsError) as info:
        traces.save(path)
    assert "3 steps" in str(info.value) and "'n.x': 2" in str(info.value)
    assert not path.exists()

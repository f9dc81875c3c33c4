"""``mdf-loops simulate``: trajectories to .npz/.csv, a plot, the time-loop model, errors."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from mdf_loops.cli.commands import main
from conftest import needs_input_port_fields

pytestmark = needs_input_port_fields  # time loops build ports with default_value/reduce

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "timeloops"
FHN = str(EXAMPLES / "fitzhugh_nagumo.json")


def _numpy_fhn(steps: int, dt: float) -> np.ndarray:
    """FitzHugh-Nagumo by forward Euler, the first step the initial values; W's update
    reads the new V (modeci-mdf updates parameters in declared order)."""
    v, w, out = -1.0, 1.0, []
    for k in range(steps):
        if k:
            v = v + (v - v**3 / 3 - w + 0.5) * dt
            w = w + ((v + 0.7 - 0.8 * w) / 12.5) * dt
        out.append((v, w))
    return np.array(out)


def test_simulate_writes_npz_csv_and_a_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    npz, table, picture = tmp_path / "t.npz", tmp_path / "t.csv", tmp_path / "t.png"
    assert main(["simulate", FHN, "--dt", "0.05", "--duration", "10", "--record", "fn.V", "fn.W",
                 "-o", str(npz), "--plot", str(picture)]) == 0
    saved = np.load(npz)
    expected = _numpy_fhn(201, 0.05)
    np.testing.assert_allclose(saved["time"], np.arange(201) * 0.05)
    np.testing.assert_allclose(saved["fn.V"], expected[:, 0], rtol=1e-12)
    assert picture.read_bytes()[:4] == b"\x89PNG"
    assert main(["simulate", FHN, "--dt", "0.05", "--steps", "5", "--record", "fn.W",
                 "-o", str(table)]) == 0
    rows = list(csv.reader(table.open()))
    assert rows[0] == ["time", "fn.W"] and len(rows) == 6
    np.testing.assert_allclose([float(r[1]) for r in rows[1:]], expected[:5, 1], rtol=1e-12)


def test_simulate_saves_the_time_loop_model_and_runs_it_again(tmp_path, capsys):
    saved = tmp_path / "loop.yaml"
    assert main(["simulate", FHN, "--dt", "0.05", "--steps", "30", "--record", "fn.V",
                 "--save-model", str(saved), "--backend", "onnxruntime"]) == 0
    first = capsys.readouterr().out
    assert main(["simulate", str(saved)]) == 0
    assert capsys.readouterr().out == first
    assert float(first.split()[1]) == pytest.approx(_numpy_fhn(30, 0.05)[-1, 0], rel=1e-12)


@pytest.mark.parametrize("argv, message", [
    (["simulate", FHN, "--steps", "3"], "give dt"),
    (["simulate", FHN, "--dt", "0.1", "--steps", "3", "-o", "x.txt"], "must end in .npz or .csv"),
    (["simulate", "missing.json", "--dt", "0.1", "--steps", "3"], "no such file"),
    (["simulate", FHN, "--dt", "0.1", "--steps", "3", "--record", "fn.nope"], "'nope'"),
    (["simulate", FHN, "--dt", "1e-300", "--duration", "1e300"], "not a finite number of steps"),
    (["simulate", FHN, "--dt", "1e-100", "--duration", "1e200"],
     "asked for about 1e+300 iterations; the limit is 1000000"),
])
def test_simulate_errors_are_one_line(argv, message, capsys):
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_simulate_under_limits_gives_the_same_files(tmp_path, capsys):
    """With --timeout/--max-memory the simulation runs in a child and returns as data."""
    plain, limited = tmp_path / "plain.npz", tmp_path / "limited.npz"
    model_plain, model_limited = tmp_path / "plain.json", tmp_path / "limited.json"
    common = [FHN, "--dt", "0.05", "--steps", "40", "--record", "fn.V", "fn.W"]
    assert main(["simulate", *common, "-o", str(plain), "--save-model", str(model_plain)]) == 0
    assert main(["simulate", *common, "-o", str(limited), "--save-model", str(model_limited),
                 "--timeout", "120", "--max-memory", "4G"]) == 0
    with np.load(plain) as a, np.load(limited) as b:
        assert sorted(a.files) == sorted(b.files) == ["fn.V", "fn.W", "time"]
        for name in a.files:
            np.testing.assert_array_equal(a[name], b[name])
    np.testing.assert_allclose(np.load(limited)["fn.V"], _numpy_fhn(40, 0.05)[:, 0], rtol=1e-12)
    assert model_plain.read_text() == model_limited.read_text()


def test_simulate_timeout_stops_a_long_simulation_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "long.npz"
    status = main(["simulate", FHN, "--dt", "0.05", "--steps", "200000000", "--record", "fn.V",
                   "--backend", "scheduler", "-o", str(out), "--timeout", "3",
                   "--max-iterations", "300000000"])
    assert status == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "took longer than 3 s" in error[0], error
    assert list(tmp_path.iterdir()) == []


def test_simulate_counts_steps_against_max_iterations(tmp_path, capsys):
    out = tmp_path / "t.npz"
    args = ["simulate", FHN, "--dt", "0.05", "--steps", "30", "--record", "fn.V", "-o", str(out)]
    assert main([*args, "--max-iterations", "20"]) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "asked for 30 iterations" in error[0] and "--max-iterations" in error[0]
    assert not out.exists()
    assert main([*args, "--max-iterations", "30"]) == 0  # the fix the message gives
    np.testing.assert_allclose(np.load(out)["fn.V"], _numpy_fhn(30, 0.05)[:, 0], rtol=1e-12)

"""A sweep's batches on real ``dask scheduler`` and ``dask worker`` processes, with faults:
a worker killed mid-sweep, the scheduler killed mid-sweep (library and command line).

Oracle: the drift-diffusion equations in numpy (ddm_oracle.ddm_numpy). Each fault must
end with every finished setting saved in the output file and one SweepError.
"""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

pytest.importorskip("dask.distributed")
xr = pytest.importorskip("xarray")

from dask_cluster import dask_processes  # noqa: E402, F401 (a fixture)
from ddm_oracle import DDM, ddm_numpy, noise  # noqa: E402

import mdf_loops  # noqa: E402
from mdf_loops.sweep import SweepError  # noqa: E402
from mdf_loops.sweep.execute import batch_size_for  # noqa: E402

DRIFTS = list(np.linspace(0.0, 3.0, 16))


def check_against_numpy(dataset, shared) -> int:
    """Every completed setting of ``dataset`` equals the numpy oracle; returns how many."""
    completed = np.flatnonzero(dataset["completed"].values)
    for k in completed:
        trace, time, choice = ddm_numpy(shared, DRIFTS[k])
        assert dataset["error"].values[k] == ""
        assert float(dataset["ddm.decision_time"][k]) == pytest.approx(time)
        assert int(dataset["decide.choice"][k]) == choice
    return len(completed)


def test_a_killed_worker_process_loses_and_duplicates_nothing(dask_processes):
    dask_processes.start_scheduler()
    dask_processes.start_workers(2)
    victim = dask_processes.workers[0]
    seen = []

    def kill_once(done, total):
        seen.append(done)
        if len(seen) == 2:
            os.kill(victim.pid, signal.SIGKILL)

    shared = noise(11)
    result = mdf_loops.sweep(DDM, grid={"accumulate.drift": DRIFTS}, inputs={"noise": shared},
                             client=dask_processes.address, batch_size=1, backend="scheduler",
                             progress=kill_once, timeout=30)
    assert victim.wait(timeout=30) == -signal.SIGKILL
    assert seen == sorted(seen) and len(seen) == len(DRIFTS)  # each setting reported once
    assert result["completed"].all()
    assert check_against_numpy(result, shared) == len(DRIFTS)


def test_a_killed_scheduler_keeps_every_finished_setting_and_raises_once(dask_processes,
                                                                         tmp_path):
    dask_processes.start_scheduler()
    dask_processes.start_workers(2)
    output = tmp_path / "partial.nc"
    seen = []

    def kill_scheduler(done, total):
        seen.append(done)
        if len(seen) == 3:
            dask_processes.kill(dask_processes.scheduler)

    shared = noise(12)
    with pytest.raises(SweepError) as raised:
        mdf_loops.sweep(DDM, grid={"accumulate.drift": DRIFTS}, inputs={"noise": shared},
                        client=dask_processes.address, batch_size=1, backend="scheduler",
                        output=output, progress=kill_scheduler, timeout=10)
    assert dask_processes.address in str(raised.value)
    assert "settings finished so far are kept" in str(raised.value)
    saved = xr.load_dataset(output)
    assert check_against_numpy(saved, shared) == seen[-1] >= 3
    assert seen[-1] < len(DRIFTS)


def test_command_line_after_a_killed_scheduler_prints_one_error_line(dask_processes,
                                                                     tmp_path, capfd,
                                                                     monkeypatch):
    from mdf_loops.cli import main
    from mdf_loops.cli import sweep as cli_sweep

    dask_processes.start_scheduler()
    dask_processes.start_workers(2)
    updates = []

    class KillingBar(cli_sweep._ProgressBar):
        def update(self, done, total):
            updates.append(done)
            if len(updates) == 2:
                dask_processes.kill(dask_processes.scheduler)

    monkeypatch.setattr(cli_sweep, "_ProgressBar", KillingBar)
    monkeypatch.setattr("mdf_loops.cli.progress.shows_progress", lambda args: True)
    np.save(tmp_path / "noise.npy", noise(13))
    output = tmp_path / "grid.nc"
    status = main(["sweep", str(DDM), "--param", "accumulate.drift=0:3:16", "-i",
                   f"noise={tmp_path / 'noise.npy'}", "-o", str(output), "--batch-size", "1",
                   "--backend", "scheduler", "--scheduler", dask_processes.address,
                   "--scheduler-timeout", "10"])
    err = capfd.readouterr().err
    assert status == 1
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err  # no Dask log line, traceback or warning
    assert lines[0].startswith(f"mdf-loops: error: the Dask scheduler at {dask_processes.address}")
    saved = xr.load_dataset(output)
    assert int(saved["completed"].sum()) == updates[-1] >= 2


def test_command_line_on_a_local_cluster_prints_nothing_from_dask(tmp_path):
    import subprocess
    import sys

    from dask_cluster import ROOT

    np.save(tmp_path / "noise.npy", noise(14))
    output = tmp_path / "local.nc"
    done = subprocess.run(
        [sys.executable, "-m", "mdf_loops", "sweep", str(DDM), "--param",
         "accumulate.drift=0.5,1.5", "-i", f"noise={tmp_path / 'noise.npy'}", "-o", str(output)],
        capture_output=True, text=True, timeout=180, cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines() == [f"mdf-loops: wrote 2 settings to {output}"]
    saved = xr.load_dataset(output)
    for k, drift in enumerate([0.5, 1.5]):
        assert float(saved["ddm.decision_time"][k]) == pytest.approx(
            ddm_numpy(noise(14), drift)[1])


@pytest.mark.parametrize("settings, threads, asked, backend, expected", [
    (1000, 2, None, "scheduler", 125), (10, 4, None, "scheduler", 1),
    (10**6, 2, None, "scheduler", 500), (7, 2, 3, "scheduler", 3),
    (20000, 2, None, "onnxruntime", 2000), (20000, 4, None, "jax", 1250),
    (4000, 2, None, "auto", 500), (10**6, 2, 7, "jax", 7)])
def test_batch_sizes(settings, threads, asked, backend, expected):
    assert batch_size_for(settings, threads, asked, backend) == expected


@pytest.mark.parametrize("asked", [0, -2, 1.5, True])
def test_bad_batch_sizes_are_refused(asked):
    with pytest.raises(SweepError, match="batch_size must be"):
        batch_size_for(10, 2, asked)


def test_losing_every_worker_keeps_the_finished_settings_and_raises_once(dask_processes,
                                                                        tmp_path, caplog):
    import logging

    dask_processes.start_scheduler()
    dask_processes.start_workers(1)
    output = tmp_path / "orphaned.nc"
    seen = []

    def kill_the_worker(done, total):
        seen.append(done)
        if len(seen) == 2:
            dask_processes.kill(dask_processes.workers[0])

    shared = noise(15)
    with caplog.at_level(logging.WARNING, logger="mdf_loops"), \
            pytest.raises(SweepError, match="has no workers|did not send a result") as raised:
        # (the second when the batch that finished as the worker died held its result)
        mdf_loops.sweep(DDM, grid={"accumulate.drift": DRIFTS}, inputs={"noise": shared},
                        client=dask_processes.address, batch_size=1, backend="scheduler",
                        output=output, progress=kill_the_worker, timeout=5)
    assert "settings finished so far are kept" in str(raised.value)
    assert any("lost all its workers" in r.getMessage() for r in caplog.records)
    saved = xr.load_dataset(output)
    assert check_against_numpy(saved, shared) == seen[-1] >= 2

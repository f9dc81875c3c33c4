"""Where a sweep runs: scheduler addresses, schedulers that are not there, silent or without
workers, the default local cluster, and scripts without a ``__main__`` guard.

Every fault must end in one SweepError within a bound (the sweep's timeout plus
start-up), never a hang: each call runs in a thread the test waits for, boundedly.
Oracle for values: the drift-diffusion equations in numpy (conftest.ddm_numpy).
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("dask.distributed")
pytest.importorskip("xarray")

from conftest import DDM, ROOT, ddm_numpy, free_port, noise  # noqa: E402

import mdf_loops  # noqa: E402
from mdf_loops.sweep import SweepError  # noqa: E402

BOUND = 90.0  # seconds any faulty sweep may take here (timeouts of a few seconds + start-up)


def bounded(call, seconds: float = BOUND):
    """``call()``'s result or exception; fails the test if it has not ended in ``seconds``."""
    outcome: dict = {}

    def target():
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s: a hang"
    return outcome


def sweep_at(address, **kwargs):
    return mdf_loops.sweep(DDM, grid={"accumulate.drift": [0.5, 1.5]},
                           inputs={"noise": noise(1)}, client=address, **kwargs)


def test_nothing_listening_is_one_sweep_error_within_the_timeout():
    address = f"tcp://127.0.0.1:{free_port()}"
    outcome = bounded(lambda: sweep_at(address, timeout=2))
    error = outcome.get("error")
    assert isinstance(error, SweepError), outcome
    assert address in str(error) and "did not answer" in str(error) and "2 s" in str(error)


@pytest.fixture
def silent_server():
    """A server that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted = []

    def accept():
        while True:
            try:
                accepted.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    server.close()
    for connection in accepted:
        connection.close()


def test_a_scheduler_that_never_answers_is_one_sweep_error(silent_server):
    outcome = bounded(lambda: sweep_at(silent_server, timeout=2))
    error = outcome.get("error")
    assert isinstance(error, SweepError), outcome
    assert silent_server in str(error) and "did not answer" in str(error)


def test_command_line_on_a_silent_scheduler_says_one_line(silent_server, tmp_path):
    command = [sys.executable, "-m", "mdf_loops", "sweep", str(DDM), "--param",
               "accumulate.drift=0.5,1", "-o", str(tmp_path / "out.nc"), "--scheduler",
               silent_server, "--scheduler-timeout", "2", "-i", "noise=[0.1, 0.2]"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=BOUND,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("mdf-loops: error: the Dask scheduler at " + silent_server)
    assert not (tmp_path / "out.nc").exists()  # nothing ran, nothing to save


def test_an_address_that_is_not_one_is_a_sweep_error():
    with pytest.raises(SweepError, match="not a Dask scheduler address"):
        sweep_at("nowhere:at:all", timeout=2)
    with pytest.raises(SweepError, match="client must be a dask.distributed.Client"):
        sweep_at(8786)


@pytest.mark.parametrize("timeout", [0, -1, float("inf"), "10", True])
def test_bad_timeouts_are_refused(timeout):
    with pytest.raises(SweepError, match="timeout must be"):
        sweep_at("tcp://127.0.0.1:1", timeout=timeout)


def test_a_scheduler_without_workers_warns_then_fails(dask_processes, caplog, tmp_path):
    dask_processes.start_scheduler()
    output = tmp_path / "none.nc"
    with caplog.at_level(logging.WARNING, logger="mdf_loops"):
        outcome = bounded(lambda: sweep_at(dask_processes.address, timeout=4, output=output))
    error = outcome.get("error")
    assert isinstance(error, SweepError), outcome
    assert "has no workers" in str(error) and "dask worker" in str(error)
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("mdf_loops")]
    assert any("has no workers" in w and "waits up to" in w for w in warnings), warnings
    import xarray as xr

    saved = xr.load_dataset(output)  # the empty table is saved: a rerun resumes from it
    assert not saved["completed"].any()


def test_a_scheduler_address_runs_the_sweep(healthy_scheduler):
    drifts = [0.5, 1.5]
    result = sweep_at(healthy_scheduler, timeout=30)
    for k, drift in enumerate(drifts):
        assert float(result["ddm.decision_time"][k]) == pytest.approx(
            ddm_numpy(noise(1), drift)[1])


def test_the_local_cluster_listens_on_loopback_only(monkeypatch):
    from dask.distributed import Client

    from mdf_loops.sweep import cluster

    seen = {}
    real = Client.__init__

    def spy(self, *args, **kwargs):
        real(self, *args, **kwargs)
        seen["scheduler"] = self.scheduler.address
        seen["dashboard"] = self.dashboard_link if self.cluster else None
        seen["workers"] = list(self.scheduler_info()["workers"])

    monkeypatch.setattr(Client, "__init__", spy)
    with cluster.connected(None, timeout=30):
        pass
    assert seen["scheduler"].startswith("tcp://127.0.0.1:")
    assert seen["dashboard"] is None or "127.0.0.1" in seen["dashboard"]
    assert seen["workers"] and all(w.startswith("tcp://127.0.0.1:") for w in seen["workers"])


SCRIPT = """
import json

import numpy as np
import mdf_loops

result = mdf_loops.sweep({model!r}, grid={{"accumulate.drift": [0.5, 1.5]}},
                         inputs={{"noise": np.zeros(50)}}{client})
print(json.dumps(result["ddm.decision_time"].values.tolist()))
"""


def run_script(tmp_path: Path, client: str = "") -> subprocess.CompletedProcess:
    script = tmp_path / "unguarded.py"
    script.write_text(SCRIPT.format(model=str(DDM), client=client))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=BOUND, cwd=tmp_path,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_an_unguarded_script_fails_at_once_saying_to_add_the_guard(tmp_path):
    done = run_script(tmp_path)
    assert done.returncode == 1
    assert done.stdout == ""
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("mdf_loops.errors.SweepError: ")
    assert "unguarded.py" in last and "if __name__ == '__main__':" in last
    assert "bootstrapping phase" not in done.stderr


def test_an_unguarded_script_with_a_scheduler_address_works(tmp_path, healthy_scheduler):
    done = run_script(tmp_path, client=f", client={healthy_scheduler!r}, timeout=30")
    assert done.returncode == 0, done.stderr
    times = [ddm_numpy(np.zeros(50), drift)[1] for drift in (0.5, 1.5)]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == pytest.approx(times)

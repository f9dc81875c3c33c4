"""Where a sweep runs: scheduler addresses, schedulers that are not there, silent or without
workers, the default local cluster, and scripts without a ``__main__`` guard.

Every fault must end in one SweepError within a bound (the sweep's timeout plus
start-up), never a hang: each call runs in a thread the test waits for, boundedly.
Oracle for values: the drift-diffusion equations in numpy (ddm_oracle.ddm_numpy).
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

from dask_cluster import (  # noqa: E402
    ROOT,
    dask_processes,  # noqa: F401 (a fixture)
    free_port,
    healthy_scheduler,  # noqa: F401 (a fixture)
)
from ddm_oracle import DDM, ddm_numpy, noise  # noqa: E402

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


def test_the_local_cluster_listens_on_loopback_only():
    psutil = pytest.importorskip("psutil")  # a dependency of distributed
    from mdf_loops.sweep.cluster import local_cluster

    me = psutil.Process()

    def listening(processes):
        return [c for p in processes for c in p.net_connections(kind="inet")
                if c.status == psutil.CONN_LISTEN]

    before = {c.laddr for c in listening([me])}
    others = set(me.children(recursive=True))  # other tests' dask processes
    with local_cluster(2) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        ours = [p for p in me.children(recursive=True) if p not in others]
        sockets = [c for c in listening([me, *ours]) if c.laddr not in before]
    assert len(sockets) >= 3  # the scheduler, its dashboard, each worker
    assert {c.laddr.ip for c in sockets} == {"127.0.0.1"}


SCRIPT = """
import json
import logging

import numpy as np
import mdf_loops

logging.getLogger("mdf_loops").addHandler(logging.StreamHandler())
logging.getLogger("mdf_loops").setLevel(logging.INFO)

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


def test_an_unguarded_script_runs_its_sweep_on_threads(tmp_path):
    done = run_script(tmp_path)
    assert done.returncode == 0, done.stderr
    times = [ddm_numpy(np.zeros(50), drift)[1] for drift in (0.5, 1.5)]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == pytest.approx(times)
    # no Dask line, no bootstrapping error: our one INFO line (the script shows INFO)
    assert done.stderr.strip().splitlines() == [
        "unguarded.py calls sweep outside `if __name__ == '__main__':`, so the local cluster "
        "runs its workers as threads of this process (put the call under that guard for "
        "worker processes: faster on the scheduler backend)"]


def test_a_guarded_script_runs_its_sweep_on_worker_processes(tmp_path):
    guarded = SCRIPT.replace("\nresult = ", "\nif __name__ == '__main__':\n    result = ")
    guarded = guarded.replace("\nprint(", "\n    print(").replace(
        "\n                         inputs", "\n                             inputs")
    script = tmp_path / "guarded.py"
    script.write_text(guarded.format(model=str(DDM), client=""))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=BOUND, cwd=tmp_path,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # not run on threads: no INFO line saying so
    times = [ddm_numpy(np.zeros(50), drift)[1] for drift in (0.5, 1.5)]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == pytest.approx(times)


@pytest.mark.parametrize("source, guarded", [
    ("if __name__ == '__main__':\n    x = 1\n", True),
    ("if '__main__' == __name__:\n    x = 1\n", True),
    ("if __name__ != '__main__':\n    x = 1\n", False),
    ("if True:\n    x = 1\n", False),
    ("x = 1\n", False),
])
def test_what_counts_as_the_main_guard(source, guarded):
    import ast

    from mdf_loops.sweep.cluster import _is_main_guard

    assert _is_main_guard(ast.parse(source).body[0]) is guarded


def test_a_worker_process_that_runs_an_unguarded_script_again_stops_with_one_line(tmp_path):
    """The safety net when the guard is not found (e.g. code run by exec): a spawned worker
    that runs the script's sweep call again exits at once with one line."""
    script = tmp_path / "child.py"
    script.write_text(
        "import multiprocessing, mdf_loops\n"
        "from mdf_loops.sweep.cluster import refuse_in_bootstrap\n"
        "if __name__ != '__main__':\n"
        "    refuse_in_bootstrap()\n"
        "def nothing():\n    pass\n"
        "if __name__ == '__main__':\n"
        "    p = multiprocessing.get_context('spawn').Process(target=nothing)\n"
        "    p.start(); p.join(60); print(p.exitcode)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=BOUND, cwd=tmp_path,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.stdout.strip() == "1"
    assert done.stderr.strip().splitlines() == [
        "mdf-loops: a script that calls mdf_loops.sweep without client= must call it under "
        "`if __name__ == '__main__':` (docs/sweeps.md, 'Where it runs')"]


def test_an_unguarded_script_with_a_scheduler_address_works(tmp_path, healthy_scheduler):
    done = run_script(tmp_path, client=f", client={healthy_scheduler!r}, timeout=30")
    assert done.returncode == 0, done.stderr
    times = [ddm_numpy(np.zeros(50), drift)[1] for drift in (0.5, 1.5)]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == pytest.approx(times)

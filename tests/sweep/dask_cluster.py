"""Real Dask processes for the sweep tests.

:class:`DaskProcesses` starts ``dask scheduler`` and ``dask worker`` as separate
processes on 127.0.0.1 (free ports), waits for them within a bound, kills any on
request, and stops every one it started when the test ends.
"""

from __future__ import annotations

import importlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
START_BOUND = 120.0  # seconds for a process to come up on a loaded 2-core machine


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class DaskProcesses:
    """A ``dask scheduler`` process and ``dask worker`` processes (no nanny: killing one
    kills the worker), their output in ``folder``."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.scheduler: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))

    def _start(self, module: str, *args: str) -> subprocess.Popen:
        log = open(self.folder / f"{module}-{time.monotonic_ns()}.log", "wb")
        with log:
            return subprocess.Popen([sys.executable, "-m", f"distributed.cli.{module}", *args],
                                    stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                    cwd=self.folder)

    def start_scheduler(self) -> None:
        self.scheduler = self._start("dask_scheduler", "--host", "127.0.0.1", "--port",
                                     str(self.port), "--no-dashboard")
        deadline = time.monotonic() + START_BOUND
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.scheduler.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the dask scheduler did not start") from None
                time.sleep(0.2)

    def start_workers(self, count: int) -> None:
        from dask.distributed import Client

        for _ in range(count):
            self.workers.append(self._start(
                "dask_worker", self.address, "--nthreads", "1", "--no-nanny",
                "--host", "127.0.0.1", "--no-dashboard"))
        with Client(self.address, timeout=START_BOUND) as client:
            client.wait_for_workers(len(self.workers), timeout=START_BOUND)
            # each worker imports mdf_loops once, before any test counts on its speed
            client.run(importlib.import_module, "mdf_loops.sweep.worker")

    def kill(self, process: subprocess.Popen) -> None:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)

    def stop(self) -> None:
        for process in [*self.workers, *([self.scheduler] if self.scheduler else [])]:
            self.kill(process)


@pytest.fixture
def dask_processes(tmp_path):
    """Dask processes the test starts (and may kill); all stopped at its end."""
    processes = DaskProcesses(tmp_path)
    try:
        yield processes
    finally:
        processes.stop()


@pytest.fixture(scope="module")
def healthy_scheduler(tmp_path_factory):
    """A scheduler with one worker, shared by the tests of a module that leave it alone."""
    processes = DaskProcesses(tmp_path_factory.mktemp("dask"))
    try:
        processes.start_scheduler()
        processes.start_workers(1)
        yield processes.address
    finally:
        processes.stop()

"""Sending a sweep's batches of settings to Dask and taking each batch's results as it finishes.

Results are fetched and recorded one batch at a time, as soon as each finishes, so
every finished setting is in the caller's table (and so in its output file) whatever
happens to the scheduler afterwards. Every wait is bounded: between results the
scheduler is asked, within the sweep's timeout, whether it still answers and still
has workers; a scheduler that died, stopped answering or lost all its workers for
that long ends the sweep with one :class:`SweepError`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from mdf_loops.sweep.cluster import (
    CONNECTION_ERRORS,
    lost,
    no_workers,
    wait_for_workers,
    worker_threads,
)
from mdf_loops.sweep.errors import SweepError
from mdf_loops.sweep.packed import PackedResults
from mdf_loops.sweep.worker import (
    ONE_CALL_BACKENDS,
    SettingsBatch,
    SweepTask,
    run_settings_packed,
)

__all__ = ["batch_size_for", "run_batches"]

log = logging.getLogger(__name__)

#: seconds between checks on the scheduler while no batch finishes
_POLL = 1.0
#: seconds between looks at the batches (a batch is many settings: this adds little)
_NAP = 0.02


#: most settings a task by default: where a batch is one call (:data:`ONE_CALL_BACKENDS`),
#: a few thousand, since each task costs the workers and the calling process a round
#: trip through the scheduler; where each setting is a run of its own, 500
_MOST_ONE_CALL, _MOST = 2000, 500


def batch_size_for(settings: int, threads: int, asked: int | None, backend: str = "") -> int:
    """Settings per task: ``asked``, or about four tasks per worker thread (at most 2,000
    settings a task on a backend that runs a batch as one call, 500 on the others), so
    that each worker has a few tasks to balance the load and Dask's cost per task is paid
    a few times per worker, not once per setting."""
    if asked is not None:
        if isinstance(asked, bool) or not isinstance(asked, int) or asked < 1:
            raise SweepError(f"batch_size must be a whole number of at least 1, not {asked!r}")
        return asked
    most = _MOST_ONE_CALL if backend in ONE_CALL_BACKENDS else _MOST
    return max(1, min(most, math.ceil(settings / (4 * max(threads, 1)))))


def run_batches(
    client: Any,
    task: SweepTask,
    batches: Sequence[SettingsBatch],
    record: Callable[[PackedResults], None],
    timeout: float,
) -> None:
    """Run every batch on ``client``'s cluster; ``record`` each batch's results as it ends."""
    from dask.distributed import as_completed

    address = str(getattr(client.scheduler, "address", "of the client"))
    try:
        futures = [client.submit(run_settings_packed, task, batch, pure=False) for batch in batches]
    except CONNECTION_ERRORS as exc:
        raise lost(address, f"did not take the work ({type(exc).__name__})", timeout) from None
    finished = as_completed(futures, loop=client.loop)  # not Dask's default client
    try:
        quiet_since = checked = time.monotonic()
        while not finished.is_empty():
            done = finished.next_batch(block=False)
            for future in done:
                results = _results(future, address, timeout)
                if results is None:  # lost with its worker: Dask runs it again
                    finished.add(future)
                else:
                    record(results)
            now = time.monotonic()
            if done:
                quiet_since = checked = now
            elif now - checked >= _POLL:  # nothing finished for a while: is the cluster alive?
                quiet_since = _check_alive(client, address, quiet_since, timeout)
                checked = time.monotonic()
            else:
                time.sleep(_NAP)
    finally:
        for future in futures:
            future.release()  # the scheduler forgets what nobody waits for


def client_running(future: Any) -> bool:
    """Whether the client of ``future`` is still connected to its scheduler."""
    return getattr(future.client, "status", None) == "running"


def _check_alive(client: Any, address: str, quiet_since: float, timeout: float) -> float:
    """Raise :class:`SweepError` when the scheduler does not answer, or has had no workers
    for ``timeout`` seconds; returns when the quiet time started (reset while workers exist)."""
    if client.status not in ("running", "connecting"):
        raise lost(address, f"closed the connection (the client is {client.status})", timeout)
    if worker_threads(client, timeout):
        return time.monotonic()
    left = timeout - (time.monotonic() - quiet_since)
    log.warning(
        "the Dask scheduler at %s has lost all its workers; the sweep waits up to %g s for one",
        address,
        max(left, 0),
    )
    if left <= 0:
        raise no_workers(client, timeout)
    wait_for_workers(client, left)
    return time.monotonic()


def _results(future: Any, address: str, timeout: float) -> PackedResults | None:
    """A finished batch's results, or None when they were lost with the worker that held
    them (Dask computes them again); a batch lost with the scheduler is a
    :class:`SweepError`, and an exception the batch raised (a fault in the code) is raised
    as it is."""
    from concurrent.futures import CancelledError

    from distributed import KilledWorker

    try:
        if future.status != "error":
            return future.result(timeout=timeout)
        raised = future.exception(timeout=timeout)
    except CancelledError:  # the client lost the scheduler: Dask cancels what was running
        raise lost(address, "went away during the sweep", timeout) from None
    except CONNECTION_ERRORS as exc:
        if future.status in ("pending", "lost") and client_running(future):
            return None
        raise lost(address, f"did not send a result ({type(exc).__name__})", timeout) from None
    if isinstance(raised, KilledWorker):
        raise SweepError(
            f"a batch of settings killed its worker several times ({raised}); "
            "the settings done so far are kept; run again to resume"
        ) from None
    raise raised

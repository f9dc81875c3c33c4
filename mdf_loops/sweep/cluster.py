"""Where a sweep runs: a Dask client for a scheduler address, a given client, or a local cluster.

Every wait on the scheduler is bounded by the sweep's ``timeout``: a scheduler that
is not there, accepts and never answers, or has no workers ends the sweep with one
:class:`SweepError` within that time (a WARNING says so early when no worker has
connected). Dask's ``Client(address, timeout=...)`` alone waits forever on a
scheduler that accepts the connection and stays silent, so an address is first
asked for the scheduler's identity, under the timeout, before a client is made.
"""

from __future__ import annotations

import ast
import asyncio
import concurrent.futures
import inspect
import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mdf_loops.sweep.errors import SweepError

__all__ = [
    "DEFAULT_TIMEOUT",
    "connected",
    "local_cluster",
    "lost",
    "no_workers",
    "refuse_in_bootstrap",
    "wait_for_workers",
    "worker_threads",
]

log = logging.getLogger(__name__)

#: seconds a sweep waits for the scheduler to answer, and for a worker to connect
DEFAULT_TIMEOUT = 60.0
#: after this share of the timeout without workers, a WARNING says the sweep waits for them
_WARN_AFTER = 0.1

#: the exceptions Dask raises when the scheduler is gone or does not answer
#: (CommClosedError is an OSError; distributed's TimeoutError is the built-in one)
CONNECTION_ERRORS = (OSError, TimeoutError, asyncio.TimeoutError, concurrent.futures.TimeoutError)

_GUARD_ADVICE = (
    "a script that calls mdf_loops.sweep without client= must call it under "
    "`if __name__ == '__main__':` (docs/sweeps.md, 'Where it runs')"
)


def lost(address: str, what: str, timeout: float) -> SweepError:
    """The error of a sweep whose scheduler stopped answering."""
    return SweepError(
        f"the Dask scheduler at {address} {what} (waited up to {timeout:g} s, the sweep's "
        "timeout); the settings finished so far are kept (in the output file, if given); "
        "check the scheduler and run the sweep again to resume"
    )


@contextmanager
def connected(client: Any, timeout: float) -> Iterator[Any]:
    """A Dask client for the block: ``client`` itself, a client of the scheduler at the
    address ``client`` names (closed after), or of a local cluster started for the block."""
    if client is None:
        with local_cluster() as local:
            yield local
    elif isinstance(client, (str, os.PathLike)):
        with _client_at(os.fspath(client), timeout) as remote:
            yield remote
    elif callable(getattr(client, "submit", None)) and callable(getattr(client, "nthreads", None)):
        yield client
    else:
        raise SweepError(
            "client must be a dask.distributed.Client or a scheduler address such as "
            f"'tcp://host:8786', not {type(client).__name__}"
        )


@contextmanager
def _client_at(address: str, timeout: float) -> Iterator[Any]:
    from dask.distributed import Client

    _ask_identity(address, timeout)
    try:
        remote = Client(address, timeout=timeout, set_as_default=False)
    except CONNECTION_ERRORS as exc:
        raise lost(address, f"did not accept a client ({exc})", timeout) from None
    try:
        yield remote
    finally:
        close_quietly(remote, timeout)


def close_quietly(client: Any, timeout: float) -> None:
    """Close ``client`` within ``timeout``, whatever state its scheduler is in."""
    try:
        client.close(timeout=timeout)
    except Exception as exc:  # a scheduler already gone: nothing left to close
        log.debug("closing the Dask client: %s: %s", type(exc).__name__, exc)


def _ask_identity(address: str, timeout: float) -> None:
    """Raise :class:`SweepError` unless a Dask scheduler at ``address`` answers within
    ``timeout`` seconds (run in a thread of its own, so any event loop of the caller's
    is left alone)."""

    async def identity() -> Any:
        from distributed.comm import connect

        comm = await connect(address, timeout=timeout)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    def ask() -> Any:
        return asyncio.run(asyncio.wait_for(identity(), timeout))

    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mdf-loops-sweep")
    try:
        reply = pool.submit(ask).result(timeout + 5)
    except (ValueError, TypeError) as exc:  # not an address Dask can parse
        raise SweepError(
            f"client={address!r} is not a Dask scheduler address such as 'tcp://host:8786' ({exc})"
        ) from None
    except CONNECTION_ERRORS as exc:
        detail = f" ({exc})" if str(exc) else ""
        raise lost(address, f"did not answer{detail}", timeout) from None
    finally:
        pool.shutdown(wait=False)
    if not isinstance(reply, dict) or reply.get("type") != "Scheduler":
        raise SweepError(f"{address} answered, but not as a Dask scheduler ({reply!r:.80})")


def worker_threads(client: Any, timeout: float) -> int:
    """The threads of all workers connected to ``client``'s scheduler (asked within
    ``timeout``)."""
    try:
        return sum(client.nthreads(callback_timeout=timeout).values())
    except CONNECTION_ERRORS as exc:
        raise lost(_address(client), f"did not answer ({type(exc).__name__})", timeout) from None


def wait_for_workers(client: Any, timeout: float) -> int:
    """The worker threads of ``client``'s scheduler, once at least one worker is there.

    Logs a WARNING when none has connected after a tenth of ``timeout``, and raises
    :class:`SweepError` when none has at ``timeout``.
    """
    start = time.monotonic()
    warned = False
    while True:
        threads = worker_threads(client, timeout)
        waited = time.monotonic() - start
        if threads:
            return threads
        if waited >= timeout:
            raise no_workers(client, timeout)
        if not warned and waited >= _WARN_AFTER * timeout:
            log.warning(
                "the Dask scheduler at %s has no workers; the sweep waits up to %g s more "
                "for one to connect (start some with `dask worker %s`)",
                _address(client),
                timeout - waited,
                _address(client),
            )
            warned = True
        time.sleep(min(0.25, timeout / 20))


def no_workers(client: Any, timeout: float) -> SweepError:
    """The error of a sweep whose scheduler has had no workers for ``timeout`` seconds."""
    address = _address(client)
    return SweepError(
        f"the Dask scheduler at {address} has no workers: none connected within "
        f"{timeout:g} s (the sweep's timeout); the settings finished so far are kept (in "
        f"the output file, if given); start workers with `dask worker {address}`, or give "
        "the sweep a longer timeout"
    )


def _address(client: Any) -> str:
    scheduler = getattr(client, "scheduler", None)
    return str(getattr(scheduler, "address", None) or "of this client")


#: Dask settings of the local cluster: no statistical profiler on the workers and slower
#: health checks, whose CPU, spent by the clock, a sweep of short runs would otherwise pay
_LOCAL_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.gil.enabled": False,
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.admin.tick.interval": "200ms",
    "distributed.worker.memory.monitor-interval": "1s",
}


@contextmanager
def local_cluster(workers: int | None = None) -> Iterator[Any]:
    """A client of a local cluster on 127.0.0.1 (its dashboard too), closed after the
    block: ``workers`` (default: one per core) single-threaded worker processes or, when
    a script calls ``sweep`` outside ``if __name__ == "__main__":`` (a worker process
    would run the script again), one worker of that many threads in this process. Dask
    logs its own cluster's start and stop only at CRITICAL (``silence_logs``, restored
    when it closes); its workers run with :data:`_LOCAL_CONFIG`."""
    import dask
    from dask.distributed import Client, LocalCluster

    refuse_in_bootstrap()
    cores = workers or (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    )
    script = unguarded_script()
    if script is not None:
        log.info(
            "%s calls sweep outside `if __name__ == '__main__':`, so the local cluster runs "
            "its workers as threads of this process (put the call under that guard for "
            "worker processes: faster on the scheduler backend)",
            script,
        )
    try:
        with dask.config.set(_LOCAL_CONFIG):  # the workers take the config as they start
            cluster = LocalCluster(
                n_workers=1 if script else cores or 1,
                threads_per_worker=(cores or 1) if script else 1,
                processes=script is None,
                dashboard_address="127.0.0.1:0",
                silence_logs=logging.CRITICAL,
                # worker processes talk over TCP on loopback; threads in process, not at all
                **({"host": "127.0.0.1"} if script is None else {}),
            )
    except Exception as exc:
        raise SweepError(_start_failure(exc, processes=script is None)) from None
    try:
        with Client(cluster, set_as_default=False) as local:
            yield local
    finally:
        cluster.close()


def unguarded_script() -> str | None:
    """The main script's name when it is running a top-level statement other than an
    ``if __name__ == "__main__":`` block (so multiprocessing's spawn would run that
    statement again in each worker process); else None (the call is guarded, or comes
    from an interactive session, a notebook, or a package's ``__main__``)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    spec = getattr(main, "__spec__", None)
    if main is None or path is None or (spec is not None and spec.name.endswith("__main__")):
        return None
    frame = inspect.currentframe()
    while frame is not None and not (
        frame.f_globals is vars(main) and frame.f_code.co_name == "<module>"
    ):
        frame = frame.f_back
    if frame is None:
        return None  # the script has finished its top level (a callback, a thread)
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None
    line = frame.f_lineno
    for statement in tree.body:
        if statement.lineno <= line <= (statement.end_lineno or statement.lineno):
            return None if _is_main_guard(statement) else os.path.basename(path)
    return None


def _is_main_guard(statement: ast.stmt) -> bool:
    """Whether ``statement`` is ``if __name__ == "__main__":`` (either way round)."""
    if not isinstance(statement, ast.If) or not isinstance(statement.test, ast.Compare):
        return False
    test = statement.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s.id for s in sides if isinstance(s, ast.Name)]
    texts = [s.value for s in sides if isinstance(s, ast.Constant)]
    return names == ["__name__"] and texts == ["__main__"]


def _start_failure(exc: BaseException, processes: bool) -> str:
    """Why the local cluster did not start, and what to do."""
    script = getattr(sys.modules.get("__main__"), "__file__", None)
    cause = " ".join(str(exc).split()) or type(exc).__name__
    if script is None or not processes:
        return f"the local Dask cluster did not start ({cause})"
    return (
        f"the local Dask cluster's workers did not start ({cause}); each worker runs "
        f"{os.path.basename(script)} again as it starts, so {_GUARD_ADVICE}"
    )


def refuse_in_bootstrap() -> None:
    """A worker process of a local cluster (started by multiprocessing's spawn) runs the
    main script again, as the module ``__mp_main__``, before it starts; a ``sweep`` call
    at the script's top level then runs in it. Stop that process at once with one line
    (its parent then says the same, see :func:`_start_failure`). While the script runs
    again, ``__mp_main__`` is a module of its own; afterwards it is ``__main__`` itself."""
    again = sys.modules.get("__mp_main__")
    if again is not None and again is not sys.modules.get("__main__"):
        raise SystemExit(f"mdf-loops: {_GUARD_ADVICE}")


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__

"""Limits the kernel enforces: work done in a child process with hard CPU and memory caps.

A limit checked by Python code cannot stop one long C call (``numpy.einsum`` on
large matrices, a YAML parser, an allocation): signal handlers run only between
bytecodes. :func:`call_limited` forks, sets in the child a hard ``RLIMIT_CPU``
(the kernel kills it) and an ``RLIMIT_AS`` address-space cap (allocations past
it fail), runs the work there, and stops it after ``timeout`` seconds of wall
clock too. The result comes back through a pipe as data only, never as pickled
objects: text, a list of text, or numpy arrays in an ``.npz`` archive read with
``allow_pickle=False``. The parent writes nothing itself; the caller writes the
result once it has it.

:func:`run_limited` is :func:`mdf_loops.run` in such a child.
"""

from __future__ import annotations

import functools
import importlib
import io
import json
import math
import os
import pickle
import resource
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mdf_loops.errors import MdfLoopsError, ResourceLimitError

__all__ = ["ResourceLimitError", "call_limited", "run_limited", "parse_memory"]


def parse_memory(text: str) -> int:
    """Bytes from ``"800M"``, ``"2G"``, ``"1.5GB"`` or a plain number of bytes."""
    units = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    cleaned = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = cleaned[-1:] if cleaned[-1:] in units else ""
    try:
        value = float(cleaned[:-1] if unit else cleaned) * units[unit]
    except ValueError:
        raise ValueError(f"expected a size such as 800M or 2G, got {text!r}") from None
    if not math.isfinite(value) or value < 1:
        raise ValueError(f"expected a positive size, got {text!r}")
    return int(value)


def call_limited(
    work: Callable[[], Any],
    *,
    timeout: float | None = None,
    max_memory: int | None = None,
    what: str = "the work",
) -> Any:
    """``work()`` run in a child process under hard limits; its result or its error.

    ``work`` must return bytes, text, a list of text, or a mapping of names to numpy
    arrays, lists of arrays (sequences) and None (empty optionals). An error in
    the child is raised here as an :class:`~mdf_loops.errors.MdfLoopsError` of the
    same class when it is one, else as one naming the original type. The child is
    forked, or started afresh when JAX is loaded (its threads do not survive a fork);
    ``work`` must then be picklable, and ``timeout`` counts from when the child is ready.

    Raises:
        ResourceLimitError: the child used more than ``timeout`` seconds (CPU or
            wall clock) or more memory than ``max_memory`` bytes allow.
    """
    child = _start(work, timeout, max_memory, fresh="jax" in sys.modules)
    try:
        payload, timed_out = _read_until(child.fd, child.pid, timeout)
    finally:
        child.close()
    status = child.wait()
    if timed_out or _killed_by(status, signal.SIGXCPU, signal.SIGKILL) and timeout:
        raise ResourceLimitError(
            f"{what} took longer than {timeout:g} s (--timeout); nothing was written"
        )
    if payload[:1] == b"E":
        raise _error_from(json.loads(payload[1:].decode("utf-8")), max_memory, what)
    if not payload:
        raise ResourceLimitError(_crash_message(status, max_memory, what))
    return _decode(payload)


@dataclass
class _Child:
    """A running child: the pipe it writes to, its pid, how to close and wait for it."""

    fd: int
    pid: int
    close: Callable[[], None]
    wait: Callable[[], int]  # its wait status (os.waitpid's encoding)


def _start(work: Callable[[], Any], timeout, max_memory, fresh: bool) -> _Child:
    if fresh:
        return _start_fresh(work, timeout, max_memory)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_fd)
        _child(work, write_fd, timeout, max_memory)
    os.close(write_fd)
    return _Child(read_fd, pid, lambda: os.close(read_fd), lambda: os.waitpid(pid, 0)[1])


def _start_fresh(work: Callable[[], Any], timeout, max_memory) -> _Child:
    """A new Python (not a fork) that unpickles ``work`` from its stdin and runs it."""
    try:
        blob = pickle.dumps((work, timeout, max_memory))
    except Exception as exc:
        raise MdfLoopsError(
            f"with JAX loaded, limited work runs in a new process and must be picklable: {exc}"
        ) from None
    read_fd, write_fd = os.pipe()
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from mdf_loops.safety.sandbox import _serve; _serve()",
            str(write_fd),
        ],
        stdin=subprocess.PIPE,
        pass_fds=(write_fd,),
        env=environment,
    )
    os.close(write_fd)
    assert process.stdin is not None, "stdin is a pipe"
    try:
        process.stdin.write(blob)
        process.stdin.close()
    except BrokenPipeError:  # it ended before reading: its status says how
        pass

    def wait() -> int:
        code = process.wait()
        return -code if code < 0 else code << 8

    return _Child(read_fd, process.pid, lambda: os.close(read_fd), wait)


_SERVE = "from mdf_loops.safety.sandbox import _serve; _serve()"


def _serve() -> None:
    """The fresh child's entry: the work from stdin (pickled by our own parent), run."""
    work, timeout, max_memory = pickle.load(sys.stdin.buffer)
    _child(work, int(sys.argv[1]), timeout, max_memory)


def run_limited(
    model: Any,
    inputs: Mapping[str, Any] | None = None,
    *,
    timeout: float | None = None,
    max_memory: int | None = None,
    **run_arguments: Any,
) -> dict[str, Any]:
    """:func:`mdf_loops.run` in a child process with a hard CPU-time and memory cap.

    ``timeout`` (seconds of CPU time and of wall clock) covers loading, checking
    and running the model; ``max_memory`` (bytes) caps the child's address space.
    """
    return call_limited(
        functools.partial(_run, model, inputs, run_arguments),  # picklable, for a fresh child
        timeout=timeout,
        max_memory=max_memory,
        what=f"running {_name(model)}",
    )


def _run(model: Any, inputs: Mapping[str, Any] | None, run_arguments: dict) -> dict[str, Any]:
    from mdf_loops.run import run

    return run(model, inputs, **run_arguments)


# ---------------------------------------------------------------- the child


def _child(
    work: Callable[[], Any], pipe: Any, timeout: float | None, max_memory: int | None
) -> None:
    code = 0
    write_fd = pipe if isinstance(pipe, int) else pipe.fileno()
    try:
        signal.signal(signal.SIGXCPU, signal.SIG_DFL)  # the kernel's limit ends the child
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if timeout:  # CPU seconds from now (a fresh process has used some to start)
            usage = resource.getrusage(resource.RUSAGE_SELF)
            seconds = math.ceil(usage.ru_utime + usage.ru_stime) + max(1, math.ceil(timeout))
            resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
        if max_memory:
            resource.setrlimit(resource.RLIMIT_AS, (max_memory, max_memory))
        _write_all(write_fd, _READY)  # the wall clock starts now
        try:
            payload = _encode(work())
        except BaseException as exc:  # every error goes back as data
            payload = b"E" + json.dumps(
                {
                    "type": type(exc).__name__,
                    "module": type(exc).__module__,
                    "memory": _out_of_memory(exc),
                    "message": str(exc),
                }
            ).encode("utf-8")
        _write_all(write_fd, payload)
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _out_of_memory(exc: BaseException | None) -> bool:
    """Whether a MemoryError caused ``exc`` (an evaluation error may wrap one)."""
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, MemoryError):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view[: 1 << 20]) :]


def _read_until(fd: int, pid: int, timeout: float | None) -> tuple[bytes, bool]:
    """Everything the child writes after it is ready; (data, whether the wall-clock limit
    ended it). The clock starts when the child is ready (a fresh one has to start)."""
    chunks: list[bytes] = []
    deadline: float | None = time.monotonic() + _STARTING
    ready = False
    while True:
        wait = None if deadline is None else max(deadline - time.monotonic(), 0)
        readable, _, _ = select.select([fd], [], [], wait)
        if not readable:
            os.kill(pid, signal.SIGKILL)
            return b"", True
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks), False
        if not ready:
            ready, chunk = True, chunk[len(_READY) :]
            deadline = time.monotonic() + timeout if timeout else None
        chunks.append(chunk)


_READY = b"R"  # the child's first byte
_STARTING = 300.0  # seconds a child may take to start (import mdf_loops afresh)


def _killed_by(status: int, *signals: int) -> bool:
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) in signals


def _crash_message(status: int, max_memory: int | None, what: str) -> str:
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        cause = f"was killed by {name}"
    else:
        cause = f"ended with status {os.WEXITSTATUS(status)}"
    hint = (
        f"; it may have needed more memory than --max-memory ({max_memory} bytes)"
        if max_memory
        else ""
    )
    return f"{what} {cause} without a result{hint}; nothing was written"


def _error_from(record: dict, max_memory: int | None, what: str) -> MdfLoopsError:
    kind, message = record.get("type", ""), " ".join(str(record.get("message", "")).split())
    if record.get("memory") and max_memory:
        return ResourceLimitError(
            f"{what} needed more memory than --max-memory allows "
            f"({max_memory} bytes): {message or 'MemoryError'}; "
            "nothing was written"
        )
    known = _our_error_class(str(record.get("module", "")), kind)
    if known is not None:
        # built without __init__ (its own may take other arguments); the fields are set here
        error: Any = MdfLoopsError.__new__(known)
        Exception.__init__(error, message)
        error.reason, error.location, error.problems = message, "", []
        return error
    return MdfLoopsError(f"unexpected {kind}: {message}")


def _our_error_class(module: str, name: str) -> type | None:
    """The MdfLoopsError subclass ``module.name`` of mdf-loops, or None."""
    if module != "mdf_loops" and not module.startswith("mdf_loops."):
        return None
    try:
        found = getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None
    return found if isinstance(found, type) and issubclass(found, MdfLoopsError) else None


# ---------------------------------------------------------------- results as data


def _encode(value: Any) -> bytes:
    if isinstance(value, bytes):
        return b"B" + value
    if isinstance(value, str):
        return b"T" + value.encode("utf-8")
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return b"L" + json.dumps(value).encode("utf-8")
    if isinstance(value, Mapping):
        manifest: list[list[Any]] = []
        arrays: dict[str, np.ndarray] = {}
        for name, item in value.items():
            if item is None:
                manifest.append([name, "none", 0])
            elif isinstance(item, list):
                manifest.append([name, "sequence", len(item)])
                for element in item:
                    arrays[f"a{len(arrays)}"] = _plain_array(element)
            else:
                manifest.append([name, "array", 1])
                arrays[f"a{len(arrays)}"] = _plain_array(item)
        buffer = io.BytesIO()
        manifest_bytes = np.frombuffer(json.dumps(manifest).encode(), np.uint8)
        np.savez(buffer, manifest=manifest_bytes, **arrays)  # type: ignore[arg-type]  # numpy stub: **arrays could fill allow_pickle
        return b"A" + buffer.getvalue()
    raise TypeError(f"a limited child can return text or arrays, not {type(value).__name__}")


def _plain_array(value: Any) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype == object:
        raise TypeError("an output holds Python objects, which cannot leave the child process")
    return array


def _decode(payload: bytes) -> Any:
    kind, body = payload[:1], payload[1:]
    if kind == b"B":
        return body
    if kind == b"T":
        return body.decode("utf-8")
    if kind == b"L":
        return json.loads(body.decode("utf-8"))
    with np.load(io.BytesIO(body), allow_pickle=False) as archive:
        manifest = json.loads(archive["manifest"].tobytes().decode())
        arrays = iter(archive[f"a{k}"] for k in range(len(archive.files) - 1))
        result: dict[str, Any] = {}
        for name, kind_, count in manifest:
            if kind_ == "none":
                result[name] = None
            elif kind_ == "sequence":
                result[name] = [next(arrays) for _ in range(count)]
            else:
                result[name] = next(arrays)
        return result


def _name(model: Any) -> str:
    return (
        f"'{os.fspath(model)}'"
        if isinstance(model, (str, os.PathLike))
        else f"model '{getattr(model, 'id', '?')}'"
    )

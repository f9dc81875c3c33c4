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

import importlib
import io
import json
import math
import os
import resource
import select
import signal
import time
from collections.abc import Callable, Mapping
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
    """``work()`` run in a forked child under hard limits; its result or its error.

    ``work`` must return text, a list of text, or a mapping of names to numpy
    arrays, lists of arrays (sequences) and None (empty optionals). An error in
    the child is raised here as an :class:`~mdf_loops.errors.MdfLoopsError` of the
    same class when it is one, else as one naming the original type.

    Raises:
        ResourceLimitError: the child used more than ``timeout`` seconds (CPU or
            wall clock) or more memory than ``max_memory`` bytes allow.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_fd)
        _child(work, write_fd, timeout, max_memory)
    os.close(write_fd)
    try:
        payload, timed_out = _read_until(read_fd, pid, timeout)
    finally:
        os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    if timed_out or _killed_by(status, signal.SIGXCPU, signal.SIGKILL) and timeout:
        raise ResourceLimitError(
            f"{what} took longer than {timeout:g} s (--timeout); nothing was written"
        )
    if payload[:1] == b"E":
        raise _error_from(json.loads(payload[1:].decode("utf-8")), max_memory, what)
    if not payload:
        raise ResourceLimitError(_crash_message(status, max_memory, what))
    return _decode(payload)


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
    from mdf_loops.run import run

    return call_limited(
        lambda: run(model, inputs, **run_arguments),
        timeout=timeout,
        max_memory=max_memory,
        what=f"running {_name(model)}",
    )


# ---------------------------------------------------------------- the child


def _child(
    work: Callable[[], Any], write_fd: int, timeout: float | None, max_memory: int | None
) -> None:
    code = 0
    try:
        signal.signal(signal.SIGXCPU, signal.SIG_DFL)  # the kernel's limit ends the child
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if timeout:
            seconds = max(1, math.ceil(timeout))
            resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
        if max_memory:
            resource.setrlimit(resource.RLIMIT_AS, (max_memory, max_memory))
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
    """Everything the child writes; (data, whether the wall-clock limit ended it)."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout if timeout else None
    while True:
        wait = None if deadline is None else max(deadline - time.monotonic(), 0)
        ready, _, _ = select.select([fd], [], [], wait)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            return b"", True
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)


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

"""A memory cap that onnxruntime enforces for the sessions of untrusted models.

onnxruntime allocates an operator's output inside its kernel, before any check of
ours could look at the size (a ``Pad``, a broadcasting ``Mul`` or a
``ConstantOfShape`` can ask for gigabytes). Sessions compiled with limits (every
run without ``trusted``) therefore allocate from one arena of the process whose
size onnxruntime itself enforces: a request past it fails inside the kernel, before
the memory is taken, and :class:`~mdf_loops.backends.onnxruntime.compiled.CompiledModel`
reports it as a :class:`~mdf_loops.errors.SizeLimitError`.

The arena is made once per process, at the first untrusted session, with room for
:data:`VALUES` values of ``max_elements`` float64 elements (1.6 GB with the default
limits); onnxruntime cannot resize it. Sessions compiled later with a larger
``max_elements`` do without it (logged at INFO), bounded by the loop guard and, where
given, ``--max-memory``. Only sessions that ask for it use the arena: onnxruntime's
other users in the process are not affected. The arena keeps what it has taken (at most
its size) for reuse until the process ends.
"""

from __future__ import annotations

import logging
import threading

import onnxruntime as ort

from mdf_loops.ops.common import Limits

__all__ = ["VALUES", "arena_bytes", "use_capped_arena", "refused_by_cap"]

log = logging.getLogger(__name__)

#: how many of the largest values an untrusted session may hold at once
VALUES = 2

_LOCK = threading.Lock()
_ARENA: list[int] = []  # the arena's size in bytes, once it is made


def arena_bytes(limits: Limits) -> int:
    """The arena an untrusted session needs: :data:`VALUES` float64 values of the largest size."""
    return VALUES * limits.max_elements * 8


def use_capped_arena(options: ort.SessionOptions, limits: Limits) -> int | None:
    """Make ``options`` allocate from the process's capped arena (made on first use);
    the arena's size in bytes, or None when it cannot serve these limits."""
    with _LOCK:
        if not _ARENA:
            size = arena_bytes(limits)
            try:
                memory = ort.OrtMemoryInfo(
                    "Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT
                )
                ort.create_and_register_allocator(memory, ort.OrtArenaCfg(size, -1, -1, -1))
            except Exception as exc:  # an onnxruntime without shared allocators
                log.info("onnxruntime offers no capped arena (%s); sizes are not capped", exc)
                _ARENA.append(0)
            else:
                _ARENA.append(size)
        size = _ARENA[0]
    if size < arena_bytes(limits):
        log.info(
            "onnxruntime's arena for untrusted models was made for max_elements=%d; a session "
            "with max_elements=%d runs without it",
            size // (VALUES * 8),
            limits.max_elements,
        )
        return None
    options.add_session_config_entry("session.use_env_allocators", "1")
    return size


def refused_by_cap(error: Exception) -> bool:
    """Whether onnxruntime's ``error`` is its arena refusing a request past the cap.

    onnxruntime raises one exception type for every kernel failure; its arena's refusal
    is told apart by its text ("Available memory of N is smaller than requested bytes
    of M", onnxruntime's bfc_arena.cc). Any other text is reported as it is.
    """
    return "smaller than requested bytes" in str(error)

"""ONNX ``Loop`` semantics over a body callable.

Reference semantics (``M`` is the trip count, ``cond`` the condition; either may be
absent, ``None``)::

    values, outputs = list(initial_values), []
    keep_going = True if cond is None else bool(cond)
    i = 0
    while (M is None or i < M) and keep_going:
        cond_out, *values, *produced = body([i, keep_going] + values)
        keep_going = bool(cond_out)   # also without a cond input (see below)
        outputs.append(produced)
        i += 1
    return values + [stack(column) for column in zip(*outputs)]

The body's condition output always decides whether another iteration runs, also
when the node has no ``cond`` input: the ONNX operator table comments that case
as ``cond = ...; // ignored``, but onnxruntime stops on it and exporters
(onnxscript's ``break``, PyTorch's dynamo exporter) rely on that, so mdf-loops
does the same (docs/semantics.md). With neither ``M`` nor ``cond`` the loop ends
when the body's condition turns false, or at the iteration limit
(:class:`~mdf_loops.ops.common.Limits`). Loop-carried values may be tensors,
sequences or optionals and may change shape between iterations; each scan output
must keep one shape.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mdf_loops.errors import LoopError
from mdf_loops.ops.common import IterationGuard
from mdf_loops.ops.stacking import ScanOutputs

__all__ = ["loop", "body_outputs_error", "not_one_boolean"]

#: ``body(values, iteration)`` returns ``[cond, *carried, *scan_elements]``.
Body = Callable[[list, "int | None"], list]


def loop(
    body: Body,
    trip_count: Any,
    condition: Any,
    initial_values: Sequence[Any],
    guard: IterationGuard | None = None,
) -> list:
    guard = guard or IterationGuard()
    max_trips = None if trip_count is None else int(np.asarray(trip_count).reshape(()))
    keep_going = True if condition is None else _truth(condition, "cond input", None)
    if max_trips is not None:
        guard.expect_at_most(max_trips)
    values = list(initial_values)
    n = len(values)
    produced = ScanOutputs(capacity=None if max_trips is None else min(max_trips, 1 << 16))
    i = 0
    while (max_trips is None or i < max_trips) and keep_going:
        guard.step(i)
        outs = body([np.array(i, dtype=np.int64), np.array(keep_going, dtype=np.bool_)] + values, i)
        if len(outs) < 1 + n:
            raise body_outputs_error(len(outs), n)
        keep_going = _truth(outs[0], "body condition output", i)
        values = list(outs[1 : 1 + n])
        produced.append(outs[1 + n :], i)
        i += 1

    if i == 0:
        return values + _empty_scan_outputs(body, values)
    return values + produced.arrays()


def _empty_scan_outputs(body: Body, values: list) -> list:
    """Scan outputs of a loop that ran zero times: length 0, element shape from a probe."""
    try:
        probe = body([np.array(0, dtype=np.int64), np.array(True)] + values, None)
    except Exception:  # the body cannot run on the initial values: shape unknown
        return []
    return [np.zeros((0,) + np.shape(y), np.asarray(y).dtype) for y in probe[1 + len(values) :]]


def _truth(value: Any, what: str, iteration: int | None) -> bool:
    array = np.asarray(value)
    if array.size != 1:
        raise not_one_boolean(what, f"shape {array.shape}", iteration)
    return bool(array.reshape(()))


def not_one_boolean(
    what: str, found: str, iteration: int | None, node: str | None = None
) -> LoopError:
    """The error for a condition (``what``) that is not one boolean (``found``: its
    shape or type), at ``iteration`` (None: before the first), of ``node`` (how the
    backend names the loop or branch, when the error would not say it otherwise)."""
    at = "" if iteration is None else f" at iteration {iteration}"
    prefix = "" if node is None else f"{node}: "
    return LoopError(f"{prefix}{what} must hold one boolean, got {found}{at}")


def body_outputs_error(n_outputs: int, n_carried: int, node: str | None = None) -> LoopError:
    """The error for a Loop body that returned too few outputs for its carried values."""
    prefix = "" if node is None else f"{node}: "
    return LoopError(
        f"{prefix}body returned {n_outputs} outputs; a Loop body returns the condition, "
        f"then the {n_carried} loop-carried values, then scan outputs"
    )

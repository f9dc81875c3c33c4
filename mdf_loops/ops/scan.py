"""ONNX ``Scan`` semantics over a body callable (opset 9 and later, and opset 8's batch form).

Reference semantics, with ``body(values, t) -> values`` and forward directions::

    states = list(initial_states)
    outputs = [[] for _ in range(num_scan_outputs)]
    for t in range(sequence_length):
        elements = [take(x, t, axis) for x, axis in zip(scan_inputs, input_axes)]
        *states, *produced = body(states + elements, t)
        for acc, y in zip(outputs, produced):
            acc.append(y)
    return states + [stack(acc, axis) for acc, axis in zip(outputs, output_axes)]

A backward input is read from its end; a backward output is stacked in reverse.
States and scan-output elements must keep one shape over all iterations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mdf_loops.errors import LoopError
from mdf_loops.ops.common import IterationGuard, check_same_type, normalize_axis
from mdf_loops.ops.stacking import ScanOutputs

#: ``body(values, iteration)`` returns the body's outputs; ``iteration`` is None for
#: the probe run that learns output shapes of a zero-length scan.
Body = Callable[[list, "int | None"], list]

__all__ = ["ScanAttributes", "scan", "scan_batched", "scan_per_entry", "split_inputs"]


@dataclass(frozen=True)
class ScanAttributes:
    """The attributes of a Scan node, defaults filled in."""

    num_scan_inputs: int
    scan_input_axes: tuple[int, ...] | None = None
    scan_input_directions: tuple[int, ...] | None = None
    scan_output_axes: tuple[int, ...] | None = None
    scan_output_directions: tuple[int, ...] | None = None

    def input_axis(self, k: int) -> int:
        return self.scan_input_axes[k] if self.scan_input_axes else 0

    def input_backward(self, k: int) -> bool:
        return bool(self.scan_input_directions[k]) if self.scan_input_directions else False

    def output_axis(self, k: int) -> int:
        return self.scan_output_axes[k] if self.scan_output_axes else 0

    def output_backward(self, k: int) -> bool:
        return bool(self.scan_output_directions[k]) if self.scan_output_directions else False


def scan(
    body: Body,
    inputs: Sequence[np.ndarray],
    attributes: ScanAttributes,
    guard: IterationGuard | None = None,
) -> list:
    """Run an opset-9+ Scan: ``inputs`` are the initial states then the scan inputs."""
    guard = guard or IterationGuard()
    m = attributes.num_scan_inputs
    states, scan_inputs = split_inputs(inputs, attributes)
    n = len(states)
    scan_inputs = [np.asarray(x) for x in scan_inputs]
    _check_list_length("scan_input_axes", attributes.scan_input_axes, m)
    _check_list_length("scan_input_directions", attributes.scan_input_directions, m)

    axes, length = _scan_axes(scan_inputs, attributes)
    guard.check_planned(length)

    def elements_at(t: int) -> list:
        return [
            np.take(x, length - 1 - t if attributes.input_backward(k) else t, axis=axes[k])
            for k, x in enumerate(scan_inputs)
        ]

    produced = ScanOutputs(capacity=length)
    for t in range(length):
        guard.step(t)
        outs = body(states + elements_at(t), t)
        _check_body_arity(outs, n)
        for i in range(n):
            check_same_type(states[i], outs[i], f"state {i}", t)
        states = list(outs[:n])
        if t == 0:
            _check_list_length("scan_output_axes", attributes.scan_output_axes, len(outs) - n)
            _check_list_length(
                "scan_output_directions", attributes.scan_output_directions, len(outs) - n
            )
        produced.append(outs[n:], t)

    if length == 0:  # zero iterations: learn the element shapes from one probe run
        return states + _empty_outputs(body, states, scan_inputs, axes, attributes)

    results = []
    for j, stacked in enumerate(produced.arrays()):
        results.append(_place(stacked, attributes.output_axis(j), attributes.output_backward(j), j))
    return states + results


def split_inputs(inputs: Sequence[Any], attributes: ScanAttributes) -> tuple[list, list]:
    """A Scan node's inputs as (initial states, scan inputs); a LoopError unless there
    is at least one scan input and no more than the inputs."""
    m = attributes.num_scan_inputs
    if m < 1 or m > len(inputs):
        raise LoopError(
            f"num_scan_inputs is {m} but the node has {len(inputs)} inputs "
            "(initial states then scan inputs; at least one scan input)"
        )
    return list(inputs[: len(inputs) - m]), list(inputs[len(inputs) - m :])


def scan_batched(
    body: Body,
    sequence_lens: np.ndarray | None,
    inputs: Sequence[np.ndarray],
    attributes: ScanAttributes,
    guard: IterationGuard | None = None,
) -> list:
    """Run an opset-8 Scan (:func:`scan_per_entry`) on numpy arrays."""
    guard = guard or IterationGuard()
    inputs = [np.asarray(x) for x in inputs]
    if not inputs:
        raise LoopError("Scan has no inputs")
    return scan_per_entry(
        lambda items, shifted: scan(body, items, shifted, guard),
        None if sequence_lens is None else np.asarray(sequence_lens),
        inputs,
        attributes,
        np.stack,
        _zero_padded,
    )


def scan_per_entry(
    scan_one: Callable[[list, ScanAttributes], list],
    sequence_lens: Any,
    inputs: Sequence[Any],
    attributes: ScanAttributes,
    stack: Callable[[list], Any],
    pad: Callable[[Any, int], Any],
) -> list:
    """Opset 8's Scan over arrays of any kind: every input has a leading batch axis.

    Batch entry ``b`` is an opset-9 scan (``scan_one(inputs, attributes)``) of its
    first ``sequence_lens[b]`` steps (all of them when ``sequence_lens`` is None); each
    state is stacked (``stack``) over the entries, and each scan output too, the
    shorter ones first padded with zeros to the longest (``pad(output, length)``).
    The backends that run Scan on their own arrays (torch) give their own three."""
    n = len(inputs) - attributes.num_scan_inputs
    shifted = ScanAttributes(
        attributes.num_scan_inputs,
        attributes.scan_input_axes,
        attributes.scan_input_directions,
        None,
        attributes.scan_output_directions,
    )
    per_entry = []
    for b in range(inputs[0].shape[0]):
        items = [x[b] for x in inputs]
        if sequence_lens is not None:
            steps = int(sequence_lens.reshape(-1)[b])
            items = items[:n] + [x[:steps] for x in items[n:]]
        per_entry.append(scan_one(items, shifted))
    results = []
    for j in range(len(per_entry[0])):
        parts = [r[j] for r in per_entry]
        if j >= n:
            longest = max(p.shape[0] for p in parts)
            parts = [pad(p, longest) for p in parts]
        results.append(stack(parts))
    return results


def _zero_padded(x: np.ndarray, length: int) -> np.ndarray:
    return np.concatenate([x, np.zeros((length - x.shape[0],) + x.shape[1:], x.dtype)])


def _scan_axes(scan_inputs: list[np.ndarray], attributes: ScanAttributes) -> tuple[list, int]:
    """Each scan input's axis (normalized), and the one length they share along it."""
    axes = []
    for k, x in enumerate(scan_inputs):
        axes.append(
            normalize_axis(
                attributes.input_axis(k), x.ndim, f"scan_input_axes[{k}]", f"scan input {k}"
            )
        )
    lengths = [x.shape[a] for x, a in zip(scan_inputs, axes, strict=True)]
    if len(set(lengths)) > 1:
        raise LoopError(
            "scan inputs differ in length along their scan axes: "
            + ", ".join(f"input {k}: {L}" for k, L in enumerate(lengths))
        )
    return axes, lengths[0]


def _empty_outputs(
    body: Body,
    states: list,
    scan_inputs: list[np.ndarray],
    axes: list[int],
    attributes: ScanAttributes,
) -> list:
    """The scan outputs of zero iterations: empty, shaped by one probe run of the body."""
    n = len(states)
    probe = body(
        states
        + [
            np.zeros(_without_axis(x.shape, a), x.dtype)
            for x, a in zip(scan_inputs, axes, strict=True)
        ],
        None,
    )
    _check_body_arity(probe, n)
    empties = [np.zeros((0,) + np.shape(y), np.asarray(y).dtype) for y in probe[n:]]
    _check_list_length("scan_output_axes", attributes.scan_output_axes, len(empties))
    return [_place(e, attributes.output_axis(j), False, j) for j, e in enumerate(empties)]


def _without_axis(shape: tuple, axis: int) -> tuple:
    return shape[:axis] + shape[axis + 1 :]


def _place(stacked: np.ndarray, axis: int, backward: bool, j: int) -> np.ndarray:
    if backward:
        stacked = stacked[::-1]
    axis = normalize_axis(axis, stacked.ndim, f"scan_output_axes[{j}]", f"scan output {j}")
    return np.ascontiguousarray(np.moveaxis(stacked, 0, axis)) if axis else stacked


def _check_body_arity(outs: Sequence, n: int) -> None:
    if len(outs) < n:
        raise LoopError(f"body returned {len(outs)} outputs but the scan carries {n} states")


def _check_list_length(name: str, values: Sequence | None, expected: int) -> None:
    if values is not None and len(values) != expected:
        raise LoopError(f"{name} has {len(values)} entries, expected {expected}")

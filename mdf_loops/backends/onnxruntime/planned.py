"""The work limits a compiled run checks before onnxruntime starts.

A ``Scan`` runs once per element of its scan inputs, so where its first scan
input is an input of the model, its number of iterations is the length of the
value fed for that input: a run over ``max_iterations`` is refused at once, with
the scheduler's message, instead of after onnxruntime has worked up to the
limit (:mod:`mdf_loops.backends.onnxruntime.guard` still stops the others).

Only Scans that run once per run are planned: those of the top graph and of
``If`` branches (also the branches :mod:`~mdf_loops.onnx.zero_steps`
wraps a Scan in), never those inside a loop body.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from mdf_loops.errors import location_frame
from mdf_loops.model.signatures import ScanSignature
from mdf_loops.ops.common import IterationGuard, Limits

__all__ = ["PlannedScan", "planned_scans", "check_planned"]


@dataclass(frozen=True)
class PlannedScan:
    """A Scan whose length is the length of a model input along ``axis``."""

    label: str  # the MDF node it came from (else the ONNX node name)
    input_name: str
    axis: int


def planned_scans(graph: onnx.GraphProto, labels: Mapping[str, str]) -> list[PlannedScan]:
    """The Scans of ``graph`` (and of its If branches) that scan one of its inputs.

    ``labels`` (the exporter's: ONNX node name -> MDF node id) names the Scans of the
    model; the copies a rewrite adds (zero_steps' one-step probe, which runs only
    when the sequence is empty) have no label and are not planned.
    """
    inputs = {value.name: value for value in graph.input}
    found: list[PlannedScan] = []
    stack = list(graph.node)
    while stack:
        node = stack.pop()
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type == "If":
            stack.extend(n for a in node.attribute if a.type == a.GRAPH for n in a.g.node)
        elif node.op_type == "Scan" and node.name in labels:
            signature = ScanSignature.from_onnx(node)
            first = node.input[signature.node_scan_inputs][0]
            if first in inputs:
                axis = _first_axis(node) if not signature.sequence_lens else 1
                found.append(PlannedScan(labels[node.name], first, axis))
    return found


def check_planned(scans: list[PlannedScan], feed: Mapping[str, Any], limits: Limits) -> None:
    """Raise :class:`~mdf_loops.errors.IterationLimitError` for a Scan fed more elements than
    ``limits.max_iterations`` (the scheduler's message, naming the node)."""
    for scan in scans:
        value = feed.get(scan.input_name)
        shape = np.shape(value) if isinstance(value, np.ndarray) else None
        if not shape or not -len(shape) <= scan.axis < len(shape):
            continue  # onnxruntime reports a value of the wrong rank
        with location_frame(f"node '{scan.label}'"):
            guard = IterationGuard(max_iterations=limits.max_iterations, kind="Scan")
            guard.check_planned(int(shape[scan.axis]))


def _first_axis(node: onnx.NodeProto) -> int:
    for attribute in node.attribute:
        if attribute.name == "scan_input_axes" and attribute.ints:
            return int(attribute.ints[0])
    return 0

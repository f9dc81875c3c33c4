"""Evaluate one call of onnx::Scan, onnx::Loop or onnx::If from an MDF node.

Turns the node's evaluated inputs and attribute parameters into the arguments of
:mod:`mdf_loops.ops`, with each body run by a :class:`~mdf_loops.body.BodyRunner`
(built once per engine node and reused across iterations and evaluations).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from . import ops
from .body import BodyRunner
from .errors import LoopError, ModelError, pop_frame, push_frame
from .representation import BODY_ATTRIBUTES, body_graph

__all__ = ["run_control_flow"]


def run_control_flow(
    op_type: str,
    opset: int,
    inputs: Sequence[Any],
    attributes: Mapping[str, Any],
    scope: Mapping[str, Any],
    owner: Any,
) -> list:
    """Run a control-flow operator; ``scope`` holds the node's ports and parameters.

    ``owner`` is the engine node being evaluated (it caches the body runners), or
    None when called outside an engine.
    """
    owner_name = f"node '{owner.node.id}'" if owner is not None else "control-flow node"
    bodies = {attr: _runner(owner, owner_name, attr, attributes) for attr in BODY_ATTRIBUTES[op_type]}
    if op_type == "If":
        if not inputs or inputs[0] is None:
            raise LoopError("If needs its 'cond' input")
        return ops.if_(
            inputs[0],
            _as_body(bodies["then_branch"], scope, "then_branch"),
            _as_body(bodies["else_branch"], scope, "else_branch"),
        )
    body = bodies["body"]
    if op_type == "Loop":
        trip_count = inputs[0] if len(inputs) > 0 else None
        condition = inputs[1] if len(inputs) > 1 else None
        carried = list(inputs[2:])
        if body.num_inputs != 2 + len(carried):
            raise LoopError(
                f"Loop body '{body.graph.id}' has {body.num_inputs} formal inputs; it needs "
                f"2 + {len(carried)} (iteration number, condition, loop-carried values)"
            )
        return ops.loop(_as_body(body, scope, "iteration"), trip_count, condition, carried)
    # Scan
    scan_attributes = ops.ScanAttributes(
        num_scan_inputs=_int(attributes, "num_scan_inputs"),
        scan_input_axes=_ints(attributes, "scan_input_axes"),
        # opset 8 names the input directions 'directions'
        scan_input_directions=_ints(attributes, "scan_input_directions")
        or _ints(attributes, "directions"),
        scan_output_axes=_ints(attributes, "scan_output_axes"),
        scan_output_directions=_ints(attributes, "scan_output_directions"),
    )
    if opset < 9:
        sequence_lens, values = (inputs[0] if inputs else None), list(inputs[1:])
    else:
        sequence_lens, values = None, list(inputs)
    if body.num_inputs != len(values):
        raise LoopError(
            f"Scan body '{body.graph.id}' has {body.num_inputs} formal inputs but the node "
            f"passes {len(values)} (states then scan inputs)"
        )
    step = _as_body(body, scope, "iteration")
    if opset < 9:
        return ops.scan_batched(step, sequence_lens, values, scan_attributes)
    return ops.scan(step, values, scan_attributes)


def _runner(owner: Any, owner_name: str, attr: str, attributes: Mapping[str, Any]) -> BodyRunner:
    if attr not in attributes or attributes[attr] is None:
        raise ModelError(f"{owner_name}: missing body parameter '{attr}'")
    value = attributes[attr]
    cache = getattr(owner, "_mdf_loops_bodies", None) if owner is not None else None
    if cache is None:
        cache = {}
        if owner is not None:
            owner._mdf_loops_bodies = cache
    cached = cache.get(attr)
    if cached is not None and cached[0] is value:
        return cached[1]
    runner = BodyRunner(body_graph(value, f"{owner_name} parameter '{attr}'"),
                        f"{owner_name} parameter '{attr}'")
    cache[attr] = (value, runner)
    return runner


def _as_body(runner: BodyRunner, scope: Mapping[str, Any], label: str) -> Callable:
    """Adapt a runner to the ``body(values, iteration)`` protocol of :mod:`ops`."""
    outer = {}
    for name in runner.signature.outer_scope_inputs:
        if name not in scope:
            raise ModelError(
                f"{runner.owner}: body '{runner.graph.id}' reads '{name}' from the enclosing "
                f"scope, but the loop node has no input port or parameter '{name}'"
            )
        outer[name] = scope[name]

    def body(values: list, iteration: int | None) -> list:
        if label != "iteration":
            frame = label
        elif iteration is None:
            frame = "shape probe of a zero-iteration loop"
        else:
            frame = f"iteration {iteration}"
        token = push_frame(frame)
        try:
            return runner(values, outer)
        finally:
            pop_frame(token)

    return body


def _int(attributes: Mapping[str, Any], name: str) -> int:
    if attributes.get(name) is None:
        raise ModelError(f"Scan needs the attribute parameter '{name}'")
    return int(np.asarray(attributes[name]).reshape(()))


def _ints(attributes: Mapping[str, Any], name: str) -> tuple[int, ...] | None:
    value = attributes.get(name)
    if value is None:
        return None
    return tuple(int(v) for v in np.asarray(value).reshape(-1))

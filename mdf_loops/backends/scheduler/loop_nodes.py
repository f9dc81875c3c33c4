"""Evaluate one call of onnx::Scan, onnx::Loop or onnx::If from an MDF node.

Turns the node's evaluated inputs and attribute parameters into the arguments of
:mod:`mdf_loops.ops`, with each body run by a :class:`~mdf_loops.backends.scheduler.body.BodyRunner`
(built once per engine node and reused across iterations and evaluations).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from mdf_loops import ops
from mdf_loops.backends.scheduler.body import BodyRunner
from mdf_loops.errors import LoopError, ModelError, pop_frame, push_frame
from mdf_loops.model.convention import BODY_ATTRIBUTES, body_graph
from mdf_loops.model.signatures import IfSignature, LoopSignature, ScanSignature
from mdf_loops.ops.common import (
    IterationGuard,
    check_elements,
    current_limits,
    element_count,
    loop_scope,
)

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
    with loop_scope(op_type):  # limits: nesting depth, and the run's iteration budget
        return _run(op_type, opset, inputs, attributes, scope, owner, owner_name)


def _run(op_type, opset, inputs, attributes, scope, owner, owner_name) -> list:
    bodies = {
        attr: _runner(owner, owner_name, attr, attributes) for attr in BODY_ATTRIBUTES[op_type]
    }
    guard = IterationGuard(kind=op_type)
    if op_type == "If":
        if not inputs or inputs[IfSignature.CONDITION] is None:
            raise LoopError("If needs its 'cond' input")
        return ops.if_(
            inputs[IfSignature.CONDITION],
            _as_body(bodies["then_branch"], scope, "then_branch"),
            _as_body(bodies["else_branch"], scope, "else_branch"),
        )
    body = bodies["body"]
    if op_type == "Loop":
        values = list(inputs) + [None] * (2 - len(inputs))
        loop = LoopSignature(num_carried=len(values) - 2, num_scan_outputs=0)
        trip_count, condition = values[loop.TRIP_COUNT], values[loop.CONDITION]
        carried = values[loop.node_carried]
        if body.num_inputs != loop.num_body_inputs:
            raise LoopError(
                f"Loop body '{body.graph.id}' has {body.num_inputs} formal inputs; it needs "
                f"2 + {len(carried)} (iteration number, condition, loop-carried values)"
            )
        # a body returning its condition input unchanged runs exactly M times: refuse now
        if trip_count is not None and condition is None and _passes_condition_through(body):
            guard.check_planned(int(np.asarray(trip_count).reshape(())))
        step = _as_body(body, scope, "iteration", first_scan_output=loop.body_scan_outputs.start)
        return ops.loop(_with_declared_probe(step, body), trip_count, condition, carried, guard)
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
    legacy = opset < 9  # opset 8: the first input is sequence_lens
    values = list(inputs[1:] if legacy else inputs)
    if body.num_inputs != len(values):
        raise LoopError(
            f"Scan body '{body.graph.id}' has {body.num_inputs} formal inputs but the node "
            f"passes {len(values)} (states then scan inputs)"
        )
    # the count of scan outputs does not matter here; ops.scan checks num_scan_inputs
    scan = ScanSignature(
        len(values) - scan_attributes.num_scan_inputs, scan_attributes.num_scan_inputs, 0, legacy
    )
    step = _as_body(body, scope, "iteration", first_scan_output=scan.body_scan_outputs.start)
    if legacy:
        sequence_lens = inputs[0] if inputs else None
        return ops.scan_batched(step, sequence_lens, values, scan_attributes, guard)
    return ops.scan(step, values, scan_attributes, guard)


def _passes_condition_through(runner: BodyRunner) -> bool:
    """Whether a Loop body returns its condition input unchanged (an Identity, or the
    port itself): only then does a trip count say how many iterations will run."""
    signature = runner.signature
    if len(signature.formal_inputs) < 2 or not signature.formal_outputs:
        return False
    cond_in = signature.formal_inputs[LoopSignature.BODY_CONDITION]
    node_id, port_id = signature.formal_outputs[LoopSignature.CONDITION_OUTPUT]
    node = next(n for n in runner.graph.nodes if n.id == node_id)
    if all(p.id != cond_in for p in node.input_ports):
        return False
    port = next((p for p in node.output_ports if p.id == port_id), None)
    value = port.value.strip() if port is not None and isinstance(port.value, str) else None
    if value == cond_in:
        return True
    identity = next((p for p in node.parameters if p.id == value), None)
    return (
        identity is not None
        and identity.function == "onnx::Identity"
        and (identity.args or {}).get("input") == cond_in
    )


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
    runner = BodyRunner(
        body_graph(value, f"{owner_name} parameter '{attr}'"), f"{owner_name} parameter '{attr}'"
    )
    cache[attr] = (value, runner)
    return runner


def _as_body(
    runner: BodyRunner, scope: Mapping[str, Any], label: str, first_scan_output: int | None = None
) -> Callable:
    """Adapt a runner to the ``body(values, iteration)`` protocol of :mod:`ops`.

    Each body output is checked against ``max_elements``; outputs from index
    ``first_scan_output`` on are scan outputs, checked as stacked over the
    iterations so far.
    """
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
            outs = runner(values, outer)
        finally:
            pop_frame(token)
        _check_output_sizes(runner, outs, first_scan_output, stacked, iteration)
        return outs

    stacked: list[int] = []  # elements of each scan output over the iterations so far
    return body


def _check_output_sizes(
    runner: BodyRunner,
    outs: list,
    first_scan_output: int | None,
    stacked: list[int],
    iteration: int | None,
) -> None:
    first = len(outs) if first_scan_output is None else first_scan_output
    limit = current_limits().max_elements  # the messages are written only when one is over it
    for j, value in enumerate(outs):
        count = element_count(value)
        if j < first or iteration is None:  # carried value, branch output or shape probe
            if count > limit:
                check_elements(count, f"{_output_name(runner, j)}", iteration)
            continue
        k = j - first
        if k == len(stacked):
            stacked.append(0)
        stacked[k] += count
        if stacked[k] > limit:
            check_elements(
                stacked[k], f"scan output {k} ({_output_name(runner, j)}, stacked)", iteration
            )


def _output_name(runner: BodyRunner, j: int) -> str:
    outputs = runner.signature.formal_outputs
    if j < len(outputs):
        node, port = outputs[j]
        return f"body output {j} '{node}.{port}'"
    return f"body output {j}"


def _int(attributes: Mapping[str, Any], name: str) -> int:
    if attributes.get(name) is None:
        raise ModelError(f"Scan needs the attribute parameter '{name}'")
    return int(np.asarray(attributes[name]).reshape(()))


def _ints(attributes: Mapping[str, Any], name: str) -> tuple[int, ...] | None:
    value = attributes.get(name)
    if value is None:
        return None
    return tuple(int(v) for v in np.asarray(value).reshape(-1))


def _with_declared_probe(step: Callable, runner: BodyRunner) -> Callable:
    """``step``, except that a failing shape probe of a zero-iteration Loop (e.g. a body
    reading row ``i`` of an empty sequence) answers with zeros of the declared output types."""

    def body(values: list, iteration: int | None) -> list:
        if iteration is not None:
            return step(values, iteration)
        try:
            return step(values, iteration)
        except Exception:  # the same failures ops.loop's probe tolerates
            declared = _declared_outputs(runner)
            if declared is None:
                raise
            return declared

    return body


def _declared_outputs(runner: BodyRunner) -> list | None:
    """Zeros of each formal output's declared ONNX tensor type (unknown sizes as 0), or None."""
    nodes = {n.id: n for n in runner.graph.nodes}
    arrays = []
    for node_id, port_id in runner.signature.formal_outputs:
        port = next(p for p in nodes[node_id].output_ports if p.id == port_id)
        tensor = ((port.metadata or {}).get("onnx_type") or {}).get("tensorType") or {}
        if "elemType" not in tensor:
            return None
        dtype = onnx.helper.tensor_dtype_to_np_dtype(int(tensor["elemType"]))
        dims = [int(d.get("dimValue", 0)) for d in (tensor.get("shape") or {}).get("dim", [])]
        arrays.append(np.zeros(dims, dtype))
    return arrays

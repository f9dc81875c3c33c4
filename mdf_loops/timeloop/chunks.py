"""A long time loop on onnxruntime run in chunks of steps, its state handed from one to the next.

onnxruntime runs an ``onnx::Loop`` as one call, with no word until it returns. For a
long simulation, :func:`run_in_chunks` runs a variant of the time-loop model (a new
model; the given one is not changed) whose initial carried values and first step number
are inputs, and whose final carried values are outputs::

    state, offset = initial values, 0
    while offset < steps:
        traces, state = loop(steps=min(CHUNK, steps - offset), state, offset)
        offset += CHUNK          # progress, limits and non-finite values between calls

In the variant, each body node that reads the Loop's iteration number reads it plus
the offset (an int64 addition: the same step numbers, so the same time, first-step
flag and input-series elements), so the chunks compute what the one call does. Only
loops whose condition cannot change are run so (no termination condition, no
``until``): the Loop does not hand out its last condition.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from modeci_mdf.mdf import Graph, InputPort, Model, Node, OutputPort, Parameter

from mdf_loops.model.convention import (
    body_graph,
    body_signature,
    port_type,
    set_body_signature,
    wrap_body,
)
from mdf_loops.timeloop.spec import LOOP_FUNCTION, LOOP_NODE, TimeLoopSpec
from mdf_loops.timeloop.watch import SimulationWatch

__all__ = ["CHUNK", "chunked_variant", "run_in_chunks"]

#: steps of one onnxruntime call; a loop of at most this many steps runs as one call
CHUNK = 1 << 15

_ITERATION, _LOCAL, _OFFSET = "iteration", "iteration__local", "iteration__offset"


def _loop_node(model: Model) -> Node:
    return next(n for n in model.graphs[0].nodes if n.id == LOOP_NODE)


def _initial_names(loop: Node) -> list[str]:
    call = next(p for p in loop.parameters if p.id == LOOP_FUNCTION)
    return [n.strip() for n in str(call.args["v_initial"]).strip("[]").split(",") if n.strip()]


def chunked_variant(model: Model) -> Model | None:
    """The model with its state as inputs and outputs (see the module), or None when its
    loop's condition can change (a termination condition or ``until``) or its body is
    not laid out as :func:`~mdf_loops.to_time_loop` writes it."""
    loop = _loop_node(model)
    params = {p.id: p for p in loop.parameters}
    body = body_graph(params["body"].value)
    signature = body_signature(body)
    if signature.formal_inputs[:1] != (_ITERATION,) or not signature.formal_outputs:
        return None
    control, cond_out = signature.formal_outputs[0]
    node = next(n for n in body.nodes if n.id == control)
    port = next(p for p in node.output_ports if p.id == cond_out)
    if not (isinstance(port.value, str) and port.value.strip() == "cond_in"):
        return None
    if any(p.id in (_LOCAL, _OFFSET) for n in body.nodes for p in n.input_ports):
        return None
    if params.get("continue0") is None or params["continue0"].value is not True:
        return None
    variant = copy.deepcopy(model)
    loop = _loop_node(variant)
    initial = _initial_names(loop)
    for name in initial:  # the initial values: ports with the same ids, defaults as before
        param = next(p for p in loop.parameters if p.id == name)
        loop.parameters.remove(param)
        value = np.asarray(param.value)
        loop.input_ports.append(
            InputPort(
                id=name,
                default_value=param.value,
                metadata=port_type(*value.shape, dtype=str(value.dtype)),
            )
        )
    loop.input_ports.append(
        InputPort(id=_OFFSET, default_value=0, metadata=port_type(dtype="int64"))
    )
    for k, name in enumerate(initial):  # the final carried values: outputs
        value = np.asarray(next(p for p in loop.input_ports if p.id == name).default_value)
        loop.output_ports.append(
            OutputPort(
                id=f"final__{k}",
                value=f"{LOOP_FUNCTION}[{k}]",
                metadata=port_type(*value.shape, dtype=str(value.dtype)),
            )
        )
    body_param = next(p for p in loop.parameters if p.id == "body")
    body_param.value = wrap_body(_offset_body(body_graph(body_param.value)))
    return variant


def _offset_body(body: Graph) -> Graph:
    """The body with every read of the iteration number shifted by the outer-scope offset."""
    signature = body_signature(body)
    for node in body.nodes:
        port = next((p for p in node.input_ports if p.id == _ITERATION), None)
        if port is None:
            continue
        port.id = _LOCAL
        node.input_ports.append(InputPort(id=_OFFSET))
        node.parameters.insert(0, Parameter(id=_ITERATION, value=f"{_LOCAL} + {_OFFSET}"))
    set_body_signature(
        body,
        [_LOCAL, *signature.formal_inputs[1:]],
        [f"{n}.{p}" for n, p in signature.formal_outputs],
        [*signature.outer_scope_inputs, _OFFSET],
    )
    return body


def run_in_chunks(
    variant: Model,
    inputs: dict,
    steps: int,
    spec: TimeLoopSpec,
    watch: SimulationWatch,
    run_chunk: Callable[[dict[str, Any]], Mapping[str, Any]],
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``time`` and the recorded values of ``steps`` steps of :func:`chunked_variant`'s
    model, :data:`CHUNK` steps a call of ``run_chunk(inputs) -> outputs`` (the variant
    run on onnxruntime); ``watch`` sees each chunk."""
    loop = _loop_node(variant)
    names = _initial_names(loop)
    state: dict[str, Any] = {
        n: next(p for p in loop.input_ports if p.id == n).default_value for n in names
    }
    refs = {"time": spec.time_port, **spec.records}
    parts: dict[str, list[np.ndarray]] = {ref: [] for ref in refs}
    done = 0
    while done < steps:
        watch.progress(done)
        n = min(CHUNK, steps - done)
        feed = {**inputs, **state, "steps": np.int64(n), _OFFSET: np.int64(done)}
        outputs = run_chunk(feed)
        for ref, port in refs.items():
            part = np.asarray(outputs[f"{LOOP_NODE}.{port}"])
            parts[ref].append(part)
            if ref != "time":
                watch.check(ref, part, done)
        state = {name: outputs[f"{LOOP_NODE}.final__{k}"] for k, name in enumerate(names)}
        done += n
    values = {ref: np.concatenate(chunks) for ref, chunks in parts.items()}
    return values.pop("time"), values

"""``to_time_loop``: a stateful MDF graph and a time loop over it -> one explicit ``onnx::Loop``."""

from __future__ import annotations

import functools
import logging
import math
import os
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from typing import Any

import numpy as np
from modeci_mdf.mdf import Graph, InputPort, Model, Node, OutputPort, Parameter

from mdf_loops.errors import ModelError
from mdf_loops.model.compat import require_input_defaults
from mdf_loops.model.convention import port_type, wrap_body
from mdf_loops.model.interface import load_model, select_graph
from mdf_loops.timeloop.body import BodyBuilder
from mdf_loops.timeloop.edges import (
    check_unordered_edges,
    refuse_cycles,
    warn_overwritten_ports,
    without_defaults,
)
from mdf_loops.timeloop.infer import infer_values
from mdf_loops.timeloop.lean_engine import lean_engine
from mdf_loops.timeloop.parts import ConvertedLoop, LoopParts, LoopStart
from mdf_loops.timeloop.plan import SchedulePlan
from mdf_loops.timeloop.probe import build_engine, probe
from mdf_loops.timeloop.spec import (
    LOOP_FUNCTION,
    LOOP_NODE,
    METADATA_KEY,
    TimeLoopSpec,
    time_loop_spec,
)

log = logging.getLogger("mdf_loops.timeloop")

#: the spec's names stay importable from here
__all__ = [
    "to_time_loop",
    "converted_loop",
    "TimeLoopSpec",
    "time_loop_spec",
    "LOOP_NODE",
    "METADATA_KEY",
]


def to_time_loop(
    model: Model | str | os.PathLike,
    *,
    dt: float,
    steps: int | None = None,
    duration: float | None = None,
    until: str | None = None,
    record: Sequence[str] = (),
    inputs: Mapping[str, Any] | None = None,
    graph: str | None = None,
    trusted: bool = False,
) -> Model:
    """A new model whose graph runs the time loop modeci-mdf's scripts write by hand.

    Equivalent to (the input model is not changed)::

        engine = EvaluableGraph(graph)
        for k in range(steps):              # while not terminated and not until
            engine.evaluate() if k == 0 else engine.evaluate(time_increment=dt)
            time[k] = k * dt; trace[ref][k] = value of ref   # for ref in record

    Args:
        dt: the time increment of every step but the first.
        steps: the number of steps (the Loop's trip count), or
        duration: simulated time; ``steps = round(duration / dt) + 1`` (0 to duration).
        until: stop after the step where this expression of ``node.name`` values holds.
        record: ``"node.port"`` or ``"node.parameter"`` values to record (scan outputs).
        inputs: input-port id -> time series (axis 0 = step; ``None`` to give it at run
            time), read one element per step.
        graph: id of the graph (default: the first).
        trusted: skip the expression allow-list when probing the model.

    The result's graph has one ``onnx::Loop`` node, :data:`LOOP_NODE`; its outputs are
    ``time`` and one stacked trajectory per recorded value (see :func:`time_loop_spec`).
    """
    source_model = load_model(model)
    return converted_loop(
        source_model,
        source_model is not model,  # read from a file here: no one else holds it
        dt=dt,
        steps=steps,
        duration=duration,
        until=until,
        record=record,
        inputs=inputs,
        graph=graph,
        trusted=trusted,
    ).model


def converted_loop(
    source_model: Model,
    owned: bool,
    *,
    dt: float,
    steps: int | None = None,
    duration: float | None = None,
    until: str | None = None,
    record: Sequence[str] = (),
    inputs: Mapping[str, Any] | None = None,
    graph: str | None = None,
    trusted: bool = False,
) -> ConvertedLoop:
    """The time loop of :func:`to_time_loop` on a loaded model, in the parts a backend runs
    (its model made when asked for); ``owned``: the model was read from a file for this
    conversion, so the stock engine probes its graph rather than a copy."""
    require_input_defaults("to_time_loop")  # the body's ports use default_value and reduce
    source = select_graph(source_model, graph)
    dt = float(dt)
    if not dt > 0:
        raise ModelError(f"dt must be a positive number of time units, got {dt!r}")
    series = {k: (None if v is None else np.asarray(v)) for k, v in (inputs or {}).items()}
    n_steps = _steps(steps, duration, dt, series)
    plan, values = _plan_and_probe(source_model, source, dt, series, trusted, owned)
    builder = BodyBuilder(source, dt, plan, values, series)
    records = builder.records(record)
    body, initial, cond0 = builder.build(until)
    spec = TimeLoopSpec(
        dt, n_steps, "time", _record_ports(records), {name: f"{name}__series" for name in series}
    )
    model_id, graph_id = f"{source_model.id}_time_loop", f"{source.id}_time_loop"
    start = LoopStart(
        n_steps,
        tuple(value for _, value in initial),
        # as the Loop node's port holds it (a list) and the backend reads it back
        tuple(None if s is None else np.asarray(s.tolist()) for s in series.values()),
        bool(cond0),
    )
    examples = _record_examples(records, values)
    parts = LoopParts(
        model_id,
        graph_id,
        body,
        builder.signature,
        tuple(_initial_name(name) for name, _ in initial),
        (np.dtype("float64"), *(e.dtype if e.shape == () else None for e in examples)),
        start,
    )
    make = functools.partial(_loop_model, source_model, parts, spec, series, examples)
    return ConvertedLoop(parts, spec, make)


def _plan_and_probe(
    source_model: Model, source: Graph, dt: float, series: dict, trusted: bool, owned: bool
) -> tuple[SchedulePlan, dict]:
    """The graph's schedule as masks (refused before anything runs), and its probed values.

    An untrusted model passes the expression allow-list first, and is probed under it.
    A graph without conditions is planned without graph-scheduler; its values' types are
    inferred where it holds scalar numbers (:mod:`~mdf_loops.timeloop.infer`), else
    probed by modeci-mdf's nodes without its scheduler
    (:mod:`~mdf_loops.timeloop.lean_engine`); the stock engine plans and probes the
    others, and any graph the lean probe fails on (so its error is stock's own).
    ``owned``: the model was read for this conversion, so the engine may use its graph
    rather than a copy (modeci-mdf's engine keeps its values apart from the model).
    """
    with ExitStack() as stack:
        if not trusted:
            from mdf_loops.safety.checks import check_model
            from mdf_loops.safety.guarded_numpy import untrusted_expressions

            check_model(source_model)
            stack.enter_context(untrusted_expressions())
        refuse_cycles(source)
        warn_overwritten_ports(source)
        unordered = check_unordered_edges(source)
        if unordered:  # probed in the time loop's order: stock's own can change run by run
            source, owned = without_defaults(source, unordered), True
        lean = lean_engine(source)
        if lean is not None:
            inferred = None if series else infer_values(source, lean.sets, dt)
            if inferred is not None:
                return lean.plan, inferred
            try:
                return lean.plan, probe(source, dt, series, lean).values
            except ModelError:
                pass  # the stock engine below fails too, in its own words
        from mdf_loops.timeloop.conditions import plan_schedule  # graph-scheduler's

        engine = build_engine(source, copy_graph=not owned)
        plan = plan_schedule(engine, source.id)  # refuse before running anything
        probed = probe(source, dt, series, engine)
    return plan, probed.values


def _steps(steps, duration, dt, series) -> int:
    if steps is not None and duration is not None:
        raise ModelError("give steps or duration, not both")
    if steps is None and duration is not None:
        ratio = float(duration) / float(dt)
        if not math.isfinite(ratio):
            raise ModelError(
                f"duration {duration!r} / dt {dt!r} is not a finite number of steps; "
                "give a finite duration and a dt that divides it into a countable number of steps"
            )
        steps = int(round(ratio)) + 1
    if steps is None:
        known = [len(s) for s in series.values() if s is not None]
        if not known:
            raise ModelError("give steps or duration (or input time series, whose length is used)")
        steps = min(known)
    steps = int(steps)
    if steps < 1:
        raise ModelError(f"steps must be at least 1, got {steps}")
    for name, s in series.items():
        if s is not None and len(s) < steps:
            raise ModelError(
                f"input '{name}': its time series has {len(s)} steps, the loop runs {steps}"
            )
    return steps


def _loop_model(
    source_model: Model,
    parts: LoopParts,
    spec: TimeLoopSpec,
    series: dict,
    examples: Sequence[np.ndarray],
) -> Model:
    """The result of :func:`to_time_loop`: one graph of the Loop node and its metadata."""
    loop = Node(id=LOOP_NODE)
    _loop_inputs(loop, spec.steps, series)
    _loop_parameters(loop, parts)
    _loop_outputs(loop, len(parts.initial_names), spec.records, examples)
    graph = Graph(id=parts.graph_id, nodes=[loop], metadata={METADATA_KEY: spec.to_metadata()})
    return Model(
        id=parts.model_id, graphs=[graph], metadata={**(source_model.metadata or {})} or None
    )


def _loop_inputs(loop: Node, n_steps: int, series: dict) -> None:
    """The trip count ``steps`` and one port per input time series (axis 0 = step)."""
    loop.input_ports.append(
        InputPort(id="steps", default_value=n_steps, metadata=port_type(dtype="int64"))
    )
    for name, values in series.items():
        dims = ["steps", *(values.shape[1:] if values is not None else ())]
        dtype = str(values.dtype) if values is not None else "float64"
        loop.input_ports.append(
            InputPort(
                id=f"{name}__series",
                default_value=None if values is None else values.tolist(),
                metadata=port_type(*dims, dtype=dtype),
            )
        )


def _initial_name(carried: str) -> str:
    """The Loop node's parameter holding the initial value of the ``carried`` value."""
    return f"init__{carried}"


def _loop_parameters(loop: Node, parts: LoopParts) -> None:
    """The initial values, the body, the first condition and the ``onnx::Loop`` call."""
    for name, value in zip(parts.initial_names, parts.start.initial, strict=True):
        loop.parameters.append(Parameter(id=name, value=value))
    loop.parameters.extend(
        [
            Parameter(id="body", value=wrap_body(parts.body)),
            Parameter(id="continue0", value=parts.start.cond),
            Parameter(
                id=LOOP_FUNCTION,
                function="onnx::Loop",
                args={
                    "M": "steps",
                    "cond": "continue0",
                    "v_initial": "[" + ", ".join(parts.initial_names) + "]",
                },
            ),
        ]
    )


def _record_ports(records: Mapping[str, tuple[str, str]]) -> dict[str, str]:
    """Record -> the Loop node's output port of its trajectory."""
    return {ref: ref.replace(".", "__") for ref in records}


def _record_examples(records: Mapping[str, tuple[str, str]], values: dict) -> list[np.ndarray]:
    """A probed value of each record (its dtype and shape at one step)."""
    examples = []
    for node, port in records.values():
        example = values.get((node, port))
        if example is None:
            example = values[(node, port[: -len("__value")])]
        examples.append(example)
    return examples


def _loop_outputs(
    loop: Node, first_scan: int, record_ports: Mapping[str, str], examples: Sequence[np.ndarray]
) -> None:
    """``time`` and one stacked trajectory per record (``examples``: a probed value of each)."""
    loop.output_ports.append(
        OutputPort(id="time", value=f"{LOOP_FUNCTION}[{first_scan}]", metadata=port_type("steps"))
    )
    for k, (port, example) in enumerate(zip(record_ports.values(), examples, strict=True)):
        loop.output_ports.append(
            OutputPort(
                id=port,
                value=f"{LOOP_FUNCTION}[{first_scan + 1 + k}]",
                metadata=port_type("steps", *example.shape, dtype=example.dtype),
            )
        )

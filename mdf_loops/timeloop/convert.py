"""``to_time_loop``: a stateful MDF graph and a time loop over it -> one explicit ``onnx::Loop``."""

from __future__ import annotations

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
from mdf_loops.timeloop.conditions import SchedulePlan, plan_schedule
from mdf_loops.timeloop.infer import infer_values
from mdf_loops.timeloop.lean_engine import lean_engine
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
__all__ = ["to_time_loop", "TimeLoopSpec", "time_loop_spec", "LOOP_NODE", "METADATA_KEY"]


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
    return time_loop_of(
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
    )


def time_loop_of(
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
) -> Model:
    """:func:`to_time_loop` of a loaded model; ``owned``: the model was read from a file
    for this conversion, so the stock engine probes its graph rather than a copy."""
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
    return _loop_model(
        source_model, source, body, initial, cond0, n_steps, dt, series, records, builder
    )


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
            from mdf_loops.safety.allowlist import untrusted_expressions
            from mdf_loops.safety.checks import check_model

            check_model(source_model)
            stack.enter_context(untrusted_expressions())
        _refuse_cycles(source)
        _warn_overwritten_ports(source)
        lean = lean_engine(source)
        if lean is not None:
            inferred = None if series else infer_values(source, lean.sets, dt)
            if inferred is not None:
                return lean.plan, inferred
            try:
                return lean.plan, probe(source, dt, series, lean).values
            except ModelError:
                pass  # the stock engine below fails too, in its own words
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


def _warn_overwritten_ports(graph: Graph) -> None:
    """A WARNING for an input port fed by several edges that overwrite one another:
    modeci-mdf walks the edges from a set, so which value the port keeps can change
    from one Python process to the next, and the backends need not agree."""
    for node in graph.nodes:
        for port in node.input_ports:
            senders = [
                f"{e.sender}.{e.sender_port}"
                for e in graph.edges
                if e.receiver == node.id and e.receiver_port == port.id
            ]
            if len(senders) > 1 and (port.reduce or "overwrite") == "overwrite":
                log.warning(
                    "graph '%s' node '%s' input port '%s': %d edges (%s) overwrite one "
                    "another; which value the port keeps is not defined (modeci-mdf walks "
                    "them from a set, in an order that can change between runs). Give the port "
                    "reduce='add' or 'multiply' if the values should combine",
                    graph.id,
                    node.id,
                    port.id,
                    len(senders),
                    ", ".join(senders),
                )


def _refuse_cycles(graph: Graph) -> None:
    """A ModelError for edges that form a cycle (stock feeds them the previous step's value)."""
    remaining = {n.id for n in graph.nodes}
    while remaining:
        ready = {
            n
            for n in remaining
            if not any(
                e.receiver == n and e.sender in remaining and e.sender != n for e in graph.edges
            )
        }
        if not ready:
            raise ModelError(
                f"graph '{graph.id}': edges form a cycle among {sorted(remaining)}; "
                "a time-loop step needs its nodes in edge order (carry the value "
                "as a parameter that reads itself instead)"
            )
        remaining -= ready


def _loop_model(
    source_model, source, body, initial, cond0, n_steps, dt, series, records, builder
) -> Model:
    """The result of :func:`to_time_loop`: one graph of the Loop node and its metadata."""
    loop = Node(id=LOOP_NODE)
    _loop_inputs(loop, n_steps, series)
    _loop_parameters(loop, body, initial, cond0)
    record_ports = _loop_outputs(loop, len(initial), records, builder.values)
    graph = Graph(
        id=f"{source.id}_time_loop",
        nodes=[loop],
        metadata={
            METADATA_KEY: {
                "dt": dt,
                "steps": n_steps,
                "time": "time",
                "records": record_ports,
                "inputs": {name: f"{name}__series" for name in series},
            }
        },
    )
    result = Model(
        id=f"{source_model.id}_time_loop",
        graphs=[graph],
        metadata={**(source_model.metadata or {})} or None,
    )
    return result


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


def _loop_parameters(loop: Node, body: Graph, initial: list, cond0: bool) -> None:
    """The initial values, the body, the first condition and the ``onnx::Loop`` call."""
    init_names = []
    for name, value in initial:
        init_names.append(f"init__{name}")
        loop.parameters.append(Parameter(id=f"init__{name}", value=value))
    loop.parameters.extend(
        [
            Parameter(id="body", value=wrap_body(body)),
            Parameter(id="continue0", value=bool(cond0)),
            Parameter(
                id=LOOP_FUNCTION,
                function="onnx::Loop",
                args={
                    "M": "steps",
                    "cond": "continue0",
                    "v_initial": "[" + ", ".join(init_names) + "]",
                },
            ),
        ]
    )


def _loop_outputs(
    loop: Node, first_scan: int, records: dict[str, tuple[str, str]], values: dict
) -> dict[str, str]:
    """``time`` and one stacked trajectory per record; returns record -> output port."""
    loop.output_ports.append(
        OutputPort(id="time", value=f"{LOOP_FUNCTION}[{first_scan}]", metadata=port_type("steps"))
    )
    record_ports = {}
    for k, ref in enumerate(records):
        port = ref.replace(".", "__")
        record_ports[ref] = port
        example = values.get(records[ref])
        if example is None:
            example = values[(records[ref][0], records[ref][1][: -len("__value")])]
        loop.output_ports.append(
            OutputPort(
                id=port,
                value=f"{LOOP_FUNCTION}[{first_scan + 1 + k}]",
                metadata=port_type("steps", *example.shape, dtype=example.dtype),
            )
        )
    return record_ports

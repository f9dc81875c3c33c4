"""``simulate``: run a time loop on a backend and return its recorded trajectories.

The time loop itself (the model's steps as one ``onnx::Loop``) is made by
:mod:`mdf_loops.timeloop`; here it runs on the python backend
(:mod:`mdf_loops.backends.python`), on onnxruntime (in chunks of steps for a long one,
:mod:`mdf_loops.timeloop.chunks`) or on the scheduler, through :func:`mdf_loops.run`.
"""

from __future__ import annotations

import functools
import logging
import operator
import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from modeci_mdf.mdf import Model

from mdf_loops.backends import SIMULATE_BACKENDS, Backend, SimulateBackend
from mdf_loops.errors import (
    EvaluationError,
    LimitError,
    MdfLoopsError,
    ModelError,
    UnsafeExpressionError,
)
from mdf_loops.model.interface import load_model
from mdf_loops.ops import observe_iterations
from mdf_loops.timeloop import chunks
from mdf_loops.timeloop.convert import converted_loop
from mdf_loops.timeloop.parts import ConvertedLoop
from mdf_loops.timeloop.spec import LOOP_NODE, METADATA_KEY, TimeLoopSpec, time_loop_spec
from mdf_loops.timeloop.trajectories import Trajectories
from mdf_loops.timeloop.watch import SimulationWatch

__all__ = ["Trajectories", "simulate", "SIMULATE_BACKENDS"]

log = logging.getLogger("mdf_loops.timeloop")


def simulate(
    model: Model | str | os.PathLike,
    *,
    dt: float | None = None,
    steps: int | None = None,
    duration: float | None = None,
    until: str | None = None,
    record: Sequence[str] | None = None,
    inputs: Mapping[str, Any] | None = None,
    backend: SimulateBackend = "auto",
    trusted: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Trajectories:
    """Simulate a stateful MDF model (or a model made by :func:`to_time_loop`).

    A model without a time loop is first turned into one by :func:`to_time_loop`
    (``dt`` and ``steps``/``duration`` needed; ``record`` defaults to every output
    port). A time-loop model runs as stored; ``steps`` then overrides its trip count
    and ``inputs`` gives the time series it reads.

    ``backend``: ``"python"`` (the body compiled to one Python loop over numpy
    scalars: the stock engine's arithmetic, fastest for small models),
    ``"onnxruntime"`` (the model exported to ONNX), ``"scheduler"`` (the body run by
    modeci-mdf's engine each step), or ``"auto"`` (python when the body compiles,
    else onnxruntime, else the scheduler; it passes a backend over with a WARNING
    that says why, and fails only where the scheduler fails).

    ``progress(done, steps)`` is called as steps start (every step on the scheduler,
    every few thousand on python and, past that many steps, on onnxruntime). The number of
    steps counts against ``max_iterations`` (:func:`mdf_loops.safety.limits`); a
    recorded value that becomes NaN or infinite is logged as a WARNING once.
    """
    if backend not in SIMULATE_BACKENDS:
        raise ValueError(f"backend must be one of {SIMULATE_BACKENDS}, not {backend!r}")
    given = model
    model = load_model(model)
    graph = model.graphs[0] if model.graphs else None
    if graph is None or METADATA_KEY not in (graph.metadata or {}):
        if dt is None:
            raise ModelError(
                f"model '{model.id}' has no time loop: give dt (and steps or duration)"
            )
        if record is None:
            record = (
                [f"{n.id}.{p.id}" for n in graph.nodes for p in n.output_ports] if graph else []
            )
        owned = model is not given  # read from the file here: probed without a copy
        loop_of = functools.partial(converted_loop, dt=dt, steps=steps, duration=duration)
        converted = loop_of(
            model, owned, until=until, record=record, inputs=dict(inputs or {}), trusted=trusted
        )
        # its expressions passed the allow-list in to_time_loop: the python backend's
        # check of the same expressions, renamed, is not repeated
        return _run(converted, {}, backend, trusted, progress, checked=True)
    if until is not None or duration is not None or record is not None or dt is not None:
        raise ModelError(
            f"model '{model.id}' is a time-loop model already: its dt, until, "
            "duration and record are fixed; give steps or inputs only"
        )
    return _run(model, _stored_loop_inputs(model, steps, inputs), backend, trusted, progress)


def _stored_loop_inputs(
    model: Model, steps: int | None, inputs: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The inputs of a stored time-loop model: its trip count and the time series it reads."""
    spec = time_loop_spec(model)
    run_inputs: dict[str, Any] = {} if steps is None else {"steps": np.int64(steps)}
    for name, series in (inputs or {}).items():
        if name not in spec.inputs:
            raise ModelError(
                f"model '{model.id}': no input time series '{name}' "
                f"(it reads {sorted(spec.inputs)})"
            )
        run_inputs[spec.inputs[name]] = np.asarray(series)
    return run_inputs


def _run(
    loop: Model | ConvertedLoop,
    inputs: dict,
    backend: str,
    trusted: bool,
    progress: Callable[[int, int], None] | None,
    checked: bool = False,
) -> Trajectories:
    """The simulation of a stored time-loop model, or of a conversion's loop (its model
    made only for a backend other than python)."""
    if isinstance(loop, ConvertedLoop):
        spec, model_id = loop.spec, loop.parts.model_id
    else:
        spec, model_id = time_loop_spec(loop), loop.id
    steps = inputs.get("steps", spec.steps)
    try:
        steps = operator.index(steps)
    except TypeError:
        raise ModelError(f"model '{model_id}': steps must be an integer, not {steps!r}") from None
    with ExitStack() as stack:
        if progress is not None:
            stack.enter_context(
                observe_iterations(lambda _where, done, _total: progress(done, steps))
            )
        watch = SimulationWatch(model_id, steps, spec.dt)
        call = _Call(inputs, backend, trusted, spec, watch, checked)
        traces = _on_backend(loop, call)
    if traces.backend != "python":  # the python backend looks at each chunk as it runs
        watch.check_all(traces.values.items())
    return traces


@dataclass(frozen=True)
class _Call:
    """What one simulation runs with, whichever backend runs it."""

    inputs: dict
    backend: str  # the one asked for ("auto" included)
    trusted: bool
    spec: TimeLoopSpec
    watch: SimulationWatch
    checked: bool  # the allow-list has passed the loop's expressions


def _on_backend(loop: Model | ConvertedLoop, call: _Call) -> Trajectories:
    """The simulation on ``call.backend``; ``auto`` tries python, onnxruntime, then the
    scheduler, and says why it passed one over (a WARNING when a backend that compiled
    failed). A conversion's loop makes its model only for onnxruntime or the scheduler."""
    backend = call.backend
    if backend in ("auto", "python"):
        traces = _on_python(loop, call)
        if traces is not None:
            return traces
    model = loop.model if isinstance(loop, ConvertedLoop) else loop
    if backend == "auto":
        try:
            return _on_run(model, call, "onnxruntime")
        except (LimitError, UnsafeExpressionError):
            raise
        except Exception as exc:
            log.warning(
                "model '%s' runs on the scheduler, not onnxruntime (slower): %s: %s",
                model.id,
                type(exc).__name__,
                exc,
            )
        return _on_run(model, call, "scheduler")
    return _on_run(model, call, backend)


def _on_python(loop: Model | ConvertedLoop, call: _Call) -> Trajectories | None:
    """The simulation on the python backend; None where ``auto`` goes on to onnxruntime
    (said in the log: a WARNING when the loop compiled and failed)."""
    from mdf_loops.backends.python import NotCompilable, run_time_loop

    model_id, backend = call.watch.model_id, call.backend
    try:
        runs = loop.parts if isinstance(loop, ConvertedLoop) else loop
        return run_time_loop(runs, call.inputs, call.spec, call.trusted, call.watch, call.checked)
    except NotCompilable as exc:
        if backend == "python":
            raise
        log.info("model '%s' does not compile to Python (%s); trying onnxruntime", model_id, exc)
    except (LimitError, UnsafeExpressionError, ModelError):
        raise  # the other backends refuse it too
    except Exception as exc:
        if backend == "python" and isinstance(exc, MdfLoopsError):
            raise
        if backend == "python":
            raise EvaluationError(
                f"model '{model_id}': the python backend failed: {type(exc).__name__}: "
                f"{exc}; backend='scheduler' runs each step through modeci-mdf's engine "
                "and names the node"
            ) from exc
        log.warning(
            "model '%s': the python backend failed (%s: %s); trying onnxruntime",
            model_id,
            type(exc).__name__,
            exc,
        )
    return None


def _on_run(model: Model, call: _Call, backend: str) -> Trajectories:
    """The simulation through :func:`mdf_loops.run` on ``backend``, onnxruntime or the
    scheduler; a long one on onnxruntime in chunks of steps (:mod:`mdf_loops.timeloop.chunks`)."""
    from mdf_loops.run import run  # onnxruntime's import: only where it runs

    inputs, trusted, spec, watch = call.inputs, call.trusted, call.spec, call.watch
    if backend == "onnxruntime" and watch.steps > chunks.CHUNK:
        variant = chunks.chunked_variant(model)
        if variant is not None:
            chunk = functools.partial(run, variant, trusted=trusted, backend="onnxruntime")
            time, values = chunks.run_in_chunks(variant, inputs, watch.steps, spec, watch, chunk)
            return Trajectories(time, values, backend)
    names = {"time": spec.time_port, **spec.records}
    outputs = run(model, dict(inputs), trusted=trusted, backend=cast(Backend, backend))
    values = {ref: np.asarray(outputs[f"{LOOP_NODE}.{port}"]) for ref, port in names.items()}
    time = values.pop("time")
    return Trajectories(time, values, backend)

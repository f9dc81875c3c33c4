"""The python backend of ``simulate``: a time-loop model's inputs handed to its compiled loop."""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
from modeci_mdf.mdf import Model

from mdf_loops.backends.python.compiled import (
    CompiledTimeLoop,
    compile_time_loop,
    loop_source,
    stored_parts,
    stored_start,
)
from mdf_loops.backends.python.recording import Recording
from mdf_loops.errors import ModelError
from mdf_loops.timeloop.parts import LoopParts
from mdf_loops.timeloop.spec import LOOP_NODE, TimeLoopSpec
from mdf_loops.timeloop.trajectories import Trajectories
from mdf_loops.timeloop.watch import SimulationWatch

__all__ = ["run_time_loop"]

#: per model, its compiled loop as trusted (True) and as not trusted (False)
_COMPILED: weakref.WeakKeyDictionary[Model, dict[bool, CompiledTimeLoop]] = (
    weakref.WeakKeyDictionary()
)

#: steps run between two looks at progress, limits and non-finite values
CHUNK = 1 << 15


def run_time_loop(
    loop: Model | LoopParts,
    inputs: dict,
    spec: TimeLoopSpec,
    trusted: bool,
    watch: SimulationWatch,
    checked: bool = False,
) -> Trajectories:
    """Simulate a time loop with its compiled Python loop, in chunks of :data:`CHUNK`
    steps between which ``watch`` reports. ``loop``: a time-loop model (compiled once per
    model, its inputs read from it on each call), or the parts a conversion holds
    (compiled for this run). A model not ``trusted`` has its expressions checked by the
    allow-list (unless ``checked`` already, as a conversion's parts always are) and
    evaluated by the interpreter's rules (``untrusted.py``)."""
    if isinstance(loop, LoopParts):
        compiled, start, model_id = _compiled(loop, trusted), loop.start, loop.model_id
    else:
        compiled = _stored_compiled(loop, trusted, checked)
        node = next(n for n in loop.graphs[0].nodes if n.id == LOOP_NODE)
        start = stored_start(node, compiled.code.initial, compiled.code.outer)
        model_id = loop.id
    steps = int(inputs.get("steps", start.steps))
    initial = [_initial(value) for value in start.initial]
    outer = _series(compiled.code.outer, start.series, inputs, steps, model_id)
    recording = Recording(compiled.code.scan_codes, steps, compiled.code.time_step is not None)
    refs = ["time", *spec.records]
    cond, done = start.cond, 0
    while cond and done < steps:
        watch.progress(done)
        stop = min(steps, done + CHUNK)
        cond, initial, stop = compiled.run(done, stop, cond, *initial, *outer, *recording.scans)
        chunk = recording.move(done, stop)
        for ref, recorded in zip(refs[1:], chunk[1:], strict=True):
            watch.check(ref, recorded, done)
        done = stop
    arrays = recording.arrays(done)
    values = {ref: arrays[1 + k] for k, ref in enumerate(spec.records)}
    return Trajectories(compiled.time(done, arrays[0]), values, "python")


def _series(
    names: tuple[str, ...], stored: tuple[Any, ...], inputs: dict, steps: int, model_id: str
) -> list[np.ndarray]:
    """The series the loop reads: given in ``inputs``, else ``stored``; each long enough."""
    series = []
    for name, default in zip(names, stored, strict=True):
        value = inputs.get(name, default)
        if value is None:
            raise ModelError(f"model '{model_id}': input time series '{name}' is not given")
        series.append(np.asarray(value))
        if len(series[-1]) < steps:
            raise ModelError(f"input '{name}': {len(series[-1])} steps, the loop runs {steps}")
    return series


def _stored_compiled(model: Model, trusted: bool, checked: bool) -> CompiledTimeLoop:
    """The loop of a stored time-loop model, compiled when first run and kept with it."""
    compiled = _COMPILED.setdefault(model, {}).get(trusted)
    if compiled is None:
        if not (trusted or checked):
            from mdf_loops.safety.checks import check_model

            check_model(model)  # the allow-list, before anything is compiled
        compiled = _COMPILED[model][trusted] = _compiled(stored_parts(model), trusted)
    return compiled


def _compiled(parts: LoopParts, trusted: bool) -> CompiledTimeLoop:
    if trusted:
        return compile_time_loop(parts)
    from mdf_loops.backends.python.untrusted import guarded_time_loop

    return guarded_time_loop(loop_source(parts))  # compiled once, guarded


def _initial(value: Any) -> Any:
    return np.asarray(value)[()] if isinstance(value, list) else value

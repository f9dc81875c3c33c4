"""The python backend of ``simulate``: a time-loop model's inputs handed to its compiled loop."""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
from modeci_mdf.mdf import Model

from mdf_loops.backends.python.compiled import (
    CompiledTimeLoop,
    compile_time_loop,
    time_loop_source,
)
from mdf_loops.backends.python.recording import Recording
from mdf_loops.errors import ModelError
from mdf_loops.model.compat import input_default
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
    model: Model,
    inputs: dict,
    spec: TimeLoopSpec,
    trusted: bool,
    watch: SimulationWatch,
    checked: bool = False,
) -> Trajectories:
    """Simulate ``model`` with its compiled Python loop (compiled once per model), in
    chunks of :data:`CHUNK` steps between which ``watch`` reports. A model not
    ``trusted`` has its expressions checked by the allow-list (unless ``checked``
    already) and evaluated by the interpreter's rules (``untrusted.py``)."""
    compiled = _COMPILED.setdefault(model, {}).get(trusted)
    if compiled is None:
        compiled = _compiled(model, trusted, checked)
    loop = next(n for n in model.graphs[0].nodes if n.id == LOOP_NODE)
    params = {p.id: p.value for p in loop.parameters}
    ports = {p.id: p for p in loop.input_ports}
    steps = int(inputs.get("steps", input_default(ports["steps"])))
    initial = [_initial(params[name]) for name in compiled.code.initial]
    outer = []
    for name in compiled.code.outer:
        value = inputs.get(name, input_default(ports[name]))
        if value is None:
            raise ModelError(f"model '{model.id}': input time series '{name}' is not given")
        outer.append(np.asarray(value))
        if len(outer[-1]) < steps:
            raise ModelError(f"input '{name}': {len(outer[-1])} steps, the loop runs {steps}")
    recording = Recording(compiled.code.scan_codes, steps, compiled.code.time_step is not None)
    refs = ["time", *spec.records]
    cond, done = bool(params["continue0"]), 0
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


def _compiled(model: Model, trusted: bool, checked: bool) -> CompiledTimeLoop:
    if trusted:
        compiled = compile_time_loop(model)
    else:
        from mdf_loops.backends.python.untrusted import guarded_time_loop

        if not checked:
            from mdf_loops.safety.checks import check_model

            check_model(model)  # the allow-list, before anything is compiled
        compiled = guarded_time_loop(time_loop_source(model))  # compiled once, guarded
    _COMPILED[model][trusted] = compiled
    return compiled


def _initial(value: Any) -> Any:
    return np.asarray(value)[()] if isinstance(value, list) else value

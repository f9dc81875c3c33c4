"""``simulate``: run a time loop and return its recorded trajectories."""

from __future__ import annotations

import csv
import logging
import os
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from modeci_mdf.mdf import Model

from mdf_loops.backends import SIMULATE_BACKENDS, Backend, SimulateBackend
from mdf_loops.errors import ModelError
from mdf_loops.model.compat import input_default
from mdf_loops.model.interface import load_model
from mdf_loops.timeloop.convert import (
    _LOOP_FUNCTION,
    LOOP_NODE,
    METADATA_KEY,
    time_loop_spec,
    to_time_loop,
)

__all__ = ["Trajectories", "simulate", "SIMULATE_BACKENDS"]

log = logging.getLogger(__name__)

#: the backends of :func:`simulate`


@dataclass(frozen=True)
class Trajectories:
    """Recorded values of a simulation: ``time`` (steps,) and ``values[ref]`` (steps, ...)."""

    time: np.ndarray
    values: dict[str, np.ndarray] = field(default_factory=dict)
    backend: str = ""

    def __getitem__(self, ref: str) -> np.ndarray:
        if ref not in self.values:
            raise KeyError(f"{ref!r} was not recorded; recorded: {sorted(self.values)}")
        return self.values[ref]

    @property
    def steps(self) -> int:
        return len(self.time)

    def save(self, path: str | os.PathLike) -> None:
        """Write ``.npz`` or ``.csv``.

        ``.npz`` holds ``time`` and one array per value, ``.csv`` one column per element.
        """
        path = os.fspath(path)
        if path.endswith(".npz"):
            np.savez(path, time=self.time, **self.values)  # type: ignore[arg-type]  # numpy stub: **arrays could fill allow_pickle
        elif path.endswith(".csv"):
            columns = {"time": self.time}
            for ref, values in self.values.items():
                flat = values.reshape(len(values), -1)
                if flat.shape[1] == 1 and values.ndim == 1:
                    columns[ref] = flat[:, 0]
                else:
                    columns.update({f"{ref}[{i}]": flat[:, i] for i in range(flat.shape[1])})
            with open(path, "w", newline="") as handle:
                writer = csv.writer(handle)
                writer.writerow(columns)
                writer.writerows(zip(*(c.tolist() for c in columns.values())))
        else:
            raise ValueError(f"{path}: write .npz or .csv")


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
    else onnxruntime, else the scheduler).
    """
    if backend not in SIMULATE_BACKENDS:
        raise ValueError(f"backend must be one of {SIMULATE_BACKENDS}, not {backend!r}")
    model = load_model(model)
    graph = model.graphs[0] if model.graphs else None
    if graph is None or METADATA_KEY not in (graph.metadata or {}):
        if dt is None:
            raise ModelError(
                f"model '{model.id}' has no time loop: give dt (and steps or duration)"
            )
        if record is None:
            record = [
                f"{n.id}.{p.id}" for g in model.graphs[:1] for n in g.nodes for p in n.output_ports
            ]
        series = {k: v for k, v in (inputs or {}).items()}
        model = to_time_loop(
            model,
            dt=dt,
            steps=steps,
            duration=duration,
            until=until,
            record=record,
            inputs=series,
            trusted=trusted,
        )
        run_inputs: dict[str, Any] = {}
    else:
        if until is not None or duration is not None or record is not None or dt is not None:
            raise ModelError(
                f"model '{model.id}' is a time-loop model already: its dt, until, "
                "duration and record are fixed; give steps or inputs only"
            )
        spec = time_loop_spec(model)
        run_inputs = {} if steps is None else {"steps": np.int64(steps)}
        for name, series in (inputs or {}).items():
            if name not in spec.inputs:
                raise ModelError(
                    f"model '{model.id}': no input time series '{name}' "
                    f"(it reads {sorted(spec.inputs)})"
                )
            run_inputs[spec.inputs[name]] = np.asarray(series)
    return _run(model, run_inputs, backend, trusted)


def _run(model: Model, inputs: dict, backend: str, trusted: bool) -> Trajectories:
    spec = time_loop_spec(model)
    steps = int(inputs.get("steps", spec.steps))
    if backend in ("auto", "python"):
        from mdf_loops.timeloop.python_loop import NotCompilable

        try:
            return _run_python(model, inputs, spec, trusted)
        except NotCompilable as exc:
            if backend == "python":
                raise
            log.info(
                "model '%s' does not compile to Python (%s); trying onnxruntime", model.id, exc
            )
    import mdf_loops
    from mdf_loops.safety import limits

    names = {"time": spec.time_port, **spec.records}
    chosen = "auto: onnxruntime, else scheduler" if backend == "auto" else backend
    with limits(max_iterations=max(steps, 1)):
        outputs = mdf_loops.run(
            model,
            {k: v for k, v in inputs.items()},
            trusted=trusted,
            backend=cast(Backend, backend),  # "python" stopped above
        )
    values = {ref: np.asarray(outputs[f"{LOOP_NODE}.{port}"]) for ref, port in names.items()}
    time = values.pop("time")
    return Trajectories(time, values, chosen)


_COMPILED: weakref.WeakKeyDictionary[Model, Any] = weakref.WeakKeyDictionary()


def _run_python(model: Model, inputs: dict, spec, trusted: bool) -> Trajectories:
    from mdf_loops.timeloop.python_loop import compile_time_loop

    compiled = _COMPILED.get(model)
    if compiled is None:
        if not trusted:
            from mdf_loops.safety.checks import check_model

            check_model(model)  # the allow-list: the body's expressions become Python code
        compiled = _COMPILED[model] = compile_time_loop(model)
    loop = next(n for n in model.graphs[0].nodes if n.id == LOOP_NODE)
    params = {p.id: p.value for p in loop.parameters}
    ports = {p.id: p for p in loop.input_ports}
    steps = int(inputs.get("steps", input_default(ports["steps"])))
    initial = [
        _initial(params[name.strip()])
        for name in next(p for p in loop.parameters if p.id == _LOOP_FUNCTION)
        .args["v_initial"]
        .strip("[]")
        .split(",")
        if name.strip()
    ]
    outer = []
    from mdf_loops.model.convention import body_graph, body_signature

    for name in body_signature(body_graph(params["body"])).outer_scope_inputs:
        value = inputs.get(name, input_default(ports[name]))
        if value is None:
            raise ModelError(f"model '{model.id}': input time series '{name}' is not given")
        outer.append(np.asarray(value))
        if len(outer[-1]) < steps:
            raise ModelError(f"input '{name}': {len(outer[-1])} steps, the loop runs {steps}")
    _, scans = compiled.run(steps, bool(params["continue0"]), *initial, *outer)
    arrays = [np.asarray(s, dtype=float) if not len(s) else np.asarray(s) for s in scans]
    time = arrays[0]
    values = {ref: arrays[1 + k] for k, ref in enumerate(spec.records)}
    return Trajectories(time, values, "python")


def _initial(value: Any) -> Any:
    return np.asarray(value)[()] if isinstance(value, list) else value

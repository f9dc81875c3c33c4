"""``simulate``: run a time loop and return its recorded trajectories."""

from __future__ import annotations

import csv
import io
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from modeci_mdf.mdf import Model

from mdf_loops.backends import SIMULATE_BACKENDS, Backend, SimulateBackend
from mdf_loops.errors import MdfLoopsError, ModelError
from mdf_loops.files import write_atomically
from mdf_loops.model.interface import load_model
from mdf_loops.timeloop.convert import to_time_loop
from mdf_loops.timeloop.spec import LOOP_NODE, METADATA_KEY, time_loop_spec

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
        """Write ``.npz`` or ``.csv`` (through a temporary file: a complete file or none).

        ``.npz`` holds ``time`` and one array per value, ``.csv`` one column per element.
        """
        path = os.fspath(path)
        if path.endswith(".npz"):
            buffer = io.BytesIO()
            np.savez(buffer, time=self.time, **self.values)  # type: ignore[arg-type]  # numpy stub: **arrays could fill allow_pickle
            write_atomically(path, buffer.getvalue())
        elif path.endswith(".csv"):
            uneven = {ref: len(v) for ref, v in self.values.items() if len(v) != len(self.time)}
            if uneven:
                raise MdfLoopsError(
                    f"{path}: a CSV row is one step; time has {len(self.time)} steps but "
                    f"these values have other numbers of rows: {uneven}; give every value "
                    "one row per step (or write .npz)"
                )
            columns = {"time": self.time}
            for ref, values in self.values.items():
                flat = values.reshape(len(values), -1)
                if flat.shape[1] == 1 and values.ndim == 1:
                    columns[ref] = flat[:, 0]
                else:
                    columns.update({f"{ref}[{i}]": flat[:, i] for i in range(flat.shape[1])})
            text = io.StringIO(newline="")
            writer = csv.writer(text)
            writer.writerow(columns)
            writer.writerows(zip(*(c.tolist() for c in columns.values()), strict=True))
            write_atomically(path, text.getvalue())
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
        return _run(model, {}, backend, trusted)
    if until is not None or duration is not None or record is not None or dt is not None:
        raise ModelError(
            f"model '{model.id}' is a time-loop model already: its dt, until, "
            "duration and record are fixed; give steps or inputs only"
        )
    return _run(model, _stored_loop_inputs(model, steps, inputs), backend, trusted)


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


def _run(model: Model, inputs: dict, backend: str, trusted: bool) -> Trajectories:
    spec = time_loop_spec(model)
    steps = int(inputs.get("steps", spec.steps))
    if backend in ("auto", "python"):
        from mdf_loops.backends.python import NotCompilable, run_time_loop

        try:
            return run_time_loop(model, inputs, spec, trusted)
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

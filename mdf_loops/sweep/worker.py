"""What a Dask worker does with a batch of settings: run each, record what failed.

The model travels as its MDF JSON text with the hash of that text. Each worker
process loads it once and keeps it (:data:`_MODELS`), so :func:`mdf_loops.run`
verifies and compiles it once per worker, not once per setting: swept parameters
are inputs of the model by then (:mod:`mdf_loops.sweep.parameters`).

A batch pays ``run``'s per-call work once, not once per setting: its first setting
runs through :func:`mdf_loops.run` (every check, the compilation), the others on the
runner ``run`` planned for that call (:func:`mdf_loops.run.planned_runner`: the
compiled model's session or jitted function, the inputs as typed), since the settings
of a batch differ only in swept values of one dtype and shape. On ``jax`` the settings
of one shape are one vectorised ``run_batch`` call instead, and on onnxruntime one
session call of the batched model where the batching transform has a rule for every
node (:mod:`mdf_loops.sweep.one_call`). The results go back as whole columns
(:mod:`mdf_loops.sweep.packed`).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from modeci_mdf.mdf import Model

from mdf_loops.backends import Backend
from mdf_loops.errors import MdfLoopsError
from mdf_loops.sweep.one_call import run_in_one_call
from mdf_loops.sweep.packed import PackedResults, SettingResult, pack

__all__ = [
    "SweepTask",
    "SettingResult",
    "SettingsBatch",
    "run_settings",
    "run_settings_packed",
    "PackedResults",
]

log = logging.getLogger(__name__)

#: the backends on which a batch runs as one call where the model allows
#: (:func:`run_settings_packed`: jax's ``run_batch``, onnxruntime's batched model)
ONE_CALL_BACKENDS = ("jax", "onnxruntime", "auto")


@dataclass(frozen=True)
class SweepTask:
    """Everything a batch needs besides its settings: the same for every batch of a sweep."""

    model_json: str
    model_key: str  # sha256 of model_json
    graph: str | None
    inputs: dict[str, Any]  # inputs every setting shares
    outputs: tuple[str, ...]
    backend: Backend
    run_options: dict[str, Any] = field(default_factory=dict)


#: models loaded in this process, by the hash of their JSON text (a few, most recent last)
_MODELS: OrderedDict[str, Model] = OrderedDict()
_MODELS_KEPT = 4
_LOCK = threading.Lock()


def _model(task: SweepTask) -> Model:
    with _LOCK:
        model = _MODELS.get(task.model_key)
        if model is None:
            model = Model.from_json(task.model_json)
            _MODELS[task.model_key] = model
            while len(_MODELS) > _MODELS_KEPT:
                _MODELS.popitem(last=False)
        _MODELS.move_to_end(task.model_key)
        return model


Settings = list[tuple[int, dict[str, np.ndarray]]]  # (setting number, {input name: value})


@dataclass(frozen=True)
class SettingsBatch:
    """A batch of settings as it travels to a worker: the setting numbers, and each swept
    input's values stacked along a new first axis where they share one shape (one buffer
    per input, not one per setting), else listed. ``size`` is the batch size of the sweep:
    a shorter last batch is padded to it on ``jax``, so one compiled batch serves all."""

    indices: tuple[int, ...]
    values: dict[str, np.ndarray | list[np.ndarray]]
    size: int

    @classmethod
    def of(cls, settings: Settings, size: int) -> SettingsBatch:
        columns: dict[str, list[np.ndarray]] = {name: [] for name in settings[0][1]}
        for _, values in settings:
            for name, column in columns.items():
                column.append(values[name])
        return cls.of_columns([index for index, _ in settings], columns, size)

    @classmethod
    def of_columns(
        cls,
        indices: Sequence[int] | np.ndarray,
        columns: Mapping[str, np.ndarray | list[np.ndarray]],
        size: int,
    ) -> SettingsBatch:
        """The batch of the settings ``indices``, given each input's values in their order
        (an array, the values along its first axis, is taken as it is)."""
        stacked = {
            name: column if isinstance(column, np.ndarray) else _stacked_if_one_shape(column)
            for name, column in columns.items()
        }
        return cls(tuple(np.asarray(indices, dtype=np.int64).tolist()), stacked, size)

    def subset(self, positions: Sequence[int]) -> SettingsBatch:
        """The settings at ``positions`` of this batch, as a batch of the same ``size``."""
        columns = {name: [column[k] for k in positions] for name, column in self.values.items()}
        return SettingsBatch.of_columns([self.indices[k] for k in positions], columns, self.size)

    def of_one_shape(self) -> bool:
        """Whether every swept input's values share one shape (each stacked)."""
        return all(isinstance(column, np.ndarray) for column in self.values.values())

    def padded(self, name: str) -> np.ndarray:
        """The stacked values of ``name`` with the last repeated up to ``size`` settings
        (one compiled batch size serves every batch of the sweep)."""
        return _padded(self.values[name], self.size)

    def settings(self) -> Settings:
        """``(setting number, {input: value})`` for each setting of the batch."""
        return [
            (index, {name: column[k] for name, column in self.values.items()})
            for k, index in enumerate(self.indices)
        ]


def run_settings(task: SweepTask, batch: Settings | SettingsBatch) -> list[SettingResult]:
    """Run each ``(index, {input: value})`` setting of a batch; one result per setting
    (:func:`run_settings_packed`, unpacked)."""
    if isinstance(batch, list):
        batch = SettingsBatch.of(batch, len(batch)) if batch else SettingsBatch((), {}, 0)
    return run_settings_packed(task, batch).unpack()


def run_settings_packed(task: SweepTask, batch: SettingsBatch) -> PackedResults:
    """Run each setting of a batch; the results as whole columns (:mod:`~.packed`).

    A setting whose run raises an :class:`~mdf_loops.MdfLoopsError` (a limit, a
    failing node) or whose outputs hold NaN is recorded as failed; any other
    exception is a fault, not a result, and ends the batch. On ``jax`` the settings
    of one shape are one vectorised call (``mdf_loops.run_batch``);
    on onnxruntime one session call of the batched model where it can be made
    (:mod:`~mdf_loops.sweep.one_call`).
    """
    model = _model(task)
    if not batch.indices:
        return pack((), {}, ())
    if task.backend == "jax":
        import mdf_loops  # the public run_batch: what a user (or a test) has in its place

        if hasattr(mdf_loops, "run_batch"):
            return _run_vectorised(mdf_loops.run_batch, model, task, batch)
    if task.backend in ("onnxruntime", "auto") and len(batch.indices) > 1 and batch.of_one_shape():
        packed = run_in_one_call(model, task, batch)
        if packed is not None:
            return packed
    return _run_each(model, task, batch)


def _run_each(model: Model, task: SweepTask, batch: SettingsBatch) -> PackedResults:
    """Each setting of ``batch`` as a run: the first that runs through ``run``, and where
    the settings share their shapes, the others on the runner ``run`` planned for it."""
    from mdf_loops.run import planned_runner, run

    options = dict(graph=task.graph, backend=task.backend, **task.run_options)
    columns: dict[str, list[Any]] = {name: [] for name in task.outputs}
    errors: list[str] = []
    runner = None
    look = batch.of_one_shape()  # settings of one shape share the runner of the first run
    for k in range(len(batch.indices)):
        inputs = {**task.inputs, **{name: column[k] for name, column in batch.values.items()}}
        try:
            if runner is not None:
                outputs = runner(inputs)
            else:
                outputs = run(model, inputs, **options)
                if look:  # once: without a plan (the scheduler backend), every setting runs
                    runner, look = planned_runner(model, inputs, **options), False
        except MdfLoopsError as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
            for column in columns.values():
                column.append(None)
            continue
        errors.append("")
        for name, column in columns.items():
            column.append(outputs[name])
    return pack(batch.indices, columns, errors)


def _run_vectorised(run_batch, model: Model, task: SweepTask, batch: SettingsBatch):
    """The settings of each shape as one call of ``mdf_loops.run_batch(model, inputs,
    params)`` (shared inputs, and each swept input stacked along a new first axis, padded
    to the sweep's batch size); when a call raises, its settings run one by one to find
    which failed. Run options it does not take make each setting run alone."""
    import inspect

    accepted = inspect.signature(run_batch).parameters
    if any(name not in accepted for name in task.run_options):
        return _run_each(model, task, batch)
    if batch.of_one_shape():
        return _run_group(run_batch, model, task, batch, batch.size)
    groups: dict[tuple, list[int]] = {}
    for k in range(len(batch.indices)):
        shapes = tuple(np.shape(column[k]) for column in batch.values.values())
        groups.setdefault(shapes, []).append(k)
    parts = [_run_group(run_batch, model, task, batch.subset(g), 0) for g in groups.values()]
    results = {r.index: r for part in parts for r in part.unpack()}  # several shapes: rare
    return PackedResults.of([results[index] for index in batch.indices])


def _run_group(run_batch, model: Model, task: SweepTask, group: SettingsBatch, size: int):
    """One ``run_batch`` call on a batch whose values are stacked, padded to ``size``
    settings (one compiled batch size serves every batch of the sweep)."""
    count = len(group.indices)
    params = {name: _padded(column, size) for name, column in group.values.items()}
    try:
        outputs = run_batch(
            model, task.inputs, params, backend="jax", graph=task.graph, **task.run_options
        )
    except MdfLoopsError as exc:
        log.info(
            "batch of %d settings failed on run_batch (%s); running them one by one", count, exc
        )
        return _run_each(model, task, group)
    # an output is stacked along its first axis, or a list where the runs' shapes differ
    columns = {name: _first_rows(outputs[name], count) for name in task.outputs}
    return pack(group.indices, columns, [""] * count)


def _stacked_if_one_shape(column: list[np.ndarray]) -> np.ndarray | list[np.ndarray]:
    """``column`` stacked along a new first axis when its values share one shape."""
    return np.stack(column) if len({np.shape(v) for v in column}) == 1 else column


def _padded(column: Any, size: int) -> np.ndarray:
    """``column`` (stacked settings) with its last row repeated up to ``size`` rows."""
    column = np.asarray(column)
    missing = size - len(column)
    if missing <= 0:
        return column
    return np.concatenate([column, np.repeat(column[-1:], missing, axis=0)])


def _first_rows(value: Any, count: int) -> Any:
    """The first ``count`` settings' values of a batched output (padding dropped)."""
    if value is None:  # an empty optional for every run
        return [None] * count
    return value[:count] if isinstance(value, (np.ndarray, list)) else [value] * count

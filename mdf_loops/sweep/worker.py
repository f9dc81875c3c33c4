"""What a Dask worker does with a batch of settings: run each, record what failed.

The model travels as its MDF JSON text with the hash of that text. Each worker
process loads it once and keeps it (:data:`_MODELS`), so :func:`mdf_loops.run`
verifies and compiles it once per worker, not once per setting: swept parameters
are inputs of the model by then (:mod:`mdf_loops.sweep.parameters`).
"""

from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from modeci_mdf.mdf import Model

from mdf_loops.backends import Backend
from mdf_loops.errors import MdfLoopsError

__all__ = [
    "SweepTask",
    "SettingResult",
    "SettingsBatch",
    "run_settings",
    "run_settings_packed",
    "PackedResults",
]

log = logging.getLogger(__name__)


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


@dataclass
class SettingResult:
    """The outputs of one setting, or why it failed (``error`` is empty when it did not)."""

    index: int
    outputs: dict[str, np.ndarray]
    error: str = ""


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
        stacked = {
            name: np.stack(column) if len({v.shape for v in column}) == 1 else column
            for name, column in columns.items()
        }
        return cls(tuple(index for index, _ in settings), stacked, size)

    def settings(self) -> Settings:
        """``(setting number, {input: value})`` for each setting of the batch."""
        return [
            (index, {name: column[k] for name, column in self.values.items()})
            for k, index in enumerate(self.indices)
        ]


def run_settings(task: SweepTask, batch: Settings | SettingsBatch) -> list[SettingResult]:
    """Run each ``(index, {input: value})`` setting of a batch; one result per setting.

    A setting whose run raises an :class:`~mdf_loops.MdfLoopsError` (a limit, a
    failing node) or whose outputs hold NaN is recorded as failed; any other
    exception is a fault, not a result, and ends the batch. On ``jax`` (where
    ``mdf_loops.run_batch`` exists) the settings of one shape are one vectorised call.
    """
    model = _model(task)
    if isinstance(batch, list):
        batch = SettingsBatch.of(batch, len(batch)) if batch else SettingsBatch((), {}, 0)
    if task.backend == "jax" and batch.indices:
        import mdf_loops

        if hasattr(mdf_loops, "run_batch"):
            return _run_vectorised(mdf_loops.run_batch, model, task, batch)
    return [_run_one(model, task, index, values) for index, values in batch.settings()]


@dataclass(frozen=True)
class PackedResults:
    """A batch's results as they travel back: each output of all its settings in one flat
    array (Dask sends every array as a frame of its own, and reads each back at a cost:
    hundreds of small arrays per batch took longer to send than to compute)."""

    indices: tuple[int, ...]
    errors: tuple[str, ...]
    #: output name -> (the values of every setting that has it, flat; each one's shape or None)
    outputs: dict[str, tuple[np.ndarray, tuple[tuple[int, ...] | None, ...]]]

    @classmethod
    def of(cls, results: list[SettingResult]) -> PackedResults:
        names = sorted({name for result in results for name in result.outputs})
        outputs = {}
        for name in names:
            arrays = [r.outputs.get(name) for r in results]
            present = [np.ravel(a) for a in arrays if a is not None]
            flat = np.concatenate(present) if present else np.zeros(0)
            outputs[name] = (flat, tuple(None if a is None else a.shape for a in arrays))
        return cls(tuple(r.index for r in results), tuple(r.error for r in results), outputs)

    def unpack(self) -> list[SettingResult]:
        """One :class:`SettingResult` per setting (its arrays views of the flat ones)."""
        results = [SettingResult(i, {}, e) for i, e in zip(self.indices, self.errors, strict=True)]
        for name, (flat, shapes) in self.outputs.items():
            start = 0
            for result, shape in zip(results, shapes, strict=True):
                if shape is not None:
                    size = math.prod(shape)
                    result.outputs[name] = flat[start : start + size].reshape(shape)
                    start += size
        return results


def run_settings_packed(task: SweepTask, batch: SettingsBatch) -> PackedResults:
    """:func:`run_settings`, its results packed for the trip back (:class:`PackedResults`)."""
    return PackedResults.of(run_settings(task, batch))


def _run_one(
    model: Model, task: SweepTask, index: int, values: dict[str, np.ndarray]
) -> SettingResult:
    from mdf_loops.run import run

    try:
        outputs = run(
            model,
            {**task.inputs, **values},
            graph=task.graph,
            backend=task.backend,
            **task.run_options,
        )
    except MdfLoopsError as exc:
        return SettingResult(index, {}, f"{type(exc).__name__}: {exc}")
    return checked_result(index, outputs, task.outputs)


def _run_vectorised(
    run_batch, model: Model, task: SweepTask, batch: SettingsBatch
) -> list[SettingResult]:
    """The settings of each shape as one call of ``mdf_loops.run_batch(model, inputs,
    params)`` (shared inputs, and each swept input stacked along a new first axis, padded
    to the sweep's batch size); when a call raises, its settings run one by one to find
    which failed. Run options it does not take make each setting run alone."""
    import inspect

    settings = batch.settings()
    accepted = inspect.signature(run_batch).parameters
    if any(name not in accepted for name in task.run_options):
        return [_run_one(model, task, index, values) for index, values in settings]
    groups: dict[tuple, Settings] = {}
    for index, values in settings:
        groups.setdefault(tuple(v.shape for v in values.values()), []).append((index, values))
    results = {}
    size = batch.size if len(groups) == 1 else 0  # pad a batch of one shape only
    for group in groups.values():
        for result in _run_group(run_batch, model, task, group, size):
            results[result.index] = result
    return [results[index] for index in batch.indices]


def _run_group(run_batch, model: Model, task: SweepTask, group: Settings, size: int):
    padded = group + [group[-1]] * max(0, size - len(group))  # one compiled batch size
    params = {name: np.stack([values[name] for _, values in padded]) for name in group[0][1]}
    try:
        outputs = run_batch(
            model, task.inputs, params, backend="jax", graph=task.graph, **task.run_options
        )
    except MdfLoopsError as exc:
        log.info(
            "batch of %d settings failed on run_batch (%s); running them one by one",
            len(group),
            exc,
        )
        return [_run_one(model, task, index, values) for index, values in group]
    # an output is stacked along its first axis, or a list where the runs' shapes differ
    return [
        checked_result(index, {name: value[k] for name, value in outputs.items()}, task.outputs)
        for k, (index, _) in enumerate(group)
    ]


def checked_result(index: int, outputs: dict[str, Any], wanted: tuple[str, ...]) -> SettingResult:
    """The ``wanted`` outputs as arrays; an output that is not a tensor or holds NaN
    makes the setting failed (its values are kept)."""
    kept: dict[str, np.ndarray] = {}
    problems = []
    for name in wanted:
        value = outputs[name]
        if value is None or isinstance(value, list):
            kind = "an empty optional" if value is None else "a sequence"
            problems.append(f"output '{name}' is {kind}; a sweep stores tensors only")
            continue
        array = np.asarray(value)
        kept[name] = array
        if array.dtype.kind in "fc" and np.isnan(array).any():
            problems.append(f"output '{name}' has NaN values")
    return SettingResult(index, kept, "; ".join(problems))

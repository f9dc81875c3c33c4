"""What a Dask worker does with a batch of settings: run each, record what failed.

The model travels as its MDF JSON text with the hash of that text. Each worker
process loads it once and keeps it (:data:`_MODELS`), so :func:`mdf_loops.run`
verifies and compiles it once per worker, not once per setting: swept parameters
are inputs of the model by then (:mod:`mdf_loops.sweep.parameters`).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from modeci_mdf.mdf import Model

from mdf_loops.backends import Backend
from mdf_loops.errors import MdfLoopsError

__all__ = ["SweepTask", "SettingResult", "run_settings"]

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


def run_settings(task: SweepTask, settings: Settings) -> list[SettingResult]:
    """Run each ``(index, {input: value})`` setting of a batch; one result per setting.

    A setting whose run raises an :class:`~mdf_loops.MdfLoopsError` (a limit, a
    failing node) or whose outputs hold NaN is recorded as failed; any other
    exception is a fault, not a result, and ends the batch.
    """
    model = _model(task)
    if task.backend == "jax":
        import mdf_loops

        if hasattr(mdf_loops, "run_batch"):
            return _run_vectorised(mdf_loops.run_batch, model, task, settings)
    return [_run_one(model, task, index, values) for index, values in settings]


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
    run_batch, model: Model, task: SweepTask, settings: Settings
) -> list[SettingResult]:
    """The whole batch as one call of ``mdf_loops.run_batch(model, inputs, params)``
    (shared inputs, and each swept input stacked along a new first axis); settings are
    rerun one by one to find which failed when it raises. Run options it does not take
    (it names those it does) make each setting run alone."""
    import inspect

    accepted = inspect.signature(run_batch).parameters
    if any(name not in accepted for name in task.run_options):
        return [_run_one(model, task, index, values) for index, values in settings]
    params = {name: np.stack([values[name] for _, values in settings]) for name in settings[0][1]}
    try:
        outputs = run_batch(
            model, task.inputs, params, backend="jax", graph=task.graph, **task.run_options
        )
    except MdfLoopsError as exc:
        log.info(
            "batch of %d settings failed on run_batch (%s); running them one by one",
            len(settings),
            exc,
        )
        return [_run_one(model, task, index, values) for index, values in settings]
    # an output is stacked along its first axis, or a list where the runs' shapes differ
    return [
        checked_result(index, {name: value[k] for name, value in outputs.items()}, task.outputs)
        for k, (index, _) in enumerate(settings)
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

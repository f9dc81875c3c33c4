"""A batch of settings on onnxruntime as one session call of the batched model.

The batching transform (:mod:`mdf_loops.backends.onnxruntime.batching`) gives the swept
inputs a batch axis, so onnxruntime's cost per operator and per loop iteration is paid
once per batch, not once per setting. A batch's first setting is typed as ``run`` types
it, and the first batch of each form in a worker process (model, run options, every
input's dtype and shape, the shared inputs' values: :data:`_CHECKED`) runs its first
setting through :func:`mdf_loops.run` (every check of the model and of its inputs, the
compilation); the later batches of that form differ only in the swept values, whose
checks (their type, the limits, while the batched call runs) are made for each batch.
The batched model is compiled for the same model, input forms, limits and threads,
where the swept values have the dtype and shape ``run`` gave the first (so no setting's
value would be converted). Where that cannot be done (a node without a batching rule,
a batch that passed a limit or failed), the batch runs one session call per setting
instead, as before, and each setting gets exactly what ``run`` gives.
"""

from __future__ import annotations

import hashlib
import logging
from typing import TYPE_CHECKING, Any

import numpy as np
from modeci_mdf.mdf import Model

from mdf_loops import ops
from mdf_loops.errors import CompileError, MdfLoopsError
from mdf_loops.model.inputs import check_inputs
from mdf_loops.model.interface import graph_interface
from mdf_loops.sweep.packed import PackedResults, Steps, pack

if TYPE_CHECKING:
    from mdf_loops.sweep.worker import SettingsBatch, SweepTask

__all__ = ["run_in_one_call"]

log = logging.getLogger(__name__)

_LIMITS = ("max_iterations", "max_total_iterations", "max_depth", "max_elements")

#: the forms of batch whose first setting ran through ``run`` in this process (:func:`_form`)
_CHECKED: dict[tuple, None] = {}
_CHECKED_KEPT = 64


def run_in_one_call(model: Model, task: SweepTask, batch: SettingsBatch) -> PackedResults | None:
    """The results of ``batch`` from one call of the batched model, or None where the
    batch must run setting by setting (the reason logged at INFO)."""
    from mdf_loops.backends.onnxruntime.batching.session import cached_batched_compile
    from mdf_loops.run import run

    options = dict(graph=task.graph, backend=task.backend, **task.run_options)
    if options.get("external_data_dir") is not None:
        return None
    first = {**task.inputs, **{name: column[0] for name, column in batch.values.items()}}
    target = next((g for g in model.graphs if g.id == task.graph), model.graphs[0])
    try:
        typed = check_inputs(target, graph_interface(target).inputs, first)
        form = _form(task, typed)
        if form is None or form not in _CHECKED:
            run(model, first, **options)  # every check, and the compiled model whose form we share
            _remember(form)
    except MdfLoopsError:
        return None  # the setting-by-setting path records it
    names = sorted(batch.values)
    for name in names:  # each setting's value as run typed the first: no conversion
        column = batch.values[name]
        if not isinstance(column, np.ndarray):
            return None  # settings of several shapes
        if column.dtype != typed[name].dtype or column.shape[1:] != np.shape(typed[name]):
            return None
    trusted = bool(options.get("trusted", False))
    changed = {name: options[name] for name in _LIMITS if options.get(name) is not None}
    with ops.limits(**changed):
        limits = None if trusted else ops.current_limits()
    try:
        session = cached_batched_compile(
            model,
            typed,
            names,
            batch.size,
            graph=task.graph,
            threads=options.get("threads", 1),
            limits=limits,
        )
    except CompileError:
        return None  # logged when it was compiled
    feed: dict[str, Any] = {k: v for k, v in typed.items() if k not in batch.values}
    feed.update({name: batch.padded(name) for name in names})
    count = len(batch.indices)
    try:
        outputs = session.compiled.run(feed)
    except Exception as exc:  # a limit, or onnxruntime failing: each setting says which
        log.info("a batch of %d settings runs setting by setting: %s", count, exc)
        return None
    columns = session.split(outputs, count)
    kept = {
        name: Steps(*column) if isinstance(column, tuple) else column
        for name, column in ((name, columns[name]) for name in task.outputs)
    }
    return pack(batch.indices, kept, [""] * count)


def _form(task: SweepTask, typed: dict[str, Any]) -> tuple | None:
    """What ``run``'s checks of a batch's first setting depend on besides the swept values:
    the model, the graph, backend, run options and limits, every input's dtype and shape, and
    the shared inputs' values (the swept values are checked for each batch); None where
    an input is not one array (each batch's first setting then runs through ``run``)."""
    if not set(task.inputs) <= set(typed) or not all(
        isinstance(value, np.ndarray) for value in typed.values()
    ):
        return None
    shared = hashlib.sha256()
    for name in sorted(task.inputs):
        shared.update(f"{name}{typed[name].dtype.str}{typed[name].shape}".encode())
        shared.update(np.ascontiguousarray(typed[name]).tobytes())
    shapes = tuple((name, typed[name].dtype.str, typed[name].shape) for name in sorted(typed))
    options = repr(sorted(task.run_options.items()))
    limits = ops.current_limits()  # those in force in this process, and the options above
    return (task.model_key, task.graph, task.backend, options, limits, shapes, shared.hexdigest())


def _remember(form: tuple | None) -> None:
    if form is None:
        return
    _CHECKED[form] = None
    while len(_CHECKED) > _CHECKED_KEPT:
        del _CHECKED[next(iter(_CHECKED))]

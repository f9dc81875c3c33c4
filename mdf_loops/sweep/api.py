"""``sweep``: one run of a model per parameter setting, spread over a Dask cluster.

Equivalent to this loop, run in parallel, with failures recorded instead of raised::

    for setting in settings:        # every combination of grid, or each sample
        model_k = copy of model with each swept "node.parameter" set to its value
        results[setting] = mdf_loops.run(model_k, {**inputs, **swept inputs}, backend=backend)
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from modeci_mdf.mdf import Model

from mdf_loops.backends import Backend
from mdf_loops.sweep.cluster import (
    DEFAULT_TIMEOUT,
    connected,
    refuse_in_bootstrap,
    wait_for_workers,
)
from mdf_loops.sweep.errors import SweepError
from mdf_loops.sweep.execute import batch_size_for, run_batches
from mdf_loops.sweep.packed import PackedResults
from mdf_loops.sweep.results import (
    ResultTable,
    check_output_path,
    fingerprint_attrs,
    load_dataset,
    save_dataset,
)
from mdf_loops.sweep.space import SweepSpace, grid_space, sample_space
from mdf_loops.sweep.worker import SettingsBatch, SweepTask

if TYPE_CHECKING:
    import xarray

__all__ = ["sweep"]

log = logging.getLogger(__name__)

#: progress callback: (settings done, settings in the sweep)
Progress = Callable[[int, int], None]


def sweep(
    model: Model | str | os.PathLike,
    grid: Mapping[str, Sequence[Any]] | None = None,
    *,
    samples: Sequence[Mapping[str, Any]] | None = None,
    inputs: Mapping[str, Any] | None = None,
    outputs: Sequence[str] | None = None,
    backend: Backend = "auto",
    client: Any = None,
    batch_size: int | None = None,
    output: str | os.PathLike | None = None,
    graph: str | None = None,
    progress: Progress | None = None,
    checkpoint_seconds: float = 30.0,
    timeout: float = DEFAULT_TIMEOUT,
    **run_options: Any,
) -> xarray.Dataset:
    """Run ``model`` once per setting of ``grid`` or ``samples`` and gather the outputs.

    Args:
        model: an MDF ``Model`` or a path (as for :func:`mdf_loops.run`).
        grid: ``{name: values}``; every combination runs. A name is a graph input
            or a parameter ``"node.parameter"`` (nodes inside loop bodies too;
            ``"loop/node.parameter"`` where a node id is used in several graphs).
        samples: instead of ``grid``, a list of ``{name: value}`` settings.
        inputs: the inputs every setting shares.
        outputs: output names to keep (default: all outputs of the graph).
        backend: as for :func:`mdf_loops.run`; on ``"jax"`` a batch is vectorised.
        client: a ``dask.distributed.Client`` or a scheduler address such as
            ``"tcp://host:8786"``; default: a local cluster on 127.0.0.1 of one
            single-threaded worker process per core, closed at the end.
        batch_size: settings per task, one call on jax/onnxruntime (default: docs/sweeps.md).
        output: a ``.nc`` (netCDF) or ``.zarr`` file. The results are written there
            (also every ``checkpoint_seconds`` while the sweep runs); a sweep whose
            file exists resumes: the settings already in it are skipped.
        progress: called with (settings done, settings in all) as batches end.
        timeout: seconds a wait on the cluster may last (docs/sweeps.md): a scheduler
            that does not answer, goes away or has no workers for that long ends the
            sweep with :class:`SweepError`, the settings finished so far in ``output``.
        run_options: passed to :func:`mdf_loops.run` (``trusted``, ``max_iterations``...).

    Returns:
        an ``xarray.Dataset``: one dimension per grid name (or ``sample``), each
        output with its own dimensions after those, ``error`` (empty where the
        setting ran; a setting that raised an :class:`~mdf_loops.MdfLoopsError`
        or gave NaN is recorded there, not raised) and ``completed``.
    """
    _check_call(client, timeout)
    plan = _plan(model, grid, samples, inputs, outputs, backend, graph, run_options)
    table = _resumed_table(plan, output)
    if table.pending:
        saver = _Checkpoints(table, output, checkpoint_seconds)
        with connected(client, timeout) as active:
            try:
                _execute(plan, table, active, batch_size, progress, saver, timeout)
            finally:
                saver.save()  # from the table alone: needs no scheduler
    elif output is not None:
        save_dataset(table.to_dataset(), output)
    return table.to_dataset()


def _check_call(client: Any, timeout: Any) -> None:
    """What needs no model: the extra is installed, this is no worker process running an
    unguarded script again, and ``timeout`` is a positive number of seconds."""
    _require_extra()
    if client is None:
        refuse_in_bootstrap()
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise SweepError(f"timeout must be a positive number of seconds, not {timeout!r}")
    if not math.isfinite(timeout):
        raise SweepError("timeout must be finite: a sweep never waits without end")


def _resumed_table(plan: _Plan, output: str | os.PathLike | None) -> ResultTable:
    """The sweep's result table, holding the settings an existing ``output`` file has done."""
    table = ResultTable(plan.space, plan.task.outputs, plan.attrs)
    if output is not None:
        check_output_path(output)
        if os.path.exists(output):
            skipped = table.resume_from(load_dataset(output, len(plan.space)))
            log.info(
                "%s: resuming; %d of %d settings already done", output, skipped, len(plan.space)
            )
    return table


def _require_extra() -> None:
    import importlib.util

    missing = [name for name in ("xarray", "distributed") if importlib.util.find_spec(name) is None]
    if missing:
        raise SweepError(f"sweep needs {' and '.join(missing)}: pip install 'mdf-loops[sweep]'")


def _check_swept_inputs(target, interface, space: SweepSpace) -> None:
    """Refuse, before anything runs, a swept input value the graph's declared type cannot
    take (each distinct shape and dtype is checked once)."""
    from mdf_loops.errors import InputError
    from mdf_loops.model.inputs import fit_input, graph_input_types

    names = [name for name in space.names if name in interface.inputs]
    declared = graph_input_types(target, {name: interface.inputs[name] for name in names})
    for name in names:
        seen = set()
        values = space.values[name]
        if isinstance(values, np.ndarray):  # one shape and dtype: its first value stands for all
            values = values[:1]
        for k, value in enumerate(values):
            if (value.shape, value.dtype) in seen:
                continue
            seen.add((value.shape, value.dtype))
            try:
                fit_input(name, value, declared[name])
            except InputError as exc:
                raise SweepError(f"swept input '{name}', value {k}: {exc}") from None


@dataclass(frozen=True)
class _Plan:
    space: SweepSpace
    task: SweepTask
    input_of: dict[str, str]  # swept name -> input name of the (rewritten) model
    attrs: dict[str, Any]


def _plan(model, grid, samples, inputs, outputs, backend, graph, run_options) -> _Plan:
    from mdf_loops.backends import BACKENDS
    from mdf_loops.model.constants import plain_constants
    from mdf_loops.model.interface import graph_interface, load_model, select_graph
    from mdf_loops.sweep.parameters import lift_parameters

    if backend not in BACKENDS:
        raise SweepError(f"backend must be one of {BACKENDS}, not {backend!r}")
    if (grid is None) == (samples is None):
        raise SweepError("give either grid={name: values} or samples=[{name: value}, ...]")
    space = grid_space(grid) if grid is not None else sample_space(samples)
    model = load_model(model)
    target = select_graph(model, graph)
    interface = graph_interface(target)
    inputs = dict(inputs or {})
    both = sorted(set(inputs) & set(space.names))
    if both:
        raise SweepError(f"{both} are swept and also given in inputs; give each once")
    _check_swept_inputs(target, interface, space)
    addresses = [name for name in space.names if name not in interface.inputs]
    plain, constants = plain_constants(model, target.id, addresses)  # imported weights
    lifted, lifted_of = lift_parameters(plain, target.id, [constants.get(a, a) for a in addresses])
    input_of = {a: lifted_of[constants.get(a, a)] for a in addresses}
    input_of.update({name: name for name in space.names if name in interface.inputs})
    wanted = tuple(outputs) if outputs is not None else tuple(interface.outputs)
    unknown = [name for name in wanted if name not in interface.outputs]
    if unknown or not wanted:
        raise SweepError(
            f"graph '{target.id}' has no outputs {unknown}; it has {sorted(interface.outputs)}"
        )
    text = lifted.to_json()
    key = hashlib.sha256(text.encode()).hexdigest()
    task = SweepTask(text, key, target.id, inputs, wanted, backend, dict(run_options))
    attrs = fingerprint_attrs(key, space, wanted, target.id, run_options, input_of, model.id)
    attrs["backend"] = backend
    return _Plan(space, task, input_of, attrs)


def _execute(
    plan: _Plan,
    table: ResultTable,
    client: Any,
    batch_size: int | None,
    progress: Progress | None,
    saver: _Checkpoints,
    timeout: float,
) -> None:
    pending = table.pending
    threads = wait_for_workers(client, timeout)
    size = batch_size_for(len(pending), threads, batch_size, plan.task.backend)
    batches = []
    for k in range(0, len(pending), size):
        indices = pending[k : k + size]
        columns = plan.space.columns(indices)  # one array per name where it can be
        named = {plan.input_of[name]: column for name, column in columns.items()}
        batches.append(SettingsBatch.of_columns(indices, named, size))

    def record(results: PackedResults) -> None:
        duplicates = table.record_packed(results)
        if duplicates:
            log.warning("%d settings arrived twice; the first result is kept", duplicates)
        if progress is not None:
            progress(int(table.completed.sum()), len(table.completed))
        saver.maybe_save()

    run_batches(client, plan.task, batches, record, timeout)


class _Checkpoints:
    """Writes the table to the output file now and then, and at the end."""

    def __init__(self, table: ResultTable, output: Any, every: float):
        self.table, self.output, self.every = table, output, every
        self.last = time.monotonic()

    def maybe_save(self) -> None:
        if self.output is not None and time.monotonic() - self.last >= self.every:
            self.save()

    def save(self) -> None:
        if self.output is not None:
            save_dataset(self.table.to_dataset(), self.output)
            self.last = time.monotonic()

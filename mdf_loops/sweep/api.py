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
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from modeci_mdf.mdf import Model

from mdf_loops.backends import Backend
from mdf_loops.sweep.errors import SweepError
from mdf_loops.sweep.results import (
    ResultTable,
    check_output_path,
    fingerprint_attrs,
    load_dataset,
    save_dataset,
)
from mdf_loops.sweep.space import SweepSpace, grid_space, sample_space
from mdf_loops.sweep.worker import SweepTask, run_settings

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
        backend: as for :func:`mdf_loops.run`; with ``"jax"`` and
            ``mdf_loops.run_batch`` available, a batch is one vectorised call.
        client: a ``dask.distributed.Client``; default: a local cluster of one
            single-threaded worker process per core, closed at the end.
        batch_size: settings per task (default: about four tasks per worker).
        output: a ``.nc`` (netCDF) or ``.zarr`` file. The results are written there
            (also every ``checkpoint_seconds`` while the sweep runs); a sweep whose
            file exists resumes: the settings already in it are skipped.
        progress: called with (settings done, settings in all) as batches finish.
        run_options: passed to :func:`mdf_loops.run` (``trusted``, ``max_iterations``...).

    Returns:
        an ``xarray.Dataset``: one dimension per grid name (or ``sample``), each
        output with its own dimensions after those, ``error`` (empty where the
        setting ran; a setting that raised an :class:`~mdf_loops.MdfLoopsError`
        or gave NaN is recorded there, not raised) and ``completed``.
    """
    _require_extra()
    plan = _plan(model, grid, samples, inputs, outputs, backend, graph, run_options)
    table = _resumed_table(plan, output)
    pending = table.pending
    if pending:
        saver = _Checkpoints(table, output, checkpoint_seconds)
        try:
            with _cluster(client) as active:
                _execute(plan, table, pending, active, batch_size, progress, saver)
        finally:
            saver.save()
    elif output is not None:
        save_dataset(table.to_dataset(), output)
    return table.to_dataset()


def _resumed_table(plan: _Plan, output: str | os.PathLike | None) -> ResultTable:
    """The sweep's result table, holding the settings an existing ``output`` file has done."""
    table = ResultTable(plan.space, plan.task.outputs, plan.attrs)
    if output is not None:
        check_output_path(output)
        if os.path.exists(output):
            skipped = table.resume_from(load_dataset(output))
            log.info(
                "%s: resuming; %d of %d settings already done", output, skipped, len(plan.space)
            )
    return table


def _require_extra() -> None:
    import importlib.util

    missing = [name for name in ("xarray", "distributed") if importlib.util.find_spec(name) is None]
    if missing:
        raise SweepError(f"sweep needs {' and '.join(missing)}: pip install 'mdf-loops[sweep]'")


@dataclass(frozen=True)
class _Plan:
    space: SweepSpace
    task: SweepTask
    input_of: dict[str, str]  # swept name -> input name of the (rewritten) model
    attrs: dict[str, Any]


def _plan(model, grid, samples, inputs, outputs, backend, graph, run_options) -> _Plan:
    from mdf_loops.backends import BACKENDS
    from mdf_loops.model.constants import plain_constants
    from mdf_loops.run import _select_graph, graph_interface, load_model
    from mdf_loops.sweep.parameters import lift_parameters

    if backend not in BACKENDS:
        raise SweepError(f"backend must be one of {BACKENDS}, not {backend!r}")
    if (grid is None) == (samples is None):
        raise SweepError("give either grid={name: values} or samples=[{name: value}, ...]")
    space = grid_space(grid) if grid is not None else sample_space(samples)
    model = load_model(model)
    target = _select_graph(model, graph)
    interface = graph_interface(target)
    inputs = dict(inputs or {})
    both = sorted(set(inputs) & set(space.names))
    if both:
        raise SweepError(f"{both} are swept and also given in inputs; give each once")
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


@contextmanager
def _cluster(client: Any) -> Iterator[Any]:
    """``client``, or a client of a local cluster (one worker process per core) for the block."""
    if client is not None:
        yield client
        return
    from dask.distributed import Client, LocalCluster

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cluster = LocalCluster(
        n_workers=cores or 1, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    try:
        with Client(cluster) as local:
            yield local
    finally:
        cluster.close()


def _batches(pending: list[int], size: int) -> list[list[int]]:
    return [pending[k : k + size] for k in range(0, len(pending), size)]


def _execute(
    plan: _Plan,
    table: ResultTable,
    pending: list[int],
    client: Any,
    batch_size: int | None,
    progress: Progress | None,
    saver: _Checkpoints,
) -> None:
    from dask.distributed import as_completed

    if batch_size is not None and batch_size < 1:
        raise SweepError(f"batch_size must be at least 1, not {batch_size}")
    workers = max(1, sum(client.nthreads().values()))
    size = batch_size or max(1, min(500, math.ceil(len(pending) / (4 * workers))))
    futures = []
    for batch in _batches(pending, size):
        settings = [
            (
                index,
                {plan.input_of[name]: value for name, value in plan.space.setting(index).items()},
            )
            for index in batch
        ]
        futures.append(client.submit(run_settings, plan.task, settings, pure=False))
    done = int(table.completed.sum())
    try:
        for future in as_completed(futures):
            duplicates = sum(not table.record(result) for result in _result(future))
            if duplicates:
                log.warning("%d settings arrived twice; the first result is kept", duplicates)
            done = int(table.completed.sum())
            if progress is not None:
                progress(done, len(table.completed))
            saver.maybe_save()
    finally:
        client.cancel([f for f in futures if not f.done()])


def _result(future: Any) -> list:
    from distributed import KilledWorker

    try:
        return future.result()
    except KilledWorker as exc:
        raise SweepError(
            f"a batch of settings killed its worker several times ({exc}); "
            "the settings done so far are kept; run again to resume"
        ) from exc


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

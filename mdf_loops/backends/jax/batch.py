"""Many runs of one model at once: ``run_batch`` over parameter settings or inputs.

On the JAX backend the runs are one ``jax.vmap``-ped, jit-compiled call; on the
others, a loop of :func:`mdf_loops.run` calls on the same (rewritten) model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from modeci_mdf.mdf import Model

from mdf_loops.backends import Backend
from mdf_loops.backends.jax.compiled import jax_errors
from mdf_loops.backends.jax.grad import lift, prepare
from mdf_loops.backends.jax.values import BUFFER_FULL, LIMIT_PASSED
from mdf_loops.errors import InputError, IterationLimitError, ModelError
from mdf_loops.model.inputs import DeclaredInput, fit_input

__all__ = ["run_batch"]

#: what a batch of values must be before the model's types apply to each row: numbers
_UNDECLARED = DeclaredInput()


def run_batch(
    model: Model | Any,
    inputs: Mapping[str, Any] | None = None,
    params: Mapping[str, Sequence[Any]] | None = None,
    *,
    backend: Backend = "jax",
    graph: str | None = None,
    trusted: bool = False,
    max_iterations: int | None = None,
) -> dict[str, Any]:
    """Run ``model`` once per row of ``params``; outputs stacked along a new first axis.

    Args:
        inputs: graph inputs shared by every run.
        params: the batch: ``{name: values}``, each with the batch along its first
            axis (all of one length). A name is a graph input or a constant
            parameter (``"node.parameter"``, or a parameter id found once).
        backend: ``"jax"`` (one vmapped call) or any backend of :func:`mdf_loops.run`
            (one run per row).

    Returns:
        ``{output name: array with the batch first}``; a list of per-run values
        where the runs' shapes differ (a Loop's scan outputs).
    """
    batch, size = _batch(params)
    first = _with_row(inputs, {n: rows[0] for n, rows in batch.items()})
    if backend == "jax":
        return _run_jax(model, first, batch, size, graph, trusted, max_iterations)
    return _run_loop(model, first, batch, size, backend, graph, trusted, max_iterations)


def _with_row(inputs: Any, row: dict[str, Any]) -> Any:
    """The shared inputs and one row of the batch (inputs that are no mapping are left for
    the input checks to refuse)."""
    return {**inputs, **row} if isinstance(inputs, Mapping) else row if inputs is None else inputs


def _batch(params: Any) -> tuple[dict[str, Any], int]:
    """``({name: rows}, batch size)``, or :class:`InputError` naming the values that do not
    give one batch: not a mapping, no names, no batch axis, batch sizes that differ."""
    if not isinstance(params, Mapping) or not params:
        raise InputError(
            "params must map graph inputs or constant parameters to their values, the "
            f"batch along the first axis, e.g. {{'alpha': [0.1, 0.2]}}; got {params!r:.60}"
        )
    batch = {}
    for name, values in params.items():
        rows = list(values) if isinstance(values, list) else fit_input(name, values, _UNDECLARED)
        if not isinstance(rows, list) and np.ndim(rows) == 0:
            raise InputError(
                f"input '{name}': params give a single value; give one value per run "
                "(the batch along the first axis), or pass it in inputs to share it"
            )
        batch[name] = rows
    sizes = {name: len(rows) for name, rows in batch.items()}
    if set(sizes.values()) == {0}:
        raise InputError(f"inputs {sorted(sizes)}: params give no runs (0 rows)")
    if len(set(sizes.values())) != 1:
        raise InputError(
            f"inputs {sorted(sizes)}: params give batches of different sizes {sizes}; "
            "give each the same number of rows"
        )
    return batch, next(iter(sizes.values()))


def _run_loop(model, first, batch, size, backend, graph, trusted, max_iterations) -> dict:
    from mdf_loops.run import run

    rewritten, feed, renamed, graph_id = lift(
        model, first, list(batch), graph=graph, trusted=trusted
    )
    runs = []
    for k in range(size):
        row = {**feed, **{renamed[n]: values[k] for n, values in batch.items()}}
        runs.append(
            run(
                rewritten,
                row,
                graph=graph_id,
                trusted=trusted,
                backend=backend,
                max_iterations=max_iterations,
            )
        )
    return {name: _stack([r[name] for r in runs]) for name in runs[0]} if runs else {}


def _stack(values: list) -> Any:
    if all(isinstance(v, np.ndarray) for v in values) and len({v.shape for v in values}) == 1:
        return np.stack(values)
    return values


def _run_jax(model, first, batch, size, graph, trusted, max_iterations) -> dict:
    from mdf_loops import ops
    from mdf_loops.backends.jax.precision import x64

    names = list(batch)
    changed = {} if max_iterations is None else {"max_iterations": max_iterations}
    with ops.limits(**changed):
        limits = None if trusted else ops.current_limits()
        lowered, feed, renamed = prepare(
            model, first, names, graph=graph, trusted=trusted, limits=limits
        )
    static, dynamic = lowered.split(lowered.feed(feed))
    rows = {}
    for name in names:
        if renamed[name] in static:
            raise ModelError(
                f"'{name}' sets a shape, an index or a trip count in the model; "
                "batch it with another backend (backend='onnxruntime')"
            )
        row = np.asarray(dynamic[renamed[name]])  # the first row, checked and typed
        rows[renamed[name]] = fit_input(
            name, batch[name], DeclaredInput("tensor", row.dtype, (size, *row.shape))
        )
    shared = {k: v for k, v in dynamic.items() if k not in rows}
    with x64():
        while True:
            fn, layout = _batched_function(lowered, static, rows, shared)
            with jax_errors(f"graph '{lowered.onnx_model.graph.name}' (jax backend, batch)"):
                flat, flags = fn(rows, shared)
            each = np.asarray(flags).reshape(-1)
            flag = int(np.bitwise_or.reduce(each & (BUFFER_FULL | LIMIT_PASSED)))
            if not lowered.grew_buffer(flag):
                break
    for row_flag in each:  # the first row whose loops passed max_total_iterations
        lowered.check_limits(int(row_flag))
    if flag & LIMIT_PASSED:
        raise IterationLimitError(
            "a Loop passed max_iterations (jax backend, batch); raise it with max_iterations=N"
        )
    return {name: _rebuild(spec, flat, size) for name, spec in layout}


def _batched_function(lowered, static, rows, shared):
    import jax

    from mdf_loops.backends.jax.flat import flatten, static_key

    key = (
        "batch",
        static_key(static),
        lowered.buffer_rows,
        tuple((k, v.shape, v.dtype.str) for k, v in rows.items()),
        tuple((k, np.shape(v)) for k, v in shared.items() if not isinstance(v, list)),
    )
    entry = lowered._jitted.get(key)
    if entry is None:
        layout: list = []
        traced = lowered.function(static, mode="run")

        def one(row, rest):
            outputs, flag = traced({**rest, **row})
            layout.clear()
            return flatten(outputs, layout), flag

        entry = lowered._jitted[key] = (jax.jit(jax.vmap(one, in_axes=(0, None))), layout)
    return entry


def _rebuild(spec, flat: list, size: int) -> Any:
    kind, where = spec
    if kind == "ragged":
        buffers, counts = np.asarray(flat[where]), np.asarray(flat[where + 1])
        return [buffers[k][: int(counts[k])] for k in range(size)]
    if kind == "list":
        return [_rebuild(s, flat, size) for s in where]
    if kind == "opt":
        return None if where is None else _rebuild(where, flat, size)
    return np.asarray(flat[where])

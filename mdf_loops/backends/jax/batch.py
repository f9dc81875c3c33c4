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
from mdf_loops.backends.jax.grad import lift, prepare
from mdf_loops.backends.jax.values import LIMIT_PASSED
from mdf_loops.errors import IterationLimitError, ModelError

__all__ = ["run_batch"]


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
    batch = {
        name: list(values) if isinstance(values, list) else np.asarray(values)
        for name, values in (params or {}).items()
    }
    sizes = {name: len(values) for name, values in batch.items()}
    if not sizes or len(set(sizes.values())) != 1:
        raise ValueError(f"params must give values for one batch size, got sizes {sizes or '{}'}")
    size = next(iter(sizes.values()))
    if backend == "jax":
        return _run_jax(model, dict(inputs or {}), batch, size, graph, trusted, max_iterations)
    return _run_loop(
        model, dict(inputs or {}), batch, size, backend, graph, trusted, max_iterations
    )


def _run_loop(model, inputs, batch, size, backend, graph, trusted, max_iterations) -> dict:
    from mdf_loops.run import run

    rewritten, feed, renamed, graph_id = lift(
        model, inputs, list(batch), graph=graph, trusted=trusted
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


def _run_jax(model, inputs, batch, size, graph, trusted, max_iterations) -> dict:
    from mdf_loops import ops
    from mdf_loops.backends.jax.precision import x64

    names = list(batch)
    first = {n: (v[0] if size else v) for n, v in batch.items()}
    changed = {} if max_iterations is None else {"max_iterations": max_iterations}
    with ops.limits(**changed):
        limits = None if trusted else ops.current_limits()
        lowered, feed, renamed = prepare(
            model, {**inputs, **first}, names, graph=graph, trusted=trusted, limits=limits
        )
    static, dynamic = lowered.split(lowered.feed(feed))
    rows = {}
    for name in names:
        if renamed[name] in static:
            raise ModelError(
                f"'{name}' sets a shape, an index or a trip count in the model; "
                "batch it with another backend (backend='onnxruntime')"
            )
        dtype = np.asarray(dynamic[renamed[name]]).dtype
        rows[renamed[name]] = np.asarray(batch[name], dtype=dtype)
    shared = {k: v for k, v in dynamic.items() if k not in rows}
    with x64():
        while True:
            fn, layout = _batched_function(lowered, static, rows, shared)
            flat, flags = fn(rows, shared)
            flag = int(np.bitwise_or.reduce(np.asarray(flags).reshape(-1)))
            if not lowered.grew_buffer(flag):
                break
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

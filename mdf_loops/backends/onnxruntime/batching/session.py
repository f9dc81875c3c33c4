"""A batch of settings in one onnxruntime call: the batched model compiled (with the
limit guards of untrusted models), and its outputs split into each setting's values.

The guards go into the batched model (:func:`compile_model`'s ``rewrite``), so their
limits count the batch: a batched loop runs as many iterations as the batch's longest
setting, so it passes ``max_iterations`` (and ``max_total_iterations``) exactly when a
setting would, or more often where loops nest; ``max_elements`` and the capped memory
of untrusted models apply to the batched values. A batch that passes a limit raises the
limit's error; the caller runs its settings one by one to find which did.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from modeci_mdf.mdf import Model

from mdf_loops.backends.onnxruntime.batching.graph import BatchedModel, OutputForm, batch_model
from mdf_loops.backends.onnxruntime.compiled import CompiledModel, compile_model
from mdf_loops.caches import CompileCache, input_signature
from mdf_loops.errors import CompileError
from mdf_loops.ops.common import Limits

__all__ = ["BatchedSession", "cached_batched_compile"]

log = logging.getLogger(__name__)

#: one output of the settings: stacked, or (padded to the longest, each one's length)
Column = np.ndarray | tuple[np.ndarray, np.ndarray]


@dataclass
class BatchedSession:
    """The compiled batched model of ``size`` settings and the form of each output."""

    compiled: CompiledModel
    size: int
    forms: dict[str, OutputForm] = field(default_factory=dict)

    def run(self, inputs: Mapping[str, Any], count: int) -> dict[str, Column]:
        """Each output's values for the first ``count`` settings: stacked along a first
        axis, or where their lengths differ, padded to the longest along the second axis
        with each setting's length. ``inputs``: the shared inputs, and
        the batched ones with ``size`` settings along their first axis. Raises the
        limit errors of :meth:`CompiledModel.run`, and onnxruntime's errors as they are."""
        return self.split(self.compiled.run(inputs), count)

    def split(self, outputs: dict[str, Any], count: int) -> dict[str, Column]:
        """The batched model's ``outputs`` as each output's values of the first ``count``
        settings (:meth:`run`)."""
        return {name: self._column(outputs, name, count) for name in self.forms}

    def _column(self, outputs: dict[str, Any], name: str, count: int) -> Column:
        form, value = self.forms[name], np.asarray(outputs[name])
        if not form.batched:  # one value every setting shares
            return np.broadcast_to(value, (count, *value.shape))
        if form.lengths is None:
            return value[:count]
        return value[:count], np.asarray(outputs[form.lengths])[:count]


_CACHE: CompileCache[BatchedSession] = CompileCache(CompileError)


def cached_batched_compile(
    model: Model,
    example_inputs: Mapping[str, Any],
    batched: Sequence[str],
    size: int,
    *,
    graph: str | None = None,
    threads: int | None = None,
    limits: Limits | None = None,
) -> BatchedSession:
    """``model`` compiled to run ``size`` settings at once, the inputs ``batched`` varying
    (cached per model, input forms, batched names, size, threads and limits; a refusal
    too: :class:`NotBatchable` or another :class:`CompileError`, logged once at INFO,
    with the node that stopped it)."""
    key = (graph, threads, limits, input_signature(example_inputs), tuple(batched), size)

    def build() -> BatchedSession:
        made: list[BatchedModel] = []

        def rewrite(onnx_model):
            made.append(batch_model(onnx_model, batched, size))
            return made[0].model

        try:
            compiled = compile_model(
                model, example_inputs, graph=graph, threads=threads, limits=limits, rewrite=rewrite
            )
        except CompileError as exc:  # NotBatchable, or onnxruntime refusing the batched model
            log.info("model '%s' runs one onnxruntime call per setting: %s", model.id, exc)
            raise
        return BatchedSession(compiled, size, made[0].outputs)

    return _CACHE.get(model, key, build)

"""The onnxruntime backend as :func:`mdf_loops.run` calls it, and ``auto``'s choice to pass
it over for the scheduler.

:func:`onnxruntime_runner` gives the compiled model (:mod:`.compiled`) as a runner of typed
inputs, or None where ``auto`` runs the call on the scheduler instead. ``auto`` passes
onnxruntime over where onnxruntime cannot run the model: the export or the session fails
(a :class:`CompileError`: an operator without a kernel at the model's types, say), or
onnxruntime fails while running it (its LSTM refuses float64 then): the runner raises
:class:`_PassedOver`, ``run`` runs the scheduler, and once the scheduler has run the inputs
:meth:`AutoChoice.remember` keeps the choice. A choice is kept per model (until it is
edited), graph, input form, threads and limits, so its WARNING comes once, and ``auto``
fails only where the scheduler fails. With ``backend="onnxruntime"`` a failure is one
:class:`EvaluationError` (or the :class:`CompileError`) saying what failed, where, and
which backends run the model instead.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mdf_loops.backends.onnxruntime.compiled import (
    CompiledModel,
    CompileError,
    cached_compile,
    onnxruntime_message,
)
from mdf_loops.caches import CompileCache, input_signature
from mdf_loops.errors import EvaluationError, MdfLoopsError
from mdf_loops.model.values import to_user
from mdf_loops.ops.common import Limits
from mdf_loops.run_plans import Runner

__all__ = ["AutoChoice", "auto_choice", "onnxruntime_runner"]

log = logging.getLogger(__name__)


class _PassedOver(EvaluationError):
    """onnxruntime failed to run a model that ``auto`` then runs on the scheduler: raised
    to ``mdf_loops.run`` alone, which runs the call on the scheduler (never to the user)."""


@dataclass
class AutoChoice:
    """Whether ``auto`` passes onnxruntime over for one call's model, graph, input form,
    threads and limits, and why (None: onnxruntime runs it)."""

    passed_over: str | None = None

    def warn(self, model_id: str, reason: str) -> None:
        """The WARNING that the model runs on the scheduler, unless this choice gave it."""
        if self.passed_over is None:
            reason = " ".join(reason.split())  # one line: a ModelError's may span several
            log.warning(
                "model '%s' runs on the scheduler, not onnxruntime (slower): %s", model_id, reason
            )

    def remember(self, reason: str) -> None:
        """Later calls of this choice go straight to the scheduler."""
        self.passed_over = reason


_CHOICES: CompileCache[AutoChoice] = CompileCache()


def auto_choice(
    model: Any, graph_id: str, threads: int | None, limits: Limits | None, typed: Mapping
) -> AutoChoice:
    """``auto``'s choice for this call (a new one after the model was edited)."""
    key = (graph_id, threads, limits, input_signature(typed))
    return _CHOICES.get(model, key, AutoChoice)


def onnxruntime_runner(
    model: Any,
    typed: Mapping[str, Any],
    graph_id: str,
    threads: int | None,
    limits: Limits | None,
    auto: bool,
) -> Runner | None:
    """The compiled model as a runner of typed inputs (outputs in the user's form); with
    ``auto``, None where onnxruntime is passed over (the WARNING logged once)."""
    choice = auto_choice(model, graph_id, threads, limits, typed) if auto else None
    if choice is not None and choice.passed_over is not None:
        return None
    try:
        compiled = cached_compile(model, typed, graph=graph_id, threads=threads, limits=limits)
    except CompileError as exc:
        if choice is None:
            raise
        choice.warn(model.id, str(exc))
        choice.remember(str(exc))
        return None
    return functools.partial(_outputs, compiled, graph_id, auto)


def _outputs(
    compiled: CompiledModel, graph_id: str, auto: bool, inputs: Mapping[str, Any]
) -> dict[str, Any]:
    try:
        outputs = compiled.run(inputs)
    except MdfLoopsError:  # the limits, values checked before running: every backend's verdict
        raise
    except Exception as exc:  # onnxruntime's own: a kernel it lacks, or one that failed
        where = f"graph '{graph_id}' (onnxruntime backend)"
        reason = f"onnxruntime cannot run it: {onnxruntime_message(exc)}"
        if auto:
            raise _PassedOver(reason, where) from None
        raise EvaluationError(
            f"{reason}; backend='auto' or 'scheduler' (--backend on the command line) runs it "
            "on modeci-mdf's engine, which names the failing node if one fails there too",
            where,
        ) from None
    return {name: to_user(value) for name, value in outputs.items()}

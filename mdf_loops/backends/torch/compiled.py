"""``mdf_loops.run(..., backend="torch")``: the model planned once per input types, run in torch.

The plan is :func:`.plan.plan` without trained values (every constant a buffer); a run
converts the typed inputs to tensors, runs under ``torch.no_grad()`` within the run's
limits, and returns numpy values.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

from modeci_mdf.mdf import Model

from mdf_loops import ops
from mdf_loops.backends.cache import CompileCache, input_signature
from mdf_loops.errors import CompileError, EvaluationError, MdfLoopsError
from mdf_loops.model.interface import select_graph
from mdf_loops.model.values import to_user

__all__ = ["compile", "cached_compile", "torch_runner"]

#: iterations treated as "no limit" (a trusted run)
_UNLIMITED = 1 << 62


def compile(
    model: Model,
    example_inputs: Mapping[str, Any],
    *,
    graph: str | None = None,
    limits: ops.Limits | None = None,
):
    """``model``'s graph as an :class:`~.module.MdfModule` with no trained values.

    Raises :class:`~mdf_loops.errors.CompileError` naming the node and operator when a
    node has no torch form, or when torch is not installed.
    """
    try:
        import torch  # noqa: F401
    except ImportError:
        raise CompileError(
            "the torch backend needs torch: pip install 'mdf-loops[torch]'"
        ) from None
    from mdf_loops.backends.torch.module import MdfModule
    from mdf_loops.backends.torch.plan import plan

    target = select_graph(model, graph)
    planned = plan(model, target, example_inputs, trainable=False, sized=limits is not None)
    module = MdfModule(model, target.id, planned)
    return module.eval()


_CACHE: CompileCache = CompileCache(CompileError)


def cached_compile(
    model: Model,
    inputs: Mapping[str, Any],
    graph: str | None = None,
    limits: ops.Limits | None = None,
):
    """:func:`compile`, cached per ``Model`` object, input dtypes and ranks, and trust
    (``limits`` None: trusted, planned without sizes)."""
    key = (graph, limits is None, input_signature(inputs))
    return _CACHE.get(model, key, lambda: compile(model, inputs, graph=graph, limits=limits))


def torch_runner(module, limits: ops.Limits | None) -> Callable[[Mapping[str, Any]], dict]:
    """:func:`mdf_loops.run`'s runner of ``module``: inputs in, the user's values out."""
    return functools.partial(_user_outputs, module, limits)


def _user_outputs(module, limits: ops.Limits | None, inputs: Mapping[str, Any]) -> dict:
    import torch

    from mdf_loops.backends.torch.values import to_numpy

    bounds = asdict(limits) if limits is not None else {"max_iterations": _UNLIMITED}
    try:
        with torch.no_grad(), ops.limits(**bounds):
            outputs = module(**inputs)
    except MdfLoopsError:
        raise
    except Exception as exc:  # torch's errors name no model element
        where = f"graph '{module._plan.graph_id}' (torch backend)"
        raise EvaluationError(f"{where}: {type(exc).__name__}: {exc}") from exc
    return {name: to_user(to_numpy(value)) for name, value in outputs.items()}

"""Repeated calls of :func:`mdf_loops.run`: what a call decided, replayed while it holds.

A call of ``run`` on a compiling backend (onnxruntime, JAX) reads the model's graph and
interface, checks the model (safety, structure), types the inputs and looks up the
compiled form: tens of microseconds of Python around a loop that may itself take less
than a millisecond. A :class:`Plan` keeps the outcome per model object and per call
arguments (graph, backend, trust, threads, limits, and the limits in force): the runner
of the compiled form, and the inputs it was typed for (names, dtypes, shapes).

A later call replays the plan when all of these hold:

* the model is the same object and was not edited since (one comparison with its
  snapshot, :mod:`mdf_loops.model.content`; the plan goes with every cache of compiled
  forms, :func:`mdf_loops.clear_compiled` too);
* the arguments are equal;
* the same inputs are given, each a numpy array of the dtype and shape that was
  accepted unchanged before (inputs not given take their defaults, read again).

Anything else takes the full path, which checks everything and plans again. A replay
skips nothing that could change the answer or a check's verdict: the checks read the
model's content and the limits, both part of the plan's key.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mdf_loops.backends.cache import CompileCache
from mdf_loops.model.inputs import DeclaredInput, default_input, fit_input

__all__ = ["Plan", "find", "keep"]

Runner = Callable[[Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Plan:
    """A compiled runner and the inputs it takes as they are."""

    runner: Runner  # typed inputs -> the user's outputs
    given: frozenset[str]  # the input names the caller gave
    accepted: tuple[tuple[str, np.dtype, tuple[int, ...]], ...]  # each given input's form
    defaults: tuple[tuple[str, list, DeclaredInput], ...]  # the others: ports, declared type
    #: the runner's outputs for inputs the plan :meth:`takes`, defaults added
    run: Runner = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # without defaults, the runner itself (one Python call less on each replay)
        object.__setattr__(self, "run", self._with_defaults if self.defaults else self.runner)

    def takes(self, inputs: Mapping[str, Any]) -> bool:
        """Whether ``inputs`` are given as the plan's inputs were (no fitting needed)."""
        if len(inputs) != len(self.given) or inputs.keys() != self.given:
            return False
        for name, dtype, shape in self.accepted:
            value = inputs[name]
            if type(value) is not np.ndarray or value.dtype is not dtype and value.dtype != dtype:
                return False
            if value.shape != shape:
                return False
        return True

    def _with_defaults(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        inputs = dict(inputs)
        for name, ports, declared in self.defaults:
            inputs[name] = fit_input(name, default_input(ports)[1], declared)
        return self.runner(inputs)


_PLANS: CompileCache[Plan] = CompileCache()


def find(model: Any, inputs: Mapping[str, Any] | None, key: Hashable) -> Plan | None:
    """The plan for calling ``run(model, inputs, ...)`` with the arguments and limits
    of ``key``, if one holds."""
    if type(inputs) is not dict and not isinstance(inputs, (Mapping, type(None))):
        return None  # the full path says what is wrong
    plan = _PLANS.peek(model, key)
    if plan is None:
        return None
    return plan if plan.takes({} if inputs is None else inputs) else None


def keep(
    model: Any,
    key: Hashable,
    runner: Runner,
    given: Mapping[str, Any],
    typed: Mapping[str, Any],
    defaults: Mapping[str, tuple[list, DeclaredInput]],
) -> None:
    """Plan the call that just ran: ``given`` the caller's inputs, ``typed`` them fitted
    (defaults added), ``defaults`` the ports and types of the inputs taken from defaults.

    Nothing is kept when an input was converted to fit (it would be converted again).
    """
    accepted = []
    for name, value in given.items():
        if typed.get(name) is not value or type(value) is not np.ndarray:
            return
        accepted.append((name, value.dtype, value.shape))
    plan = Plan(
        runner,
        frozenset(given),
        tuple(accepted),
        tuple((name, *defaults[name]) for name in typed if name not in given),
    )
    _PLANS.put(model, key, plan)

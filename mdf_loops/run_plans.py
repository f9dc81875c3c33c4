"""Repeated calls of :func:`mdf_loops.run`: what a call decided, replayed while it holds.

A call of ``run`` on a compiling backend (onnxruntime, JAX) reads the model's graph and
interface, checks the model (safety, structure), types the inputs and looks up the
compiled form: tens of microseconds of Python around a loop that may itself take less
than a millisecond. A :class:`Plan` keeps the outcome per model object and per call
arguments (graph, backend, trust, threads, limits, and the limits in force): the runner
of the compiled form, and the inputs it was typed for (names, dtypes, shapes).

A later call replays the plan when all of these hold:

* the model is the same object and was not edited since the plan was made (one
  comparison with its snapshot of then, :func:`mdf_loops.model.content.edit_test`; plans
  go with :func:`mdf_loops.clear_compiled`, as every cache of compiled forms does);
* the arguments are equal;
* the same inputs are given, each a numpy array of the dtype and shape that was
  accepted unchanged before (inputs not given take their defaults as the plan typed
  them: a default is part of the model, and an edit of it, in place too, is an edit).

Anything else takes the full path, which checks everything and plans again. A replay
skips nothing that could change the answer or a check's verdict: the checks read the
model's content and the limits, both part of the plan's key.

A replay is what a repeated call costs beside its compiled loop, so finding a plan is one
dict lookup by the model's id, one by the key, and the snapshot comparison: no content
version and no weak dictionary on the way (about 20 µs for an imported RNN).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mdf_loops.backends.cache import CompileCache
from mdf_loops.model.content import edit_test

__all__ = ["Plan", "find", "keep"]

Runner = Callable[[Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Plan:
    """A compiled runner and the inputs it takes as they are."""

    runner: Runner  # typed inputs -> the user's outputs
    given: frozenset[str]  # the input names the caller gave
    accepted: tuple[tuple[str, np.dtype, tuple[int, ...]], ...]  # each given input's form
    defaults: dict[str, Any]  # the others: their defaults, typed
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
        return self.runner({**inputs, **self.defaults})


class _Kept:
    """The plans of one model object, made while it held what ``still`` compares."""

    __slots__ = ("model", "still", "plans", "last")

    def __init__(self, model: weakref.ref, still: Callable[[Any], bool]) -> None:
        self.model, self.still = model, still
        self.plans: dict[Hashable, Plan] = {}
        #: the key and plan found last: compared, not hashed (a key holds the limits in
        #: force, whose hash is a Python call)
        self.last: tuple[Hashable, Plan] | None = None


class _Plans(CompileCache[Plan]):
    """The plans of every model, by its id (the model held weakly: its plans go with it); a
    :class:`~mdf_loops.backends.cache.CompileCache` so that ``clear_compiled()`` empties it."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: dict[int, _Kept] = {}

    def clear(self) -> None:
        super().clear()
        self.kept.clear()

    def count(self, model: Any = None) -> int:
        if model is None:
            return sum(len(kept.plans) for kept in list(self.kept.values()))
        kept = self.kept.get(id(model))
        return 0 if kept is None or kept.model() is not model else len(kept.plans)


_PLANS = _Plans()


def find(model: Any, inputs: Mapping[str, Any] | None, key: Hashable) -> Plan | None:
    """The plan for calling ``run(model, inputs, ...)`` with the arguments and limits
    of ``key``, if one holds."""
    kept = _PLANS.kept.get(id(model))
    if kept is None or kept.model() is not model:
        return None
    last = kept.last
    if last is not None and last[0] == key:
        plan = last[1]
    else:
        found = kept.plans.get(key)
        if found is None:
            return None
        kept.last = (key, found)
        plan = found
    if type(inputs) is not dict and not isinstance(inputs, (Mapping, type(None))):
        return None  # (inputs of the wrong type: the full path says what is wrong)
    if not plan.takes({} if inputs is None else inputs) or not kept.still(model):
        return None
    return plan


def keep(
    model: Any,
    key: Hashable,
    runner: Runner,
    given: Mapping[str, Any],
    typed: Mapping[str, Any],
) -> None:
    """Plan the call that just ran: ``given`` the caller's inputs, ``typed`` them fitted
    (defaults added).

    Nothing is kept when an input was converted to fit (it would be converted again).
    """
    accepted = []
    for name, value in given.items():
        if typed.get(name) is not value or type(value) is not np.ndarray:
            return
        accepted.append((name, value.dtype, value.shape))
    still = edit_test(model)
    if still is None:  # a model no snapshot can watch: walked on every call anyway
        return
    plan = Plan(
        runner,
        frozenset(given),
        tuple(accepted),
        {name: value for name, value in typed.items() if name not in given},
    )
    kept = _PLANS.kept.get(id(model))
    if kept is None or kept.model() is not model or kept.still != still:  # new, or edited
        kept = _PLANS.kept[id(model)] = _Kept(weakref.ref(model, _forget(id(model))), still)
    kept.plans[key] = plan
    kept.last = (key, plan)


def _forget(number: int) -> Callable[[weakref.ref], None]:
    """The callback that drops the plans of the model of id ``number`` when it goes."""

    def forget(ref: weakref.ref) -> None:
        kept = _PLANS.kept.get(number)
        if kept is not None and kept.model is ref:
            del _PLANS.kept[number]

    return forget

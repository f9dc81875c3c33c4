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
version and no weak dictionary on the way (about 20 µs for an imported RNN, 35 to 55 µs
when the compiled loop has just pushed the model out of the CPU caches).

A runner may be split in two (:class:`Dispatching`: JAX's, whose compiled call returns
before its loop has run); :func:`replay` then hides the comparison behind the loop:

1. find the plan by the model's id, the key and the input forms;
2. *start* the runner: the compiled loop is set going, nothing is waited for;
3. compare the model with its snapshot, while the loop runs;
4. if the model was edited, drop what was started (its outputs, and any error it raised
   or would raise) and take the full path; else *finish*: wait for the outputs.

The answer is always that of the model as it is when the call returns, as when the
comparison came first (a synchronous runner, onnxruntime's, keeps that order). A second
thread editing the model while a call runs is the same race either way: the call answers
for the model as it was at the comparison, or for the model as edited.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from mdf_loops.caches import CompileCache
from mdf_loops.model.content import edit_test

__all__ = ["Dispatching", "Plan", "find", "forget", "keep", "replay"]

Runner = Callable[[Mapping[str, Any]], dict[str, Any]]


@runtime_checkable
class Dispatching(Protocol):
    """A runner split in two, so that :func:`replay` compares the model while it runs.

    ``runner(inputs)`` is ``finish(start(inputs))``. ``start`` sets the work going and
    returns what ``finish`` needs, without waiting for it and without changing anything a
    later call reads; ``finish`` waits and returns the outputs (errors as the runner
    raises them). What was started and not finished is dropped, with its errors.
    """

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Any]: ...

    def start(self, inputs: Mapping[str, Any]) -> Any: ...

    def finish(self, started: Any) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Plan:
    """A compiled runner and the inputs it takes as they are."""

    runner: Runner  # typed inputs -> the user's outputs
    given: frozenset[str]  # the input names the caller gave
    accepted: tuple[tuple[str, np.dtype, tuple[int, ...]], ...]  # each given input's form
    defaults: dict[str, Any]  # the others: their defaults, typed
    #: the runner's outputs for inputs the plan :meth:`takes`, defaults added
    run: Runner = field(init=False, repr=False, compare=False)
    #: a :class:`Dispatching` runner's start (defaults added) and finish; else None
    start: Callable[[Mapping[str, Any]], Any] | None = field(init=False, repr=False, compare=False)
    finish: Callable[[Any], dict[str, Any]] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # without defaults, the runner itself (one Python call less on each replay)
        runner, defaults = self.runner, self.defaults
        object.__setattr__(self, "run", self._with_defaults if defaults else runner)
        start = finish = None
        if isinstance(runner, Dispatching):
            start, finish = (self._start_with_defaults if defaults else runner.start), runner.finish
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "finish", finish)

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

    def _start_with_defaults(self, inputs: Mapping[str, Any]) -> Any:
        return self.runner.start({**inputs, **self.defaults})  # type: ignore[attr-defined]


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
    :class:`~mdf_loops.caches.CompileCache` so that ``clear_compiled()`` empties it."""

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


def replay(model: Any, inputs: Mapping[str, Any] | None, key: Hashable) -> dict[str, Any] | None:
    """The outputs of ``run(model, inputs, ...)`` with the arguments and limits of ``key``,
    by its plan; None when no plan holds (take the full path). In the order of the
    module's docstring: a :class:`Dispatching` runner is started before the comparison
    with the snapshot and finished after it, any other runs after it."""
    found = _candidate(model, inputs, key)
    if found is None:
        return None
    plan, still = found
    given = {} if inputs is None else inputs
    start = plan.start
    if start is None:  # synchronous: compare, then run
        return plan.run(given) if still(model) else None
    try:
        started = start(given)
    except Exception:
        if still(model):
            raise
        return None  # the model was edited: its error is not the answer
    if not still(model):
        return None  # edited while the loop ran: what was started is dropped
    return plan.finish(started)  # type: ignore[misc]


def find(model: Any, inputs: Mapping[str, Any] | None, key: Hashable) -> Plan | None:
    """The plan for calling ``run(model, inputs, ...)`` with the arguments and limits
    of ``key``, if one holds (the model compared with its snapshot now)."""
    found = _candidate(model, inputs, key)
    return None if found is None or not found[1](model) else found[0]


def _candidate(
    model: Any, inputs: Mapping[str, Any] | None, key: Hashable
) -> tuple[Plan, Callable[[Any], bool]] | None:
    """The plan kept for the call and the test of whether the model still holds what it
    held then (not made here), if the arguments and input forms are the plan's."""
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
    if not plan.takes({} if inputs is None else inputs):
        return None
    return plan, kept.still


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


def forget(model: Any, key: Hashable) -> None:
    """Drop the plan of ``model`` for the arguments and limits of ``key``: its runner no
    longer answers for the call (``auto`` passed onnxruntime over for it)."""
    kept = _PLANS.kept.get(id(model))
    if kept is None or kept.model() is not model:
        return
    kept.plans.pop(key, None)
    if kept.last is not None and kept.last[0] == key:
        kept.last = None


def _forget(number: int) -> Callable[[weakref.ref], None]:
    """The callback that drops the plans of the model of id ``number`` when it goes."""

    def forget(ref: weakref.ref) -> None:
        kept = _PLANS.kept.get(number)
        if kept is not None and kept.model is ref:
            del _PLANS.kept[number]

    return forget

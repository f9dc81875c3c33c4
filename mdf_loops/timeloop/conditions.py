"""graph-scheduler conditions of a stateful MDF graph, as expressions of a time-loop body.

A time-loop step is one ``EvaluableGraph.evaluate`` call: one *trial*
(``TimeScale.ENVIRONMENT_STATE_UPDATE``) of one *pass* over the graph's
consideration sets. The conditions are read from modeci-mdf's own parsed scheduler
(so they mean what the stock engine makes of them) and written as boolean
expressions of counters the loop carries:

* ``calls__<node>``: how often a node has run (``TimeScale.ENVIRONMENT_SEQUENCE``);
* runs of ``dep`` since ``node`` last ran (``EveryNCalls``), which graph-scheduler
  resets at the start of every trial, so within the step;
* ``iteration``: the passes so far (one per step).

Node conditions (``Always``, ``Never``, ``EveryNPasses``, ``AfterNPasses``,
``AtPass``, ``BeforePass``, ``AfterPass``, ``EveryNCalls``, ``AfterNCalls``,
``BeforeNCalls``, ``AtNCalls``, and ``All``/``Any``/``Not`` of these) become masks:
a node runs in a step where its expression holds and keeps its values otherwise.
Termination conditions of the ``ENVIRONMENT_SEQUENCE`` scale (the same ones, plus
``Threshold``) become the Loop's condition. Anything else is refused by name.
"""

from __future__ import annotations

import inspect
from typing import Any

import graph_scheduler.condition as gs
from graph_scheduler import TimeScale

from mdf_loops.errors import ConditionError
from mdf_loops.timeloop.plan import Counts, SchedulePlan, ThresholdRead

__all__ = ["SchedulePlan", "plan_schedule", "ConditionError", "Counts", "ThresholdRead"]


def plan_schedule(engine: Any, graph_id: str) -> SchedulePlan:
    """Read and check the conditions of a stock ``EvaluableGraph``'s scheduler."""
    scheduler = engine.scheduler
    sets = [sorted(n.id for n in s) for s in scheduler.consideration_queue]
    node_conditions = {}
    for node, condition in scheduler.conditions.conditions.items():
        if not isinstance(condition, gs.Always):
            node_conditions[node.id] = condition
    _drop_every_call(sets, node_conditions)
    terms = scheduler.termination_conds
    trial = terms.get(TimeScale.ENVIRONMENT_STATE_UPDATE)
    sequence = terms.get(TimeScale.ENVIRONMENT_SEQUENCE)
    _check_trial(trial, SchedulePlan(sets, node_conditions, None), graph_id)
    for scale, condition in terms.items():
        if scale not in (
            TimeScale.ENVIRONMENT_STATE_UPDATE,
            TimeScale.ENVIRONMENT_SEQUENCE,
        ) and not isinstance(condition, gs.Never):
            raise ConditionError(
                f"graph '{graph_id}': termination condition {_name(condition)} at "
                f"{scale} has no time-loop equivalent"
            )
    plan = SchedulePlan(
        sets,
        node_conditions,
        None if sequence is None or isinstance(sequence, gs.Never) else sequence,
    )
    set_of = {n: k for k, s in enumerate(sets) for n in s}
    for owner, condition in node_conditions.items():
        _collect(condition, plan, owner, set_of, graph_id, termination=False)
    if plan.termination is not None:
        _collect(plan.termination, plan, None, set_of, graph_id, termination=True)
    for owner in plan.masked:
        if owner not in plan.counted:
            plan.counted.append(owner)
    return plan


def _drop_every_call(sets: list[list[str]], node_conditions: dict[str, Any]) -> None:
    """Drop ``EveryNCalls(dependency, 1)`` where it always holds, as for ``Always``.

    PsyNeuLink gives each node of a pathway ``EveryNCalls(sender, 1)``. When the sender
    runs in an earlier consideration set of every pass (it has no condition, or one
    dropped here), the receiver's condition holds in every pass, and a pass runs every
    node, so the trial is one pass as without conditions.
    """
    set_of = {n: k for k, s in enumerate(sets) for n in s}
    for node in (n for s in sets for n in s):
        condition = node_conditions.get(node)
        if not isinstance(condition, gs.EveryNCalls) or len(condition.args) != 2:
            continue
        dependency, n = _node_id(condition.args[0]), condition.args[1]
        earlier = set_of.get(dependency, len(sets)) < set_of[node]
        if n == 1 and earlier and dependency not in node_conditions:
            del node_conditions[node]


def _check_trial(condition: Any, plan: SchedulePlan, graph_id: str) -> None:
    """A step must be one pass: the trial ends after every pass."""
    if isinstance(condition, gs.AllHaveRun) and not condition.args and not plan.node_conditions:
        return  # every node runs in the first pass
    if (
        isinstance(condition, gs.AfterNPasses)
        and condition.args[0] == 1
        and _scale(condition) == TimeScale.ENVIRONMENT_STATE_UPDATE
    ):
        return
    what = _name(condition)
    raise ConditionError(
        f"graph '{graph_id}': the environment_state_update termination {what} lets one "
        "EvaluableGraph.evaluate call run several passes; a time-loop step is one pass "
        "(one trial of several passes is not supported). " + _trial_fix(condition, plan, graph_id)
    )


def _trial_fix(condition: Any, plan: SchedulePlan, graph_id: str) -> str:
    """What to write instead of a several-pass trial, when the time loop accepts it."""
    one_pass = (
        "set termination {'environment_state_update': {'type': 'AfterNPasses', 'kwargs': {'n': 1}}}"
    )
    if condition is None or isinstance(condition, (gs.AllHaveRun, gs.Never)):
        return f"To step one pass at a time, {one_pass}"
    set_of = {n: k for k, s in enumerate(plan.sets) for n in s}
    scratch = SchedulePlan(plan.sets, plan.node_conditions, condition)
    try:
        _collect(condition, scratch, None, set_of, graph_id, termination=True)
    except ConditionError as exc:
        reason = str(exc)
        return (
            f"To step one pass at a time, {one_pass}; {_name(condition)} cannot end the "
            f"simulation instead ({reason})"
        )
    return (
        f"To step one pass at a time, {one_pass} and end the simulation with it as the "
        f"'environment_sequence' termination: {_name(condition)}"
    )


def _collect(condition, plan: SchedulePlan, owner, set_of, graph_id, termination) -> None:
    """Record in ``plan`` what ``condition`` reads (counts, thresholds); refuse the rest."""
    where = (
        f"graph '{graph_id}' termination condition"
        if termination
        else f"graph '{graph_id}' condition of node '{owner}'"
    )
    if isinstance(condition, (gs.All, gs.Any, gs.Not)):
        for inner in condition.args:
            _collect(inner, plan, owner, set_of, graph_id, termination)
        return
    if isinstance(condition, _PASS_CONDITIONS):
        return
    if isinstance(condition, (gs.AfterNCalls, gs.BeforeNCalls, gs.AtNCalls, gs.EveryNCalls)):
        _collect_calls(condition, plan, owner, set_of, where)
        return
    if isinstance(condition, gs.Threshold) and termination:
        _collect_threshold(condition, plan, set_of, where)
        return
    if isinstance(condition, gs.WhenFinished):
        raise ConditionError(
            f"{where}: {_name(condition)} asks a node whether it is finished, "
            "which MDF nodes do not say; end the run with a Threshold on the "
            "value that decides it"
        )
    raise ConditionError(
        f"{where}: {_name(condition)} has no time-loop equivalent (supported: "
        "Always, Never, All, Any, Not, EveryNPasses, AfterNPasses, AtPass, "
        "BeforePass, AfterPass, EveryNCalls, AfterNCalls, BeforeNCalls, AtNCalls"
        + (", Threshold" if termination else "")
        + ")"
    )


#: conditions that read nothing but the pass count
_PASS_CONDITIONS = (
    gs.Always,
    gs.Never,
    gs.EveryNPasses,
    gs.AfterNPasses,
    gs.AtPass,
    gs.BeforePass,
    gs.AfterPass,
)


def _collect_calls(condition, plan: SchedulePlan, owner, set_of, where: str) -> None:
    """A count condition: its dependency's calls are counted (and, for EveryNCalls, the
    calls since the owner last ran); refused within the owner's consideration set unless
    it is an AfterNCalls of another node."""
    dependency = _node_id(condition.args[0])
    if owner is not None and set_of.get(dependency) == set_of.get(owner):
        if not isinstance(condition, gs.AfterNCalls) or dependency == owner:
            raise ConditionError(
                f"{where}: {_name(condition)} depends on '{dependency}', "
                "which runs in the same consideration set; graph-scheduler's order there "
                "is not defined, so only "
                "AfterNCalls (which holds whichever runs first) is supported there"
            )
        plan.same_set.setdefault(owner, set()).add(dependency)
    if dependency not in plan.counted:
        plan.counted.append(dependency)
    if isinstance(condition, gs.EveryNCalls):
        if owner is None:
            raise ConditionError(f"{where}: EveryNCalls needs an owner node")
        if (dependency, owner) not in plan.useable:
            plan.useable.append((dependency, owner))


def _collect_threshold(condition, plan: SchedulePlan, set_of, where: str) -> None:
    """A Threshold termination: the value it reads, on a node of the last consideration set."""
    node = _node_id(condition.dependency)
    if set_of.get(node, 0) != len(plan.sets) - 1:
        raise ConditionError(
            f"{where}: Threshold on '{node}.{condition.parameter}', a node "
            "that is not in the last consideration set: it could end a step "
            "half-way, which the time loop does not model"
        )
    port = f"threshold{len(plan.thresholds)}"
    plan.thresholds.append(ThresholdRead(node, str(condition.parameter), port))


def expression(condition, counts: Counts, owner: str | None, plan: SchedulePlan) -> str:
    """``condition`` as a boolean expression of ``counts``."""
    if isinstance(condition, gs.Always):
        return "True"
    if isinstance(condition, gs.Never):
        return "False"
    if isinstance(condition, (gs.All, gs.Any)):
        parts = [f"({expression(c, counts, owner, plan)})" for c in condition.args]
        if not parts:
            return "True" if isinstance(condition, gs.All) else "False"
        return (" & " if isinstance(condition, gs.All) else " | ").join(parts)
    if isinstance(condition, gs.Not):
        return f"numpy.logical_not({expression(condition.args[0], counts, owner, plan)})"
    if isinstance(
        condition, (gs.EveryNPasses, gs.AfterNPasses, gs.AtPass, gs.BeforePass, gs.AfterPass)
    ):
        n, scale = condition.args[0], _scale(condition)
        passes = counts.passes if scale == TimeScale.ENVIRONMENT_SEQUENCE else "0"
        op = {
            gs.EveryNPasses: "%",
            gs.AfterNPasses: ">=",
            gs.AtPass: "==",
            gs.BeforePass: "<",
            gs.AfterPass: ">",
        }[type(condition)]
        return f"{passes} % {int(n)} == 0" if op == "%" else f"{passes} {op} {int(n)}"
    if isinstance(condition, gs.EveryNCalls):
        return f"{counts.useable(_node_id(condition.args[0]), owner)} >= {int(condition.args[1])}"
    if isinstance(condition, (gs.AfterNCalls, gs.BeforeNCalls, gs.AtNCalls)):
        dependency, n = _node_id(condition.args[0]), int(condition.args[1])
        scale = _scale(condition)
        calls = (
            counts.calls(dependency)
            if scale == TimeScale.ENVIRONMENT_SEQUENCE
            else counts.calls_trial(dependency)
        )
        op = {gs.AfterNCalls: ">=", gs.BeforeNCalls: "<", gs.AtNCalls: "=="}[type(condition)]
        return f"{calls} {op} {n}"
    if isinstance(condition, gs.Threshold):
        read = next(
            t
            for t in plan.thresholds
            if t.node == _node_id(condition.dependency) and t.name == condition.parameter
        )
        value = counts.threshold(read)
        if value in ("True", "False"):
            return value
        for i in condition.indices or ():
            value = f"{value}[{int(i)}]"
        comparator, threshold = condition.comparator, float(condition.threshold)
        if comparator in ("==", "!="):
            close = (
                f"abs({value} - {threshold!r}) <= "
                f"{float(condition.atol)!r} + {float(condition.rtol)!r} * {abs(threshold)!r}"
            )
            return close if comparator == "==" else f"numpy.logical_not({close})"
        return f"{value} {comparator} {threshold!r}"
    raise ConditionError(f"condition {_name(condition)} has no time-loop equivalent")


def _scale(condition) -> TimeScale:
    """The time scale a counting condition counts in (an argument or a closure variable)."""
    for arg in condition.args:
        if isinstance(arg, TimeScale):
            return arg
    scale = inspect.getclosurevars(condition.func).nonlocals.get("time_scale")
    return scale if isinstance(scale, TimeScale) else TimeScale.ENVIRONMENT_STATE_UPDATE


def _node_id(node: Any) -> str:
    return node if isinstance(node, str) else node.id


def _name(condition: Any) -> str:
    """``condition`` written by class and arguments: ``All(AfterNCalls('A', 2), JustRan('B'))``."""
    if condition is None:
        return "None"
    if isinstance(condition, gs.Threshold):
        parts = [
            repr(_node_id(condition.dependency)),
            repr(str(condition.parameter)),
            repr(condition.threshold),
            repr(condition.comparator),
        ]
        parts += [
            f"{key}={getattr(condition, key)!r}"
            for key in ("indices", "atol", "rtol")
            if getattr(condition, key, None) not in (None, 0)
        ]
        return f"Threshold({', '.join(parts)})"
    parts = [_argument(a) for a in getattr(condition, "args", ())]
    parts += [f"{k}={_argument(v)}" for k, v in (getattr(condition, "kwargs", None) or {}).items()]
    return f"{type(condition).__name__}({', '.join(parts)})"


def _argument(value: Any) -> str:
    if isinstance(value, gs.Condition):
        return _name(value)
    if isinstance(value, TimeScale):
        return f"TimeScale.{value.name}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_argument(v) for v in value) + "]"
    if hasattr(value, "id"):
        return repr(_node_id(value))
    return repr(value)

"""graph-scheduler settings for a loop body that has no scheduling conditions.

A body runs once per iteration, so graph-scheduler's per-pass bookkeeping is
paid once per iteration: every condition is asked through
``call_with_pruned_args`` (which inspects a signature each time), and the clock
copies a :class:`graph_scheduler.time.Time` (whose constructor builds pint
quantities) at every consideration set. A body without conditions needs none of
that. :func:`schedule_simply` gives its scheduler

- :class:`EveryPass` on each node (graph-scheduler's ``Always``, answered directly),
- :class:`AllHaveRunOnce` and :class:`NeverEnds` as termination conditions
  (``AllHaveRun`` and ``Never``, answered directly),
- a clock whose history keeps no tree of past times and whose current time is a
  :class:`CountingTime` (a ``Time`` that is cheap to copy and increment).

The scheduler itself still runs every pass: it visits the nodes in their
topologically sorted consideration sets, counts their runs and advances its
clock, and ``EvaluableGraph.evaluate`` evaluates the nodes it yields. Each node
runs once per pass, in dependency order, as under the default conditions.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from graph_scheduler import Scheduler, TimeScale
from graph_scheduler.condition import Condition
from graph_scheduler.time import Time, _time_scale_to_attr_str

__all__ = [
    "EveryPass",
    "AllHaveRunOnce",
    "NeverEnds",
    "CountingTime",
    "schedule_simply",
    "forget_finished_updates",
]

_UPDATE = TimeScale.ENVIRONMENT_STATE_UPDATE


class EveryPass(Condition):
    """``Always``: satisfied on every pass."""

    def __init__(self) -> None:
        super().__init__(_true)

    def is_satisfied(self, *args: Any, **kwargs: Any) -> bool:
        return True

    def __str__(self) -> str:  # EvaluableGraph.evaluate formats every condition on each call
        return "Always()"


class NeverEnds(Condition):
    """``Never``: the termination condition of a sequence the caller ends."""

    def __init__(self) -> None:
        super().__init__(_false)

    def is_satisfied(self, *args: Any, **kwargs: Any) -> bool:
        return False

    def __str__(self) -> str:
        return "Never()"


class AllHaveRunOnce(Condition):
    """``AllHaveRun()``: every node of the scheduler has run in this environment state update."""

    def __init__(self) -> None:
        super().__init__(_true)

    def is_satisfied(
        self, *args: Any, scheduler: Scheduler = None, execution_id: Any = None, **kwargs: Any
    ) -> bool:
        counts = scheduler.counts_total[execution_id][_UPDATE]
        for node in scheduler.nodes:
            if counts[node] < 1:
                return False
        return True

    def __str__(self) -> str:
        return "AllHaveRun()"


# Time's fields by TimeScale value (finest first); incrementing one resets the finer ones
_FIELDS = tuple(_time_scale_to_attr_str(ts) for ts in sorted(TimeScale, key=lambda ts: ts.value))


class CountingTime(Time):
    """A :class:`~graph_scheduler.time.Time` without absolute time, cheap to copy and increment."""

    def __copy__(self) -> CountingTime:
        copy = CountingTime.__new__(CountingTime)
        copy.__dict__.update(self.__dict__)
        return copy

    def _increment_by_time_scale(self, time_scale: TimeScale) -> None:
        fields = self.__dict__
        level = time_scale.value
        fields[_FIELDS[level]] += 1
        for finer in _FIELDS[:level]:
            fields[finer] = 0


def schedule_simply(scheduler: Scheduler, nodes: Iterable[Any]) -> None:
    """Give ``scheduler`` (of a graph without conditions) the lean settings above."""
    scheduler.add_condition_set({node: EveryPass() for node in nodes})
    scheduler.termination_conds = {
        _UPDATE: AllHaveRunOnce(),
        TimeScale.ENVIRONMENT_SEQUENCE: NeverEnds(),
    }
    scheduler.get_clock(None)  # the clock EvaluableGraph.evaluate runs on
    for clock in scheduler.clocks.values():
        _lighten(clock)


def forget_finished_updates(scheduler: Scheduler) -> None:
    """Free the time-tree nodes of the environment state updates that have ended.

    For a body with scheduling conditions the clock keeps its time tree, one
    node per environment state update (one per loop iteration, some 500 bytes
    each). Conditions read the tree at the current update only (graph-scheduler's
    time conditions count within the latest one), so the finished updates'
    nodes are replaced by ``None``, which keeps the later ones at their indices.
    """
    for clock in scheduler.clocks.values():
        for sequence in clock.history.children:
            updates = sequence.children
            for k in range(len(updates) - 2, -1, -1):
                if updates[k] is None:
                    break
                updates[k] = None


def _lighten(clock: Any) -> None:
    history = clock.history
    history.max_depth = TimeScale.LIFE  # no tree node per pass: no condition reads past times
    current = history.current_time
    if type(current) is Time and not current.absolute_enabled:
        lean = CountingTime.__new__(CountingTime)
        lean.__dict__.update(vars(current))
        history.current_time = lean


def _true() -> bool:
    return True


def _false() -> bool:
    return False

"""What a time loop's schedule is, as data: the consideration sets, the masked nodes and
the conditions (planned from graph-scheduler's conditions by
:mod:`~mdf_loops.timeloop.conditions`; a graph without conditions is planned without it,
:mod:`~mdf_loops.timeloop.lean_engine`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Counts", "SchedulePlan", "ThresholdRead"]


@dataclass(frozen=True)
class ThresholdRead:
    """A value a Threshold termination reads: ``node.name`` (parameter or output port)."""

    node: str
    name: str
    port: str  # the control-node input port that receives it


@dataclass
class SchedulePlan:
    """The consideration sets, which nodes are masked, and the conditions as functions."""

    sets: list[list[str]]
    node_conditions: dict[str, Any]  # node id -> graph-scheduler Condition (not Always)
    termination: Any | None  # the ENVIRONMENT_SEQUENCE condition, None for Never
    thresholds: list[ThresholdRead] = field(default_factory=list)
    counted: list[str] = field(default_factory=list)  # nodes whose calls are counted
    useable: list[tuple[str, str]] = field(default_factory=list)  # (dependency, owner)
    #: owner -> nodes of its own consideration set its AfterNCalls conditions count
    same_set: dict[str, set[str]] = field(default_factory=dict)

    @property
    def masked(self) -> dict[str, None]:
        """Nodes that may skip a step, in the order of the consideration sets (a dict
        used as an ordered set: the loop's carried counters follow it, so the model
        made is the same in every process, whatever its hash seed).

        Those with a node condition, or a termination that can end a pass early.
        """
        gated = self.termination is not None and len(self.sets) > 1
        return {
            n: None
            for k, s in enumerate(self.sets)
            for n in s
            if n in self.node_conditions or (gated and k > 0)
        }

    @property
    def needs_schedule(self) -> bool:
        return bool(self.masked)


@dataclass(frozen=True)
class Counts:
    """Expressions of the scheduler's counts at one check point of a step."""

    calls: Callable[[str], str]  # ENVIRONMENT_SEQUENCE calls of a node
    calls_trial: Callable[[str], str]  # calls within this trial/pass
    passes: str  # ENVIRONMENT_SEQUENCE passes
    useable: Callable[[str, str | None], str]
    threshold: Callable[[ThresholdRead], str]

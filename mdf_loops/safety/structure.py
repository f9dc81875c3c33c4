"""The model shapes modeci-mdf's engine would hang or crash on, found before it runs.

Element lists that are no lists or repeat an id, edges whose ends are no node
or port, text edge weights, edges no root node leads to (the engine would
requeue them for ever) and conditions that are no graph-scheduler condition.
Each function returns the :class:`~mdf_loops.validation.report.Problem` list of
one part of a graph; :mod:`mdf_loops.safety.checks` walks the model (bodies at
every depth) and calls them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

import numpy as np
from modeci_mdf.mdf import Condition, Graph

from mdf_loops.errors import Problem
from mdf_loops.model.compat import input_default
from mdf_loops.model.documents import format_path

__all__ = ["listed_elements", "edge_problems", "condition_problems", "field_of"]


def listed_elements(owner: Any, field: str, path: tuple) -> tuple[list, list[Problem]]:
    """The elements of a list field, and the problems of the field (another type, repeated ids)."""
    items = getattr(owner, field, None)
    ids = [getattr(i, "id", None) for i in items] if isinstance(items, list) else []
    if not isinstance(items, list) or not all(isinstance(i, str) for i in ids):
        where = format_path(path + (field,))
        return [], [Problem(where, f"expected a list of elements with ids, found {items!r:.60}")]
    if len(set(ids)) == len(ids):
        return items, []
    problems = []
    seen: set = set()
    for item in items:
        if item.id in seen:
            where = format_path(path + (field,))
            problems.append(Problem(where, f"'{item.id}' is defined more than once"))
        seen.add(item.id)
    return items, problems


def edge_problems(graph_id: str, nodes: list, edges: list, path: tuple) -> list[Problem]:
    """Edges whose ends are no node or port, weights that are no number, unordered edges."""
    problems = []
    by_id = {n.id: n for n in nodes}
    for edge in edges:
        where = format_path(path + ("edges", edge.id))
        for end, port, ports in (
            ("sender", edge.sender_port, "output_ports"),
            ("receiver", edge.receiver_port, "input_ports"),
        ):
            node = by_id.get(getattr(edge, end))
            if node is None:
                problems.append(
                    Problem(
                        where,
                        f"{end} '{getattr(edge, end)}' is not a node of graph '{graph_id}'",
                    )
                )
            elif all(getattr(p, "id", None) != port for p in _as_list(getattr(node, ports))):
                kind = ports.replace("_", " ")
                problems.append(
                    Problem(where, f"{end} port '{port}' is not one of the {kind} of '{node.id}'")
                )
        parameters = edge.parameters or {}
        weight = parameters.get("weight", 1) if isinstance(parameters, Mapping) else None
        if not _numeric(weight):
            problems.append(
                Problem(where + ".parameters.weight", f"weight {weight!r:.60} is not a number")
            )
    stuck = _unordered_edges(nodes, edges)
    if stuck and not problems:  # a dangling edge explains it already
        problems.append(
            Problem(
                format_path(path + ("edges",)),
                f"edges {sorted(stuck)} start at nodes no root node leads to (a cycle without "
                "an entry); modeci-mdf's engine would never finish ordering them",
            )
        )
    return problems


def condition_problems(graph: Graph, path: tuple) -> list[Problem]:
    """Conditions of ``graph`` (nested ones too) whose type graph-scheduler does not have."""
    conditions = graph.conditions
    if conditions is None:
        return []
    problems = []
    for group in ("node_specific", "termination"):
        entries = getattr(conditions, group, None) or {}
        for key, condition in entries.items() if isinstance(entries, Mapping) else ():
            for kind in _condition_types(condition):
                if kind not in _scheduler_conditions():
                    problems.append(
                        Problem(
                            format_path(path + ("conditions", group, key)),
                            f"'{kind}' is not a scheduler condition",
                        )
                    )
    return problems


def field_of(item: Any, name: str) -> Any:
    """An attribute of an object, or an entry of a dict (conditions come as either)."""
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


@lru_cache(maxsize=1)
def _scheduler_conditions() -> frozenset:
    """The condition classes of graph-scheduler (imported when a model has conditions)."""
    import graph_scheduler.condition as conditions

    return frozenset(
        n
        for n in dir(conditions)
        if isinstance(getattr(conditions, n), type)
        and issubclass(getattr(conditions, n), conditions.Condition)
    )


def _condition_types(condition: Any) -> Iterator[Any]:
    """The ``type`` of a condition and of every condition nested in its arguments."""
    stack = [condition]
    while stack:
        item = stack.pop()
        if isinstance(item, (Condition, Mapping)) and field_of(item, "type") is not None:
            yield field_of(item, "type")
            kwargs = field_of(item, "kwargs")
            stack.extend(kwargs.values() if isinstance(kwargs, Mapping) else ())
        elif isinstance(item, list):
            stack.extend(item)


def _unordered_edges(nodes: list, edges: list) -> set[str]:
    """Edges modeci-mdf's EvaluableGraph would requeue for ever (it orders them from root nodes)."""
    receivers = {e.receiver for e in edges}
    reached = {n.id for n in nodes if n.id not in receivers}
    if not reached:
        reached = {
            n.id for n in nodes if any(input_default(p) is not None for p in n.input_ports or ())
        }
    pending = list(edges)
    changed = True
    while pending and changed:
        changed = False
        for edge in list(pending):
            if edge.sender in reached:
                reached.add(edge.receiver)
                pending.remove(edge)
                changed = True
    return {e.id for e in pending}


def _numeric(value: Any) -> bool:
    if isinstance(value, (bool, int, float, np.number)):
        return True
    return isinstance(value, list) and all(_numeric(v) for v in value)


def _as_list(value: Any) -> list:
    """A list field's items; nothing for a field of another type (reported where it is walked)."""
    return value if isinstance(value, list) else []

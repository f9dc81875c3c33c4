"""One scheduler pass of a condition-free body, planned once and replayed each iteration.

A body without scheduling conditions runs each node once per pass, in the order
of graph-scheduler's consideration sets, whatever the values: the order is the
same on every iteration. :class:`PlannedPass` asks graph-scheduler for that order
once (one pass of the body's own scheduler, with the lean settings of
:mod:`mdf_loops.backends.scheduler.lean_schedule`), then each call does what
``EvaluableGraph.evaluate`` does with the nodes of a pass, through the same engine
objects: for each node in the planned order, it records the node in
``order_of_execution``, evaluates its incoming edges whose sender has run
(``EvaluableGraph.evaluate_edge``; an edge whose sender has not run is reported as
the engine reports it) and evaluates the node (``EvaluableNode.evaluate``). What a
call leaves out is what a condition-free pass does not need: graph-scheduler's
pass over its conditions and clock, and the formatting of every condition into
text that the engine prints only when verbose.

A body with conditions (or a verbose engine) takes ``EvaluableGraph.evaluate``.
"""

from __future__ import annotations

import builtins
from typing import Any

import modeci_mdf.execution_engine as _engine

from mdf_loops.errors import IterationLimitError
from mdf_loops.ops.common import current_limits, how_to_raise

__all__ = ["PlannedPass", "step_limit_error"]


class PlannedPass:
    """The nodes of one pass of ``engine`` (an ``EvaluableGraph`` without conditions), in
    graph-scheduler's order, each with its incoming edges."""

    def __init__(self, engine: Any):
        self.engine = engine
        incoming: dict[str, list] = {node.id: [] for node in engine.graph.nodes}
        for edge in engine.graph.edges:
            incoming[edge.receiver].append(edge)
        scheduler = engine.scheduler
        self.steps = [list(nodes) for nodes in scheduler.run()]  # graph-scheduler's order
        for history in scheduler.execution_list.values():
            history.clear()
        self.nodes = [
            (node.id, incoming[node.id], engine.enodes[node.id])
            for nodes in self.steps
            for node in nodes
        ]

    def __call__(self) -> None:
        """One pass, as ``EvaluableGraph.evaluate`` runs it (ONNX semantics active)."""
        engine = self.engine
        limit = current_limits().max_iterations
        if len(self.steps) > limit:  # as the scheduler's bound would stop it
            raise step_limit_error(engine.graph.id, limit)
        ran = engine.order_of_execution
        evaluate_edge = engine.evaluate_edge
        for node_id, edges, enode in self.nodes:
            ran.append(node_id)
            for edge in edges:
                if edge.sender in ran:
                    evaluate_edge(edge, time_increment=None, array_format=_engine.FORMAT_DEFAULT)
                else:
                    _print_as_the_engine(
                        f"> Not evaluating edge: {edge!s}, as sender not run yet..."
                    )
            enode.evaluate(time_increment=None, array_format=_engine.FORMAT_DEFAULT)


def _print_as_the_engine(text: str) -> None:
    """``print`` as the engine's module calls it (the hooks put one there)."""
    vars(_engine).get("print", builtins.print)(text)


def step_limit_error(graph_id: str, limit: int) -> IterationLimitError:
    """The error of a graph whose scheduler would run more than ``limit`` steps."""
    return IterationLimitError(
        f"graph '{graph_id}': its scheduler ran {limit} steps in one evaluation "
        "without meeting the graph's termination condition (max_iterations); "
        f"check the graph's conditions, or {how_to_raise('max_iterations')}"
    )

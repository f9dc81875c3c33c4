"""What modeci-mdf's engine makes of a stateful graph's edges, checked before a time loop
is made of it: edges that form a cycle (refused), several edges that overwrite one port
and edges into a port with a ``default_value`` (stock's order, or value, is not defined
there: a WARNING; or stock reads the step before: refused)."""

from __future__ import annotations

import copy
import logging

from modeci_mdf.mdf import Graph

from mdf_loops.errors import ModelError

__all__ = ["check_unordered_edges", "refuse_cycles", "warn_overwritten_ports", "without_defaults"]

log = logging.getLogger("mdf_loops.timeloop")


def warn_overwritten_ports(graph: Graph) -> None:
    """A WARNING for an input port fed by several edges that overwrite one another:
    modeci-mdf walks the edges from a set, so which value the port keeps can change
    from one Python process to the next, and the backends need not agree."""
    for node in graph.nodes:
        for port in node.input_ports:
            senders = [
                f"{e.sender}.{e.sender_port}"
                for e in graph.edges
                if e.receiver == node.id and e.receiver_port == port.id
            ]
            if len(senders) > 1 and (port.reduce or "overwrite") == "overwrite":
                log.warning(
                    "graph '%s' node '%s' input port '%s': %d edges (%s) overwrite one "
                    "another; which value the port keeps is not defined (modeci-mdf walks "
                    "them from a set, in an order that can change between runs). Give the port "
                    "reduce='add' or 'multiply' if the values should combine",
                    graph.id,
                    node.id,
                    port.id,
                    len(senders),
                    ", ".join(senders),
                )


def check_unordered_edges(graph: Graph) -> set[tuple[str, str]]:
    """An edge into an input port that has a ``default_value`` does not order its two
    nodes in modeci-mdf's engine (``Graph.dependency_dict`` leaves it out): stock runs
    them in the order of graph-scheduler's consideration sets, made from the other edges.
    Where the sender's set comes first, that is the edge's order, the time loop's; where
    the two share a set, stock's order is not defined (it can change from one Python
    process to the next): a WARNING, and the time loop runs the sender first; where the
    receiver's set comes first, stock reads the sender's value of the step before, which
    the time loop does not model: refused by name. Returns the ports of the edges warned
    of, as ``(node, port)``."""
    defaults = {
        (n.id, p.id) for n in graph.nodes for p in n.input_ports if p.default_value is not None
    }
    unordered: set[tuple[str, str]] = set()
    if not any((e.receiver, e.receiver_port) in defaults for e in graph.edges):
        return unordered
    ordering: dict[str, set[str]] = {n.id: set() for n in graph.nodes}
    for edge in graph.edges:
        if (edge.receiver, edge.receiver_port) not in defaults:
            ordering[edge.receiver].add(edge.sender)
    level: dict[str, int] = {}  # the consideration set, as graph-scheduler's toposort

    def level_of(node: str) -> int:
        pending = [node]  # no recursion: a chain may be longer than Python's stack
        while pending:
            top = pending[-1]
            unknown = [s for s in ordering[top] if s not in level]
            if unknown:
                pending.extend(unknown)
                continue
            level[top] = 1 + max((level[s] for s in ordering[top]), default=-1)
            pending.pop()
        return level[node]

    for edge in graph.edges:
        if (edge.receiver, edge.receiver_port) not in defaults:
            continue
        sender, receiver = level_of(edge.sender), level_of(edge.receiver)
        where = (
            f"graph '{graph.id}' node '{edge.receiver}' input port '{edge.receiver_port}': "
            f"the edge from '{edge.sender}.{edge.sender_port}' does not order the two nodes "
            "in modeci-mdf (the port has a default_value)"
        )
        if sender > receiver:
            raise ModelError(
                f"{where}, and stock runs '{edge.receiver}' first, reading the value "
                f"'{edge.sender}' had the step before, which the time loop does not model; "
                "remove the port's default_value to run the sender first"
            )
        if sender == receiver:
            unordered.add((edge.receiver, edge.receiver_port))
            log.warning(
                "%s, so stock runs them in either order, which can change between runs; "
                "the time loop runs '%s' first. Remove the port's default_value for stock "
                "to do the same",
                where,
                edge.sender,
            )
    return unordered


def without_defaults(graph: Graph, ports: set[tuple[str, str]]) -> Graph:
    """A copy of ``graph`` without the default values of ``ports`` (node, port), whose
    edges then order their nodes in modeci-mdf's engine as in the time loop."""
    copied = copy.deepcopy(graph)
    for node in copied.nodes:
        for port in node.input_ports:
            if (node.id, port.id) in ports:
                port.default_value = None
    return copied


def refuse_cycles(graph: Graph) -> None:
    """A ModelError for edges that form a cycle (stock feeds them the previous step's value)."""
    remaining = {n.id for n in graph.nodes}
    while remaining:
        ready = {
            n
            for n in remaining
            if not any(
                e.receiver == n and e.sender in remaining and e.sender != n for e in graph.edges
            )
        }
        if not ready:
            raise ModelError(
                f"graph '{graph.id}': edges form a cycle among {sorted(remaining)}; "
                "a time-loop step needs its nodes in edge order (carry the value "
                "as a parameter that reads itself instead)"
            )
        remaining -= ready

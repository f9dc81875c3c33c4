"""Where things sit in a picture of a model: the Graphviz nodes edges attach to, how a
body connects to its loop node (from the operator signatures of
:mod:`mdf_loops.model.signatures`), and rows kept in order."""

from __future__ import annotations

from dataclasses import dataclass, field

from modeci_mdf.mdf import Graph, Node

from mdf_loops.model.signatures import LoopSignature, ScanSignature
from mdf_loops.rendering.labels import int_parameter

__all__ = ["Ports", "Wiring", "body_wiring", "in_order"]


@dataclass
class Ports:
    """Where edges attach to a drawn node: Graphviz node names by port id."""

    inputs: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass
class Wiring:
    """How a body connects to its loop node, by position in the body's signature."""

    roles: list[str]  # role of each formal input
    #: formal input -> (loop value, label)
    feeds: dict[int, tuple[str, str]] = field(default_factory=dict)
    #: formal output -> (loop output, label)
    results: dict[int, tuple[int, str]] = field(default_factory=dict)
    #: formal output -> formal input it returns to
    carries: dict[int, int] = field(default_factory=dict)


def body_wiring(op: str, node: Node, arguments: dict[str, list[str]], body: Graph) -> Wiring:
    """How ``body`` of the loop node ``node`` (operator ``op``) connects to it.

    ``arguments`` are the Graphviz names of the values bound to each formal input of
    the operator.
    """
    meta = body.metadata or {}
    n_in = len(meta.get("formal_inputs") or [])
    n_out = len(meta.get("formal_outputs") or [])
    if op == "Scan":
        values = arguments.get(ScanSignature.VALUES_ARGUMENT, [])
        m = int_parameter(node, "num_scan_inputs", len(values))
        n = max(len(values) - m, 0)
        scan = ScanSignature(n, m, max(n_out - n, 0))
        states, outputs = scan.body_states, scan.body_state_outputs
        return Wiring(
            roles=[
                f"state {k}" if k < states.stop else f"scan element {k - states.stop}"
                for k in range(n_in)
            ],
            feeds={
                k: (v, "initial" if k < states.stop else "slices") for k, v in enumerate(values)
            },
            results={j: (j, "final" if j < outputs.stop else "stacked") for j in range(n_out)},
            carries={j: j for j in range(min(outputs.stop, n_out))},
        )
    if op == "Loop":
        carried = arguments.get(LoopSignature.CARRIED_ARGUMENT, [])
        loop = LoopSignature(len(carried), max(n_out - 1 - len(carried), 0))
        first_in, first_out = loop.body_carried.start, loop.body_carried_outputs.start
        feeds = {first_in + k: (source, "initial") for k, source in enumerate(carried)}
        if arguments.get(loop.CONDITION_ARGUMENT):
            feeds[loop.BODY_CONDITION] = (arguments[loop.CONDITION_ARGUMENT][0], "initial")
        named = {loop.ITERATION: "iteration number", loop.BODY_CONDITION: "condition"}
        carries = {loop.CONDITION_OUTPUT: loop.BODY_CONDITION}
        carries.update({first_out + k: first_in + k for k in range(loop.num_carried)})
        return Wiring(
            roles=[named.get(k, f"carried {k - first_in}") for k in range(n_in)],
            feeds=feeds,
            results={
                j: (j - first_out, "final" if j < loop.body_carried_outputs.stop else "stacked")
                for j in range(first_out, n_out)
            },
            carries={j: k for j, k in carries.items() if j < n_out},
        )
    return Wiring(roles=[""] * n_in, results={j: (j, "") for j in range(n_out)})  # If


def in_order(row, names: list[str]) -> None:
    """Keep the nodes of a same-rank row left to right in the order given (invisible edges)."""
    for left, right in zip(names, names[1:], strict=False):  # each name with the next
        row.edge(left, right, style="invis")

"""A graph without scheduling conditions stepped by modeci-mdf's own nodes, without its scheduler.

``EvaluableGraph`` builds a graph-scheduler ``Scheduler`` (a toposort, default
conditions, clocks) to run one pass over the graph per step. A graph with no
conditions needs none of it: each step runs every node once, consideration set by
consideration set, in the toposort of modeci-mdf's ``Graph.dependency_dict`` (the queue
graph-scheduler makes of it). So :func:`lean_engine` plans that pass itself and steps
the nodes with modeci-mdf's own ``EvaluableNode.evaluate`` (its inputs, parameters,
conditions and outputs, evaluated by the engine's own expression evaluator), and the
edges with ``EvaluableGraph.evaluate_edge``: the values, types and errors are stock's.

It answers only where the pass is certain to be stock's; otherwise it returns None
and the caller builds the stock engine:

* the graph is not marked for ONNX semantics, has no node-specific or termination
  conditions, and no two nodes share an id;
* every edge's sender is in an earlier consideration set than its receiver (an edge
  into a port with a ``default_value`` is no dependency for modeci-mdf, so its sender
  may run later, or in the same set, in an order the scheduler leaves open), and no
  input port receives more than one edge (their order is a set's);
* no node has ``functions``, and every name a parameter's value or its ``args`` read is
  known to the node or is one of the args (modeci-mdf then keeps the parameters in the
  model's order; else it reorders them, or refuses the node in its own words).
"""

from __future__ import annotations

import ast
import builtins
import functools
import keyword
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from modeci_mdf.mdf import Graph, Node

from mdf_loops.caches import by_text
from mdf_loops.model.semantics import onnx_semantics_of
from mdf_loops.timeloop.plan import SchedulePlan

if TYPE_CHECKING:
    from modeci_mdf.execution_engine import EvaluableNode

__all__ = ["LeanEngine", "lean_engine", "required_names", "is_stateful"]


class LeanEngine:
    """What :func:`~mdf_loops.timeloop.probe.probe` asks of an ``EvaluableGraph``:
    ``enodes`` and ``evaluate``, for a graph :func:`lean_engine` accepts."""

    verbose = False

    def evaluate_edge(self, edge: Any, time_increment: float | None = None) -> None:
        """``EvaluableGraph.evaluate_edge``, modeci-mdf's own (it reads ``enodes`` and
        ``verbose`` only)."""
        from modeci_mdf.execution_engine import EvaluableGraph

        EvaluableGraph.evaluate_edge(self, edge, time_increment=time_increment)  # type: ignore[arg-type]

    def __init__(self, graph: Graph, sets: list[list[str]]) -> None:
        self.graph = graph
        self.sets = sets
        incoming: dict[str, list[Any]] = {node.id: [] for node in graph.nodes}
        for edge in graph.edges:
            incoming[edge.receiver].append(edge)
        self._incoming = incoming

    @functools.cached_property
    def enodes(self) -> dict[str, EvaluableNode]:
        """modeci-mdf's ``EvaluableNode`` of each node, made when first stepped."""
        return {node.id: _evaluable_node(node) for node in self.graph.nodes}

    @property
    def plan(self) -> SchedulePlan:
        """What :func:`~mdf_loops.timeloop.conditions.plan_schedule` plans for the graph."""
        return SchedulePlan([list(s) for s in self.sets], {}, None)

    def evaluate(
        self,
        time_increment: float | None = None,
        initializer: Mapping[str, Any] | None = None,
    ) -> None:
        """One ``EvaluableGraph.evaluate``: one pass over every node, edges first."""
        if initializer:  # as the stock engine gives them: every input port of that id
            for enode in self.enodes.values():
                for name, port in enode.evaluable_inputs.items():
                    if name in initializer:
                        port.set_input_value(initializer[name])
        for consideration_set in self.sets:
            for node_id in consideration_set:
                for edge in self._incoming[node_id]:
                    self.evaluate_edge(edge, time_increment=time_increment)
                self.enodes[node_id].evaluate(time_increment=time_increment)


def lean_engine(graph: Graph) -> LeanEngine | None:
    """modeci-mdf's nodes of ``graph`` ready to step without a scheduler, or None where
    the graph needs the stock engine (see the module docstring)."""
    if onnx_semantics_of(graph) is not None:
        return None  # the stock engine evaluates a marked graph under ONNX semantics
    conditions = graph.conditions
    if conditions is not None and (conditions.node_specific or conditions.termination):
        return None
    if len({node.id for node in graph.nodes}) != len(graph.nodes):
        return None  # the engine keeps one node per id: stock decides which
    sets = _consideration_sets(graph)
    if sets is None or not all(_stock_builds(node) for node in graph.nodes):
        return None
    return LeanEngine(graph, sets)


def _consideration_sets(graph: Graph) -> list[list[str]] | None:
    """graph-scheduler's consideration queue of the graph (sorted ids), where every edge
    runs from an earlier set to a later one and no port has two edges; else None."""
    try:
        dependencies = {
            node.id: {sender.id for sender in senders}
            for node, senders in graph.dependency_dict.items()
        }
    except AttributeError:
        return None  # an edge to a missing node or port: the stock engine says which
    sets = _toposort(dependencies)
    if sets is None:
        return None
    set_of = {node_id: k for k, s in enumerate(sets) for node_id in s}
    receivers = set()
    for edge in graph.edges:
        port = (edge.receiver, edge.receiver_port)
        sender, receiver = set_of.get(edge.sender), set_of.get(edge.receiver)
        if sender is None or receiver is None or not sender < receiver or port in receivers:
            return None
        receivers.add(port)
    return sets


def _toposort(dependencies: dict[str, set[str]]) -> list[list[str]] | None:
    """The sets ``toposort.toposort`` yields (graph-scheduler's consideration queue), as
    sorted ids: each node in the first set after all it depends on; None for a cycle."""
    remaining = {node: senders - {node} for node, senders in dependencies.items()}
    sets = []
    while remaining:
        ready = {node for node, senders in remaining.items() if not senders}
        if not ready:
            return None
        sets.append(sorted(ready))
        remaining = {n: senders - ready for n, senders in remaining.items() if n not in ready}
    return sets


def _stock_builds(node: Node) -> bool:
    """Whether modeci-mdf builds ``node`` with its parameters in the model's order (every
    name a value reads is known to the node) and without functions to order."""
    if node.functions:
        return False
    own = {port.id for port in node.input_ports} | {p.id for p in node.parameters}
    for parameter in node.parameters:
        args = parameter.args or {}
        if not isinstance(args, dict):
            return False
        texts = [parameter.value, *args.values()]
        for text in (t for t in texts if type(t) is str):
            if not all(
                name in own or name in args or name in KNOWN_PARAMETERS
                for name in required_names(text)
            ):
                return False
    return True


def _evaluable_node(node: Node) -> EvaluableNode:
    """The ``EvaluableNode`` modeci-mdf builds for a node :func:`_stock_builds` accepts."""
    from modeci_mdf.execution_engine import EvaluableNode, EvaluableOutput, EvaluableParameter

    enode = EvaluableNode.__new__(EvaluableNode)
    enode.verbose = False
    enode.node = node
    quiet_input = _quiet_input_class()
    enode.evaluable_inputs = {p.id: quiet_input(p, False) for p in node.input_ports}
    enode.evaluable_parameters = OrderedDict(
        (p.id, EvaluableParameter(p, False)) for p in node.parameters
    )
    enode.evaluable_functions = OrderedDict()
    enode.evaluable_outputs = {p.id: EvaluableOutput(p, False) for p in node.output_ports}
    return enode


#: modeci-mdf's ``execution_engine.KNOWN_PARAMETERS``: the names every node knows (its
#: definition in every supported version; ``tests/timeloop/test_lean_engine.py`` compares)
KNOWN_PARAMETERS = frozenset(["constant", "math", "numpy", *dir(builtins)])


@by_text(maxsize=4096)
def required_names(expression: str) -> frozenset[str]:
    """The names modeci-mdf requires a node to know for a parameter's value (a pure
    function of the text, asked of the same few expressions on every conversion):
    ``execution_engine.get_required_variables_from_expression``.

    That function cuts the text into pieces at its brackets and keeps the names of each
    piece's parse, the piece's ends stripped of `` ,+-*/%^&``, then ``])`` and ``[(``. A
    text without brackets is one piece: its names are read here the same way, without
    importing the engine (which imports torch, where installed: about a second). A text
    with brackets, or one whose piece does not parse (the engine raises its own error),
    is the engine's to answer.
    """
    if expression.isascii() and expression.isidentifier() and not keyword.iskeyword(expression):
        return frozenset((expression,))  # what its parse gives a bare name
    if "[" not in expression and "]" not in expression:  # one piece, parsed as stock does
        piece = expression.strip(" ,+-*/%^&").lstrip("])").rstrip("[(")
        try:
            tree = ast.parse(piece)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass
        else:
            return frozenset(str(n.id) for n in ast.walk(tree) if isinstance(n, ast.Name))
    from modeci_mdf.execution_engine import get_required_variables_from_expression

    return frozenset(get_required_variables_from_expression(expression))


def is_stateful(parameter: Any) -> bool:
    """modeci-mdf's ``Parameter.is_stateful``, with the names a value reads remembered."""
    if parameter.time_derivative is not None or parameter.default_initial_value is not None:
        return True
    value = parameter.value
    return type(value) is str and parameter.id in required_names(value)


@functools.cache
def _quiet_input_class() -> type:
    """modeci-mdf's ``EvaluableInput``, less the print of each value it is set to (the
    engine's prints are DEBUG log lines; formatting a numpy value for one costs more than
    the step): a first or overwriting value is kept as it comes, the rest is stock's.
    Made when a node is first stepped, so that the engine is imported only then."""
    from modeci_mdf.execution_engine import EvaluableInput

    class QuietInput(EvaluableInput):  # type: ignore[misc]
        curr_value: Any

        def set_input_value(self, value: Any) -> None:
            if self.curr_value is None or self.input_port.reduce == "overwrite":
                self.curr_value = value
            else:
                super().set_input_value(value)

    return QuietInput

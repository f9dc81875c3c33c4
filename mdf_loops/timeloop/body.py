"""The one-step body graph of a time loop, built from the nodes of a stateful graph.

Each source node becomes a stateless step node (:mod:`~mdf_loops.timeloop.step`); the
builder adds the clock (time and the first-step flag), the node that reads the input
time series, the schedule of conditioned nodes and the control node computing the
Loop's condition, and states which values the Loop carries and records.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Sequence
from typing import Any

import attr
import numpy as np
from modeci_mdf.mdf import Edge, Graph, InputPort, Node, OutputPort, Parameter

from mdf_loops.errors import ModelError
from mdf_loops.model.convention import BodySignature, set_body_signature
from mdf_loops.model.inputs import engine_zeros
from mdf_loops.timeloop.plan import SchedulePlan
from mdf_loops.timeloop.schedule import (
    control_node,
    counter_ports,
    schedule_node,
    termination_expression,
)
from mdf_loops.timeloop.step import FIRST, FRESH, RUNS, carried_port, step_node, value_port

__all__ = ["BodyBuilder"]


class BodyBuilder:
    """Builds the one-step body graph from the source graph."""

    def __init__(self, source: Graph, dt: float, plan: SchedulePlan, values: dict, series: dict):
        self.source, self.dt, self.plan, self.values, self.series = source, dt, plan, values, series
        self.nodes = {n.id: n for n in source.nodes}
        self.exposed: dict[str, set[str]] = {n: set() for n in self.nodes}
        taken = set(self.nodes)
        self.clock = _fresh_id("clock", taken)
        self.feed = _fresh_id("inputs", taken)
        self.scheduler = _fresh_id("schedule", taken)
        self.control = _fresh_id("control", taken)
        for read in plan.thresholds:
            self._reference(read.node, read.name)

    def _reference(self, node_id: str, name: str) -> tuple[str, str]:
        """The body output port showing ``node.name`` after a step."""
        node = self.nodes.get(node_id)
        if node is None:
            raise ModelError(
                f"graph '{self.source.id}' has no node '{node_id}' (nodes: {sorted(self.nodes)})"
            )
        if any(p.id == name for p in node.output_ports):
            return node_id, name
        if any(p.id == name for p in node.parameters):
            self.exposed[node_id].add(name)
            return node_id, value_port(name)
        raise ModelError(
            f"node '{node_id}' has no output port or parameter '{name}' (ports: "
            f"{[p.id for p in node.output_ports]}, parameters: "
            f"{[p.id for p in node.parameters]})"
        )

    def records(self, record: Sequence[str]) -> dict[str, tuple[str, str]]:
        refs = {}
        for ref in record:
            if not isinstance(ref, str) or ref.count(".") != 1:
                raise ModelError(f"record {ref!r}: expected 'node_id.port_or_parameter_id'")
            refs[ref] = self._reference(*ref.split("."))
        self.recorded = refs
        return refs

    def build(self, until: str | None) -> tuple[Graph, list[tuple[str, Any]], bool]:
        body = Graph(id=f"{self.source.id}_step")
        masked = self.plan.masked
        carried_in: list[str] = []
        carried_out: list[tuple[str, str]] = []
        initial: list[tuple[str, Any]] = []
        integers: dict[str, set[str]] = {}  # per node, the values modeci-mdf holds as ints
        for (owner, name), value in self.values.items():
            if value.dtype.kind in "iu":
                integers.setdefault(owner, set()).add(name)
        for node in self.source.nodes:
            built = step_node(
                node,
                self.dt,
                conditioned=node.id in masked,
                exposed=self.exposed[node.id],
                integers=frozenset(integers.get(node.id, ())),
            )
            body.nodes.append(built.node)
            for name in built.carried_parameters:
                carried_in.append(carried_port(node.id, name))
                carried_out.append((node.id, value_port(name)))
                initial.append((carried_port(node.id, name), self._initial(node.id, name)))
            for port in built.carried_outputs:
                carried_in.append(carried_port(node.id, port))
                carried_out.append((node.id, port))
                initial.append((carried_port(node.id, port), self._initial(node.id, port)))
        body.edges.extend([_copied_edge(e) for e in self.source.edges])
        self._clock(body)
        self._inputs(body)
        if self.plan.needs_schedule:
            body.nodes.append(schedule_node(self.plan, self.scheduler))
            for name in counter_ports(self.plan):
                carried_in.append(name)
                carried_out.append((self.scheduler, f"{name}__next"))
                initial.append((name, 0))
            for n in masked:
                self._edge(body, self.scheduler, f"runs__{n}", n, RUNS)
                self._edge(body, self.scheduler, f"fresh__{n}", n, FRESH)
        until_text, until_ports = self._until(body, until)
        body.nodes.append(control_node(self.plan, self.control, until_text, until_ports))
        if self.plan.termination is not None:
            for name in counter_ports(self.plan):
                self._edge(body, self.scheduler, f"{name}__next", self.control, f"end__{name}")
            for read in self.plan.thresholds:
                self._edge(body, *self._reference(read.node, read.name), self.control, read.port)
        self.signature = self._signature(body, carried_in, carried_out)
        return body, initial, self._initial_condition()

    def _signature(
        self, body: Graph, carried_in: list[str], carried_out: list[tuple[str, str]]
    ) -> BodySignature:
        """The body's signature, written into its metadata and kept (:attr:`signature`)
        for a backend that compiles the body as built."""
        outputs = [(self.control, "cond_out"), *carried_out, (self.clock, "time")]
        signature = BodySignature(
            ("iteration", "cond_in", *carried_in),
            (*outputs, *self.recorded.values()),
            tuple(f"{p}__series" for p in self.series),
        )
        set_body_signature(
            body,
            signature.formal_inputs,
            [f"{node}.{port}" for node, port in signature.formal_outputs],
            signature.outer_scope_inputs,
        )
        return signature

    def _initial(self, node_id: str, name: str) -> Any:
        value = self.values.get((node_id, name))
        if value is None:
            raise ModelError(
                f"node '{node_id}' '{name}': it never got a value in the first "
                "steps on modeci-mdf's engine, so its type is unknown"
            )
        return _stored_initial(value)

    def _edge(self, body: Graph, sender: str, sender_port: str, receiver: str, port: str) -> None:
        body.edges.append(
            Edge(
                id=f"{sender}_{sender_port}__{receiver}_{port}",
                sender=sender,
                sender_port=sender_port,
                receiver=receiver,
                receiver_port=port,
            )
        )

    def _clock(self, body: Graph) -> None:
        clock = Node(id=self.clock)
        clock.input_ports.append(InputPort(id="iteration"))
        clock.output_ports.extend(
            [
                OutputPort(id="time", value=f"iteration * {self.dt!r}"),
                OutputPort(id="first", value="iteration == 0"),
            ]
        )
        body.nodes.insert(0, clock)
        for node in self.source.nodes:
            self._edge(body, self.clock, "first", node.id, FIRST)

    def _inputs(self, body: Graph) -> None:
        received = {(e.receiver, e.receiver_port) for e in self.source.edges}
        targets: dict[str, list[str]] = {p: [] for p in self.series}
        by_id = {n.id: n for n in body.nodes}
        for node in self.source.nodes:
            for port in node.input_ports:
                if (node.id, port.id) in received:
                    if port.default_value is not None:
                        # modeci-mdf's engine orders two nodes by an edge only into a
                        # port without a default (Graph.dependency_dict): the step runs
                        # the sender first on every backend (stock in either order)
                        step_port = next(p for p in by_id[node.id].input_ports if p.id == port.id)
                        step_port.default_value = None
                    continue
                if port.id in targets:
                    targets[port.id].append(node.id)
                    continue
                _default_input(by_id[node.id], port.id)
        for name, receivers in targets.items():
            if not receivers:
                raise ModelError(
                    f"input '{name}': no input port of that id without an edge "
                    f"in graph '{self.source.id}'"
                )
        if not self.series:
            return
        feed = Node(id=self.feed)
        feed.input_ports.append(InputPort(id="iteration"))
        for name in self.series:
            feed.input_ports.append(InputPort(id=f"{name}__series"))
            feed.parameters.append(
                Parameter(
                    id=f"{name}__now",
                    function="onnx::Gather",
                    args={"data": f"{name}__series", "indices": "iteration"},
                )
            )
            feed.output_ports.append(OutputPort(id=name, value=f"{name}__now[()]"))
        body.nodes.insert(1, feed)
        for name, receivers in targets.items():
            for receiver in receivers:
                self._edge(body, self.feed, name, receiver, name)

    def _until(self, body: Graph, until: str | None) -> tuple[str | None, list[str]]:
        if until is None:
            return None, []
        try:
            tree = ast.parse(until.strip(), mode="eval")
        except SyntaxError as exc:
            raise ModelError(f"until {until!r}: not an expression ({exc.msg})") from None
        ports: dict[str, str] = {}

        class _Refs(ast.NodeTransformer):
            def visit_Attribute(inner, node):  # noqa: N805 - closure over the builder
                if isinstance(node.value, ast.Name) and node.value.id in self.nodes:
                    ref = f"{node.value.id}.{node.attr}"
                    if ref not in ports:
                        ports[ref] = f"until{len(ports)}"
                        self._edge(
                            body,
                            *self._reference(node.value.id, node.attr),
                            self.control,
                            ports[ref],
                        )
                    return ast.copy_location(ast.Name(id=ports[ref], ctx=ast.Load()), node)
                return inner.generic_visit(node)

        text = ast.unparse(_Refs().visit(tree))
        if not ports:
            raise ModelError(f"until {until!r}: it reads no 'node.name' value of the graph")
        return text, list(ports.values())

    def _initial_condition(self) -> bool:
        """Stock's check before the first step: is the run terminated already?"""
        if self.plan.termination is None:
            return True
        defaults = {}
        for read in self.plan.thresholds:
            node = self.nodes[read.node]
            param = next((p for p in node.parameters if p.id == read.name), None)
            default = param.default_initial_value if param is not None else None
            defaults[read.port] = np.asarray(
                default if isinstance(default, (int, float, list)) else 0.0, dtype=float
            )
        text = termination_expression(
            self.plan,
            calls=lambda n: "0",
            useable=lambda d, o: "0",
            passes="0",
            threshold=lambda read: read.port,
        )
        value = eval(text, {"__builtins__": {"abs": abs}, "numpy": np}, defaults)  # noqa: S307
        return not bool(value)


#: the dtype a numeric array of each kind has once stored in a model file and read back
#: (``numpy.asarray(array.tolist())``)
_READ_BACK = {
    "b": np.dtype(bool),
    "i": np.dtype("int64"),
    "f": np.dtype("float64"),
    "c": np.dtype("complex128"),
}


def _stored_initial(value: Any) -> Any:
    """A probed value as the Loop node holds it: a number as Python's (the python
    backend's types start from it), a numeric array as an array of the dtype it would
    be read back with (a nested list costs a Python object, and a check, per element:
    minutes for a port of millions of zeros), anything else as a nested list."""
    array = np.asarray(value)
    dtype = _READ_BACK.get(array.dtype.kind)
    if array.ndim == 0 or dtype is None:
        return array.tolist()
    return array.astype(dtype)  # a copy


def _default_input(node: Node, port_id: str) -> None:
    """An input port without an edge reads what modeci-mdf reads there
    (:func:`~mdf_loops.model.inputs.engine_zeros`): its ``default_value``, else
    ``numpy.full(shape, 0)`` (``0.0`` for a float ``type``) on the first evaluation and
    float zeros after it.

    An array of zeros becomes a constant parameter of the step node with the port's id
    (a list-valued parameter is an array on every backend; a list ``default_value``
    would reach the expressions as a Python list). So do int zeros that turn into float
    zeros: ``numpy.where(first__step, 0, 0.0)`` (for an array, over two constant
    parameters of the zeros), which the python backend folds to stock's int on the first
    step and float after; the engine and ONNX hold the float zeros from
    the first step (a value's type is fixed across a Loop's steps).
    """
    port = next(p for p in node.input_ports if p.id == port_id)
    if port.default_value is not None:
        return
    zeros, later = engine_zeros(port), engine_zeros(port, read_before=True)
    if not zeros.shape and zeros.dtype == later.dtype:
        port.default_value = zeros.item()
        return
    node.input_ports.remove(port)
    if zeros.dtype == later.dtype:  # an array of zeros on every step
        node.parameters.insert(0, Parameter(id=port.id, value=zeros))
        return
    if not zeros.shape:  # int zeros on the first step, float zeros after
        value = f"numpy.where({FIRST}, {zeros.item()!r}, {later.item()!r})"
        node.parameters.insert(0, Parameter(id=port.id, value=value))
        return
    taken = {p.id for p in node.parameters} | {p.id for p in node.input_ports}
    first_id = _fresh_id(f"{port.id}__first", taken)
    later_id = _fresh_id(f"{port.id}__later", taken)
    node.parameters[:0] = [  # the arrays are constants of the step, then the choice
        Parameter(id=first_id, value=zeros),
        Parameter(id=later_id, value=later),
        Parameter(id=port.id, value=f"numpy.where({FIRST}, {first_id}, {later_id})"),
    ]


def _copied_edge(edge: Edge) -> Edge:
    """A new edge equal to ``edge``, sharing none of its dicts (``copy.deepcopy`` of the
    edge gives the same, at three times the cost)."""
    return attr.evolve(
        edge, parameters=copy.deepcopy(edge.parameters), metadata=copy.deepcopy(edge.metadata)
    )


def _fresh_id(name: str, taken: set[str]) -> str:
    candidate, k = name, 1
    while candidate in taken:
        candidate, k = f"{name}{k}", k + 1
    taken.add(candidate)
    return candidate

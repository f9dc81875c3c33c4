"""The graphs the lean probe and the type inference are checked on against the stock
engine's probe (test_lean_engine.py, test_infer.py): the example time-loop models, the
models of test_stock_constructs.py, and random small models of scalar parameters (some
of them made arrays)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

from modeci_mdf.mdf import (
    Edge,
    Graph,
    InputPort,
    Model,
    Node,
    OutputPort,
    Parameter,
    ParameterCondition,
)
from test_stock_constructs import MODELS as STOCK_CONSTRUCTS

from mdf_loops.model.interface import load_model

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "timeloops"


def example_and_construct_graphs() -> list[tuple[str, Graph]]:
    """(name, first graph) of each example time-loop model file and each stock construct."""
    found = [(path.name, load_model(path).graphs[0]) for path in sorted(EXAMPLES.glob("*.json"))]
    found += [(name, build().graphs[0]) for name, build in STOCK_CONSTRUCTS.items()]
    return found


def random_scalar_graphs(seed: int, count: int) -> Iterator[tuple[str, Graph]]:
    """("random model k", graph) of ``count`` random scalar models drawn from one seed."""
    rng = random.Random(seed)
    for k in range(count):
        yield f"random model {k}", random_scalar_model(rng, k).graphs[0]


def random_array_graphs(seed: int, count: int) -> Iterator[tuple[str, Graph]]:
    """("random array model k", graph): random scalar models whose literal values and
    initial values are made lists at random (shapes (1,) and (2,), as NeuroML's exports
    write ``[0.0]``), some parameters set only by conditions (SwitchedRLC_Circuit's), and
    some values wrapped in ``numpy.exp``, ``and`` or ``or`` (NeuroML's exports)."""
    rng = random.Random(seed)
    for k in range(count):
        model = random_scalar_model(rng, k)
        for node in model.graphs[0].nodes:
            for p in node.parameters:
                if type(p.value) in (int, float) and rng.random() < 0.6:
                    p.value = [p.value] if rng.random() < 0.5 else [p.value, rng.choice(NUMBERS)]
                if type(p.default_initial_value) in (int, float) and rng.random() < 0.6:
                    p.default_initial_value = [p.default_initial_value] * rng.choice([1, 2])
                if p.conditions and p.time_derivative and rng.random() < 0.3:
                    p.time_derivative = p.default_initial_value = None  # conditions only
                    test = rng.choice(["1 > 0", "0 > 1", "2 * 0.5 > 0.75"])  # not itself
                    p.conditions = [ParameterCondition(id="c", test=test, value=[2.5])]
                if type(p.value) is str and not p.default_initial_value and rng.random() < 0.3:
                    p.value = rng.choice(["numpy.exp(0.1 * ({x}))", "({x}) > 0.5 and ({x}) < 3",
                                          "({x}) < 0.5 or ({x}) > 3"]).format(x=p.value)
        yield f"random array model {k}", model.graphs[0]


NUMBERS = [0, 1, 2, 3, -1, 0.5, 2.0, 1.5, -0.25, 4.0]
KINDS = ["literal", "text", "counter", "derivative", "expression", "other forms", "when"]


def random_scalar_model(rng: random.Random, k: int) -> Model:
    """A chain of 1-3 nodes of scalar parameters: ints and floats, literals and text,
    counters, time derivatives, whole-number float results (modelspec makes those
    Python ints), conditions, weighted edges and ports with defaults."""
    nodes, edges = [], []
    for n in range(rng.randint(1, 3)):
        ports = (
            []
            if n == 0
            else [InputPort(id="inp", default_value=rng.choice([None, None, None, 1, 0.5]))]
        )
        names = ["inp"] if n else []
        parameters = []
        for j in range(rng.randint(1, 4)):
            parameters.append(_random_parameter(rng, f"p{j}", names))
            names.append(f"p{j}")
        outputs = [OutputPort(id="out", value=rng.choice(names[-len(parameters) :]))]
        outputs.append(OutputPort(id="twice", value=f"2 * {rng.choice(names)}"))
        nodes.append(
            Node(id=f"n{n}", input_ports=ports, parameters=parameters, output_ports=outputs)
        )
        if n:
            weight = rng.choice([None, 1, 2, 0.5])
            edges.append(
                Edge(
                    id=f"e{n}",
                    sender=f"n{n - 1}",
                    sender_port=rng.choice(["out", "twice"]),
                    receiver=f"n{n}",
                    receiver_port="inp",
                    parameters=None if weight is None else {"weight": weight},
                )
            )
    return Model(id=f"random{k}", graphs=[Graph(id=f"random{k}", nodes=nodes, edges=edges)])


def _random_parameter(rng: random.Random, pid: str, names: list[str]) -> Parameter:
    """Parameter ``pid`` of a random kind, reading one of ``names`` or a number."""
    kind = rng.choice(KINDS)
    other = rng.choice(names) if names else repr(rng.choice(NUMBERS))
    if kind == "literal":
        return Parameter(id=pid, value=rng.choice(NUMBERS))
    if kind == "text":
        return Parameter(id=pid, value=repr(rng.choice(NUMBERS)))
    if kind == "counter":
        return Parameter(
            id=pid,
            value=f"{pid} + {rng.choice(NUMBERS)!r}",
            default_initial_value=rng.choice([None, 0, 1.0, "2"]),
        )
    if kind == "derivative":
        return Parameter(
            id=pid,
            default_initial_value=rng.choice([0, 1.0, -2]),
            time_derivative=f"{other} * {rng.choice(NUMBERS)!r} - {pid}",
        )
    if kind == "expression":
        op = rng.choice(["+", "-", "*", "/", "**"])
        return Parameter(id=pid, value=f"{other} {op} {rng.choice([2, 0.5, 4.0])!r}")
    if kind == "other forms":
        form = rng.choice(
            ["-{x}", "{x} > 0.5", "numpy.where({x} >= 1, 1, 0.5)", "({x})", "{x} * 0"]
        )
        return Parameter(id=pid, value=form.format(x=other))
    return Parameter(
        id=pid,
        default_initial_value=rng.choice([0, 0.5]),
        time_derivative="1",
        conditions=[ParameterCondition(id="c", test=f"{pid} > 0.01", value=rng.choice([0, 2.5]))],
    )

"""What a simulation reports and refuses (mdf_loops/timeloop/watch.py and simulate's
backend choice): the first non-finite value, progress, the step limit, auto's fallbacks,
and the messages of the refusals found on modeci-mdf's example models."""

from __future__ import annotations

import ast
import logging
import re

import numpy as np
import pytest
from modeci_mdf.mdf import (Condition, ConditionSet, Edge, Graph, InputPort, Model, Node,
                            OutputPort, Parameter)

import mdf_loops
from mdf_loops.backends.python import simulate as python_simulate
from mdf_loops.errors import ConditionError, EvaluationError, IterationLimitError, ModelError
from conftest import needs_input_port_fields

pytestmark = needs_input_port_fields

BACKENDS = ["python", "onnxruntime", "scheduler"]


def _single(*parameters: Parameter, outputs=(("out", "x"),), node_id="N") -> Model:
    node = Node(id=node_id, parameters=list(parameters),
                output_ports=[OutputPort(id=p, value=v) for p, v in outputs])
    return Model(id="m", graphs=[Graph(id="g", nodes=[node])])


def _blow_up() -> Model:
    """x grows by x*x*1e100 a step: inf after a few steps; y = x - x is NaN from then."""
    return _single(Parameter(id="x", default_initial_value=1.0, time_derivative="x * x * 1e100"),
                   outputs=(("out", "x"), ("gap", "x - x")))


def _numpy_blow_up(steps: int) -> np.ndarray:
    x, out = 1.0, []
    with np.errstate(over="ignore"):
        for k in range(steps):
            x = 1.0 if k == 0 else float(np.float64(x) + np.float64(x) * x * 1e100 * 1.0)
            out.append(x)
    return np.array(out)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_first_non_finite_value_is_warned_once_with_node_port_and_step(backend, caplog):
    expected = _numpy_blow_up(8)
    first = int(np.argmin(np.isfinite(expected)))
    assert 0 < first < 8  # the oracle blows up within the run
    with caplog.at_level(logging.WARNING, logger="mdf_loops"), np.errstate(all="ignore"):
        traces = mdf_loops.simulate(_blow_up(), dt=1.0, steps=8, record=["N.out", "N.gap"],
                                    backend=backend)
    np.testing.assert_array_equal(traces["N.out"], expected)
    warned = [r.getMessage() for r in caplog.records if "becomes" in r.getMessage()]
    assert len(warned) == 2, warned  # once per value, not once per step
    assert f"node 'N' port 'out' becomes infinite at step {first} (t={first:g})" in warned[0]
    assert f"node 'N' port 'gap' becomes NaN at step {first}" in warned[1]


def test_finite_values_give_no_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="mdf_loops"):
        mdf_loops.simulate(_single(Parameter(id="x", default_initial_value=1.0,
                                             time_derivative="-x")),
                           dt=0.1, steps=50, record=["N.out"], backend="python")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("shape", [(6,), (6, 2), (6, 2, 3)])
def test_the_first_step_with_a_non_finite_element_is_named_at_any_shape(shape, caplog):
    from mdf_loops.timeloop.watch import SimulationWatch

    values = np.ones(shape)
    values[(4,) + (1,) * (len(shape) - 1)] = np.nan  # step 4 of the chunk
    values[(5,) + (0,) * (len(shape) - 1)] = np.inf
    watch = SimulationWatch("m", 100, 0.5)
    with caplog.at_level(logging.WARNING, logger="mdf_loops"):
        watch.check("N.v", values, first_step=10)
        watch.check("N.v", values, first_step=20)  # warned once
        watch.check("N.w", np.ones(shape), first_step=10)
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "node 'N' port 'v' becomes NaN at step 14 (t=7)" in warned[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_huge_step_counts_are_refused_before_anything_runs(backend, tmp_path):
    decay = _single(Parameter(id="x", default_initial_value=1.0, time_derivative="-x"))
    with pytest.raises(IterationLimitError, match="asked for 1000000000000 iterations.*"
                                                  "max_iterations"):
        mdf_loops.simulate(decay, dt=0.1, steps=10**12, record=["N.out"], backend=backend)
    path = tmp_path / "loop.json"  # the count written in a time-loop model's file
    mdf_loops.to_time_loop(decay, dt=0.1, steps=10**12, record=["N.out"]).to_json_file(str(path))
    with pytest.raises(IterationLimitError, match="1000000000000 iterations"):
        mdf_loops.simulate(path, backend=backend)
    with mdf_loops.safety.limits(max_iterations=20):  # the fix the message gives works
        assert mdf_loops.simulate(path, steps=20, backend=backend).steps == 20


def test_progress_is_reported_in_chunks_on_python_and_every_step_on_the_scheduler(monkeypatch):
    decay = _single(Parameter(id="x", default_initial_value=1.0, time_derivative="-x"))
    monkeypatch.setattr(python_simulate, "CHUNK", 4)
    seen: list[tuple[int, int]] = []
    mdf_loops.simulate(decay, dt=0.1, steps=10, record=["N.out"], backend="python",
                       progress=lambda done, total: seen.append((done, total)))
    assert seen == [(0, 10), (4, 10), (8, 10)]
    seen.clear()
    mdf_loops.simulate(decay, dt=0.1, steps=6, record=["N.out"], backend="scheduler",
                       progress=lambda done, total: seen.append((done, total)))
    assert [d for d, _ in seen] == list(range(6)) and {t for _, t in seen} == {6}


def test_auto_passes_a_failing_backend_over_with_a_warning(monkeypatch, caplog):
    decay = _single(Parameter(id="x", default_initial_value=1.0, time_derivative="-0.5 * x"))
    expected = [1.0]
    for _ in range(9):
        expected.append(expected[-1] + (-0.5 * expected[-1]) * 0.1)

    def broken(model):
        raise RuntimeError("a bug in the writer")

    monkeypatch.setattr(python_simulate, "loop_source", broken)  # untrusted: its text
    with caplog.at_level(logging.WARNING, logger="mdf_loops"):
        traces = mdf_loops.simulate(decay, dt=0.1, steps=10, record=["N.out"])
    assert traces.backend == "onnxruntime"
    np.testing.assert_allclose(traces["N.out"], expected, rtol=1e-12)
    assert any("python backend failed (RuntimeError: a bug in the writer)" in r.getMessage()
               for r in caplog.records)
    with pytest.raises(EvaluationError, match="python backend failed: RuntimeError"):
        mdf_loops.simulate(decay, dt=0.1, steps=10, record=["N.out"], backend="python")


def test_ports_fed_by_several_overwriting_edges_are_warned(caplog):
    a = Node(id="A", output_ports=[OutputPort(id="out", value="1")])
    b = Node(id="B", output_ports=[OutputPort(id="out", value="2")])
    c = Node(id="C", input_ports=[InputPort(id="x")],
             parameters=[Parameter(id="s", value="s + x")],
             output_ports=[OutputPort(id="out", value="s")])
    edges = [Edge(id=f"e{n}", sender=n, sender_port="out", receiver="C", receiver_port="x")
             for n in "AB"]
    model = Model(id="m", graphs=[Graph(id="g", nodes=[a, b, c], edges=edges)])
    with caplog.at_level(logging.WARNING, logger="mdf_loops"):
        mdf_loops.to_time_loop(model, dt=1.0, steps=3, record=["C.out"])
    warned = [r.getMessage() for r in caplog.records]
    assert any("node 'C' input port 'x': 2 edges (A.out, B.out) overwrite" in m for m in warned)


def test_a_function_parameter_read_before_its_first_value_fails_as_on_stock():
    model = _single(Parameter(id="x", value="y + 1"),
                    Parameter(id="y", function="linear",
                              args={"variable0": 2.0, "slope": 1.0, "intercept": 0.0}))
    with pytest.raises(ModelError, match=r"graph 'g': step 0 fails on modeci-mdf's engine: .*"
                                         r"\[y \+ 1\]"):
        mdf_loops.to_time_loop(model, dt=1.0, steps=3, record=["N.out"])


def test_a_value_whose_shape_changes_is_refused_by_name():
    model = _single(Parameter(id="x", value="numpy.append(x, 1.0)"))
    with pytest.raises(ModelError, match="node 'N' 'x': its shape changes from step to step"):
        mdf_loops.to_time_loop(model, dt=1.0, steps=3, record=["N.out"], trusted=True)


def _counters(trial_end: Condition, chained: bool = True) -> Model:
    nodes = [Node(id=n, parameters=[Parameter(id="n", value="n + 1", default_initial_value=0)],
                  output_ports=[OutputPort(id="out", value="n")]) for n in "ABC"]
    edges = [Edge(id=f"A{n}", sender="A", sender_port="out", receiver=n, receiver_port="x")
             for n in "BC"] if chained else []
    for node in nodes[1:] if chained else []:
        node.input_ports.append(InputPort(id="x"))
    conditions = ConditionSet(
        node_specific={"B": Condition("EveryNCalls", dependencies="A", n=2)} if chained else {},
        termination={"environment_state_update": trial_end})
    return Model(id="abc", graphs=[Graph(id="g", nodes=nodes, edges=edges,
                                         conditions=conditions)])


def test_several_pass_trials_are_named_by_class_and_arguments():
    model = _counters(Condition("And", dependencies=[
        Condition("AfterNCalls", dependencies="C", n=2), Condition("JustRan", dependencies="A")]))
    with pytest.raises(ConditionError) as error:
        mdf_loops.to_time_loop(model, dt=1.0, steps=3, record=["A.out"])
    message = str(error.value)
    assert "All(AfterNCalls('C', 2), JustRan('A'))" in message and " object at " not in message
    assert "cannot end the simulation instead" in message  # no fix that would be refused


def test_the_fix_a_several_pass_trial_message_suggests_works():
    threshold = Condition("Threshold", dependency="C", parameter="n", threshold=4,
                          comparator=">=")
    model = _counters(threshold, chained=False)
    with pytest.raises(ConditionError) as error:
        mdf_loops.to_time_loop(model, dt=1.0, steps=20, record=["C.out"])
    message = str(error.value)
    assert "Threshold('C', 'n', 4, '>=')" in message
    suggested = ast.literal_eval(re.search(r"set termination (\{.*?\}\}\})", message).group(1))
    terms = {key: Condition(value["type"], **value["kwargs"]) for key, value in suggested.items()}
    terms["environment_sequence"] = threshold  # "end the simulation with it"
    model.graphs[0].conditions.termination = terms
    traces = mdf_loops.simulate(model, dt=1.0, steps=20, record=["C.out"])
    assert traces["C.out"].tolist() == [1, 2, 3, 4]  # C runs every step and ends at n >= 4

"""The constructs of PsyNeuLink's MDF exports (``get_mdf_serialized``), in models of our
own written as PsyNeuLink writes them, simulated equal to stock modeci-mdf's loop (one
subprocess without mdf_loops) and to numpy recurrences in the test.

What PsyNeuLink writes for a mechanism that integrates over time: the mechanism's
output function listed before the integrator function it reads; the integrator's
``previous_value`` parameter (a ``default_initial_value`` that is a scalar while the
value is a (1, 1) array); input ports with a shape and an integer type but no edge and
no default (fed by the composition's input node, which is not exported); a function
whose value is a bare tuple (``f[0], f[1], t + h``) and another's args that rebind a
parameter's name (``"v": "v + 0.5 * h * k1"``: Runge-Kutta stages); ``EveryNCalls(sender,
1)`` on each node of a pathway with an ``AllHaveRun`` trial; and noise as an
``onnx::RandomNormal`` function (refused: stock draws unseeded numbers).
``test_external_models.py`` runs a folder of real exports by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_input_port_fields
from stock_batch import StockJob, stock_traces

import mdf_loops
from mdf_loops.errors import ConditionError, ModelError

pytestmark = needs_input_port_fields

DT, STEPS = 0.05, 30
ALWAYS = {"type": "Always", "kwargs": {}}


def _model(name: str, nodes: dict, edges: dict | None = None, node_conditions=None) -> dict:
    """An MDF document with PsyNeuLink's condition set (one trial of one pass each)."""
    conditions = {
        "node_specific": node_conditions or {n: ALWAYS for n in nodes},
        "termination": {
            "environment_sequence": {"type": "Never", "kwargs": {}},
            "environment_state_update": {"type": "AllHaveRun", "kwargs": {"dependencies": []}},
        },
    }
    graph = {"nodes": nodes, "edges": edges or {}, "conditions": conditions,
             "parameters": {"learning_rate": 0.05}, "metadata": {"type": "Composition"}}
    return {name: {"format": "ModECI MDF v0.4", "generating_application": "PsyNeuLink",
                   "graphs": {name: graph}}}


def _adaptive_mechanism(name: str, rate: float, offset: float, initial, slope: float,
                        input_type: str = "int64") -> dict:
    """A TransferMechanism in integrator mode: output function first, then the integrator."""
    integrator = f"{name}_AdaptiveIntegrator_Function_0"
    return {
        "metadata": {"type": "TransferMechanism"},
        "input_ports": {f"{name}_InputPort_0": {"shape": [1, 1], "type": input_type}},
        "functions": {
            f"{name}_Linear_Function_0": {
                "function": "linear",
                "args": {"slope": slope, "intercept": 0.5, "variable0": integrator},
            },
            integrator: {
                "args": {"offset": offset, "rate": rate, "noise": 0.0,
                         "variable0": f"{name}_InputPort_0"},
                "value": "(1 - rate) * previous_value + rate * variable0 + noise + offset",
            },
        },
        "parameters": {
            "integrator_function_value": {"value": [[0]]},
            "previous_value": {"value": integrator, "default_initial_value": initial},
        },
        "output_ports": {f"{name}_RESULT": {"value": f"{name}_Linear_Function_0",
                                            "shape": [1], "type": "float64"}},
    }


def pnl_adaptive() -> dict:
    return _model("pnl_adaptive", {"a": _adaptive_mechanism("a", 0.25, 0.1, [[2.0]], 2.0)})


def pnl_pathway() -> dict:
    nodes = {"A": _adaptive_mechanism("A", 0.5, 1.0, [[0]], 1.0),
             "B": _adaptive_mechanism("B", 0.2, 0.0, 0.0, 3.0, input_type="float64")}
    edges = {"A_to_B": {"sender": "A", "receiver": "B", "sender_port": "A_RESULT",
                        "receiver_port": "B_InputPort_0", "parameters": {"weight": 1}}}
    every = {"type": "EveryNCalls", "kwargs": {"dependency": "A", "n": 1}}
    return _model("pnl_pathway", nodes, edges, {"A": ALWAYS, "B": every})


def pnl_runge_kutta() -> dict:
    """FitzHugh-Nagumo in PsyNeuLink's form, with two Runge-Kutta stages for V."""
    h = {"h": DT}
    dv = "v - v ** 3 / 3 - w + variable0"
    node = {
        "metadata": {"type": "IntegratorMechanism"},
        "input_ports": {"fn_InputPort_0": {"shape": [1, 1], "type": "int64"}},
        "functions": {
            "k1": {"args": {"variable0": "fn_InputPort_0"}, "value": dv},
            "k2": {"args": {**h, "variable0": "fn_InputPort_0", "v": "v + 0.5 * h * k1"},
                   "value": dv},
            "result": {"args": h, "value": "[v + h * k2, w + h * 0.08 * (v + 0.7 - 0.8 * w)]"},
            "fn_F": {"args": {**h, "variable0": "result"},
                     "value": "result[0], result[1], previous_time + h"},
        },
        "parameters": {
            "reset": {"value": 0},
            "v": {"value": "fn_F[0]", "default_initial_value": -1},
            "w": {"value": "fn_F[1]", "default_initial_value": 0},
            "previous_time": {"value": "fn_F[2]", "default_initial_value": 0.0},
        },
        # (an output port of w would change shape after the first step on stock too: w's
        # first value does not read the (1, 1) input; PsyNeuLink's ports all read fn_F[0])
        "output_ports": {"V": {"value": "fn_F[0]", "shape": [1], "type": "float64"}},
    }
    return _model("pnl_runge_kutta", {"fn": node})


MODELS = {f.__name__: f for f in (pnl_adaptive, pnl_pathway, pnl_runge_kutta)}


def _record(document: dict) -> list[str]:
    (model,) = document.values()
    (graph,) = model["graphs"].values()
    return [f"{n}.{p}" for n, node in graph["nodes"].items() for p in node["output_ports"]]


def _numpy_oracle(name: str) -> dict[str, np.ndarray]:
    """The recurrences the models describe, stepped in plain Python floats."""
    out: dict[str, list] = {}
    if name == "pnl_adaptive":
        x = 2.0
        for _ in range(STEPS):
            x = 0.75 * x + 0.1
            out.setdefault("a.a_RESULT", []).append(2.0 * x + 0.5)
    elif name == "pnl_pathway":
        a = b = 0.0
        for _ in range(STEPS):
            a = 0.5 * a + 1.0
            b = 0.8 * b + 0.2 * (a + 0.5)
            out.setdefault("A.A_RESULT", []).append(a + 0.5)
            out.setdefault("B.B_RESULT", []).append(3.0 * b + 0.5)
    else:
        v, w = -1.0, 0.0
        for _ in range(STEPS):
            k1 = v - v**3 / 3 - w
            mid = v + 0.5 * DT * k1
            k2 = mid - mid**3 / 3 - w
            v, w = v + DT * k2, w + DT * 0.08 * (v + 0.7 - 0.8 * w)
            out.setdefault("fn.V", []).append(v)
    return {ref: np.array(values).reshape(STEPS, 1, 1) for ref, values in out.items()}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("pnl_models")
    paths = {}
    for name, build in MODELS.items():
        paths[name] = folder / f"{name}.json"
        paths[name].write_text(json.dumps(build()))
    return paths


@pytest.fixture(scope="module")
def stock(files, tmp_path_factory) -> dict[str, dict]:
    """Every model through stock modeci-mdf's loop, in one interpreter without mdf_loops."""
    jobs = {name: StockJob(path, DT, STEPS, _record(MODELS[name]()))
            for name, path in files.items()}
    return stock_traces(jobs, tmp_path_factory.mktemp("pnl_stock"))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_stock_follows_the_numpy_recurrence(name, stock):
    """The oracle's check: the models mean what the test says they mean."""
    for ref, expected in _numpy_oracle(name).items():
        np.testing.assert_allclose(stock[name][ref], expected, rtol=1e-12, err_msg=ref)


@pytest.mark.parametrize("backend", ["scheduler", "python", "onnxruntime", "auto"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_export_equals_stock(name, backend, files, stock):
    record = _record(MODELS[name]())
    traces = mdf_loops.simulate(files[name], dt=DT, steps=STEPS, record=record, backend=backend)
    assert traces.backend == ("python" if backend == "auto" else backend)
    for ref in record:
        ours, theirs = traces[ref], stock[name][ref]
        assert ours.shape == theirs.shape, (ref, ours.shape, theirs.shape)
        if backend == "onnxruntime":
            np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-300, err_msg=ref)
        else:
            np.testing.assert_array_equal(ours, theirs, err_msg=f"{name} {ref} on {backend}")


def _noisy() -> dict:
    document = pnl_adaptive()
    node = document["pnl_adaptive"]["graphs"]["pnl_adaptive"]["nodes"]["a"]
    draw = {"function": "onnx::RandomNormal", "args": {"shape": [1], "seed": -1}}
    node["functions"]["a_random_draw"] = draw
    integrator = node["functions"]["a_AdaptiveIntegrator_Function_0"]
    integrator["value"] += " + 0.0 * a_random_draw"
    return document


def test_random_noise_is_refused_by_name(tmp_path):
    path = tmp_path / "noisy.json"
    path.write_text(json.dumps(_noisy()))
    before = path.read_text()
    with pytest.raises(ModelError, match=r"node 'a' function 'a_random_draw': onnx::RandomNormal"):
        mdf_loops.simulate(path, dt=DT, steps=3, record=["a.a_RESULT"])
    assert path.read_text() == before


def test_functions_that_read_one_another_are_refused_as_stock_refuses_them(tmp_path):
    document = pnl_adaptive()
    functions = document["pnl_adaptive"]["graphs"]["pnl_adaptive"]["nodes"]["a"]["functions"]
    functions["a_AdaptiveIntegrator_Function_0"]["args"]["offset"] = "a_Linear_Function_0"
    path = tmp_path / "cycle.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ModelError, match="(?s)modeci-mdf cannot build it: .*a_Linear_Function_0"):
        mdf_loops.to_time_loop(path, dt=DT, steps=3, record=["a.a_RESULT"], trusted=True)


def test_every_second_call_still_needs_several_passes(tmp_path):
    """EveryNCalls(A, 2) under AllHaveRun: stock runs two passes a trial (refused)."""
    document = pnl_pathway()
    graph = document["pnl_pathway"]["graphs"]["pnl_pathway"]
    graph["conditions"]["node_specific"]["B"]["kwargs"]["n"] = 2
    path = tmp_path / "every_second.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ConditionError, match="AllHaveRun.* several passes"):
        mdf_loops.simulate(path, dt=DT, steps=3, record=["B.B_RESULT"])


def test_a_value_reading_a_function_call_is_refused_by_name(tmp_path):
    """PsyNeuLink's input port fed by two projections: ``variable0[0]`` over a ReduceSum."""
    document = pnl_adaptive()
    node = document["pnl_adaptive"]["graphs"]["pnl_adaptive"]["nodes"]["a"]
    node["input_ports"]["a_InputPort_1"] = {"shape": [1, 1], "type": "float64"}
    node["parameters"]["combined"] = {"value": "[a_InputPort_0, a_InputPort_1]"}
    node["functions"] = {
        "a_combination": {"function": "onnx::ReduceSum", "args": {"data": "combined", "axes": 0}},
        "a_dimreduce": {"args": {"variable0": "a_combination"}, "value": "variable0[0]"},
        **node["functions"],
    }
    node["functions"]["a_AdaptiveIntegrator_Function_0"]["args"]["variable0"] = "a_dimreduce"
    path = tmp_path / "two_projections.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ModelError, match=r"node 'a' function 'a_dimreduce': its value reads "
                                         r"function 'a_combination' \(onnx::ReduceSum\)"):
        mdf_loops.simulate(path, dt=DT, steps=3, record=["a.a_RESULT"])

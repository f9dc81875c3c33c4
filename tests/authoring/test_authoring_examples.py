"""The Theano scan examples under examples/theano_*.py, each checked against a numpy loop written here.

Every example's committed JSON/YAML is run with modeci-mdf's own
``EvaluableGraph`` (after ``import mdf_loops``), with ``mdf_loops.run`` (both
backends), and exported with ``mdf_loops.onnx.export.mdf_to_onnx``, checked with
the full ONNX checker and run by onnxruntime; all against the same numpy oracle.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Callable

import numpy as np
import onnx
import onnxruntime
import pytest
import yaml
from modeci_mdf.execution_engine import EvaluableGraph
from modeci_mdf.utils import load_mdf

import mdf_loops
from mdf_loops.onnx.export import mdf_to_onnx
from conftest import needs_input_port_fields

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


# ---------------------------------------------------------------- numpy oracles


def power_oracle(A, k):
    result = np.ones_like(A)
    for _ in range(int(k)):
        result = result * A
    return {"A_to_the_k": result}


def polynomial_oracle(coefficients, x):
    total = 0.0
    for power, coefficient in enumerate(coefficients):
        total += float(coefficient) * float(x) ** power
    return {"polynomial": np.float64(total)}


def triangular_oracle(up_to):
    total, sequence = 0, []
    for n in range(int(up_to)):
        total += n
        sequence.append(total)
    return {"triangular_sequence": np.array(sequence, dtype=np.int32)}


def set_value_oracle(location, values, output_model):
    steps = []
    for (i, j), value in zip(location, values):
        matrix = np.zeros_like(output_model)
        matrix[i, j] = value
        steps.append(matrix)
    return {"result": np.array(steps)}


def rnn_oracle(W, W_in_1, W_in_2, W_feedback, W_out, u, x0, y0):
    """x[t] = tanh(x[t-1] W + u[t] W_in_1 + u[t-4] W_in_2 + y[t-1] W_feedback); y[t] = x[t-3] W_out.

    Time t indexes u; the first step is t = 4 (u[t-4] must exist), so x0 holds
    x[1], x[2], x[3] and y0 is y[3].
    """
    x = {1: x0[0], 2: x0[1], 3: x0[2]}
    y = {3: y0}
    for t in range(4, len(u)):
        x[t] = np.tanh(x[t - 1] @ W + u[t] @ W_in_1 + u[t - 4] @ W_in_2 + y[t - 1] @ W_feedback)
        y[t] = x[t - 3] @ W_out
    steps = range(4, len(u))
    return {"x_vals": np.array([x[t] for t in steps]), "y_vals": np.array([y[t] for t in steps])}


def powers_of_two_oracle(max_value):
    power, values = 1.0, []
    for _ in range(1024):
        power = power * 2
        values.append(power)
        if power > max_value:
            break
    return {"values": np.array(values)}


def gibbs_oracle(W, bvis, bhid, sample, steps=10):
    module = _example("theano_gibbs")
    a, c, m = module.LCG_MULTIPLIER, module.LCG_INCREMENT, module.LCG_MODULUS
    hidden_rng, visible_rng = module.HIDDEN_SEEDS.copy(), module.VISIBLE_SEEDS.copy()
    v = sample
    for _ in range(steps):
        hidden_rng = (hidden_rng * a + c) % m
        h = (hidden_rng / m < _sigmoid(v @ W + bhid)).astype(np.float64)
        visible_rng = (visible_rng * a + c) % m
        v = (visible_rng / m < _sigmoid(h @ W.T + bvis)).astype(np.float64)
    return {"sample_after_chain": v, "hidden_rng_after": hidden_rng,
            "visible_rng_after": visible_rng}


# name, inputs, oracle
CASES: list[tuple[str, Callable[[ModuleType], dict], Callable]] = [
    ("theano_power", lambda m: m.example_inputs(2), power_oracle),
    ("theano_power", lambda m: m.example_inputs(4), power_oracle),
    ("theano_power", lambda m: m.example_inputs(0), power_oracle),
    ("theano_polynomial", lambda m: m.example_inputs(), polynomial_oracle),
    ("theano_polynomial", lambda m: {"coefficients": np.linspace(-1, 1, 7, dtype=np.float32),
                                     "x": np.float32(0.5)}, polynomial_oracle),
    ("theano_triangular", lambda m: m.example_inputs(15), triangular_oracle),
    ("theano_set_value", lambda m: m.example_inputs(), set_value_oracle),
    ("theano_rnn", lambda m: m.example_inputs(), rnn_oracle),
    ("theano_rnn", lambda m: m.example_inputs(steps=5, seed=3), rnn_oracle),
    ("theano_powers_of_two", lambda m: m.example_inputs(45.0), powers_of_two_oracle),
    ("theano_powers_of_two", lambda m: m.example_inputs(1.5), powers_of_two_oracle),
    ("theano_gibbs", lambda m: m.example_inputs(), gibbs_oracle),
    ("theano_gibbs", lambda m: m.example_inputs(seed=7), gibbs_oracle),
]
NAMES = sorted({name for name, _, _ in CASES})
IDS = [f"{name}-{i}" for i, (name, _, _) in enumerate(CASES)]


def _check(outputs: dict, expected: dict) -> None:
    assert set(expected) <= set(outputs)
    for name, value in expected.items():
        got = np.asarray(outputs[name])
        assert got.shape == np.shape(value), name
        np.testing.assert_allclose(got, value, rtol=1e-6 if got.dtype == np.float32 else 1e-12,
                                   atol=0, err_msg=name)


def _case(index: int):
    name, make_inputs, oracle = CASES[index]
    inputs = make_inputs(_example(name))
    return name, inputs, oracle(**inputs)


# ---------------------------------------------------------------- the documented values


def test_documented_values():
    """The values the reference docs print."""
    power = _example("theano_power")
    run = mdf_loops.run(EXAMPLES / "theano_power.json", power.example_inputs(2),
                        backend="scheduler")
    np.testing.assert_array_equal(run["A_to_the_k"], np.arange(10) ** 2)
    run = mdf_loops.run(EXAMPLES / "theano_power.json", power.example_inputs(4),
                        backend="scheduler")
    np.testing.assert_array_equal(run["A_to_the_k"], np.arange(10) ** 4)
    run = mdf_loops.run(EXAMPLES / "theano_polynomial.json",
                        _example("theano_polynomial").example_inputs(), backend="scheduler")
    assert run["polynomial"] == 19.0
    run = mdf_loops.run(EXAMPLES / "theano_triangular.json", {"up_to": np.int32(15)},
                        backend="scheduler")
    assert run["triangular_sequence"].tolist() == [n * (n + 1) // 2 for n in range(15)]
    assert run["triangular_sequence"][-1] == 105
    run = mdf_loops.run(EXAMPLES / "theano_set_value.json",
                        _example("theano_set_value").example_inputs(), backend="scheduler")
    assert run["result"].shape == (2, 5, 5)
    assert run["result"][0, 1, 1] == 42 and run["result"][1, 2, 3] == 50
    assert np.count_nonzero(run["result"]) == 2
    run = mdf_loops.run(EXAMPLES / "theano_powers_of_two.json", {"max_value": 45.0},
                        backend="scheduler")
    assert run["values"].tolist() == [2, 4, 8, 16, 32, 64]


# ---------------------------------------------------------------- every way to run them


@pytest.mark.parametrize("index", range(len(CASES)), ids=IDS)
def test_scheduler_matches_numpy(index):
    name, inputs, expected = _case(index)
    _check(mdf_loops.run(EXAMPLES / f"{name}.json", inputs, backend="scheduler"), expected)


@pytest.mark.parametrize("index", range(len(CASES)), ids=IDS)
def test_default_run_matches_numpy(index):
    name, inputs, expected = _case(index)
    _check(mdf_loops.run(EXAMPLES / f"{name}.yaml", inputs), expected)


@pytest.mark.parametrize("file_format", ["json", "yaml"])
@pytest.mark.parametrize("index", range(len(CASES)), ids=IDS)
def test_stock_evaluable_graph_matches_numpy(index, file_format):
    name, inputs, expected = _case(index)
    graph = load_mdf(str(EXAMPLES / f"{name}.{file_format}")).graphs[0]
    interface = mdf_loops.model.graph_interface(graph)
    engine = EvaluableGraph(graph)
    engine.evaluate(initializer={interface.inputs[k]: np.asarray(v) for k, v in inputs.items()})
    outputs = {out: engine.enodes[node].evaluable_outputs[port].curr_value
               for out, (node, port) in interface.outputs.items()}
    _check(outputs, expected)


@pytest.mark.parametrize("index", range(len(CASES)), ids=IDS)
def test_onnx_export_passes_checker_and_matches_numpy_in_onnxruntime(index):
    name, inputs, expected = _case(index)
    exported = mdf_to_onnx(load_mdf(str(EXAMPLES / f"{name}.json")))
    onnx.checker.check_model(exported, full_check=True)
    session = onnxruntime.InferenceSession(exported.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    declared = session.get_inputs() + session.get_overridable_initializers()  # defaults
    feeds = {i.name: np.asarray(inputs[i.name]) for i in declared}
    names = [o.name for o in session.get_outputs()]
    _check(dict(zip(names, session.run(None, feeds))), expected)


@needs_input_port_fields  # the scripts write defaults as fields
@pytest.mark.parametrize("name", NAMES)
def test_committed_files_are_what_the_script_writes(name):
    written = json.loads(_example(name).build_model().to_json())
    assert json.loads((EXAMPLES / f"{name}.json").read_text()) == written
    assert yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text()) == written


@pytest.mark.parametrize("name", NAMES)
def test_main_writes_and_runs(name, tmp_path, monkeypatch, capsys):
    module = _example(name)
    monkeypatch.setattr(module, "HERE", tmp_path)
    module.main()
    assert (tmp_path / f"{name}.json").exists() and (tmp_path / f"{name}.yaml").exists()
    assert capsys.readouterr().out


# ---------------------------------------------------------------- how they are lowered


def _nodes_by_function(graph) -> dict[str, list]:
    found: dict[str, list] = {}
    for node in graph.nodes:
        for p in node.parameters:
            if p.function:
                found.setdefault(p.function, []).append(node)
    return found


def _body(node):
    value = next(p.value for p in node.parameters if p.id == "body")
    return mdf_loops.model.body_graph(value)


def test_power_keeps_a_state_instead_of_stacking_every_step():
    graph = load_mdf(str(EXAMPLES / "theano_power.json")).graphs[0]
    (loop,) = _nodes_by_function(graph)["onnx::Loop"]
    body = _body(loop)
    # condition + one carried value; no scan output
    assert len(body.metadata["formal_outputs"]) == 2
    assert len(body.metadata["formal_inputs"]) == 3


def test_rnn_feeds_each_tap_as_its_own_scan_input_and_carries_a_window():
    graph = load_mdf(str(EXAMPLES / "theano_rnn.json")).graphs[0]
    (scan,) = _nodes_by_function(graph)["onnx::Scan"]
    assert scan.id == "rnn"  # the scan's name
    params = {p.id: p for p in scan.parameters}
    assert params["num_scan_inputs"].value == 2  # u[t-4] and u[t]
    body = _body(scan)
    # states: the window x[t-3..t-1] and y[t-1]; then the two taps of u
    assert len(body.metadata["formal_inputs"]) == 4
    slices = _nodes_by_function(graph)["onnx::Slice"]
    assert len(slices) >= 2


def test_powers_of_two_is_a_loop_with_the_step_limit_as_trip_count():
    model = load_mdf(str(EXAMPLES / "theano_powers_of_two.json"))
    graph = model.graphs[0]
    assert "onnx::Scan" not in _nodes_by_function(graph)
    (loop,) = _nodes_by_function(graph)["onnx::Loop"]
    args = next(p.args for p in loop.parameters if p.function == "onnx::Loop")
    trip = args["M"]
    (constant,) = [n for n in graph.nodes if any(o.id == trip for o in n.output_ports)]
    value = next(p.value for p in constant.parameters if p.id == "value")
    assert mdf_loops.model.values.decode_tensor(value) == 1024
    assert model.onnx_opset_version

"""The example models under examples/: each checked against a numpy computation written here.

Every example is loaded from its committed JSON and YAML file, run with
``mdf_loops.run`` (through the MDF scheduler and through onnxruntime) and
compared with an independent numpy loop over the same inputs (same seeded
noise, same weights); each also runs once through modeci-mdf's own
``EvaluableGraph``, and its ONNX export runs in onnxruntime.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import yaml
from modeci_mdf.execution_engine import EvaluableGraph
from modeci_mdf.utils import load_mdf

import mdf_loops
from conftest import needs_input_port_fields

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NAMES = [
    "elman_rnn",
    "lstm_cell",
    "bidirectional_scan",
    "drift_diffusion",
    "rescorla_wagner",
    "hopfield",
    "newton",
    "nested_trials",
]


def _module_at(path: Path, module_name: str) -> ModuleType:
    """The module of the file at ``path``: by its path, so no import depends on ``sys.path``."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _example(name: str) -> ModuleType:
    return _module_at(EXAMPLES / f"{name}.py", f"example_{name}")


@functools.cache
def _theano_cases() -> list:
    """The Theano examples' numpy oracles, kept with their authoring tests.

    Loaded by path: pytest puts ``tests/authoring`` on ``sys.path`` only once it has
    collected that folder, so a plain import would pass or fail with the order of files.
    """
    path = Path(__file__).resolve().parent / "authoring" / "test_authoring_examples.py"
    return _module_at(path, "theano_example_oracles").CASES


@pytest.fixture(scope="module", params=["json", "yaml"])
def file_format(request) -> str:
    return request.param


@pytest.fixture(scope="module", params=["scheduler", "onnxruntime", "torch"])
def backend(request) -> str:
    """Ways ``mdf_loops.run`` runs a model: the MDF scheduler, onnxruntime, and torch."""
    if request.param == "torch":
        pytest.importorskip("torch")
    return request.param


def _load(name: str, file_format: str):
    return load_mdf(str(EXAMPLES / f"{name}.{file_format}"))


def _stock_engine_outputs(name: str, inputs: dict) -> dict:
    """Run the example's JSON with modeci-mdf's own engine; outputs as 'node.port'."""
    graph = _load(name, "json").graphs[0]
    engine = EvaluableGraph(graph)
    engine.evaluate(initializer=inputs)
    return {
        f"{node_id}.{port_id}": output.curr_value
        for node_id, enode in engine.enodes.items()
        for port_id, output in enode.evaluable_outputs.items()
    }


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


# ---------------------------------------------------------------- the committed files


@needs_input_port_fields  # the scripts write defaults as fields
@pytest.mark.parametrize("name", NAMES)
def test_committed_files_are_what_the_script_writes(name):
    written = json.loads(_example(name).build_model().to_json())
    assert json.loads((EXAMPLES / f"{name}.json").read_text()) == written
    assert yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text()) == written


# ---------------------------------------------------------------- Elman RNN


def _elman(w, h0, x):
    h, hidden = h0, []
    for x_t in x:
        h = np.tanh(w["W"] @ x_t + w["U"] @ h + w["b"])
        hidden.append(h)
    return h, np.array(hidden)


def test_elman_rnn(file_format, backend):
    ex = _example("elman_rnn")
    inputs = ex.example_inputs()
    out = mdf_loops.run(_load("elman_rnn", file_format), inputs, backend=backend)
    h_final, hidden = _elman(ex.weights(), inputs["h0"], inputs["x"])
    assert out["rnn.hidden"].shape == (ex.N_STEPS, ex.N_HIDDEN)
    np.testing.assert_allclose(out["rnn.hidden"], hidden, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out["rnn.h_final"], h_final, rtol=1e-12, atol=1e-12)


def test_elman_rnn_nonzero_initial_state_and_other_length():
    ex = _example("elman_rnn")
    rng = np.random.default_rng(11)
    h0, x = rng.uniform(-1, 1, ex.N_HIDDEN), rng.normal(size=(7, ex.N_INPUT))
    out = mdf_loops.run(_load("elman_rnn", "json"), {"h0": h0, "x": x}, backend="scheduler")
    np.testing.assert_allclose(out["rnn.hidden"], _elman(ex.weights(), h0, x)[1], atol=1e-12)


def test_elman_rnn_stock_engine():
    ex = _example("elman_rnn")
    inputs = ex.example_inputs()
    out = _stock_engine_outputs("elman_rnn", inputs)
    np.testing.assert_allclose(out["rnn.hidden"], _elman(ex.weights(), **inputs)[1], atol=1e-12)


def test_elman_rnn_wrong_input_width_is_refused_before_running():
    with pytest.raises(mdf_loops.errors.ModelError, match=r"input 'x': expected shape \[\?, 3\]"):
        mdf_loops.run(_load("elman_rnn", "json"), {"x": np.zeros((4, 2))})


def test_elman_rnn_wrong_input_width_names_node_and_iteration():
    model = _load("elman_rnn", "json")
    for port in model.graphs[0].nodes[0].input_ports:
        port.metadata = None  # undeclared: the mistake surfaces inside the loop
    with pytest.raises(mdf_loops.errors.EvaluationError) as info:
        mdf_loops.run(model, {"h0": np.zeros(5), "x": np.zeros((4, 2))}, backend="scheduler")
    message = str(info.value)
    assert "node 'rnn'" in message and "iteration 0" in message and "node 'cell'" in message


# ---------------------------------------------------------------- LSTM


def _lstm(w, h0, c0, x):
    h, c, hidden = h0, c0, []
    for x_t in x:
        z = {g: w[f"W_{g}"] @ x_t + w[f"U_{g}"] @ h + w[f"b_{g}"] for g in "ifog"}
        i, f, o, g = _sigmoid(z["i"]), _sigmoid(z["f"]), _sigmoid(z["o"]), np.tanh(z["g"])
        c = f * c + i * g
        h = o * np.tanh(c)
        hidden.append(h)
    return h, c, np.array(hidden)


def test_lstm_cell(file_format, backend):
    ex = _example("lstm_cell")
    inputs = ex.example_inputs()
    out = mdf_loops.run(_load("lstm_cell", file_format), inputs, backend=backend)
    h, c, hidden = _lstm(ex.weights(), inputs["h0"], inputs["c0"], inputs["x"])
    np.testing.assert_allclose(out["lstm.hidden"], hidden, atol=1e-12)
    np.testing.assert_allclose(out["lstm.h_final"], h, atol=1e-12)
    np.testing.assert_allclose(out["lstm.c_final"], c, atol=1e-12)


def test_lstm_cell_stock_engine():
    ex = _example("lstm_cell")
    inputs = ex.example_inputs()
    out = _stock_engine_outputs("lstm_cell", inputs)
    h, c, hidden = _lstm(ex.weights(), inputs["h0"], inputs["c0"], inputs["x"])
    np.testing.assert_allclose(out["lstm.c_final"], c, atol=1e-12)
    np.testing.assert_allclose(out["lstm.hidden"], hidden, atol=1e-12)


# ---------------------------------------------------------------- bidirectional scan


def _bidirectional(w, h0_fwd, h0_bwd, x):
    forward = _elman({"W": w["W_fwd"], "U": w["U_fwd"], "b": w["b_fwd"]}, h0_fwd, x)
    backward = _elman({"W": w["W_bwd"], "U": w["U_bwd"], "b": w["b_bwd"]}, h0_bwd, x[::-1])
    hidden_bwd = backward[1][::-1]  # row t: the backward state after reading x[T-1], ..., x[t]
    return forward[0], backward[0], np.concatenate([forward[1], hidden_bwd], axis=1)


def test_bidirectional_scan(file_format, backend):
    ex = _example("bidirectional_scan")
    inputs = ex.example_inputs()
    out = mdf_loops.run(_load("bidirectional_scan", file_format), inputs, backend=backend)
    h_fwd, h_bwd, hidden = _bidirectional(ex.weights(), **inputs)
    assert out["concat.hidden"].shape == (ex.N_STEPS, 2 * ex.N_HIDDEN)
    np.testing.assert_allclose(out["concat.hidden"], hidden, atol=1e-12)
    np.testing.assert_allclose(out["birnn.h_final_fwd"], h_fwd, atol=1e-12)
    np.testing.assert_allclose(out["birnn.h_final_bwd"], h_bwd, atol=1e-12)
    # the backward RNN's last state is the one stored at t = 0
    np.testing.assert_allclose(out["concat.hidden"][0, ex.N_HIDDEN:], h_bwd, atol=1e-12)


def test_bidirectional_scan_stock_engine():
    ex = _example("bidirectional_scan")
    inputs = ex.example_inputs()
    out = _stock_engine_outputs("bidirectional_scan", inputs)
    np.testing.assert_allclose(out["concat.hidden"], _bidirectional(ex.weights(), **inputs)[2],
                               atol=1e-12)


# ---------------------------------------------------------------- drift diffusion


def _ddm(noise, drift=1.0, threshold=1.0, noise_sd=1.0, dt=0.01):
    x, t, trace = 0.0, 0.0, []
    for n in noise:
        x = x + drift * dt + noise_sd * np.sqrt(dt) * n
        t += dt
        trace.append(x)
        if abs(x) >= threshold:
            break
    choice = 1 if x >= threshold else -1 if x <= -threshold else 0
    return x, t, np.array(trace), choice


def _check_ddm(out, noise):
    x, t, trace, choice = _ddm(noise)
    np.testing.assert_allclose(out["ddm.trace"], trace, atol=1e-12)
    np.testing.assert_allclose(out["ddm.decision_time"], t, atol=1e-12)
    assert int(out["decide.choice"]) == choice
    return len(trace), choice


def test_drift_diffusion(file_format, backend):
    noise = np.random.default_rng(3).standard_normal(200)  # the example's seeded noise
    out = mdf_loops.run(_load("drift_diffusion", file_format), {"noise": noise}, backend=backend)
    steps, choice = _check_ddm(out, noise)
    assert (steps, choice) == (112, 1)  # crossed the upper threshold before the noise ran out


def test_drift_diffusion_lower_threshold():
    noise = np.random.default_rng(5).standard_normal(200)
    out = mdf_loops.run(_load("drift_diffusion", "json"), {"noise": noise}, backend="scheduler")
    steps, choice = _check_ddm(out, noise)
    assert choice == -1 and steps < 200


def test_drift_diffusion_no_decision_stops_at_the_end_of_the_noise():
    noise = np.random.default_rng(1).standard_normal(200)
    out = mdf_loops.run(_load("drift_diffusion", "json"), {"noise": noise}, backend="scheduler")
    steps, choice = _check_ddm(out, noise)
    assert (steps, choice) == (200, 0)


def test_drift_diffusion_stock_engine():
    noise = np.random.default_rng(3).standard_normal(200)
    out = _stock_engine_outputs("drift_diffusion", {"noise": noise})
    _check_ddm(out, noise)
    np.testing.assert_allclose(out["ddm.evidence"], _ddm(noise)[0], atol=1e-12)


def test_drift_diffusion_noise_of_wrong_rank_names_the_loop():
    model = _load("drift_diffusion", "json")
    for node in model.graphs[0].nodes:
        for port in node.input_ports:
            port.metadata = None  # undeclared: the mistake surfaces inside the loop
    with pytest.raises(mdf_loops.errors.LoopError, match="node 'ddm'.*condition.*iteration 0"):
        mdf_loops.run(model, {"noise": np.zeros((3, 2))}, backend="scheduler")


def test_drift_diffusion_noise_of_wrong_rank_is_refused_before_running():
    with pytest.raises(mdf_loops.errors.ModelError, match=r"input 'noise': expected shape \[\?\]"):
        mdf_loops.run(_load("drift_diffusion", "json"), {"noise": np.zeros((3, 2))})


# ---------------------------------------------------------------- Rescorla-Wagner


def _rescorla_wagner(V0, cues, outcomes, alpha=0.2):
    V, history, errors = V0.copy(), [], []
    for x, lam in zip(cues, outcomes):
        delta = lam - V @ x
        V = V + alpha * delta * x
        history.append(V)
        errors.append(delta)
    return V, np.array(history), np.array(errors)


def test_rescorla_wagner(file_format, backend):
    inputs = _example("rescorla_wagner").example_inputs()
    out = mdf_loops.run(_load("rescorla_wagner", file_format), inputs, backend=backend)
    V, history, errors = _rescorla_wagner(**inputs)
    np.testing.assert_allclose(out["trials.V_final"], V, atol=1e-12)
    np.testing.assert_allclose(out["trials.V_history"], history, atol=1e-12)
    np.testing.assert_allclose(out["trials.prediction_errors"], errors, atol=1e-12)
    V_A, V_B, V_C, V_D = out["trials.V_final"]
    assert V_B < 0.05 < 0.4 < V_D  # blocking: A blocks B, D learns with C


def test_rescorla_wagner_random_design_stock_engine():
    rng = np.random.default_rng(8)
    cues = rng.integers(0, 2, size=(15, 4)).astype(float)
    outcomes = rng.choice([0.0, 1.0], size=15)
    inputs = {"V0": np.full(4, 0.1), "cues": cues, "outcomes": outcomes}
    out = _stock_engine_outputs("rescorla_wagner", inputs)
    V, history, errors = _rescorla_wagner(**inputs)
    np.testing.assert_allclose(out["trials.V_history"], history, atol=1e-12)
    np.testing.assert_allclose(out["trials.prediction_errors"], errors, atol=1e-12)


# ---------------------------------------------------------------- Hopfield


def _hopfield(patterns, s, max_sweeps=100):
    W = patterns.T @ patterns / patterns.shape[1]
    np.fill_diagonal(W, 0.0)
    states, energies = [], []
    for _ in range(max_sweeps):
        new = np.where(W @ s >= 0, 1.0, -1.0)
        changed = not np.array_equal(new, s)
        s = new
        states.append(s)
        energies.append(-0.5 * s @ W @ s)
        if not changed:
            break
    return s, np.array(states), np.array(energies)


def test_hopfield(file_format, backend):
    ex = _example("hopfield")
    inputs = ex.example_inputs()
    out = mdf_loops.run(_load("hopfield", file_format), inputs, backend=backend)
    s, states, energies = _hopfield(ex.stored_patterns(), inputs["s0"])
    np.testing.assert_array_equal(out["recall.s_final"], s)
    np.testing.assert_array_equal(out["recall.states"], states)
    np.testing.assert_allclose(out["recall.energies"], energies, atol=1e-12)
    np.testing.assert_array_equal(out["recall.s_final"], ex.stored_patterns()[0])  # recalled
    assert np.all(np.diff(out["recall.energies"]) <= 0)


def test_hopfield_two_cycle_stops_at_max_sweeps():
    # four patterns and twelve flips: synchronous updates fall into a two-state cycle
    ex = _example("hopfield")
    patterns = np.random.default_rng(0).choice([-1.0, 1.0], size=(4, ex.N_UNITS))
    probe = patterns[0].copy()
    probe[np.random.default_rng(4).choice(ex.N_UNITS, 12, replace=False)] *= -1
    model = ex.build_model(patterns, max_sweeps=8)
    out = mdf_loops.run(model, {"s0": probe}, backend="scheduler")
    s, states, _ = _hopfield(patterns, probe, max_sweeps=8)
    assert len(states) == 8
    np.testing.assert_array_equal(out["recall.states"], states)
    np.testing.assert_array_equal(states[-1], states[-3])  # a cycle, not a fixed point


def test_hopfield_stock_engine():
    ex = _example("hopfield")
    inputs = ex.example_inputs()
    out = _stock_engine_outputs("hopfield", inputs)
    np.testing.assert_array_equal(out["recall.states"],
                                  _hopfield(ex.stored_patterns(), inputs["s0"])[1])


# ---------------------------------------------------------------- Newton


def _newton(x, coefficients=(1.0, 0.0, -2.0, -5.0), tol=1e-10):
    c3, c2, c1, c0 = coefficients
    iterates = []
    while True:
        step = (((c3 * x + c2) * x + c1) * x + c0) / ((3 * c3 * x + 2 * c2) * x + c1)
        x = x - step
        iterates.append(x)
        if abs(step) <= tol:
            return x, np.array(iterates)


def test_newton(file_format, backend):
    out = mdf_loops.run(_load("newton", file_format), {"x0": np.array(1.0)}, backend=backend)
    root, iterates = _newton(1.0)
    np.testing.assert_allclose(out["newton.iterates"], iterates, rtol=1e-14)
    np.testing.assert_allclose(out["newton.root"], 2.0945514815423265, rtol=1e-14)
    real_roots = [r.real for r in np.roots([1.0, 0.0, -2.0, -5.0]) if abs(r.imag) < 1e-12]
    np.testing.assert_allclose(out["newton.root"], real_roots, rtol=1e-12)


def test_newton_other_cubic_stock_engine():
    # x^3 - 6x^2 + 11x - 6 = (x - 1)(x - 2)(x - 3); from 3.6 Newton finds 3
    coefficients = (1.0, -6.0, 11.0, -6.0)
    graph = _example("newton").build_model(coefficients, tol=1e-12).graphs[0]
    engine = EvaluableGraph(graph)
    engine.evaluate(initializer={"x0": np.array(3.6)})
    outputs = engine.enodes["newton"].evaluable_outputs
    root, iterates = _newton(3.6, coefficients, tol=1e-12)
    np.testing.assert_allclose(outputs["iterates"].curr_value, iterates, rtol=1e-14)
    np.testing.assert_allclose(outputs["root"].curr_value, 3.0, rtol=1e-14)


def test_newton_that_cycles_hits_the_iteration_limit():
    # x^3 - 2x + 2 from 0: Newton jumps 0 -> 1 -> 0 -> ... for ever
    model = _example("newton").build_model((1.0, 0.0, -2.0, 2.0))
    with pytest.raises(mdf_loops.errors.IterationLimitError, match="node 'newton'.*20 iterations"):
        mdf_loops.run(model, {"x0": np.array(0.0)}, max_iterations=20, backend="scheduler")


# ---------------------------------------------------------------- nested trials


def _nested_trials(x_init, stimuli, tau=1.0, dt=0.1, carryover=0.5):
    x, ends, traces = x_init, [], []
    for stimulus in stimuli:
        x = carryover * x
        trace = []
        for s_t in stimulus:
            x = x + dt * (-x + s_t) / tau
            trace.append(x)
        ends.append(x)
        traces.append(trace)
    return x, np.array(ends), np.array(traces)


def test_nested_trials(file_format, backend):
    ex = _example("nested_trials")
    inputs = ex.example_inputs()
    out = mdf_loops.run(_load("nested_trials", file_format), inputs, backend=backend)
    x, ends, traces = _nested_trials(**inputs)
    assert out["trials.traces"].shape == (ex.N_TRIALS, ex.N_STEPS)
    np.testing.assert_allclose(out["trials.traces"], traces, atol=1e-12)
    np.testing.assert_allclose(out["trials.x_end_of_trial"], ends, atol=1e-12)
    np.testing.assert_allclose(out["trials.x_final"], x, atol=1e-12)


def test_nested_trials_tau_reaches_the_inner_body():
    # a different tau in the top-level graph changes every inner time step
    ex = _example("nested_trials")
    inputs = ex.example_inputs()
    out = mdf_loops.run(ex.build_model(tau=0.3), inputs, backend="scheduler")
    np.testing.assert_allclose(out["trials.traces"], _nested_trials(**inputs, tau=0.3)[2],
                               atol=1e-12)
    assert not np.allclose(out["trials.traces"], _nested_trials(**inputs)[2])


def test_nested_trials_stock_engine():
    ex = _example("nested_trials")
    inputs = ex.example_inputs()
    out = _stock_engine_outputs("nested_trials", inputs)
    np.testing.assert_allclose(out["trials.traces"], _nested_trials(**inputs)[2], atol=1e-12)


# ---------------------------------------------------------------- export to ONNX


def _expected_outputs(name: str, ex: ModuleType, inputs: dict) -> dict:
    """Every graph output of an example, computed by the numpy loops above."""
    if name == "elman_rnn":
        h, hidden = _elman(ex.weights(), **inputs)
        return {"rnn.h_final": h, "rnn.hidden": hidden}
    if name == "lstm_cell":
        h, c, hidden = _lstm(ex.weights(), **inputs)
        return {"lstm.h_final": h, "lstm.c_final": c, "lstm.hidden": hidden}
    if name == "bidirectional_scan":
        h_fwd, h_bwd, hidden = _bidirectional(ex.weights(), **inputs)
        return {"birnn.h_final_fwd": h_fwd, "birnn.h_final_bwd": h_bwd, "concat.hidden": hidden}
    if name == "drift_diffusion":
        _, t, trace, choice = _ddm(inputs["noise"])
        return {"ddm.decision_time": t, "ddm.trace": trace, "decide.choice": choice}
    if name == "rescorla_wagner":
        V, history, errors = _rescorla_wagner(**inputs)
        return {"trials.V_final": V, "trials.V_history": history,
                "trials.prediction_errors": errors}
    if name == "hopfield":
        s, states, energies = _hopfield(ex.stored_patterns(), inputs["s0"])
        return {"recall.s_final": s, "recall.states": states, "recall.energies": energies}
    if name == "newton":
        root, iterates = _newton(float(inputs["x0"]))
        return {"newton.root": root, "newton.iterates": iterates}
    if name == "nested_trials":
        x, ends, traces = _nested_trials(**inputs)
        return {"trials.x_final": x, "trials.x_end_of_trial": ends, "trials.traces": traces}
    raise AssertionError(f"no expected outputs for {name}")


@pytest.mark.parametrize("name", NAMES)
def test_exported_model_runs_in_onnxruntime(name):
    onnx = pytest.importorskip("onnx")
    onnxruntime = pytest.importorskip("onnxruntime")
    from mdf_loops.onnx.export import mdf_to_onnx

    ex = _example(name)
    inputs = {k: np.asarray(v) for k, v in ex.example_inputs().items()}
    exported = mdf_to_onnx(EXAMPLES / f"{name}.json")  # input types as the model declares them
    onnx.checker.check_model(exported, full_check=True)
    session = onnxruntime.InferenceSession(exported.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    results = dict(zip(names, session.run(None, {i.name: inputs[i.name]
                                                 for i in session.get_inputs()})))
    expected = _expected_outputs(name, ex, inputs)
    assert sorted(results) == sorted(expected)
    for output, value in expected.items():
        np.testing.assert_allclose(results[output], value, rtol=1e-9, atol=1e-12,
                                   err_msg=f"{name}: {output}")


def test_exported_elman_rnn_takes_any_sequence_length():
    onnxruntime = pytest.importorskip("onnxruntime")
    from mdf_loops.onnx.export import mdf_to_onnx

    ex = _example("elman_rnn")
    session = onnxruntime.InferenceSession(
        mdf_to_onnx(EXAMPLES / "elman_rnn.yaml").SerializeToString(),
        providers=["CPUExecutionProvider"])
    h0, x = np.full(ex.N_HIDDEN, 0.2), np.random.default_rng(5).normal(size=(7, ex.N_INPUT))
    h_final, hidden = session.run(None, {"h0": h0, "x": x})
    np.testing.assert_allclose(hidden, _elman(ex.weights(), h0, x)[1], rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------- the command line, no inputs given


def _leaky(x0, I, dt=0.1, tau=2.0):
    x, trace = x0, []
    for i_t in I:
        x = x + dt * (-x + i_t) / tau
        trace.append(x)
    return x, np.array(trace)


def _every_expected_output(name: str) -> dict:
    """Every output of an example on its example_inputs(), from a numpy loop written in a test."""
    ex = _example(name)
    inputs = ex.example_inputs()
    if name in NAMES:
        return _expected_outputs(name, ex, inputs)
    if name == "leaky_integrator":
        x, trace = _leaky(**inputs)
        return {"integrate.x_final": x, "integrate.trace": trace}
    oracle = next(oracle for case, _, oracle in _theano_cases() if case == name)
    return oracle(**inputs)


ALL_EXAMPLES = sorted(p.stem for p in EXAMPLES.glob("*.py"))


def _cli(capsys, *args) -> str:
    from mdf_loops.cli import main

    status = main([str(a) for a in args])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert "WARNING" not in captured.err  # no fallback from onnxruntime to the scheduler
    return captured.out


@pytest.mark.parametrize("name", ALL_EXAMPLES)
def test_the_command_line_runs_every_example_with_no_inputs(name, tmp_path, capsys):
    expected = _every_expected_output(name)
    for model_file in (EXAMPLES / f"{name}.json", EXAMPLES / f"{name}.yaml"):
        assert _cli(capsys, "validate", model_file) == f"{model_file}: valid\n"
        _cli(capsys, "run", model_file, "-o", tmp_path / "out.npz")
        with np.load(tmp_path / "out.npz") as saved:
            assert sorted(saved.files) == sorted(expected)
            for output, value in expected.items():
                np.testing.assert_allclose(saved[output], value, rtol=1e-6, atol=1e-12,
                                           err_msg=f"{name}: {output}")
                assert saved[output].shape == np.shape(value)


@pytest.mark.parametrize("name", ALL_EXAMPLES)
def test_the_command_line_exports_every_example_with_its_defaults(name, tmp_path, capsys):
    """The exported model keeps the defaults as initializers: onnxruntime runs it with no feeds."""
    onnxruntime = pytest.importorskip("onnxruntime")
    _cli(capsys, "export", EXAMPLES / f"{name}.json", "-o", tmp_path / "model.onnx")
    session = onnxruntime.InferenceSession(str(tmp_path / "model.onnx"),
                                           providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    results = dict(zip(names, session.run(None, {})))
    for output, value in _every_expected_output(name).items():
        np.testing.assert_allclose(results[output], value, rtol=1e-6, atol=1e-12,
                                   err_msg=f"{name}: {output}")


def test_run_with_no_inputs_uses_the_defaults_typed_as_declared():
    # theano_power declares k int32 and A float32; the defaults are stored as plain lists
    out = mdf_loops.run(EXAMPLES / "theano_power.json", backend="scheduler")
    assert out["A_to_the_k"].dtype == np.float32
    np.testing.assert_array_equal(out["A_to_the_k"], np.arange(10, dtype=np.float32) ** 2)

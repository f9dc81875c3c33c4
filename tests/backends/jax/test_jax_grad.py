"""mdf_loops.grad and value_and_grad (mdf_loops/backends/jax/grad.py) against finite
differences of numpy loops written here."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto
from onnx import helper as oh

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import mdf_loops  # noqa: E402
from conftest import BOOL, INT64, body_graph, expression_node, mdf_model, onnx_model, value_info  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import rescorla_wagner  # noqa: E402

DOUBLE = TensorProto.DOUBLE


def _central(f, x: float, h: float = 1e-6) -> float:
    return (f(x + h) - f(x - h)) / (2 * h)


# ---------------------------------------------------------------- Scan (a parameter in a body)


def _rw_numpy(alpha, v0, cues, outcomes):
    v = np.array(v0, float)
    for x, lam in zip(cues, outcomes):
        v = v + alpha * (lam - v @ x) * x
    return v


def test_scan_gradient_wrt_a_body_parameter_and_an_input_matches_finite_differences():
    model = rescorla_wagner.build_model(alpha=0.2)
    inputs = rescorla_wagner.example_inputs()
    weights = np.array([1.0, -2.0, 0.5, 3.0])
    value, grads = mdf_loops.value_and_grad(
        model, lambda out: out["trials.V_final"] @ weights, ["alpha", "V0"], inputs)

    def loss(alpha, v0=inputs["V0"]):
        return _rw_numpy(alpha, v0, inputs["cues"], inputs["outcomes"]) @ weights

    np.testing.assert_allclose(value, loss(0.2), rtol=1e-12)
    np.testing.assert_allclose(grads["alpha"], _central(loss, 0.2), rtol=1e-6)
    for k in range(4):
        step = np.eye(4)[k]
        fd = _central(lambda e: loss(0.2, inputs["V0"] + e * step), 0.0)
        np.testing.assert_allclose(grads["V0"][k], fd, rtol=1e-6, atol=1e-9)
    # the model itself is unchanged: alpha is still its parameter
    assert mdf_loops.run(model, inputs, backend="scheduler")["trials.V_final"] @ weights == \
        pytest.approx(loss(0.2))


def test_a_qualified_parameter_name_and_a_given_value():
    model = rescorla_wagner.build_model(alpha=0.2)
    inputs = rescorla_wagner.example_inputs()
    grads = mdf_loops.grad(model, lambda out: out["trials.V_final"].sum(), ["learn.alpha"],
                           {**inputs, "learn.alpha": 0.35})
    f = lambda a: _rw_numpy(a, inputs["V0"], inputs["cues"], inputs["outcomes"]).sum()  # noqa: E731
    np.testing.assert_allclose(grads["learn.alpha"], _central(f, 0.35), rtol=1e-6)


# ---------------------------------------------------------------- Loop


def _growth_loop(with_condition: bool):
    """x <- x * w + 1 for at most M steps, while x < 100 when with_condition."""
    nodes = [oh.make_node("Mul", ["x", "w"], ["xw"]), oh.make_node("Add", ["xw", "one"], ["x_next"])]
    nodes.append(oh.make_node("Less", ["x_next", "hundred"], ["go"]) if with_condition
                 else oh.make_node("Identity", ["c"], ["go"]))
    body = body_graph(nodes, [value_info("i", INT64, []), value_info("c", BOOL, []),
                              value_info("x", DOUBLE, [])],
                      [value_info("go", BOOL, []), value_info("x_next", DOUBLE, [])])
    loop = oh.make_node("Loop", ["M", "cond" if with_condition else "", "x0"], ["x_final"], body=body)
    constants = [oh.make_tensor("one", DOUBLE, [], [1.0]), oh.make_tensor("hundred", DOUBLE, [], [100.0]),
                 oh.make_tensor("M", TensorProto.INT64, [], [50])]
    inputs = [value_info("x0", DOUBLE, []), value_info("w", DOUBLE, [])]
    if with_condition:
        inputs.append(value_info("cond", BOOL, []))
    return onnx_model([loop], inputs, [value_info("x_final", DOUBLE, [])], initializers=constants)


def _growth_numpy(x0, w, with_condition):
    x = x0
    for _ in range(50):
        x = x * w + 1
        if with_condition and not x < 100:
            break
    return x


@pytest.mark.parametrize("with_condition", [True, False], ids=["condition", "trip_count"])
def test_loop_gradient_matches_finite_differences(with_condition):
    model = mdf_loops.onnx_to_mdf(_growth_loop(with_condition))
    w = 1.3 if with_condition else 0.9
    inputs = {"x0": np.float64(0.5), "w": np.float64(w)}
    if with_condition:
        inputs["cond"] = np.array(True)
    value, grads = mdf_loops.value_and_grad(model, "x_final", ["x0", "w"], inputs)
    np.testing.assert_allclose(value, _growth_numpy(0.5, w, with_condition), rtol=1e-12)
    np.testing.assert_allclose(grads["w"], _central(lambda v: _growth_numpy(0.5, v, with_condition), w),
                               rtol=1e-6)
    np.testing.assert_allclose(grads["x0"], _central(lambda v: _growth_numpy(v, w, with_condition), 0.5),
                               rtol=1e-6)


# ---------------------------------------------------------------- If


def _branching_model():
    """y = x * x * a when sum(x) > 0, else sin(x) * a."""
    then_branch = body_graph([oh.make_node("Mul", ["x", "x"], ["xx"]),
                              oh.make_node("Mul", ["xx", "a"], ["y_then"])],
                             [], [value_info("y_then", DOUBLE, [3])], "then")
    else_branch = body_graph([oh.make_node("Sin", ["x"], ["s"]),
                              oh.make_node("Mul", ["s", "a"], ["y_else"])],
                             [], [value_info("y_else", DOUBLE, [3])], "else")
    return onnx_model(
        [oh.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
         oh.make_node("Greater", ["total", "zero"], ["positive"]),
         oh.make_node("If", ["positive"], ["y"], then_branch=then_branch, else_branch=else_branch)],
        [value_info("x", DOUBLE, [3]), value_info("a", DOUBLE, [])], [value_info("y", DOUBLE, [3])],
        initializers=[oh.make_tensor("zero", DOUBLE, [], [0.0])])


@pytest.mark.parametrize("x", [[0.5, 1.0, -0.2], [-0.5, 0.3, -1.0]], ids=["then", "else"])
def test_if_gradient_follows_the_branch_taken(x):
    model = mdf_loops.onnx_to_mdf(_branching_model())
    x = np.asarray(x)
    grads = mdf_loops.grad(model, lambda out: (out["y"] ** 3).sum(), ["x", "a"],
                           {"x": x, "a": np.float64(1.5)})

    def f(x_, a):
        y = x_ * x_ * a if x_.sum() > 0 else np.sin(x_) * a
        return (y ** 3).sum()

    np.testing.assert_allclose(grads["a"], _central(lambda a: f(x, a), 1.5), rtol=1e-6)
    for k in range(3):
        fd = _central(lambda e: f(x + e * np.eye(3)[k], 1.5), 0.0)
        np.testing.assert_allclose(grads["x"][k], fd, rtol=1e-6)


# ---------------------------------------------------------------- a top-level parameter, errors


def _gain_model():
    return mdf_model(expression_node("amplify", ["x"], {"y": "gain * x * x"}, {"gain": 3.0}))


def test_gradient_wrt_a_top_level_parameter():
    x = np.array([1.0, 2.0, -1.0])
    grads = mdf_loops.grad(_gain_model(), lambda out: out["amplify.y"].sum(), ["gain"], {"x": x})
    np.testing.assert_allclose(grads["gain"], (x * x).sum())


def test_an_unknown_name_lists_the_constant_parameters():
    with pytest.raises(mdf_loops.errors.ModelError, match=r"amplify\.gain"):
        mdf_loops.grad(_gain_model(), "amplify.y", ["beta"], {"x": np.ones(3)})


def test_the_objective_must_be_a_scalar():
    with pytest.raises(mdf_loops.errors.ModelError, match="scalar"):
        mdf_loops.grad(_gain_model(), "amplify.y", ["gain"], {"x": np.ones(3)})


def test_integer_inputs_have_no_gradient():
    with pytest.raises(mdf_loops.errors.ModelError, match="floating-point"):
        mdf_loops.grad(_gain_model(), lambda out: out["amplify.y"].sum(), ["x"],
                       {"x": np.ones(3, dtype=np.int64)})


# ---------------------------------------------------------------- fitting (docs/jax.md)


def simulate_bandit(alpha: float, beta: float, trials: int, seed: int) -> dict:
    """Choices of a Rescorla-Wagner learner on a two-armed bandit (numpy, independent)."""
    rng = np.random.default_rng(seed)
    reward_probability = [0.8, 0.2]
    v = np.zeros(4)
    choices, rewards = [], []
    for _ in range(trials):
        p = np.exp(beta * v[:2]) / np.exp(beta * v[:2]).sum()
        choice = rng.choice(2, p=p)
        reward = float(rng.random() < reward_probability[choice])
        v[choice] += alpha * (reward - v[choice])
        choices.append(choice)
        rewards.append(reward)
    return {"choices": np.array(choices), "rewards": np.array(rewards)}


def test_fitting_recovers_the_rescorla_wagner_learning_rate():
    beta, true_alpha = 4.0, 0.3
    data = simulate_bandit(true_alpha, beta, trials=3000, seed=1)
    inputs = {"V0": np.zeros(4), "cues": np.eye(4)[data["choices"]], "outcomes": data["rewards"]}

    def negative_log_likelihood(outputs):
        values_before = jnp.concatenate([jnp.zeros((1, 4)), outputs["trials.V_history"][:-1]])
        logits = beta * values_before[:, :2]
        chosen = jnp.take_along_axis(logits, jnp.asarray(data["choices"])[:, None], axis=1)[:, 0]
        return -(chosen - jax.scipy.special.logsumexp(logits, axis=1)).mean()

    model = rescorla_wagner.build_model(alpha=0.5)
    alpha = 0.5
    for _ in range(100):
        _, grads = mdf_loops.value_and_grad(model, negative_log_likelihood, ["alpha"],
                                            {**inputs, "alpha": alpha})
        alpha = float(np.clip(alpha - 2.0 * grads["alpha"], 0.01, 0.99))
    assert abs(alpha - true_alpha) < 0.05 * true_alpha


def test_a_loop_scan_output_of_run_time_length_is_refused_as_objective():
    from test_jax_backend import _long_while_with_scan_outputs

    model = mdf_loops.onnx_to_mdf(_long_while_with_scan_outputs())
    inputs = {"cond": np.array(True), "x0": np.float64(0.0), "limit": np.float64(5.0)}
    with pytest.raises(mdf_loops.errors.ModelError, match="run time"):
        mdf_loops.grad(model, lambda out: out["xs"].sum(), ["x0"], inputs)
    # its loop-carried value can be differentiated
    grads = mdf_loops.grad(model, "x_final", ["x0"], {**inputs, "x0": np.float64(0.5)})
    np.testing.assert_allclose(grads["x0"], 1.0)


def test_a_loop_with_only_a_condition_is_differentiated_past_the_first_block():
    # no trip count: the differentiable form runs in blocks of rows, grown on demand
    from test_jax_backend import _long_while_with_scan_outputs

    model = mdf_loops.onnx_to_mdf(_long_while_with_scan_outputs())
    inputs = {"cond": np.array(True), "x0": np.float64(0.25), "limit": np.float64(6000.0)}
    value, grads = mdf_loops.value_and_grad(model, "x_final", ["x0"], inputs)
    assert value == np.float32(6000.25)
    np.testing.assert_allclose(grads["x0"], 1.0)


def test_wrt_given_as_one_string_names_one_input():
    x = np.array([1.0, 2.0, -1.0])
    model = mdf_model(expression_node("amplify", ["xy"], {"y": "gain * xy * xy"}, {"gain": 3.0}))
    grads = mdf_loops.grad(model, lambda out: out["amplify.y"].sum(), "xy", {"xy": x})
    assert list(grads) == ["xy"]
    np.testing.assert_allclose(grads["xy"], 2 * 3.0 * x)


def _loop_with_scan_output(control: str):
    """x <- x + 1 recording each x; stopped by: a constant trip count and a body condition
    from data ("condition"), only a condition ("no trip count"), or a trip count from a graph
    input ("run-time trip count")."""
    go = (oh.make_node("Less", ["x_next", "hundred"], ["go"]) if control != "run-time trip count"
          else oh.make_node("Identity", ["c"], ["go"]))
    body = body_graph([oh.make_node("Add", ["x", "one"], ["x_next"]), go,
                       oh.make_node("Identity", ["x_next"], ["x_seen"])],
                      [value_info("i", INT64, []), value_info("c", BOOL, []), value_info("x", DOUBLE, [])],
                      [value_info("go", BOOL, []), value_info("x_next", DOUBLE, []),
                       value_info("x_seen", DOUBLE, [])])
    trip = {"condition": "M", "no trip count": "", "run-time trip count": "n"}[control]
    loop = oh.make_node("Loop", [trip, "", "x0"], ["x_final", "xs"], body=body)
    constants = [oh.make_tensor("one", DOUBLE, [], [1.0]), oh.make_tensor("hundred", DOUBLE, [], [100.0]),
                 oh.make_tensor("M", TensorProto.INT64, [], [5])]
    inputs = [value_info("x0", DOUBLE, [])] + ([value_info("n", INT64, [])] if trip == "n" else [])
    return onnx_model([loop], inputs, [value_info("x_final", DOUBLE, []), value_info("xs", DOUBLE, [None])],
                      initializers=constants)


@pytest.mark.parametrize("control, advice", [
    ("condition", "may stop before its trip count of 5.*make the body's condition output always true"),
    ("no trip count", "has no trip count, only a condition; give it a constant trip count"),
    ("run-time trip count", "takes its trip count from a run-time value; make the trip count a constant"),
])
def test_the_refusal_of_a_run_time_length_scan_output_fits_the_loop(control, advice):
    model = mdf_loops.onnx_to_mdf(_loop_with_scan_output(control))
    inputs = {"x0": np.float64(0.5), **({"n": np.int64(3)} if control == "run-time trip count" else {})}
    with pytest.raises(mdf_loops.errors.ModelError, match=f"output 'xs'.*{advice}") as refusal:
        mdf_loops.grad(model, lambda out: out["xs"].sum(), "x0", inputs)
    if control != "no trip count":
        assert "give it a constant trip count" not in str(refusal.value)
    # its loop-carried value is differentiated: x_final = x0 + iterations
    np.testing.assert_allclose(mdf_loops.grad(model, "x_final", "x0", inputs)["x0"], 1.0)


def test_repeated_calls_follow_new_inputs_and_edits_of_the_model():
    # a repeated call replays the last one's plan (mdf_loops.run_plans); it must see
    # new input values and an edit of the model
    model = rescorla_wagner.build_model(alpha=0.2)
    inputs = rescorla_wagner.example_inputs()
    weights = np.array([1.0, -2.0, 0.5, 3.0])

    def objective(out):
        return out["trials.V_final"] @ weights

    def loss(alpha, v0):
        return _rw_numpy(alpha, v0, inputs["cues"], inputs["outcomes"]) @ weights

    for v0 in (inputs["V0"], inputs["V0"] + 0.25, inputs["V0"] - 0.5):
        value, grads = mdf_loops.value_and_grad(model, objective, "alpha", {**inputs, "V0": v0})
        np.testing.assert_allclose(value, loss(0.2, v0), rtol=1e-12)
        np.testing.assert_allclose(grads["alpha"], _central(lambda a: loss(a, v0), 0.2), rtol=1e-6)
    learn = model.graphs[0].nodes[0].parameters[0].value["graph_trial"].nodes[0]
    alpha = next(p for p in learn.parameters if p.id == "alpha")
    alpha.value = 0.45  # an edit of the model: planned calls must not answer for the old one
    value, grads = mdf_loops.value_and_grad(model, objective, "alpha", inputs)
    np.testing.assert_allclose(value, loss(0.45, inputs["V0"]), rtol=1e-12)
    np.testing.assert_allclose(grads["alpha"], _central(lambda a: loss(a, inputs["V0"]), 0.45),
                               rtol=1e-6)


# ------------------------------------------- two parameters of one node (lifting shifts indices)


def _leaky_numpy(dt, tau, x0, current):
    x = x0
    for i_t in current:
        x = x + dt * (-x + i_t) / tau
    return x


@pytest.mark.parametrize("order", [["dt", "tau"], ["tau", "dt"]])
def test_gradient_wrt_two_parameters_of_one_body_node_in_either_order(order):
    model = str(Path(__file__).resolve().parents[3] / "examples" / "leaky_integrator.json")
    current = np.linspace(0.0, 1.0, 12)
    inputs = {"x0": np.array(0.3), "I": current}
    grads = mdf_loops.grad(model, "integrate.x_final", order, inputs)
    assert set(grads) == set(order)
    np.testing.assert_allclose(
        grads["dt"], _central(lambda dt: _leaky_numpy(dt, 2.0, 0.3, current), 0.1), rtol=1e-6)
    np.testing.assert_allclose(
        grads["tau"], _central(lambda tau: _leaky_numpy(0.1, tau, 0.3, current), 2.0), rtol=1e-6)

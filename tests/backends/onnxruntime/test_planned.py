"""mdf_loops.backends.onnxruntime.planned: limits known before running are refused up front.

A Scan over a model input runs once per element, so the compiled path refuses a
run over ``max_iterations`` before onnxruntime starts, with the scheduler's own
message (the oracle: the same run on the scheduler backend); limits passed while
running name the model's node, never a node a rewrite added, and which limit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

import mdf_loops
from mdf_loops.onnx.ort_safe import make_safe
from mdf_loops.backends.onnxruntime.planned import PlannedScan, planned_scans
from mdf_loops.errors import IterationLimitError
from mdf_loops.onnx.export import export_model

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
LEAKY = EXAMPLES / "leaky_integrator.json"
NESTED = EXAMPLES / "nested_trials.json"


def _refusal(path: Path, backend: str, **limits) -> str:
    with pytest.raises(IterationLimitError) as caught:
        mdf_loops.run(str(path), backend=backend, **limits)
    return str(caught.value)


@pytest.mark.parametrize("path, limit", [(LEAKY, 10), (NESTED, 5)], ids=["leaky", "nested"])
def test_a_scan_over_an_input_is_refused_with_the_schedulers_message(path, limit):
    compiled = _refusal(path, "onnxruntime", max_iterations=limit)
    assert compiled == _refusal(path, "scheduler", max_iterations=limit)
    assert "is asked for" in compiled and f"the limit is {limit} iterations" in compiled


def test_the_scan_a_zero_step_rewrite_wraps_keeps_its_label():
    """make_safe wraps the Scan in an If (zero_steps.py): the wrapped Scan keeps its name."""
    result = export_model(mdf_loops.load_model(LEAKY))
    runnable = make_safe(result.model)
    assert [n.op_type for n in runnable.graph.node][-1] == "If"  # wrapped
    assert planned_scans(runnable.graph, result.labels) == [PlannedScan("integrate", "I", 0)]


def test_a_scan_of_zero_steps_is_not_refused_and_gives_the_schedulers_answer():
    inputs = {"I": np.zeros(0)}
    compiled = mdf_loops.run(str(LEAKY), inputs, backend="onnxruntime", max_iterations=10)
    reference = mdf_loops.run(str(LEAKY), inputs, backend="scheduler", max_iterations=10)
    assert np.asarray(compiled["integrate.trace"]).shape == (0,)
    np.testing.assert_array_equal(compiled["integrate.x_final"], reference["integrate.x_final"])


def test_within_the_limit_the_scan_runs_to_the_end():
    inputs = {"I": np.ones(10)}
    out = mdf_loops.run(str(LEAKY), inputs, backend="onnxruntime", max_iterations=10)
    x, trace = 0.0, []
    for _ in range(10):
        x += 0.1 * (-x + 1.0) / 2.0
        trace.append(x)
    np.testing.assert_allclose(out["integrate.trace"], trace, rtol=1e-12)


def test_a_limit_passed_inside_a_body_names_the_models_node():
    """The inner Scan's length is known only in the body: onnxruntime's flag names the
    outer node, the inner one, the limit and the length asked (as the scheduler's path)."""
    message = _refusal(NESTED, "onnxruntime", max_iterations=10)
    assert message.startswith("node 'trials' > node 'time_steps': Scan asked for 20 "
                              "iterations, more than 10, the limit (max_iterations)"), message
    scheduler = _refusal(NESTED, "scheduler", max_iterations=10)
    assert "node 'trials'" in scheduler and "node 'time_steps'" in scheduler
    assert "zero_steps" not in message and "_node" not in message


def test_a_planned_scan_needs_a_model_input():
    """A Scan over a value the model computes is not planned (guard.py flags it)."""
    from onnx import helper as oh

    body = oh.make_graph([oh.make_node("Identity", ["x"], ["y"])], "b",
                         [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [])],
                         [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [])])
    graph = oh.make_graph(
        [oh.make_node("Neg", ["xs"], ["negated"]),
         oh.make_node("Scan", ["negated"], ["ys"], body=body, num_scan_inputs=1, name="s"),
         oh.make_node("Scan", ["xs"], ["zs"], body=body, num_scan_inputs=1, name="t")],
        "g", [oh.make_tensor_value_info("xs", onnx.TensorProto.FLOAT, ["n"])],
        [oh.make_tensor_value_info("ys", onnx.TensorProto.FLOAT, ["n"])])
    assert planned_scans(graph, {"s": "first", "t": "second"}) == [PlannedScan("second", "xs", 0)]

"""The JAX backend (mdf_loops/backends/jax/) against the ONNX conformance outputs, onnxruntime
and numpy loops written here."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import helper as oh

jax = pytest.importorskip("jax")

import mdf_loops  # noqa: E402
from mdf_loops.backends.jax import compile as jax_compile  # noqa: E402
from mdf_loops.workloads import running_sum, while_loop  # noqa: E402
from conftest import (BOOL, FLOAT, INT64, assert_same, body_graph, control_flow_cases,  # noqa: E402
                      onnx_model, ort_run, value_info)

def test_float64_models_stay_float64_and_x64_is_not_left_on():
    inputs = {"x0": np.array(0.0), "I": np.sin(np.arange(40) / 5.0)}
    outputs = mdf_loops.run("examples/leaky_integrator.json", inputs, backend="jax")
    expected, x = [], 0.0
    for current in inputs["I"]:
        x = x + 0.1 * (-x + current) / 2.0
        expected.append(x)
    assert outputs["integrate.trace"].dtype == np.float64
    np.testing.assert_allclose(outputs["integrate.trace"], expected, rtol=1e-12)
    assert not jax.config.jax_enable_x64
    assert jax.numpy.asarray(1.0).dtype == np.float32


def _scan_with_axes():
    """Scan over axis 1 of x, read backwards, states summed, outputs stacked on axis 1."""
    body = body_graph(
        [oh.make_node("Add", ["s", "x_t"], ["s_next"]),
         oh.make_node("Mul", ["x_t", "x_t"], ["sq"])],
        [value_info("s", FLOAT, [3]), value_info("x_t", FLOAT, [3])],
        [value_info("s_next", FLOAT, [3]), value_info("sq", FLOAT, [3])])
    node = oh.make_node("Scan", ["s0", "x"], ["s_final", "squares"], body=body,
                        num_scan_inputs=1, scan_input_axes=[1], scan_input_directions=[1],
                        scan_output_axes=[1], scan_output_directions=[1])
    return onnx_model([node], [value_info("s0", FLOAT, [3]), value_info("x", FLOAT, [3, 5])],
                      [value_info("s_final", FLOAT, [3]), value_info("squares", FLOAT, [3, 5])])


def test_scan_axes_and_directions_match_onnxruntime(rng):
    model = _scan_with_axes()
    feeds = {"s0": rng.standard_normal(3).astype(np.float32),
             "x": rng.standard_normal((3, 5)).astype(np.float32)}
    expected = ort_run(model, feeds)
    outputs = mdf_loops.run(mdf_loops.onnx_to_mdf(model), feeds, backend="jax")
    for name, value in expected.items():
        assert_same(outputs[name], value)


def _long_while_with_scan_outputs():
    """x <- x + 1 while x < limit, every x recorded: more rows than the first buffer holds."""
    body = body_graph(
        [oh.make_node("Add", ["x", "one"], ["x_next"]),
         oh.make_node("Less", ["x_next", "limit"], ["go"]),
         oh.make_node("Identity", ["x_next"], ["seen"])],
        [value_info("i", INT64, []), value_info("c", BOOL, []), value_info("x", FLOAT, [])],
        [value_info("go", BOOL, []), value_info("x_next", FLOAT, []), value_info("seen", FLOAT, [])])
    node = oh.make_node("Loop", ["", "cond", "x0"], ["x_final", "xs"], body=body)
    one = oh.make_tensor("one", FLOAT, [], [1.0])
    return onnx_model([node], [value_info("cond", BOOL, []), value_info("x0", FLOAT, []),
                               value_info("limit", FLOAT, [])],
                      [value_info("x_final", FLOAT, []), value_info("xs", FLOAT, ["n"])],
                      initializers=[one])


def test_a_loop_stopped_by_its_condition_records_every_iteration():
    model = mdf_loops.onnx_to_mdf(_long_while_with_scan_outputs())
    feeds = {"cond": np.array(True), "x0": np.float32(0), "limit": np.float32(10_000)}
    outputs = mdf_loops.run(model, feeds, backend="jax")
    np.testing.assert_array_equal(outputs["xs"], np.arange(1, 10_001, dtype=np.float32))
    assert outputs["x_final"] == np.float32(10_000)
    short = mdf_loops.run(model, {**feeds, "limit": np.float32(3)}, backend="jax")
    np.testing.assert_array_equal(short["xs"], [1, 2, 3])


def test_a_loop_past_max_iterations_is_stopped_with_the_limit_named():
    model = mdf_loops.onnx_to_mdf(while_loop(500).model)
    inputs = while_loop(500).inputs
    with pytest.raises(mdf_loops.errors.IterationLimitError, match="max_iterations"):
        mdf_loops.run(model, inputs, backend="jax", max_iterations=100)
    assert mdf_loops.run(model, inputs, backend="jax", max_iterations=1000)["x_final"] == 500


def test_a_long_scan_is_refused_at_the_iteration_limit():
    work = running_sum(300)
    with pytest.raises(mdf_loops.errors.IterationLimitError, match="300 iterations"):
        mdf_loops.run(mdf_loops.onnx_to_mdf(work.model), work.inputs, backend="jax",
                      max_iterations=100)


def test_an_operator_with_no_lowering_is_a_compile_error_naming_the_node():
    model = onnx_model([oh.make_node("Det", ["x"], ["d"], name="determinant")],
                       [value_info("x", FLOAT, [2, 2])], [value_info("d", FLOAT, [])])
    mdf = mdf_loops.onnx_to_mdf(model)
    with pytest.raises(mdf_loops.errors.CompileError, match="Det"):
        mdf_loops.run(mdf, {"x": np.eye(2, dtype=np.float32)}, backend="jax")
    # the other backends still run it
    assert mdf_loops.run(mdf, {"x": np.eye(2, dtype=np.float32)})["d"] == 1


def test_an_if_on_a_run_time_condition_becomes_one_compiled_function():
    then_branch = body_graph([oh.make_node("Mul", ["x", "x"], ["y_then"])], [],
                             [value_info("y_then", FLOAT, [2])], "then")
    else_branch = body_graph([oh.make_node("Neg", ["x"], ["y_else"])], [],
                             [value_info("y_else", FLOAT, [2])], "else")
    model = onnx_model(
        [oh.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
         oh.make_node("Greater", ["total", "zero"], ["positive"]),
         oh.make_node("If", ["positive"], ["y"], then_branch=then_branch, else_branch=else_branch)],
        [value_info("x", FLOAT, [2])], [value_info("y", FLOAT, [2])],
        initializers=[oh.make_tensor("zero", FLOAT, [], [0.0])])
    mdf = mdf_loops.onnx_to_mdf(model)
    lowered = jax_compile(mdf, {"x": np.ones(2, np.float32)})
    assert lowered.level == 0  # nothing taken as a constant: the condition is traced
    for x in ([1.0, 2.0], [-3.0, 1.0]):
        x = np.asarray(x, np.float32)
        assert_same(mdf_loops.run(mdf, {"x": x}, backend="jax")["y"], ort_run(model, {"x": x})["y"])


def _case(name):
    case = control_flow_cases()[name]
    names = [i.name for i in case.model.graph.input]
    return case, mdf_loops.onnx_to_mdf(case.model), dict(zip(names, case.data_sets[0][0]))


def test_a_run_time_trip_count_needs_no_new_compilation():
    # Range expanded to a Loop whose trip count is computed from the inputs
    case, model, inputs = _case("test_range_float_type_positive_delta_expanded")
    lowered = jax_compile(model, inputs)
    assert lowered.level == 0  # every input traced
    for limit in (9.0, 2.0, 30.0):
        other = {**inputs, "limit": np.float32(limit)}
        np.testing.assert_allclose(lowered.run(other)[case.model.graph.output[0].name],
                                   np.arange(inputs["start"], limit, inputs["delta"]))


def test_inputs_that_set_shapes_are_compiled_in_as_constants():
    case, model, inputs = _case("test_affine_grid_2d_expanded")
    assert jax_compile(model, inputs).level == 1  # the integer size input is a constant
    outputs = mdf_loops.run(model, inputs, backend="jax")
    assert_same(outputs[case.model.graph.output[0].name], case.data_sets[0][1][0], 1e-4, 1e-5)


def test_compilations_are_cached_per_model_and_input_types():
    from mdf_loops.backends.jax.compiled import _CACHE, clear_compiled

    work = running_sum(10)
    model = mdf_loops.onnx_to_mdf(work.model)
    clear_compiled()
    mdf_loops.run(model, work.inputs, backend="jax")
    mdf_loops.run(model, {**work.inputs, "x": work.inputs["x"][:5]}, backend="jax")
    assert _CACHE.count(model) == 1


def test_float_inputs_that_set_a_shape_are_constants_too():
    model = onnx_model([oh.make_node("Range", ["start", "limit", "delta"], ["r"])],
                       [value_info(n, FLOAT, []) for n in ("start", "limit", "delta")],
                       [value_info("r", FLOAT, ["n"])])
    mdf = mdf_loops.onnx_to_mdf(model)
    feeds = {k: np.array(v, np.float32) for k, v in (("start", 1), ("limit", 4), ("delta", 0.5))}
    assert jax_compile(mdf, feeds).level == 2  # compiled again for each new value
    for limit in (4.0, 7.0):
        other = {**feeds, "limit": np.array(limit, np.float32)}
        assert_same(mdf_loops.run(mdf, other, backend="jax")["r"], ort_run(model, other)["r"])


# the exporter corpus is built by tests/onnx/test_exporter_corpus.py; its cases run here too
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "onnx"))


def _corpus_names():
    from test_exporter_corpus import CASES

    return sorted(CASES)


@pytest.mark.parametrize("name", _corpus_names())
def test_exporter_corpus_on_jax(name):
    """Models of real exporters (tests/onnx/test_exporter_corpus.py) against onnxruntime."""
    from test_exporter_corpus import _case, _compare, _imported

    case = _case(name)
    if name == "skl_knn_imputer":  # Compress: its output size depends on the data
        with pytest.raises(mdf_loops.errors.CompileError, match="Compress"):
            mdf_loops.run(_imported(name), case.feeds, backend="jax")
        return
    _compare(name, "jax", mdf_loops.run(_imported(name), case.feeds, backend="jax"))

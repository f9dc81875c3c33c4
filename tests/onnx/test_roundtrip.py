"""Round trips: ONNX -> MDF -> ONNX, MDF -> JSON/YAML -> MDF, and MDF -> ONNX for every example.

Oracles: onnxruntime (one thread) on the original ONNX model, and ``mdf_loops.run``
on modeci-mdf's scheduler (``run_mdf``) for the MDF model before serialization
or export.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from modeci_mdf.utils import load_mdf
from onnx import helper as oh

import mdf_loops
from conftest import (
    BOOL,
    FLOAT,
    INT64,
    assert_same,
    body_graph,
    control_flow_cases,
    onnx_model,
    onnxruntime_runs_case,
    ort_run,
    run_mdf,
    value_info,
)
from mdf_loops.onnx.export import mdf_to_onnx

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
#: float32 tolerance
RTOL, ATOL = 1e-5, 1e-6

#: arguments for an example's ``example_inputs`` that has required parameters
_EXAMPLE_ARGUMENTS = {"theano_power": {"k": 3}}


def _feeds(names, values) -> dict:
    return {k: v if isinstance(v, list) else np.asarray(v) for k, v in zip(names, values)}


# ---------------------------------------------------------------- ONNX -> MDF -> ONNX


def _assert_reexport_matches_original(original: onnx.ModelProto, feeds: dict) -> None:
    reexported = mdf_to_onnx(mdf_loops.onnx_to_mdf(original))
    onnx.checker.check_model(reexported, full_check=True)
    expected = ort_run(original, feeds)
    actual = ort_run(reexported, feeds)
    assert sorted(actual) == sorted(expected)
    for name, value in expected.items():
        assert_same(actual[name], value, RTOL, ATOL)


@pytest.mark.parametrize("name", [n for n in sorted(control_flow_cases()) if onnxruntime_runs_case(n)])
def test_conformance_case_onnx_mdf_onnx(name):
    """(test_onnx_export.py counts these cases, and compares the others in onnx's evaluator.)"""
    case = control_flow_cases()[name]
    inputs, _ = case.data_sets[0]
    _assert_reexport_matches_original(case.model, _feeds([i.name for i in case.model.graph.input], inputs))


def _loop_with_if_and_scan() -> onnx.ModelProto:
    """Loop (M and cond given) whose body runs an If and a Scan over xs, both reading the
    top-level W and xs from the outer scope; scan axis -1, backward."""
    scan_body = body_graph(
        [oh.make_node("MatMul", ["W", "h"], ["wh"]), oh.make_node("Add", ["wh", "x_t"], ["pre"]),
         oh.make_node("Tanh", ["pre"], ["h_next"]), oh.make_node("Identity", ["h_next"], ["h_out"])],
        [value_info("h", FLOAT, [3]), value_info("x_t", FLOAT, [3])],
        [value_info("h_next", FLOAT, [3]), value_info("h_out", FLOAT, [3])], name="scan_body")
    then = body_graph([oh.make_node("Mul", ["h_in", "half"], ["scaled"])], [],
                      [value_info("scaled", FLOAT, [3])], name="then")
    other = body_graph([oh.make_node("Neg", ["h_in"], ["flipped"])], [],
                       [value_info("flipped", FLOAT, [3])], name="else")
    loop_body = body_graph(
        [oh.make_node("Cast", ["i"], ["i_f"], to=FLOAT),
         oh.make_node("Less", ["i_f", "one"], ["first"]),
         oh.make_node("If", ["first"], ["h_start"], then_branch=then, else_branch=other),
         oh.make_node("Scan", ["h_start", "xs"], ["h_end", "trace"], body=scan_body,
                      num_scan_inputs=1, scan_input_axes=[-1], scan_input_directions=[1],
                      scan_output_axes=[-1]),
         oh.make_node("ReduceSum", ["h_end"], ["total"], keepdims=0),
         oh.make_node("Less", ["total", "limit"], ["go_on"]),
         oh.make_node("Identity", ["h_end"], ["h_in_next"])],
        [value_info("i", INT64, []), value_info("cond", BOOL, []), value_info("h_in", FLOAT, [3])],
        [value_info("go_on", BOOL, []), value_info("h_in_next", FLOAT, [3]),
         value_info("trace", FLOAT, [3, None])], name="loop_body")
    nodes = [oh.make_node("Loop", ["M", "c", "h0"], ["h_final", "traces"], body=loop_body)]
    inits = [oh.make_tensor("half", FLOAT, [], [0.5]), oh.make_tensor("one", FLOAT, [], [1.0]),
             oh.make_tensor("limit", FLOAT, [], [2.5])]
    return onnx_model(nodes, [value_info("M", INT64, []), value_info("c", BOOL, []),
                              value_info("h0", FLOAT, [3]), value_info("W", FLOAT, [3, 3]),
                              value_info("xs", FLOAT, [3, None])],
                      [value_info("h_final", FLOAT, [3]), value_info("traces", FLOAT, None)],
                      initializers=inits)


def test_nested_loop_if_scan_onnx_mdf_onnx(rng):
    model = _loop_with_if_and_scan()
    feeds = {"M": np.array(4), "c": np.array(True),
             "h0": rng.normal(size=3).astype(np.float32),
             "W": rng.normal(scale=0.5, size=(3, 3)).astype(np.float32),
             "xs": rng.normal(size=(3, 5)).astype(np.float32)}
    _assert_reexport_matches_original(model, feeds)


# ---------------------------------------------------------------- MDF -> JSON/YAML -> MDF


@pytest.mark.parametrize("file_format", ["json", "yaml"])
@pytest.mark.parametrize("name", ["test_loop11", "test_loop13_seq", "test_loop16_seq_none",
                                  "test_scan_sum", "test_scan9_sum", "test_if_opt", "test_if_seq",
                                  "test_range_float_type_positive_delta_expanded"])
def test_imported_model_survives_serialization(name, file_format, tmp_path):
    """Typed constants, sequences, optionals and the opset-8 Scan survive JSON and YAML."""
    case = control_flow_cases()[name]
    model = mdf_loops.onnx_to_mdf(case.model)
    feeds = _feeds([i.name for i in case.model.graph.input], case.data_sets[0][0])
    reloaded = _reloaded(model, file_format, tmp_path)
    before, after = run_mdf(model, feeds), run_mdf(reloaded, feeds)
    assert sorted(after) == sorted(before)
    for key, value in before.items():
        assert_same(after[key], value, rtol=0, atol=0)


def _reloaded(model, file_format: str, tmp_path: Path):
    path = tmp_path / f"{model.id}.{file_format}"
    (model.to_json_file if file_format == "json" else model.to_yaml_file)(str(path))
    return load_mdf(str(path))


# ---------------------------------------------------------------- the examples


def _example_names() -> list[str]:
    return sorted(p.stem for p in EXAMPLES.glob("*.json"))


def _example_inputs(name: str) -> dict:
    script = EXAMPLES / f"{name}.py"
    if name == "leaky_integrator":
        return {"x0": np.array(0.0), "I": np.where(np.arange(50) < 25, 1.0, 0.0)}
    assert script.exists(), f"examples/{name}.json has no script examples/{name}.py"
    spec = importlib.util.spec_from_file_location(f"_example_{name}", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert hasattr(module, "example_inputs"), f"examples/{name}.py has no example_inputs()"
    required = [p for p in inspect.signature(module.example_inputs).parameters.values()
                if p.default is inspect.Parameter.empty]
    arguments = _EXAMPLE_ARGUMENTS.get(name, {})
    assert {p.name for p in required} <= set(arguments), \
        f"examples/{name}.py: example_inputs() needs {[p.name for p in required]}; add them above"
    return module.example_inputs(**arguments)


def test_every_example_is_covered():
    assert len(_example_names()) >= 9, _example_names()
    assert "leaky_integrator" in _example_names()


@pytest.mark.parametrize("file_format", ["json", "yaml"])
@pytest.mark.parametrize("name", _example_names())
def test_example_survives_serialization(name, file_format, tmp_path):
    model = mdf_loops.load_model(EXAMPLES / f"{name}.json")
    inputs = _example_inputs(name)
    before = run_mdf(model, inputs)
    after = run_mdf(_reloaded(model, file_format, tmp_path), inputs)
    assert sorted(after) == sorted(before)
    for key, value in before.items():
        assert_same(after[key], value, rtol=0, atol=0)


@pytest.mark.parametrize("name", _example_names())
def test_example_exports_and_runs_in_onnxruntime(name):
    model = mdf_loops.load_model(EXAMPLES / f"{name}.json")
    inputs = _example_inputs(name)
    exported = mdf_to_onnx(model, example_inputs=inputs)
    onnx.checker.check_model(exported, full_check=True)
    expected = run_mdf(model, inputs)
    feeds = {i.name: np.asarray(inputs[i.name]) for i in exported.graph.input}
    actual = ort_run(exported, feeds)
    assert sorted(actual) == sorted(expected)
    for key, value in expected.items():
        assert_same(actual[key], value, RTOL, ATOL)

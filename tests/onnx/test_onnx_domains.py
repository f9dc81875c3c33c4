"""Local functions of any opset, domains left unused, unsupported domains, and exports that
always pass ``onnx.checker.check_model(full_check=True)``."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from modeci_mdf.mdf import Graph, Model
from onnx import helper as oh

import mdf_loops
from conftest import (BOOL, FLOAT, assert_same, expression_node, loop_node, mdf_body,
                      onnx_model, ort_run, value_info)
from mdf_loops.cli import main as cli_main
from mdf_loops.errors import ModelError


def _function(name: str, domain: str, opset: int, nodes, inputs, outputs) -> onnx.FunctionProto:
    return oh.make_function(domain, name, inputs, outputs, nodes,
                            [oh.make_opsetid("", opset)])


def _calling(function: onnx.FunctionProto, model_opset: int) -> onnx.ModelProto:
    call = oh.make_node(function.name, ["x"], ["y"], domain=function.domain)
    return onnx_model([call], [value_info("x", FLOAT, [3])], [value_info("y", FLOAT, None)],
                      opset=model_opset, functions=[function],
                      extra_opsets={function.domain: 1})


def _all_paths(model: onnx.ModelProto, feeds: dict, expected: dict) -> onnx.ModelProto:
    imported = mdf_loops.onnx_to_mdf(model)
    for backend in ("scheduler", "onnxruntime"):
        results = mdf_loops.run(imported, feeds, backend=backend)
        for name, value in expected.items():
            assert_same(results[name], value)
    exported = mdf_loops.mdf_to_onnx(imported)
    results = ort_run(exported, feeds)
    for name, value in expected.items():
        assert_same(results[name], value)
    return exported


def test_a_local_function_of_an_older_opset_is_inlined():
    """skl2onnx's KNNImputer: functions at opset 21 inside an opset-22 model (here 17 in 18)."""
    twice = _function("twice_plus_one", "local_domain", 17,
                      [oh.make_node("Add", ["a", "a"], ["b"]),
                       oh.make_node("Constant", [], ["one"], value_float=1.0),
                       oh.make_node("Add", ["b", "one"], ["c"])], ["a"], ["c"])
    model = _calling(twice, 18)
    x = np.array([1.0, -2.0, 0.5], np.float32)
    expected = {"y": x * 2 + 1}
    assert_same(ort_run(model, {"x": x})["y"], expected["y"])  # the oracle agrees
    exported = _all_paths(model, {"x": x}, expected)
    assert {o.domain for o in exported.opset_import} == {""}  # local_domain dropped
    assert not exported.functions


def test_a_local_function_whose_operators_changed_is_converted():
    """ReduceSum took its axes as an attribute before opset 13 and as an input since."""
    total = _function("column_total", "this", 11,
                      [oh.make_node("ReduceSum", ["a"], ["b"], axes=[0], keepdims=0)],
                      ["a"], ["b"])
    model = _calling(total, 13)
    x = np.array([1.0, -2.0, 0.5], np.float32)
    expected = {"y": np.array(x.sum(), np.float32)}
    exported = _all_paths(model, {"x": x}, expected)
    assert {o.domain for o in exported.opset_import} == {""}  # 'this' dropped


def test_a_leftover_domain_in_the_metadata_does_not_break_export():
    """An MDF model whose metadata still lists onnxscript's 'this' domain exports."""
    model = onnx_model([oh.make_node("Neg", ["x"], ["y"])], [value_info("x", FLOAT, [2])],
                       [value_info("y", FLOAT, [2])])
    imported = mdf_loops.onnx_to_mdf(model)
    imported.graphs[0].metadata["onnx_other_opsets"] = {"this": 1}
    exported = mdf_loops.mdf_to_onnx(imported)
    assert {o.domain for o in exported.opset_import} == {""}
    assert_same(ort_run(exported, {"x": np.ones(2, np.float32)})["y"], -np.ones(2, np.float32))


def test_an_unused_declared_domain_is_not_recorded():
    model = onnx_model([oh.make_node("Neg", ["x"], ["y"])], [value_info("x", FLOAT, [2])],
                       [value_info("y", FLOAT, [2])], extra_opsets={"ai.onnx.ml": 3, "this": 1})
    assert "onnx_other_opsets" not in mdf_loops.onnx_to_mdf(model).graphs[0].metadata


def test_another_domain_is_one_error_naming_node_domain_operator_and_the_supported():
    node = oh.make_node("FusedMatMul", ["a", "b"], ["c"], domain="com.microsoft", name="fused")
    model = onnx_model([node], [value_info("a", FLOAT, [2, 2]), value_info("b", FLOAT, [2, 2])],
                       [value_info("c", FLOAT, [2, 2])], extra_opsets={"com.microsoft": 1})
    with pytest.raises(ModelError) as info:
        mdf_loops.onnx_to_mdf(model)
    message = str(info.value)
    for fragment in ("node 'fused'", "'FusedMatMul'", "'com.microsoft'", "'ai.onnx'",
                     "'ai.onnx.ml'"):
        assert fragment in message, message


def test_a_nested_node_of_another_domain_is_refused_too():
    inner = oh.make_node("Gelu", ["x"], ["y"], domain="com.microsoft", name="gelu_in_branch")
    branch = oh.make_graph([inner], "then", [], [value_info("y", FLOAT, [2])])
    other = oh.make_graph([oh.make_node("Identity", ["x"], ["z"])], "else", [],
                          [value_info("z", FLOAT, [2])])
    node = oh.make_node("If", ["c"], ["out"], then_branch=branch, else_branch=other)
    model = onnx_model([node], [value_info("c", BOOL, []), value_info("x", FLOAT, [2])],
                       [value_info("out", FLOAT, [2])], extra_opsets={"com.microsoft": 1})
    with pytest.raises(ModelError, match="gelu_in_branch.*com.microsoft"):
        mdf_loops.onnx_to_mdf(model)


# ---------------------------------------------------------------- checked exports


def _counting_loop_model() -> Model:
    """A hand-written Loop whose trip count input port has no type (float64 from JSON)."""
    step = expression_node("step", ["i", "c", "v"], {"c_out": "c", "v_out": "v + 1"})
    body = mdf_body("count", [step], ["i", "c", "v"], ["step.c_out", "step.v_out"])
    node = loop_node("counter", "Loop", {"M": "M", "v_initial": "[v0]"}, {"body": body},
                     ["M", "v0"], 1)
    return Model(id="counting", graphs=[Graph(id="main", nodes=[node])])


def test_a_float_trip_count_is_cast_to_int64():
    model = _counting_loop_model()
    feeds = {"M": np.array(4.0), "v0": np.array([0.5])}  # float64, as a JSON number reads
    exported = mdf_loops.mdf_to_onnx(model, example_inputs=feeds)
    onnx.checker.check_model(exported, full_check=True)
    assert any(n.op_type == "Cast" for n in exported.graph.node)
    assert_same(ort_run(exported, feeds)["counter.out0"], np.array([4.5]))
    results = mdf_loops.run(model, feeds, backend="onnxruntime")
    assert_same(results["counter.out0"], np.array([4.5]))


def _mistyped_model() -> Model:
    """An imported model whose JSON was edited: its output declared int64, computed as float."""
    model = onnx_model([oh.make_node("Neg", ["x"], ["y"])], [value_info("x", FLOAT, [2])],
                       [value_info("y", FLOAT, [2])])
    imported = mdf_loops.onnx_to_mdf(model)
    for node in imported.graphs[0].nodes:
        for port in node.output_ports:
            if (port.metadata or {}).get("onnx_type"):
                port.metadata["onnx_type"]["tensorType"]["elemType"] = onnx.TensorProto.INT64
    return imported


def test_an_export_that_fails_the_checker_is_a_model_error():
    with pytest.raises(ModelError, match="onnx.checker") as info:
        mdf_loops.mdf_to_onnx(_mistyped_model())
    assert "graph 'main'" in str(info.value)


def test_the_command_line_exits_1_and_writes_nothing(tmp_path, capsys):
    source, target = tmp_path / "mistyped.json", tmp_path / "mistyped.onnx"
    _mistyped_model().to_json_file(str(source))
    assert cli_main(["export", str(source), "-o", str(target)]) == 1
    assert not target.exists()
    assert "onnx.checker" in capsys.readouterr().err


def test_the_command_line_casts_a_json_trip_count(tmp_path):
    source, target = tmp_path / "count.json", tmp_path / "count.onnx"
    _counting_loop_model().to_json_file(str(source))
    status = cli_main(["export", str(source), "-o", str(target), "-i", "M=3", "-i", "v0=[0.0]"])
    assert status == 0
    exported = onnx.load(str(target))
    onnx.checker.check_model(exported, full_check=True)
    # the command line types the undeclared trip count int64 (docs/cli.md), so M is int64
    feeds = {"M": np.array(3), "v0": np.array([0.0])}
    assert_same(ort_run(exported, feeds)["counter.out0"], np.array([3.0]))


def test_int64_is_used_as_is():
    step = expression_node("step", ["i", "c", "v"], {"c_out": "c", "v_out": "v + 1"})
    body = mdf_body("count", [step], ["i", "c", "v"], ["step.c_out", "step.v_out"])
    node = loop_node("counter", "Loop", {"M": "M", "v_initial": "[v0]"}, {"body": body},
                     ["M", "v0"], 1)
    model = Model(id="counting", graphs=[Graph(id="main", nodes=[node])])
    exported = mdf_loops.mdf_to_onnx(model, example_inputs={"M": np.array(2, np.int64),
                                                            "v0": np.zeros(1)})
    assert not any(n.op_type == "Cast" for n in exported.graph.node)


def test_a_function_neither_aligned_nor_converted_is_an_error_naming_it():
    """A function declaring opset 9 but using Gelu (opset 20): no converter can help."""
    broken = _function("broken", "local_domain", 9, [oh.make_node("Gelu", ["a"], ["b"])],
                       ["a"], ["b"])
    with pytest.raises(ModelError, match=r"local_domain::broken.*\['Gelu'\]"):
        mdf_loops.onnx_to_mdf(_calling(broken, 20))


def test_a_function_of_a_newer_opset_is_brought_down_to_the_model():
    """A function at opset 18 in an opset-17 model, its operators the same in both."""
    newer = _function("scaled", "this", 18, [oh.make_node("Mul", ["a", "a"], ["b"])],
                      ["a"], ["b"])
    x = np.array([1.0, -2.0, 0.5], np.float32)
    _all_paths(_calling(newer, 17), {"x": x}, {"y": x * x})

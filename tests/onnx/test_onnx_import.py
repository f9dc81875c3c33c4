"""ONNX -> MDF import (mdf_loops/onnx/import_.py): ids, constants, names, functions, errors."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from modeci_mdf.utils import load_mdf
from onnx import helper as oh
from onnx import numpy_helper

import mdf_loops
from conftest import (
    BOOL,
    FLOAT,
    INT64,
    assert_same,
    onnx_model,
    ort_run,
    run_imported,
    run_mdf,
    value_info,
)


def _function_parameter(node):
    return next(p for p in node.parameters if p.function)


def test_unnamed_nodes_of_the_same_op_get_unique_ids(tmp_path, rng):
    model = onnx_model(
        [oh.make_node("Add", ["x", "y"], ["s"]), oh.make_node("Add", ["s", "y"], ["t"]),
         oh.make_node("Add", ["t", "t"], ["u"])],
        [value_info("x", FLOAT, [3]), value_info("y", FLOAT, [3])], [value_info("u", FLOAT, [3])],
    )
    mdf = mdf_loops.onnx_to_mdf(model)
    ids = [n.id for n in mdf.graphs[0].nodes]
    assert len(ids) == 3 and len(set(ids)) == 3 and all(ids)

    path = tmp_path / "adds.json"
    mdf.to_json_file(str(path))
    document = json.loads(path.read_text())
    (graph,) = document[mdf.id]["graphs"].values()
    assert len(graph["nodes"]) == 3  # a JSON object keyed by id keeps all three

    feeds = {"x": rng.standard_normal(3).astype(np.float32), "y": rng.standard_normal(3).astype(np.float32)}
    results = run_mdf(load_mdf(str(path)), feeds)
    assert_same(results["u"], 2 * (feeds["x"] + 2 * feeds["y"]))


CONSTANTS = {
    "f32": np.array([[1.5, -2.0, 3.25]], np.float32),
    "i64": np.array([7, -3, 2**40], np.int64),
    "flag": np.array([True, False]),
    "scalar": np.array(0.125, np.float32),
    "empty": np.zeros((0, 3), np.float32),
}


def _constants_model():
    initializers = [numpy_helper.from_array(v, name) for name, v in CONSTANTS.items()]
    nodes = [
        oh.make_node("Constant", [], ["c_i64"], value=numpy_helper.from_array(np.array([[4, 5]], np.int64))),
        oh.make_node("Constant", [], ["c_float"], value_float=2.5),
        oh.make_node("Constant", [], ["c_ints"], value_ints=[1, 2, 3]),
        oh.make_node("Constant", [], ["c_bool"], value=numpy_helper.from_array(np.array(True))),
    ]
    nodes += [oh.make_node("Identity", [name], [f"{name}_out"]) for name in CONSTANTS]
    outputs = [f"{name}_out" for name in CONSTANTS] + ["c_i64", "c_float", "c_ints", "c_bool"]
    return onnx_model(nodes, [], [value_info(name, FLOAT, None) for name in outputs],
                      initializers=initializers)


EXPECTED_CONSTANT_OUTPUTS = {
    **{f"{name}_out": value for name, value in CONSTANTS.items()},
    "c_i64": np.array([[4, 5]], np.int64),
    "c_float": np.array(2.5, np.float32),
    "c_ints": np.array([1, 2, 3], np.int64),
    "c_bool": np.array(True),
}


@pytest.mark.parametrize("form", ["in_memory", "json", "yaml"])
def test_initializers_and_constants_keep_dtype_and_shape(form, tmp_path):
    mdf = mdf_loops.onnx_to_mdf(_constants_model())
    if form != "in_memory":
        path = tmp_path / f"constants.{form}"
        (mdf.to_json_file if form == "json" else mdf.to_yaml_file)(str(path))
        mdf = load_mdf(str(path))
    results = run_mdf(mdf, {})
    assert sorted(results) == sorted(EXPECTED_CONSTANT_OUTPUTS)
    for name, value in EXPECTED_CONSTANT_OUTPUTS.items():
        assert_same(results[name], value)


def test_initializers_become_typed_constant_nodes():
    graph = mdf_loops.onnx_to_mdf(_constants_model()).graphs[0]
    constants = [n for n in graph.nodes if _function_parameter(n).function == "onnx::Constant"]
    stored = {n.output_ports[0].id: n.get_parameter("value").value for n in constants
              if n.get_parameter("value") is not None}
    for name, array in CONSTANTS.items():
        assert stored[name]["dtype"] == array.dtype.name
        assert stored[name]["shape"] == list(array.shape)
    assert stored["empty"]["data"] == []


def test_graph_inputs_and_outputs_keep_their_onnx_names(rng):
    """Names that are not identifiers still name the inputs and outputs of ``run``."""
    model = onnx_model(
        [oh.make_node("Mul", ["input:0", "2"], ["out.product"], name="my mul"),
         oh.make_node("Neg", ["input:0"], ["class"])],
        [value_info("input:0", FLOAT, [2]), value_info("2", FLOAT, [2])],
        [value_info("out.product", FLOAT, [2]), value_info("class", FLOAT, [2])],
    )
    mdf = mdf_loops.onnx_to_mdf(model)
    interface = mdf_loops.model.graph_interface(mdf.graphs[0])
    assert list(interface.inputs) == ["input:0", "2"]
    assert list(interface.outputs) == ["out.product", "class"]
    feeds = {"input:0": rng.standard_normal(2).astype(np.float32),
             "2": rng.standard_normal(2).astype(np.float32)}
    results = run_mdf(mdf, feeds)
    assert_same(results["out.product"], feeds["input:0"] * feeds["2"])
    assert_same(results["class"], -feeds["input:0"])
    with pytest.raises(mdf_loops.errors.ModelError, match="input:0"):
        run_mdf(mdf, {"2": feeds["2"]})


def test_graph_without_control_flow_matches_onnxruntime(rng):
    w1 = rng.standard_normal((4, 8)).astype(np.float32)
    b1 = rng.standard_normal(8).astype(np.float32)
    model = onnx_model(
        [
            oh.make_node("MatMul", ["x", "w1"], ["h"]),
            oh.make_node("Add", ["h", "b1"], ["h_b"]),
            oh.make_node("Relu", ["h_b"], ["a"]),
            oh.make_node("Split", ["a", "halves"], ["left", "right"], axis=1),
            oh.make_node("Mul", ["left", "right"], ["gated"]),
            oh.make_node("Softmax", ["gated"], ["probs"], axis=-1),
            oh.make_node("ArgMax", ["probs"], ["label"], axis=1, keepdims=0),
            oh.make_node("Shape", ["probs"], ["shape"]),
        ],
        [value_info("x", FLOAT, [3, 4])],
        [value_info("probs", FLOAT, None), value_info("label", INT64, None),
         value_info("shape", INT64, None), value_info("right", FLOAT, None)],
        initializers=[numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
                      numpy_helper.from_array(np.array([4, 4], np.int64), "halves")],
    )
    feeds = {"x": rng.standard_normal((3, 4)).astype(np.float32)}
    results = run_imported(model, feeds)
    for name, value in ort_run(model, feeds).items():
        assert_same(results[name], value)
    a = np.maximum(feeds["x"] @ w1 + b1, 0)
    gated = a[:, :4] * a[:, 4:]
    e = np.exp(gated - gated.max(axis=1, keepdims=True))
    assert_same(results["probs"], e / e.sum(axis=1, keepdims=True))


def _function_model():
    """``local.AxpY(a, x, y) = a * x + y`` with a float attribute default via a Constant."""
    function = oh.make_function(
        "local", "AxpY", ["a", "x", "y"], ["z"],
        [oh.make_node("Mul", ["a", "x"], ["ax"]), oh.make_node("Add", ["ax", "y"], ["z"])],
        opset_imports=[oh.make_opsetid("", 17)],
    )
    nodes = [oh.make_node("AxpY", ["a", "x", "y"], ["z1"], domain="local"),
             oh.make_node("AxpY", ["a", "z1", "y"], ["z2"], domain="local")]
    return onnx_model(nodes, [value_info(n, FLOAT, [3]) for n in ("a", "x", "y")],
                      [value_info("z2", FLOAT, [3])], functions=[function],
                      extra_opsets={"local": 1})


def test_model_local_functions_are_inlined(rng):
    model = _function_model()
    mdf = mdf_loops.onnx_to_mdf(model)
    functions = [_function_parameter(n).function for n in mdf.graphs[0].nodes]
    assert functions.count("onnx::Mul") == 2 and functions.count("onnx::Add") == 2
    assert all(f.startswith("onnx::") for f in functions)
    feeds = {n: rng.standard_normal(3).astype(np.float32) for n in ("a", "x", "y")}
    results = run_mdf(mdf, feeds)
    a, x, y = feeds["a"], feeds["x"], feeds["y"]
    assert_same(results["z2"], a * (a * x + y) + y)
    assert_same(results["z2"], ort_run(model, feeds)["z2"])


def test_unknown_domain_node_is_a_model_error():
    model = onnx_model([oh.make_node("Frobnicate", ["x"], ["y"], name="frob_node", domain="com.example")],
                       [value_info("x", FLOAT, [2])], [value_info("y", FLOAT, [2])],
                       extra_opsets={"com.example": 1})
    with pytest.raises(mdf_loops.errors.ModelError, match="frob_node.*com.example"):
        mdf_loops.onnx_to_mdf(model)


def test_unknown_operator_is_a_model_error():
    model = onnx_model([oh.make_node("NoSuchOp", ["x"], ["y"], name="mystery")],
                       [value_info("x", FLOAT, [2])], [value_info("y", FLOAT, [2])])
    with pytest.raises(mdf_loops.errors.ModelError, match="mystery.*NoSuchOp"):
        mdf_loops.onnx_to_mdf(model)


def test_truncated_onnx_file_is_a_model_error(tmp_path):
    model = onnx_model([oh.make_node("Relu", ["x"], ["y"])], [value_info("x", FLOAT, [2])],
                       [value_info("y", FLOAT, [2])],
                       initializers=[numpy_helper.from_array(np.ones(64, np.float32), "unused")])
    data = model.SerializeToString()
    path = tmp_path / "truncated.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(mdf_loops.errors.ModelError, match="truncated.onnx"):
        mdf_loops.onnx_to_mdf(path)
    with pytest.raises(mdf_loops.errors.ModelError, match="truncated.onnx"):
        run_mdf(path, {"x": np.zeros(2, np.float32)})


def test_missing_onnx_file_is_a_model_error(tmp_path):
    with pytest.raises(mdf_loops.errors.ModelError, match="absent.onnx"):
        mdf_loops.onnx_to_mdf(tmp_path / "absent.onnx")


def test_import_from_path_and_bool_graph_input(tmp_path):
    model = onnx_model([oh.make_node("Not", ["b"], ["nb"]), oh.make_node("Cast", ["nb"], ["n"], to=INT64)],
                       [value_info("b", BOOL, [3])], [value_info("n", INT64, [3])])
    path = tmp_path / "not.onnx"
    onnx.save(model, str(path))
    results = run_mdf(path, {"b": np.array([True, False, True])})
    assert_same(results["n"], np.array([0, 1, 0], np.int64))

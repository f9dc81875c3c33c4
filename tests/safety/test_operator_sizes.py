"""mdf_loops/safety/operator_sizes.py for text, signal and ai.onnx.ml operators: sizes
planned before the kernel allocates, checked against the ONNX reference evaluator."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator
from conftest import child_peak

import mdf_loops
from mdf_loops.errors import SizeLimitError
from mdf_loops.safety.operator_sizes import check_planned_size, planned_elements

ML = "ai.onnx.ml"


def _reference(op_type: str, inputs: list, attributes: dict, domain: str = "",
               opset: int = 20) -> np.ndarray:
    names = [f"in{k}" for k in range(len(inputs))]
    node = oh.make_node(op_type, names, ["out"], domain=domain, **attributes)
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info(n, 0, None) for n in names],
                          [oh.make_tensor_value_info("out", 0, None)])
    opsets = [oh.make_opsetid("", opset), oh.make_opsetid(ML, 3)]
    model = oh.make_model(graph, opset_imports=opsets)
    return ReferenceEvaluator(model).run(None, dict(zip(names, inputs, strict=True)))[0]


@pytest.mark.parametrize("op_type, inputs, attributes", [
    ("LinearRegressor", [np.ones((4, 3), np.float32)],
     {"coefficients": [1.0] * 6, "targets": 2}),
    ("ArrayFeatureExtractor", [np.ones((2, 5), np.float32), np.array([0, 3, 4], np.int64)], {}),
    ("OneHotEncoder", [np.array([[1, 2]], np.int64)], {"cats_int64s": [1, 2, 3]}),
    ("FeatureVectorizer", [np.ones((3, 2), np.float32), np.ones((3, 4), np.float32)],
     {"inputdimensions": [2, 4]}),
])
def test_ml_plans_match_the_reference_evaluator(op_type, inputs, attributes):
    expected = _reference(op_type, inputs, attributes, domain=ML)
    assert planned_elements(op_type, inputs, attributes, ML) == np.size(expected)


def test_an_ml_attribute_asking_for_billions_is_refused_before_the_kernel():
    rows = np.ones((4, 3), np.float32)
    with pytest.raises(SizeLimitError, match="onnxml::TreeEnsembleRegressor has 4000000000"):
        check_planned_size("TreeEnsembleRegressor", [rows], {"n_targets": 10**9}, ML)
    with pytest.raises(SizeLimitError, match="onnxml::LinearRegressor"):
        check_planned_size("LinearRegressor", [rows], {"targets": 10**9}, ML)
    assert planned_elements("Add", [rows, rows], {}, "com.other") is None  # not a domain we run


def test_string_concat_is_counted_by_the_bytes_of_its_texts():
    a = np.array(["ab", "c"], dtype=object)
    b = np.array(["x" * 14], dtype=object)
    expected = _reference("StringConcat", [a, b], {})
    assert list(expected) == ["ab" + "x" * 14, "c" + "x" * 14]
    longest = max(len(t) for t in expected)  # 16 characters: 64 bytes, 8 float64 elements
    assert planned_elements("StringConcat", [a, b], {}) >= np.size(expected) * 4 * longest // 8
    doubled = np.array(["x" * 10_000], dtype=object)  # joined: 20,000 characters, 80 kB
    with mdf_loops.safety.limits(max_elements=9_000):
        with pytest.raises(SizeLimitError, match="onnx::StringConcat"):
            check_planned_size("StringConcat", [doubled, doubled], {})


def test_a_window_of_ten_billion_stops_before_allocating():
    code = """
import numpy as np, mdf_loops
from onnx import helper as oh, TensorProto as T
node = oh.make_node("HannWindow", ["n"], ["y"])
graph = oh.make_graph([node], "g", [oh.make_tensor_value_info("n", T.INT64, [])],
                      [oh.make_tensor_value_info("y", T.FLOAT, None)])
model = mdf_loops.onnx_to_mdf(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)]))
mdf_loops.run(model, {"n": np.array(10**10, np.int64)}, backend="scheduler")"""
    result, peak = child_peak(code, limit_mb=4000)
    assert result.startswith("SizeLimitError") and "onnx::HannWindow" in result, result
    assert peak < 1000


def test_a_sequence_is_counted_by_its_members_elements():
    """A Loop's carried sequence grows by a 1,000-element tensor per iteration: its
    members are counted, not its length (20 items of 1,000 would pass a count of 20)."""
    from onnx import TensorProto as T

    body = oh.make_graph(
        [oh.make_node("Identity", ["cond"], ["cond_out"]),
         oh.make_node("ConstantOfShape", ["shape"], ["big"]),
         oh.make_node("SequenceInsert", ["seq", "big"], ["seq_out"])], "body",
        [oh.make_tensor_value_info("i", T.INT64, []), oh.make_tensor_value_info("cond", T.BOOL, []),
         oh.make_tensor_sequence_value_info("seq", T.FLOAT, None)],
        [oh.make_tensor_value_info("cond_out", T.BOOL, []),
         oh.make_tensor_sequence_value_info("seq_out", T.FLOAT, None)],
        [oh.make_tensor("shape", T.INT64, [1], [1000])])
    graph = oh.make_graph(
        [oh.make_node("SequenceEmpty", [], ["empty"], dtype=T.FLOAT),
         oh.make_node("Loop", ["n", "", "empty"], ["seq_final"], body=body),
         oh.make_node("SequenceLength", ["seq_final"], ["length"])], "g",
        [oh.make_tensor_value_info("n", T.INT64, [])],
        [oh.make_tensor_value_info("length", T.INT64, [])])
    model = mdf_loops.onnx_to_mdf(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)]))
    n = {"n": np.array(20, np.int64)}
    assert mdf_loops.run(model, n, backend="scheduler")["length"] == 20  # within the limit
    with pytest.raises(SizeLimitError, match="iteration 5 .* has 6000 elements"):
        mdf_loops.run(model, n, backend="scheduler", max_elements=5000)


def test_text_arrays_are_counted_by_their_bytes():
    from mdf_loops.ops.common import element_count

    assert element_count(np.array(["x" * 100] * 4)) == 4 * 100 * 4 // 8  # 4 bytes a character
    assert element_count([np.ones(3), [np.ones(2), np.ones(5)]]) == 10
    assert element_count([]) == 0 and element_count(np.ones((2, 3))) == 6


@pytest.mark.parametrize("sizes, axes, policy", [
    ([1, 1, 30, 30], None, "not_smaller"),  # one scale, 30, for every axis: 24,300,000
    ([30, 30], [2, 3], "not_smaller"),
    ([1, 1, 30, 5], None, "not_larger"),
    ([1, 1, 7, 30], None, "stretch"),
])
def test_resize_to_sizes_kept_in_aspect_plans_the_scale_the_policy_picks(sizes, axes, policy):
    x = np.ones((1, 1, 1, 30), np.float32)
    attributes = {"keep_aspect_ratio_policy": policy, **({"axes": axes} if axes else {})}
    inputs = [x, None, None, np.array(sizes, np.int64)]
    if sizes != [1, 1, 30, 30]:
        made = _reference("Resize", [x, np.array([], np.float32), np.array([], np.float32),
                                     inputs[3]], attributes, opset=19)
        assert planned_elements("Resize", inputs, attributes) >= made.size
    else:  # 24,300,000 elements: the plan, checked, and the refusal through a backend
        assert planned_elements("Resize", inputs, attributes) == 30 * 30 * 30 * 900
        node = oh.make_node("Resize", ["x", "", "", "sizes"], ["y"], **attributes)
        graph = oh.make_graph(
            [node], "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 1, 30]),
                          oh.make_tensor_value_info("sizes", TensorProto.INT64, [4])],
            [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        model = mdf_loops.onnx_to_mdf(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 19)]))
        with mdf_loops.safety.limits(max_elements=10**6), pytest.raises(
                SizeLimitError, match="onnx::Resize has 24300000 elements"):
            mdf_loops.run(model, {"x": x, "sizes": inputs[3]}, backend="scheduler")

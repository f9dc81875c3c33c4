"""Every operator of the default ONNX domain is sized before it allocates, or listed with
the reason it needs no plan (mdf_loops/safety/operator_sizes.py, window_sizes.py,
bounded_operators.py); the plans of window_sizes.py against the ONNX reference evaluator."""

from __future__ import annotations

import numpy as np
import onnx.defs
import pytest
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator
from conftest import child_peak

import mdf_loops
from mdf_loops.errors import SizeLimitError
from mdf_loops.safety.bounded_operators import BOUNDED_BY_INPUTS
from mdf_loops.safety.operator_sizes import check_planned_size, has_size_plan, planned_elements

rng = np.random.default_rng(25)


def test_every_operator_schema_has_a_size_plan_or_a_reason():
    schemas = onnx.defs.get_all_schemas_with_history()
    names = {s.name for s in schemas if s.domain in ("", "ai.onnx")}
    planned = {n for n in names if has_size_plan(n)}
    missing = sorted(names - planned - set(BOUNDED_BY_INPUTS))
    assert not missing, f"operators with no size plan and no reason: {missing}"
    assert not planned & set(BOUNDED_BY_INPUTS)
    assert set(BOUNDED_BY_INPUTS) <= names  # no stale entry


def _outputs(op_type: str, inputs: list, attributes: dict, opset: int, outputs: int = 1):
    names = [f"in{k}" if v is not None else "" for k, v in enumerate(inputs)]
    outs = [f"out{k}" for k in range(outputs)]
    node = oh.make_node(op_type, names, outs, **attributes)
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info(n, 0, None) for n in names if n],
                          [oh.make_tensor_value_info(o, 0, None) for o in outs])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])
    feed = {n: v for n, v in zip(names, inputs, strict=True) if n}
    return ReferenceEvaluator(model).run(None, feed)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def i64(*values):
    return np.array(values, np.int64)


CASES = [  # (op, inputs, attributes, opset, outputs, exact)
    ("STFT", [f32(2, 64, 1), np.array(8, np.int64), None, np.array(16, np.int64)], {}, 17, 1, True),
    ("STFT", [f32(1, 40, 1), np.array(5, np.int64), np.hanning(12).astype(np.float32)], {"onesided": 0}, 17, 1,
     True),
    ("Gather", [f32(3, 4, 5), np.zeros((6, 2), np.int64)], {"axis": 1}, 13, 1, True),
    ("GatherND", [f32(2, 3, 4), np.zeros((5, 2), np.int64)], {}, 13, 1, True),
    ("Conv", [f32(1, 2, 9, 9), f32(4, 2, 3, 3)], {"pads": [5, 5, 5, 5]}, 11, 1, False),
    ("ConvTranspose", [f32(1, 2, 5, 5), f32(2, 3, 3, 3)], {"strides": [7, 7]}, 11, 1, True),
    ("MaxPool", [f32(1, 2, 9, 9)], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, 12, 2, False),
    ("LSTM", [f32(7, 2, 3), f32(1, 4 * 50, 3), f32(1, 4 * 50, 50)], {"hidden_size": 50}, 14, 1,
     True),
    ("RoiAlign", [f32(1, 3, 8, 8), np.array([[0, 0, 4, 4], [1, 1, 5, 5]], np.float32),
                  i64(0, 0)], {"output_height": 6, "output_width": 7}, 16, 1, True),
    ("AffineGrid", [f32(2, 2, 3), i64(2, 1, 5, 6)], {}, 20, 1, True),
    ("CenterCropPad", [f32(4, 5), i64(9, 2)], {}, 18, 1, True),
    ("Col2Im", [f32(1, 4, 16), i64(5, 5), i64(2, 2)], {}, 18, 1, False),
    ("TfIdfVectorizer", [np.array([[1, 2, 3]], np.int64)],
     {"mode": "TF", "min_gram_length": 1, "max_gram_length": 1, "max_skip_count": 0,
      "ngram_counts": [0], "ngram_indexes": [0, 9], "pool_int64s": [1, 2]}, 9, 1, True),
    ("StringSplit", [np.array(["a b c", "d"], dtype=object)], {}, 20, 1, False),
    ("GridSample", [f32(1, 3, 4, 4), f32(1, 6, 7, 2)], {}, 16, 1, True),
    ("MaxUnpool", [f32(1, 1, 2, 2), np.array([[[[0, 3], [10, 15]]]], np.int64)],
     {"kernel_shape": [2, 2], "strides": [2, 2]}, 11, 1, True),
    ("MatMulInteger", [np.ones((3, 4), np.uint8), np.ones((4, 6), np.uint8)], {}, 10, 1, True),
    ("Attention", [f32(1, 2, 3, 4), f32(1, 2, 5, 4), f32(1, 2, 5, 4)], {}, 23, 1, False),
]


@pytest.mark.parametrize("op_type, inputs, attributes, opset, outputs, exact", CASES,
                         ids=[f"{c[0]}-{k}" for k, c in enumerate(CASES)])
def test_window_plans_bound_the_reference_evaluator_s_outputs(op_type, inputs, attributes,
                                                              opset, outputs, exact):
    made = _outputs(op_type, inputs, attributes, opset, outputs)
    largest = max(int(np.size(v)) for v in made)
    planned = planned_elements(op_type, inputs, attributes)
    assert planned is not None and planned >= largest
    if exact:
        assert planned == largest


def test_an_stft_asking_for_billions_stops_before_allocating():
    code = """
import numpy as np, mdf_loops
from onnx import helper as oh, TensorProto as T
node = oh.make_node("STFT", ["x", "step", "", "n"], ["y"])
graph = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", T.FLOAT, [1, None, 1]),
                                    oh.make_tensor_value_info("step", T.INT64, []),
                                    oh.make_tensor_value_info("n", T.INT64, [])],
                      [oh.make_tensor_value_info("y", T.FLOAT, None)])
model = mdf_loops.onnx_to_mdf(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]))
x = np.zeros((1, 200_000, 1), np.float32)  # 800 kB: frames of 100,000 every step, 20 GB
mdf_loops.run(model, {"x": x, "step": np.array(1, np.int64), "n": np.array(100_000, np.int64)},
              backend="scheduler")"""
    result, peak = child_peak(code, limit_mb=4000)
    assert result.startswith("SizeLimitError") and "onnx::STFT" in result, result
    assert peak < 1000


def test_attributes_that_ask_for_billions_are_refused_before_the_kernel():
    x = f32(1, 2, 8, 8)
    with pytest.raises(SizeLimitError, match="onnx::ConvTranspose"):
        check_planned_size("ConvTranspose", [x, f32(2, 3, 3, 3)], {"strides": [10**5, 10**5]})
    with pytest.raises(SizeLimitError, match="onnx::LSTM"):
        check_planned_size("LSTM", [f32(7, 2, 3)], {"hidden_size": 10**8})
    with pytest.raises(SizeLimitError, match="onnx::Gather"):
        check_planned_size("Gather", [f32(1, 2 * 10**4), np.zeros(10**4, np.int64)], {"axis": 0})
    with mdf_loops.safety.limits(max_elements=10**4):
        with pytest.raises(SizeLimitError, match="onnx::MaxPool"):
            check_planned_size("MaxPool", [x], {"kernel_shape": [2, 2], "pads": [99] * 4})

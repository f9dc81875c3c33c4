"""check_planned_size's shortcut (the product of the inputs' sizes bounds a broadcasting
operator's, MatMul's and Gemm's output) against the full estimate and onnx.reference."""

import numpy as np
import pytest
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

from mdf_loops.errors import SizeLimitError
from mdf_loops.ops.common import limits
from mdf_loops.safety.operator_sizes import check_planned_size

CASES = [
    ("Add", [np.ones((40, 1)), np.ones((1, 50))], {}),
    ("Where", [np.ones((3, 1, 1), bool), np.ones((1, 4, 1)), np.ones((1, 1, 5))], {}),
    ("MatMul", [np.ones((30, 2)), np.ones((2, 40))], {}),
    ("MatMul", [np.ones((3, 1, 4, 2)), np.ones((5, 2, 6))], {}),
    ("Gemm", [np.ones((2, 30)), np.ones((40, 2))], {"transA": 1, "transB": 1}),
    # an empty input: the product of sizes is 0, the output is not empty
    ("MatMul", [np.ones((30, 0)), np.ones((0, 40))], {}),
]


def _output_size(op_type, inputs, attributes) -> int:
    names = [f"in{k}" for k in range(len(inputs))]
    node = oh.make_node(op_type, names, ["out"], **attributes)
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info(n, 0, None) for n in names],
                          [oh.make_tensor_value_info("out", 0, None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])
    (out,) = ReferenceEvaluator(model).run(None, dict(zip(names, inputs)))
    return int(np.size(out))


@pytest.mark.parametrize(("op_type", "inputs", "attributes"), CASES)
def test_the_check_refuses_exactly_the_outputs_over_the_limit(op_type, inputs, attributes):
    size = _output_size(op_type, inputs, attributes)
    with limits(max_elements=max(size, 1)):
        check_planned_size(op_type, inputs, attributes)  # at the limit: allowed
    if size > 1:
        with limits(max_elements=size - 1), pytest.raises(SizeLimitError, match="max_elements"):
            check_planned_size(op_type, inputs, attributes)

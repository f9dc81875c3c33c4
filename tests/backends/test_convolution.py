"""Convolutions, pools, Pad, PRelu and Dropout on the torch and JAX backends (where the
windows sit: mdf_loops/backends/windows.py; the lowerings: backends/torch/convolution.py,
backends/jax/convolution.py): onnxruntime's values on the same nodes; what has no
lowering is refused naming the node."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_model, ort_run  # noqa: E402
from onnx import TensorProto, helper

import mdf_loops
from mdf_loops.errors import MdfLoopsError

BACKENDS = ("torch", "jax")

F32 = TensorProto.FLOAT
I64 = TensorProto.INT64
X2 = (2, 4, 7, 6)

CASES = {
    # name: (op, attributes, input shapes, extra constant inputs, opset)
    "conv_groups_dilations_asymmetric": (
        "Conv", {"group": 2, "dilations": [2, 1], "strides": [1, 2], "pads": [1, 0, 2, 1]},
        [X2, (6, 2, 2, 3), (6,)], {}, 17,
    ),
    "conv1d_same_upper": ("Conv", {"auto_pad": "SAME_UPPER", "strides": [2]},
                          [(1, 3, 9), (2, 3, 4)], {}, 17),
    "conv_same_lower": ("Conv", {"auto_pad": "SAME_LOWER", "strides": [2, 2]},
                        [X2, (3, 4, 3, 2)], {}, 17),
    "conv3d_valid": ("Conv", {"auto_pad": "VALID"}, [(1, 2, 4, 5, 3), (2, 2, 2, 2, 2)], {}, 17),
    "max_pool_ceil_pads": ("MaxPool", {"kernel_shape": [3, 2], "strides": [2, 2],
                                       "pads": [1, 0, 1, 1], "ceil_mode": 1}, [X2], {}, 17),
    "max_pool_dilated": ("MaxPool", {"kernel_shape": [2, 2], "dilations": [2, 1],
                                     "pads": [1, 0, 1, 1]}, [X2], {}, 17),
    "max_pool_same_upper": ("MaxPool", {"kernel_shape": [3, 2], "strides": [2, 1],
                                        "auto_pad": "SAME_UPPER"}, [X2], {}, 17),
    "average_pool_pads_excluded": ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 0]},
                                   [X2], {}, 17),
    "average_pool_pads_included": ("AveragePool", {"kernel_shape": [2, 3], "strides": [2, 1],
                                                   "pads": [0, 1, 1, 1], "count_include_pad": 1},
                                   [X2], {}, 17),
    "average_pool_ceil": ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2],
                                          "ceil_mode": 1}, [X2], {}, 17),
    "average_pool_ceil_pads": ("AveragePool", {"kernel_shape": [3, 2], "strides": [2, 2],
                                               "pads": [1, 0, 1, 1], "ceil_mode": 1}, [X2], {}, 17),
    "global_average_pool": ("GlobalAveragePool", {}, [X2], {}, 17),
    "global_max_pool": ("GlobalMaxPool", {}, [X2], {}, 17),
    "prelu_per_channel": ("PRelu", {}, [X2, (4, 1, 1)], {}, 17),
    "pad_constant_negative": ("Pad", {}, [X2], {"pads": [0, 0, 2, -1, 0, 1, 1, 2]}, 17),
    "pad_reflect": ("Pad", {"mode": "reflect"}, [X2], {"pads": [0, 0, 2, 3, 0, 0, 1, 2]}, 17),
    "pad_edge_axes": ("Pad", {"mode": "edge"}, [X2],
                      {"pads": [3, 1, 0, 2], "constant_value": None, "axes": [-1, 2]}, 18),
    "pad_wrap": ("Pad", {"mode": "wrap"}, [X2], {"pads": [0, 0, 1, 2, 0, 0, 2, 1]}, 19),
    "dropout_inference": ("Dropout", {}, [X2], {}, 17),
    "batch_normalization": ("BatchNormalization", {"epsilon": 0.01},
                            [X2, (4,), (4,), (4,), (4,)], {}, 15),
}


def _model(op, attributes, shapes, constants, opset, outputs=("y",)):
    names = [f"x{k}" for k in range(len(shapes))]
    given = {k: v for k, v in constants.items() if v is not None}  # None: an absent input
    initializers = [helper.make_tensor(k, I64, [len(v)], v) for k, v in given.items()]
    inputs = names + [k if k in given else "" for k in constants]
    node = helper.make_node(op, inputs, list(outputs), name="cnn", **attributes)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, F32, s) for n, s in zip(names, shapes, strict=True)],
        [helper.make_tensor_value_info(o, F32 if o == "y" else TensorProto.BOOL, None)
         for o in outputs],
        initializer=initializers,
    )
    rng = np.random.default_rng(len(op) + opset)
    inputs = {n: rng.normal(size=s).astype(np.float32) for n, s in zip(names, shapes, strict=True)}
    if op == "BatchNormalization":  # a variance
        inputs["x4"] = np.abs(inputs["x4"])
    return make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), inputs


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_operators_match_onnxruntime(name, backend):
    pytest.importorskip(backend)
    model, inputs = _model(*CASES[name])
    expected = ort_run(model, inputs)["y"]
    out = mdf_loops.run(mdf_loops.onnx_to_mdf(model), inputs, backend=backend)["y"]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "case, outputs, message",
    [
        (("MaxPool", {"kernel_shape": [2, 2]}, [X2], {}, 17), ("y", "indices"), "Indices"),
        (("AveragePool", {"kernel_shape": [2, 2], "dilations": [2, 2], "pads": [1, 1, 1, 1]},
          [X2], {}, 19), ("y",), "dilations"),
    ],
)
def test_what_has_no_lowering_is_refused_naming_the_node(case, outputs, message, backend):
    pytest.importorskip(backend)
    model, inputs = _model(*case, outputs=outputs)
    if len(outputs) > 1:
        model.graph.output[1].type.tensor_type.elem_type = I64
    with pytest.raises(MdfLoopsError, match=rf"node 'cnn_node' \({case[0]}\).*{message}"):
        mdf_loops.run(mdf_loops.onnx_to_mdf(model), inputs, backend=backend)

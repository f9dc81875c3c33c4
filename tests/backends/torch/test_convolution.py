"""Convolutions, pools, Pad, PRelu and Dropout on the torch backend
(mdf_loops/backends/torch/convolution.py): onnxruntime's values on the same nodes; the
CNN constructs of ModECI's PyTorch examples (Conv2d, PReLU, ZeroPad2d, average and max
pools, torch.cat, Linear) through from_pytorch and to_pytorch, against the module and
torch.autograd through it; what has no lowering is refused naming the node."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from onnx import TensorProto, helper

import mdf_loops
from mdf_loops.errors import MdfLoopsError

torch = pytest.importorskip("torch")
from conftest import make_model, ort_run  # noqa: E402

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
    return make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), inputs


@pytest.mark.parametrize("name", sorted(CASES))
def test_operators_match_onnxruntime(name):
    model, inputs = _model(*CASES[name])
    expected = ort_run(model, inputs)["y"]
    out = mdf_loops.run(mdf_loops.onnx_to_mdf(model), inputs, backend="torch")["y"]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "case, outputs, message",
    [
        (("MaxPool", {"kernel_shape": [2, 2]}, [X2], {}, 17), ("y", "indices"), "Indices"),
        (("AveragePool", {"kernel_shape": [2, 2], "dilations": [2, 2], "pads": [1, 1, 1, 1]},
          [X2], {}, 19), ("y",), "dilations"),
    ],
)
def test_what_has_no_lowering_is_refused_naming_the_node(case, outputs, message):
    model, inputs = _model(*case, outputs=outputs)
    if len(outputs) > 1:
        model.graph.output[1].type.tensor_type.elem_type = I64
    with pytest.raises(MdfLoopsError, match=rf"node 'cnn_node' \({case[0]}\).*{message}"):
        mdf_loops.run(mdf_loops.onnx_to_mdf(model), inputs, backend="torch")


class SmallInception(torch.nn.Module):
    """The layers ModECI's inception.py and simple_Convolution.py use, in small."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, kernel_size=3, padding=1)
        self.prelu = torch.nn.PReLU(init=0.1)
        self.branch = torch.nn.Conv2d(4, 2, kernel_size=1)
        self.pad = torch.nn.ZeroPad2d((0, 1, 0, 1))
        self.average = torch.nn.AvgPool2d(2, stride=1)
        self.maximum = torch.nn.MaxPool2d(2, stride=2)
        self.fc = torch.nn.Linear(6 * 4 * 4, 5)

    def forward(self, x):
        y = self.prelu(self.conv(x))
        y = torch.cat((self.branch(y), self.average(self.pad(y))), dim=1)
        y = torch.relu(self.maximum(y))
        return self.fc(y.reshape(y.shape[0], -1))


def test_a_small_inception_trains_as_the_module():
    torch.manual_seed(0)
    module = SmallInception()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, 8, 8, generator=g)
    model = mdf_loops.from_pytorch(module, (x,))
    ours, theirs = mdf_loops.to_pytorch(model), copy.deepcopy(module)
    mine, other = x.clone().requires_grad_(), x.clone().requires_grad_()
    (out,) = ours(mine).values()
    np.testing.assert_allclose(out.detach(), module(x).detach(), rtol=1e-5, atol=1e-5)
    (out**2).sum().backward()
    (theirs(other) ** 2).sum().backward()
    np.testing.assert_allclose(mine.grad, other.grad, rtol=1e-4, atol=1e-5)
    assert sum(p.numel() for p in ours.parameters()) >= sum(p.numel() for p in theirs.parameters())
    for m in (ours, theirs):  # one step each: the same model if every gradient is right
        with torch.no_grad():
            for p in m.parameters():
                if p.grad is not None:  # ours also holds the pad's fill value, unread
                    p -= 0.05 * p.grad
    (again,) = ours(x).values()
    np.testing.assert_allclose(again.detach(), theirs(x).detach(), rtol=1e-4, atol=1e-5)

"""The per-operator rules of the batching transform (mdf_loops/backends/onnxruntime/
batching/rules.py): random small graphs of the supported operators, run batched in one
onnxruntime call against one onnxruntime run per setting of the unbatched graph, and
numpy on a few by hand.

Results agree to float rounding (rtol 1e-12): the same operations on the same numbers,
where onnxruntime's vectorised kernels may round a transcendental function differently
from one element to a thousand; element-wise arithmetic and comparisons are exact.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from mdf_loops.backends.onnxruntime.batching import NotBatchable, batch_model
from conftest import make_model  # noqa: E402

SIZE = 4


def session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def model_of(nodes, inputs, outputs, initializers=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def double(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.DOUBLE, list(shape))


def ints(name: str, values) -> onnx.TensorProto:
    return helper.make_tensor(name, TensorProto.INT64, [len(values)], list(values))


def per_setting_and_batched(model, batched: dict, shared: dict):
    """Each setting's outputs run alone, and the batched model's outputs (as given)."""
    alone = session(model)
    names = [o.name for o in model.graph.output]
    expected = [
        dict(zip(names, alone.run(None, {**shared, **{k: v[s] for k, v in batched.items()}})))
        for s in range(SIZE)
    ]
    result = batch_model(model, list(batched), SIZE)
    onnx.checker.check_model(result.model)
    got = session(result.model).run(None, {**shared, **batched})
    return expected, dict(zip([o.name for o in result.model.graph.output], got)), result


def assert_batched_equal(model, batched, shared):
    expected, got, result = per_setting_and_batched(model, batched, shared)
    for name, form in result.outputs.items():
        for s in range(SIZE):
            value = got[name][s] if form.batched else got[name]
            np.testing.assert_allclose(value, expected[s][name], rtol=1e-12, atol=0)
            assert np.shape(value) == np.shape(expected[s][name])


class RandomGraph:
    """A random graph of supported operators over a batched ``x`` and ``w`` and a shared
    ``y``: each step applies an operator to values of fitting shapes."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.values: list[tuple[str, tuple]] = [("x", (2, 3)), ("w", (3,)), ("y", (2, 3))]
        self.nodes: list = []
        self.inits: list = []
        self.count = 0

    def fresh(self) -> str:
        self.count += 1
        return f"v{self.count}"

    def pick(self, ranked=None):
        choices = [v for v in self.values if ranked is None or len(v[1]) in ranked]
        return choices[self.rng.integers(len(choices))]

    def constant(self, values) -> str:
        name = self.fresh()
        self.inits.append(ints(name, values))
        return name

    def add(self, op, inputs, shape, **attrs):
        out = self.fresh()
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        self.values.append((out, tuple(shape)))

    def step(self):
        kind = self.rng.integers(10)
        (a, sa), (b, sb) = self.pick(), self.pick()
        if kind <= 2:
            try:
                shape = np.broadcast_shapes(sa, sb)
            except ValueError:
                return
            op = ["Add", "Sub", "Mul", "Max", "Min", "Div"][self.rng.integers(6)]
            self.add(op, [a, b], shape)
        elif kind == 3:
            op = ["Abs", "Neg", "Tanh", "Identity", "Exp"][self.rng.integers(5)]
            self.add(op, [a], sa)
        elif kind == 4:
            try:
                shape = np.broadcast_shapes(sa, sb)
            except ValueError:
                return
            less = self.fresh()
            self.nodes.append(helper.make_node("Less", [a, b], [less]))
            self.add("Where", [less, a, b], shape)
        elif kind == 5 and sa:
            axis = int(self.rng.integers(-len(sa), len(sa)))
            keep = int(self.rng.integers(2))
            shape = list(sa)
            shape[axis] = 1
            shape = shape if keep else [d for k, d in enumerate(sa) if k != axis % len(sa)]
            op = ["ReduceSum", "ReduceMax", "ReduceMean"][self.rng.integers(3)]
            self.add(op, [a, self.constant([axis])], shape, keepdims=keep)
        elif kind == 6:
            axis = int(self.rng.integers(-len(sa) - 1, len(sa) + 1))
            shape = list(sa)
            shape.insert(axis % (len(sa) + 1), 1)
            self.add("Unsqueeze", [a, self.constant([axis])], shape)
        elif kind == 7 and len(sa) == 2:
            self.add("Transpose", [a], sa[::-1], perm=[1, 0])
        elif kind == 8 and sa:
            axis = int(self.rng.integers(len(sa)))
            self.add("Gather", [a, self.constant([0, sa[axis] - 1, 0])], (*sa[:axis], 3, *sa[axis + 1 :]), axis=axis)
        elif kind == 9:
            self.add("Reshape", [a, self.constant([-1])], (int(np.prod(sa)),))

    def model(self, steps: int) -> onnx.ModelProto:
        for _ in range(steps):
            self.step()
        outputs = [double(name, shape) for name, shape in self.values[-3:]]
        inputs = [double(name, shape) for name, shape in self.values[:3]]
        return model_of(self.nodes, inputs, outputs, self.inits)


@pytest.mark.parametrize("seed", range(40))
def test_random_graphs_batched_equal_each_setting_run_alone(seed):
    graph = RandomGraph(seed)
    model = graph.model(12)
    rng = np.random.default_rng(100 + seed)
    batched = {"x": rng.normal(size=(SIZE, 2, 3)), "w": rng.normal(size=(SIZE, 3))}
    assert_batched_equal(model, batched, {"y": rng.normal(size=(2, 3))})


def test_axis_operators_against_numpy():
    nodes = [
        helper.make_node("Size", ["x"], ["n"]),
        helper.make_node("Shape", ["x"], ["shape"], start=-1),
        helper.make_node("Concat", ["x", "y"], ["joined"], axis=-1),
        helper.make_node("Slice", ["joined", "starts", "ends"], ["sliced"]),
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("MatMul", ["w", "m"], ["wm"]),
        helper.make_node("Expand", ["w", "target"], ["wide"]),
        helper.make_node("Squeeze", ["one", "zero"], ["squeezed"]),
        helper.make_node("Unsqueeze", ["w", "zero"], ["one"]),
    ]
    nodes = nodes[:-2] + [nodes[-1], nodes[-2]]
    inits = [ints("starts", [1]), ints("ends", [2]), ints("target", [2, 3]), ints("zero", [0])]
    model = model_of(
        nodes,
        [double("x", (2, 3)), double("y", (2, 3)), double("w", (3,)), double("m", (3, 2))],
        [
            helper.make_tensor_value_info("n", TensorProto.INT64, []),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [1]),
            double("sliced", (1, 6)),
            double("xw", (2,)),
            double("wm", (2,)),
            double("wide", (2, 3)),
            double("squeezed", (3,)),
        ],
        inits,
    )
    rng = np.random.default_rng(7)
    x, w = rng.normal(size=(SIZE, 2, 3)), rng.normal(size=(SIZE, 3))
    y, m = rng.normal(size=(2, 3)), rng.normal(size=(3, 2))
    _, got, result = per_setting_and_batched(model, {"x": x, "w": w}, {"y": y, "m": m})
    assert not result.outputs["n"].batched and got["n"] == 6  # one setting's size
    assert got["shape"].tolist() == [3]
    np.testing.assert_array_equal(got["sliced"], np.concatenate([x, np.broadcast_to(y, x.shape)], -1)[:, 1:2])
    np.testing.assert_allclose(got["xw"], np.einsum("bij,bj->bi", x, w), rtol=1e-12)
    np.testing.assert_allclose(got["wm"], w @ m, rtol=1e-12)
    np.testing.assert_array_equal(got["wide"], np.broadcast_to(w[:, None, :], (SIZE, 2, 3)))
    np.testing.assert_array_equal(got["squeezed"], w)


def refusal(node, inputs, outputs, batched, inits=()) -> str:
    with pytest.raises(NotBatchable) as caught:
        batch_model(model_of([node], inputs, outputs, inits), batched, SIZE)
    return str(caught.value)


def test_an_operator_without_a_rule_refuses_naming_the_node():
    node = helper.make_node("TopK", ["w", "k"], ["top", "where"], name="pick_best")
    message = refusal(
        node,
        [double("w", (3,))],
        [double("top", (1,)), helper.make_tensor_value_info("where", TensorProto.INT64, [1])],
        ["w"],
        [ints("k", [1])],
    )
    assert "node 'pick_best' (TopK)" in message and "no rule" in message


def test_random_operators_refuse_even_without_batched_inputs():
    node = helper.make_node("RandomNormal", [], ["r"], shape=[3], name="draw")
    message = refusal(node, [double("w", (3,))], [double("r", (3,))], ["w"])
    assert "'draw'" in message and "random" in message


def test_gather_with_both_data_and_indices_batched_refuses():
    node = helper.make_node("Gather", ["w", "i"], ["g"], name="pick")
    index = helper.make_tensor_value_info("i", TensorProto.INT64, [])
    message = refusal(node, [double("w", (3,)), index], [double("g", ())], ["w", "i"])
    assert "'pick'" in message and "both" in message


def test_a_name_that_is_no_input_refuses():
    node = helper.make_node("Identity", ["w"], ["v"])
    assert "not inputs" in refusal(node, [double("w", (3,))], [double("v", (3,))], ["nope"])

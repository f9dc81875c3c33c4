"""ONNX's RNN, GRU and LSTM on the torch and JAX backends (mdf_loops/backends/recurrent.py):
the values onnxruntime gives on the same model, for each direction, layout, optional input
and activation the lowering takes; what it does not take is refused naming the node."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_model, ort_run  # noqa: E402
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import mdf_loops
from mdf_loops.errors import CompileError

BACKENDS = ("torch", "jax")
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
SEQ, BATCH, IN, HIDDEN = 4, 2, 3, 5

CASES = {
    # name: (operator, attributes, optional inputs given)
    "rnn": ("RNN", {}, ()),
    "rnn_reverse_relu": ("RNN", {"direction": "reverse", "activations": ["Relu"]}, ("B", "h")),
    "rnn_bidirectional_batch_first": ("RNN", {"direction": "bidirectional", "layout": 1}, ("h",)),
    "gru": ("GRU", {}, ("B",)),
    "gru_linear_before_reset": ("GRU", {"linear_before_reset": 1}, ("B", "h")),
    "gru_bidirectional": ("GRU", {"direction": "bidirectional"}, ("B", "h")),
    "lstm": ("LSTM", {}, ()),
    "lstm_peepholes": ("LSTM", {}, ("B", "h", "c", "P")),
    "lstm_reverse_batch_first": ("LSTM", {"direction": "reverse", "layout": 1}, ("B", "h", "c")),
    "lstm_bidirectional_softsign": (
        "LSTM",
        {"direction": "bidirectional", "activations": ["Sigmoid", "Softsign", "Tanh"] * 2},
        ("B",),
    ),
}


def _model(op: str, attributes: dict, given: tuple[str, ...]):
    """One recurrent node over graph inputs, and random inputs for it."""
    dirs = 2 if attributes.get("direction") == "bidirectional" else 1
    batch_first = attributes.get("layout", 0) == 1
    g = GATES[op] * HIDDEN
    state = [BATCH, dirs, HIDDEN] if batch_first else [dirs, BATCH, HIDDEN]
    shapes = {
        "X": [BATCH, SEQ, IN] if batch_first else [SEQ, BATCH, IN],
        "W": [dirs, g, IN],
        "R": [dirs, g, HIDDEN],
        "B": [dirs, 2 * g],
        "h": state,
        "c": state,
        "P": [dirs, 3 * HIDDEN],
    }
    order = ["X", "W", "R", "B", "", "h", "c", "P"][: 8 if op == "LSTM" else 6]
    names = [n if n in ("X", "W", "R") or n in given else "" for n in order]
    while not names[-1]:
        names.pop()
    outputs = ["Y", "Y_h", "Y_c"][: 3 if op == "LSTM" else 2]
    node = helper.make_node(op, names, outputs, name="cell", hidden_size=HIDDEN, **attributes)
    graph = helper.make_graph(
        [node],
        "recurrent",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, shapes[n]) for n in names if n],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
    )
    rng = np.random.default_rng(len(names) + len(attributes))
    inputs = {n: rng.normal(0, 0.6, shapes[n]).astype(np.float32) for n in names if n}
    return make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), inputs


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_recurrent_operators_match_onnxruntime(backend, name):
    pytest.importorskip(backend)
    model, inputs = _model(*CASES[name])
    expected = _onnxruntime(*CASES[name], inputs)
    out = mdf_loops.run(mdf_loops.onnx_to_mdf(model), inputs, backend=backend)
    for key, value in expected.items():
        np.testing.assert_allclose(out[key], value, rtol=1e-5, atol=1e-5, err_msg=key)


def _onnxruntime(op: str, attributes: dict, given: tuple[str, ...], inputs: dict) -> dict:
    """onnxruntime's outputs; for ``layout=1``, which it does not run, those of the same
    node with ``layout=0`` on the inputs and outputs transposed to and from batch first."""
    if not attributes.get("layout"):
        return ort_run(_model(op, attributes, given)[0], inputs)
    sequence_first = _model(op, {**attributes, "layout": 0}, given)[0]
    swapped = {k: v.swapaxes(0, 1) if k in ("X", "h", "c") else v for k, v in inputs.items()}
    out = ort_run(sequence_first, swapped)
    return {k: v.transpose(2, 0, 1, 3) if k == "Y" else v.swapaxes(0, 1) for k, v in out.items()}


REFUSED = {
    # what the lowering does not take: (attributes, optional inputs, the message)
    "clip": ({"clip": 1.0}, (), "attribute clip"),
    "input_forget": ({"input_forget": 1}, (), "input_forget=1"),
    "alpha": (
        {"activations": ["LeakyRelu", "Tanh", "Tanh"], "activation_alpha": [0.1]},
        (),
        "activation_alpha",
    ),
    "activation": ({"activations": ["HardSigmoid", "Tanh", "Tanh"]}, (), "'hardsigmoid'"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_the_lowering_does_not_take_is_refused_naming_the_node(backend, name):
    pytest.importorskip(backend)
    attributes, given, message = REFUSED[name]
    model, inputs = _model("LSTM", attributes, given)
    with pytest.raises(CompileError) as info:
        mdf_loops.run(mdf_loops.onnx_to_mdf(model), inputs, backend=backend)
    text = str(info.value)
    assert "(LSTM)" in text and message in text and "backend='onnxruntime'" in text, text


@pytest.mark.parametrize("backend", BACKENDS)
def test_sequence_lens_is_refused_naming_the_input(backend):
    pytest.importorskip(backend)
    model, inputs = _model("GRU", {}, ("B",))
    node = model.graph.node[0]
    node.input.extend(["lengths"])
    model.graph.input.append(helper.make_tensor_value_info("lengths", TensorProto.INT32, [BATCH]))
    inputs["lengths"] = np.full(BATCH, SEQ, np.int32)
    with pytest.raises(CompileError, match=r"\(GRU\).*sequence_lens"):
        mdf_loops.run(mdf_loops.onnx_to_mdf(model), inputs, backend=backend)


@pytest.mark.parametrize("name", ["gru_linear_before_reset", "lstm_peepholes"])
def test_jax_gradients_equal_central_differences_of_onnx_reference(name):
    jnp = pytest.importorskip("jax.numpy")
    op, attributes, given = CASES[name]
    model, inputs = _model(op, attributes, given)
    for vi in list(model.graph.input) + list(model.graph.output):
        vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    inputs = {k: v.astype(np.float64) for k, v in inputs.items()}
    weights = np.linspace(-1, 1, SEQ * BATCH * HIDDEN).reshape(SEQ, 1, BATCH, HIDDEN)

    reference = ReferenceEvaluator(model)  # numpy, in float64 (onnxruntime's GRU has none)

    def loss(feeds):
        return float(np.sum(weights * reference.run(["Y"], feeds)[0]))

    _, grads = mdf_loops.value_and_grad(
        mdf_loops.onnx_to_mdf(model),
        lambda out: jnp.sum(weights * out["Y"]),
        ["X", "R", "B"],
        inputs,
    )
    eps = 1e-6
    for name_in in ("X", "R", "B"):
        flat = inputs[name_in].reshape(-1)
        for k in range(0, flat.size, 7):
            up, down = flat.copy(), flat.copy()
            up[k] += eps
            down[k] -= eps
            shape = inputs[name_in].shape
            numeric = (
                loss({**inputs, name_in: up.reshape(shape)})
                - loss({**inputs, name_in: down.reshape(shape)})
            ) / (2 * eps)
            np.testing.assert_allclose(grads[name_in].reshape(-1)[k], numeric, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", ["rnn", "rnn_bidirectional_batch_first", "gru_linear_before_reset",
                                  "lstm", "lstm_reverse_batch_first"])
def test_torch_s_own_kernels_equal_the_loop_of_onnx_semantics(name):
    """Where torch's fused kernel takes a node it must give the generic loop's values."""
    torch = pytest.importorskip("torch")
    from mdf_loops.backends.recurrent import Recurrence, lower
    from mdf_loops.backends.torch import registry
    from mdf_loops.backends.torch.recurrent import OPS, _fused

    model, inputs = _model(*CASES[name])
    node = model.graph.node[0]
    call = registry.NodeCall(node, "node 'cell'", 14)
    rec = Recurrence.of(call, OPS)
    values = {k: torch.tensor(v) for k, v in inputs.items()}
    args = [values.get(k) for k in ("X", "W", "R", "B", "h", "c", "P")]
    fused = _fused(rec, *args)
    if CASES[name][1].get("direction") == "reverse":
        assert fused is None  # torch has no reverse-only kernel: the loop runs it
        return
    assert fused is not None
    for got, want in zip(fused, lower(OPS, rec, *args), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

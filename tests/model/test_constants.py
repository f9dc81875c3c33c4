"""Imported ONNX constants named as parameters (mdf_loops/model/constants.py): by their
ONNX name in grad(wrt=...), run_batch(params=...) and sweep, at the top level and in a
loop body. Oracles: a numpy Elman RNN written here and its finite differences."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from onnx import numpy_helper

import mdf_loops
from mdf_loops.errors import ModelError
from mdf_loops.model.constants import constant_names, plain_constants
from mdf_loops.workloads import elman_rnn

RNN = elman_rnn(steps=6, inputs=3, hidden=4, seed=2)
WEIGHTS = {t.name: numpy_helper.to_array(t) for t in RNN.model.graph.initializer}


def rnn_numpy(X, h0, Wx, Wh, b):
    h, H = np.asarray(h0, np.float64), []
    for x in X:
        h = np.tanh(x @ Wx + h @ Wh + b)
        H.append(h)
    return h, np.array(H)


def _objective_weights() -> np.ndarray:
    return np.random.default_rng(5).normal(size=(6, 4))


def _loss(**changed) -> float:
    weights = {**WEIGHTS, **changed}
    _, H = rnn_numpy(RNN.inputs["X"], RNN.inputs["h0"], weights["Wx"], weights["Wh"], weights["b"])
    return float((H * _objective_weights()).sum())


def _finite_differences(name: str, h: float = 1e-6) -> np.ndarray:
    base = WEIGHTS[name].astype(np.float64)
    out = np.zeros_like(base)
    for k in np.ndindex(base.shape):
        step = np.zeros_like(base)
        step[k] = h
        out[k] = (_loss(**{name: base + step}) - _loss(**{name: base - step})) / (2 * h)
    return out


def _body_constant_model():
    """The RNN with ``b`` an initializer of the Scan body instead of the main graph."""
    model = copy.deepcopy(RNN.model)
    b = next(t for t in model.graph.initializer if t.name == "b")
    model.graph.node[0].attribute[0].g.initializer.append(b)
    model.graph.initializer.remove(b)
    return model


@pytest.mark.parametrize("where", ["top level", "loop body"])
def test_grad_names_imported_weights_by_their_onnx_names(where):
    pytest.importorskip("jax")
    onnx_model = RNN.model if where == "top level" else _body_constant_model()
    model = mdf_loops.onnx_to_mdf(onnx_model)
    weights = _objective_weights()
    inputs = {k: v.astype(np.float64) for k, v in RNN.inputs.items()}
    grads = mdf_loops.grad(model, lambda out: (out["H"] * weights).sum(), ["Wx", "b"], inputs)
    assert grads["Wx"].shape == (3, 4) and grads["b"].shape == (4,)
    for name in ("Wx", "b"):  # float32 weights: the model computes in float32
        np.testing.assert_allclose(grads[name], _finite_differences(name), rtol=2e-3, atol=2e-4)


def test_a_constant_is_also_named_by_its_node():
    pytest.importorskip("jax")
    model = mdf_loops.onnx_to_mdf(RNN.model)
    weights = _objective_weights()
    by_name = mdf_loops.grad(model, lambda out: (out["H"] * weights).sum(), "b", RNN.inputs)
    by_node = mdf_loops.grad(model, lambda out: (out["H"] * weights).sum(), "b_constant.value",
                             RNN.inputs)
    np.testing.assert_allclose(by_node["b_constant.value"], by_name["b"])


@pytest.mark.parametrize("backend", ["jax", "onnxruntime"])
def test_run_batch_over_imported_weights(backend):
    if backend == "jax":
        pytest.importorskip("jax")
    model = mdf_loops.onnx_to_mdf(RNN.model)
    rows = np.random.default_rng(3).normal(size=(3, 4)).astype(np.float32)
    out = mdf_loops.run_batch(model, RNN.inputs, params={"b": rows}, backend=backend)
    for k in range(3):
        h_last, _ = rnn_numpy(RNN.inputs["X"], RNN.inputs["h0"], WEIGHTS["Wx"], WEIGHTS["Wh"], rows[k])
        np.testing.assert_allclose(out["h_last"][k], h_last, rtol=1e-5, atol=1e-6)


def test_sweep_over_an_imported_weight():
    pytest.importorskip("xarray")
    distributed = pytest.importorskip("dask.distributed")
    model = mdf_loops.onnx_to_mdf(RNN.model)
    rows = np.random.default_rng(4).normal(size=(2, 4)).astype(np.float32)
    with distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        result = mdf_loops.sweep(model, samples=[{"b": r} for r in rows], inputs=RNN.inputs,
                                 outputs=["h_last"], client=client, backend="onnxruntime")
    for k in range(2):
        h_last, _ = rnn_numpy(RNN.inputs["X"], RNN.inputs["h0"], WEIGHTS["Wx"], WEIGHTS["Wh"], rows[k])
        np.testing.assert_allclose(np.asarray(result["h_last"][k]), h_last, rtol=1e-5, atol=1e-6)


def test_the_given_model_is_left_as_it_was():
    model = mdf_loops.onnx_to_mdf(_body_constant_model())
    before = model.to_json()
    plain, addresses = plain_constants(model, model.graphs[0].id, ["Wx", "b", "nothing"])
    assert model.to_json() == before
    assert plain is not model and addresses == {"Wx": "Wx_constant.Wx",
                                                "b": "b_constant.b"}
    assert constant_names(model.graphs[0]) == ["Wh", "Wx", "b"]
    assert plain_constants(model, model.graphs[0].id, ["nothing"]) == (model, {})


def test_an_unknown_name_lists_the_imported_constants():
    pytest.importorskip("jax")
    model = mdf_loops.onnx_to_mdf(RNN.model)
    with pytest.raises(ModelError, match=r"imported ONNX constants: \['Wh', 'Wx', 'b'\]"):
        mdf_loops.grad(model, "h_last", ["Wy"], RNN.inputs)

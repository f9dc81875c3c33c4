"""mdf_loops/backends/scheduler/onnx_functions.py: in a run, ``onnx::`` functions compute at
their inputs' element type; stock modeci-mdf rounds float64 through float32.

ModECI/MDF's ``examples/TensorFlow/Keras/IRIS/keras_to_MDF.json`` ends in a float64
``onnx::Softmax``: stock casts each float64 input of an ``onnx::`` function to float32
(``modeci_mdf.functions.onnx.convert_type``) and the float32 result back to float64,
so its answer is the float32 softmax, about 1e-7 relative from the float64 one
``mdf_loops.run`` gives on every backend (docs/api.md, "The stock engine"). The
engine outside ``run`` keeps stock's bytes. Oracles: numpy in float64 and float32, and
stock in a subprocess.
"""

from __future__ import annotations

import numpy as np
import pytest
from modeci_mdf.mdf import Graph, Model, Node, OutputPort, Parameter
from stock_files import stock_outputs

import mdf_loops
from mdf_loops.model import stock_evaluate

# logits whose float32 softmax differs from the float64 one in the last float32 bits
LOGITS = np.array(
    [[0.1234567890123, -1.98765432109876, 2.5555555555555], [3.3333333333333, 0.7, -0.1111111]]
)


def _softmax_model() -> Model:
    """keras_to_MDF.json's last layer: a float64 value through ``onnx::Softmax``."""
    node = Node(
        id="out_layer",
        parameters=[
            Parameter(id="linear", value=LOGITS.tolist()),
            Parameter(id="softmax", function="onnx::Softmax", args={"input": "linear"}),
        ],
        output_ports=[OutputPort(id="out", value="softmax")],
    )
    return Model(id="softmax", graphs=[Graph(id="g", nodes=[node])])


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.fixture(scope="module")
def stock(tmp_path_factory):
    outputs = stock_outputs({"softmax": _softmax_model()}, tmp_path_factory.mktemp("softmax"))
    assert isinstance(outputs["softmax"], dict), outputs["softmax"]
    return outputs["softmax"]["out_layer.out"]


def test_stock_rounds_a_float64_onnx_function_through_float32(stock):
    as_float32 = _softmax(LOGITS.astype(np.float32)).astype(np.float64)
    assert stock.dtype == np.float64
    np.testing.assert_allclose(stock, as_float32, rtol=1e-6)  # float32 arithmetic
    assert not np.allclose(stock, _softmax(LOGITS), rtol=1e-9, atol=0)


@pytest.mark.parametrize("backend", ["scheduler", "onnxruntime", "torch", "jax"])
def test_run_computes_at_the_inputs_element_type(stock, backend):
    if backend in ("torch", "jax"):
        pytest.importorskip(backend)
    ours = np.asarray(mdf_loops.run(_softmax_model(), backend=backend)["out_layer.out"])
    assert ours.dtype == np.float64
    np.testing.assert_allclose(ours, _softmax(LOGITS), rtol=1e-13, atol=0)
    if backend == "scheduler":  # onnx.reference's kernel: numpy's float64 arithmetic
        np.testing.assert_array_equal(ours, _softmax(LOGITS))
    np.testing.assert_allclose(ours, stock, rtol=1e-6)  # and stock's within float32 rounding


def test_the_engine_outside_a_run_keeps_stock_bytes(stock):
    ours = stock_evaluate(_softmax_model().graphs[0], {})["out_layer.out"]
    np.testing.assert_array_equal(ours, stock)
    assert np.asarray(ours).dtype == stock.dtype

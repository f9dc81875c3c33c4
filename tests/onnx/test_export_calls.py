"""ONNX export of ``onnx::<Op>`` calls (mdf_loops/onnx/export_calls.py): inputs that ONNX
reads as 1-D lists given as numbers, and attributes given as the call's args, as
PsyNeuLink writes ``onnx::ReduceSum`` (``{"data": ..., "axes": 0}``), checked against
numpy in the test and run in onnxruntime.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from modeci_mdf.mdf import Graph, InputPort, Model, Node, OutputPort, Parameter

import mdf_loops
from conftest import ort_run
from mdf_loops.errors import ModelError
from mdf_loops.onnx.export import mdf_to_onnx

X = np.arange(24.0).reshape(2, 3, 4) / 7


def _reduce_sum(axes, opset: int | None = None, ports=("x",)) -> Model:
    node = Node(id="n")
    node.input_ports.extend(InputPort(id=p) for p in ports)
    node.parameters.append(
        Parameter(id="total", function="onnx::ReduceSum", args={"data": "x", "axes": axes})
    )
    node.output_ports.append(OutputPort(id="y", value="total"))
    model = Model(id="m", graphs=[Graph(id="g", nodes=[node])])
    if opset is not None:
        model.onnx_opset_version = opset
    return model


def _export_and_run(model: Model, inputs: dict, opset: int | None = None) -> np.ndarray:
    exported = mdf_to_onnx(model, example_inputs=inputs, opset=opset)
    onnx.checker.check_model(exported, full_check=True)
    return ort_run(exported, inputs)["n.y"]


@pytest.mark.parametrize("opset", [11, 13, 21])  # axes: an attribute before 13, an input from 13
@pytest.mark.parametrize("axes", [0, 1, -1, "1", "[0, 2]"])
def test_reduce_sum_with_number_axes_exports_as_a_list(axes, opset):
    expected = np.sum(X, axis=tuple(np.atleast_1d(eval(str(axes)))), keepdims=True)
    out = _export_and_run(_reduce_sum(axes), {"x": X}, opset)
    np.testing.assert_allclose(out, expected, rtol=1e-15)
    ours = mdf_loops.run(_reduce_sum(axes, opset), {"x": X}, backend="onnxruntime")["n.y"]
    np.testing.assert_allclose(ours, expected, rtol=1e-15)


def test_an_attribute_arg_not_known_at_export_time_is_refused_by_name():
    """Before opset 13 ``axes`` is an attribute: it cannot be read from an input port."""
    inputs = {"x": X, "k": np.array(1, dtype=np.int64)}
    with pytest.raises(ModelError, match="node 'n': attribute 'axes' must be known"):
        mdf_to_onnx(_reduce_sum("k", ports=("x", "k")), example_inputs=inputs, opset=11)


@pytest.mark.parametrize("backend", ["scheduler", "onnxruntime", "torch", "jax"])
def test_a_variadic_list_of_quoted_port_names_binds_the_ports(backend):
    """modeci-mdf's pytorch_to_mdf writes a Concat's inputs as "['_59', '_61']" (quoted
    names), which its engine binds to the ports: every backend reads it so."""
    pytest.importorskip(backend) if backend in ("torch", "jax") else None
    node = Node(id="Concat_62")
    node.input_ports.extend(InputPort(id=p, shape=(2, 3), type="float64") for p in ("_59", "_61"))
    node.parameters.append(Parameter(id="axis", value=1))
    node.parameters.append(
        Parameter(id="onnx_Concat_1", function="onnx::Concat", args={"inputs": "['_59', '_61']"})
    )
    node.output_ports.append(OutputPort(id="_62", value="onnx_Concat_1"))
    model = Model(id="m", graphs=[Graph(id="g", nodes=[node])])
    a, b = X[0, :2, :3], X[1, :2, :3]
    out = mdf_loops.run(model, {"_59": a, "_61": b}, backend=backend)
    np.testing.assert_allclose(out["Concat_62._62"], np.concatenate([a, b], axis=1))

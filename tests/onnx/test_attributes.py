"""mdf_loops/onnx/attributes.py: the bare text of an ONNX operator's string attribute is data.

modeci-mdf's ``pytorch_to_mdf`` writes ``onnx::Pad``'s ``mode`` as a parameter
``"mode": "constant"`` beside the call (ModECI/MDF's ``examples/PyTorch/inception.json``),
where mdf-loops' importer writes ``["constant"]``. Oracles: stock modeci-mdf in a
subprocess for what stock runs ("constant"; its engine reads other text as a name and
fails), ``numpy.pad`` for the other modes ONNX defines.
"""

from __future__ import annotations

import numpy as np
import pytest
from modeci_mdf.execution_engine import EvaluableGraph
from modeci_mdf.mdf import Graph, InputPort, Model, Node, OutputPort, Parameter
from stock_files import stock_outputs

import mdf_loops
from mdf_loops.errors import MdfLoopsError, ModelError
from mdf_loops.onnx.attributes import is_attribute_text, string_attributes

X = np.array([[0.5, -1.25, 2.0], [3.0, 0.25, -4.5]])  # exact in float32, as stock computes
PADS = [0, 1, 0, 2]  # one before and two after on the last axis
BACKENDS = ["scheduler", "onnxruntime", "torch"]


def _pad_model(mode: str, where: str, function: str = "onnx::Pad") -> Model:
    """A Pad node as ``pytorch_to_mdf`` writes it: ``mode`` a parameter beside the call
    (``where="parameter"``), or an argument of the call (``where="argument"``)."""
    args = {"data": "x", "pads": "pads"}
    parameters = [Parameter(id="pads", value=PADS)]
    if where == "parameter":
        parameters.append(Parameter(id="mode", value=mode))
    else:
        args["mode"] = mode
    parameters.append(Parameter(id="padded", function=function, args=args))
    node = Node(
        id="pad",
        input_ports=[InputPort(id="x", shape=X.shape, type="float64")],
        parameters=parameters,
        output_ports=[OutputPort(id="out", value="padded")],
    )
    return Model(id=f"pad_{mode}_{where}", graphs=[Graph(id="g", nodes=[node])])


def _run(model: Model, backend: str) -> np.ndarray:
    if backend == "torch":
        pytest.importorskip("torch")
    return np.asarray(mdf_loops.run(model, {"x": X}, backend=backend)["pad.out"])


@pytest.fixture(scope="module")
def stock(tmp_path_factory):
    models = {
        f"{mode}_{where}": _pad_model(mode, where)
        for mode in ("constant", "reflect")
        for where in ("parameter", "argument")
    }
    for model in models.values():  # stock reads x from the port's default zeros otherwise
        model.graphs[0].nodes[0].parameters.insert(0, Parameter(id="x", value=X.tolist()))
        model.graphs[0].nodes[0].input_ports.clear()
    return stock_outputs(models, tmp_path_factory.mktemp("pad"))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("where", ["parameter", "argument"])
def test_bare_constant_mode_runs_as_stock_runs_it(stock, where, backend):
    expected = stock[f"constant_{where}"]
    assert isinstance(expected, dict), expected
    np.testing.assert_array_equal(expected["pad.out"], np.pad(X, [(0, 0), (1, 2)]))
    model = _pad_model("constant", where)
    assert mdf_loops.validate(model) == []
    ours = _run(model, backend)
    assert ours.dtype == expected["pad.out"].dtype
    np.testing.assert_array_equal(ours, expected["pad.out"])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("where", ["parameter", "argument"])
@pytest.mark.parametrize("mode", ["reflect", "edge"])
def test_other_modes_onnx_defines_run_on_every_backend(mode, where, backend):
    model = _pad_model(mode, where)
    assert mdf_loops.validate(model) == []
    np.testing.assert_array_equal(_run(model, backend), np.pad(X, [(0, 0), (1, 2)], mode=mode))
    text = model.graphs[0].nodes[0].parameters[1]  # the user's model keeps its text
    assert (text.value if where == "parameter" else text.args["mode"]) == mode


@pytest.mark.parametrize("where", ["parameter", "argument"])
def test_the_engine_outside_a_run_keeps_stock_behaviour(stock, where):
    # stock's engine reads 'reflect' as a name it cannot find; so does it after the import
    assert "vars are missing" in stock[f"reflect_{where}"]
    with pytest.raises(ValueError, match="vars are missing"):
        EvaluableGraph(_pad_model("reflect", where).graphs[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_mode_onnx_does_not_define_is_an_error_naming_the_node(backend):
    with pytest.raises(MdfLoopsError, match="pad") as raised:
        _run(_pad_model("bogus", "parameter"), backend)
    assert "bogus" in str(raised.value) or backend == "onnxruntime"


def test_bare_text_elsewhere_stays_an_expression():
    # 'mode' is no attribute of Relu, and 'pads' is an input of Pad, not a string attribute
    for model, field in [
        (_pad_model("constant", "parameter", function="onnx::Relu"), "mode"),
        (_pad_model("constant", "parameter"), "pads"),
    ]:
        node = model.graphs[0].nodes[0]
        if field == "pads":
            node.parameters[0].value = "reflect"
        (problem,) = mdf_loops.validate(model)
        assert problem.path == f"graphs.g.nodes.pad.parameters.{field}.value"
        assert "is not a port, parameter or function of this node" in problem.message
        with pytest.raises(ModelError, match="not a port, parameter or function"):
            mdf_loops.run(model, {"x": X}, backend="scheduler")


def test_text_naming_something_of_the_node_is_read_not_taken_as_text():
    attributes = string_attributes(["onnx::Pad", "linear", None, "onnx::Conv"])
    assert {"mode", "auto_pad"} <= attributes and "pads" not in attributes
    assert is_attribute_text("mode", "reflect", attributes, {"x", "pads"})
    assert not is_attribute_text("mode", "x", attributes, {"x", "pads"})  # a name it reads
    assert not is_attribute_text("mode", "x + 1", attributes, set())  # an expression
    assert not is_attribute_text("mode", "None", attributes, set())  # a keyword
    assert not is_attribute_text("pads", "reflect", attributes, set())

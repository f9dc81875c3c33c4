"""mdf_loops/safety/checks.py: a parameter named like a Python builtin is a value of the node.

modeci-mdf's ``pytorch_to_mdf`` names a layer's input parameter ``input``
(ModECI/MDF's ``examples/PyTorch/mlp_pure_mdf.json``); a model that only reads it
is accepted, with stock modeci-mdf in a subprocess as the oracle, while calling
such a name, and reading it where modeci-mdf would meet the builtin, stay refused.
"""

from __future__ import annotations

import numpy as np
import pytest
from modeci_mdf.mdf import Graph, Model, Node, OutputPort, Parameter
from stock_files import stock_outputs

import mdf_loops
from mdf_loops.errors import UnsafeExpressionError
from mdf_loops.safety.checks import find_unsafe

INPUT = [[0.5, -1.0, 2.0]]
WEIGHT = [[0.25, -0.5], [1.5, 0.125], [-2.0, 0.75]]


def _model(*parameters: Parameter, outputs: dict[str, str]) -> Model:
    node = Node(
        id="layer",
        parameters=list(parameters),
        output_ports=[OutputPort(id=port, value=value) for port, value in outputs.items()],
    )
    return Model(id="named_like_builtins", graphs=[Graph(id="g", nodes=[node])])


def _reads_builtin_names() -> Model:
    """mlp_pure_mdf.json's layer: ``input`` read by a standard function's argument, and by
    an expression of a parameter itself named like a builtin (``vars``)."""
    return _model(
        Parameter(id="input", value=INPUT),
        Parameter(id="weight", value=WEIGHT),
        Parameter(id="mul", function="MatMul", args={"A": "input", "B": "weight"}),
        Parameter(id="vars", value="input * 2 + 1"),
        outputs={"out": "mul", "doubled": "vars", "same": "input"},
    )


@pytest.fixture(scope="module")
def stock(tmp_path_factory):
    return stock_outputs({"reads": _reads_builtin_names()}, tmp_path_factory.mktemp("builtins"))


@pytest.mark.parametrize("backend", ["scheduler", "onnxruntime"])
def test_a_parameter_named_like_a_builtin_is_read_as_its_value(stock, backend):
    expected = stock["reads"]
    assert isinstance(expected, dict), expected  # stock runs it
    model = _reads_builtin_names()
    assert mdf_loops.validate(model) == []
    ours = mdf_loops.run(model, backend=backend)  # not trusted
    x = np.array(INPUT)
    np.testing.assert_allclose(expected["layer.out"], x @ np.array(WEIGHT), rtol=1e-15)
    for port in ("out", "doubled", "same"):
        value = np.asarray(ours[f"layer.{port}"])
        assert value.dtype == expected[f"layer.{port}"].dtype
        if backend == "scheduler":  # the engine's own arithmetic: stock's bytes
            np.testing.assert_array_equal(value, expected[f"layer.{port}"])
        else:
            np.testing.assert_allclose(value, expected[f"layer.{port}"], rtol=1e-12)


@pytest.mark.parametrize(
    "value, refused",
    [
        ("input()", "`input` is refused: the Python builtin 'input' is not allowed"),
        ("input(weight)", "`input` is refused: the Python builtin 'input' is not allowed"),
        ("__import__", "`__import__` is refused: a dunder name"),
        ("open(weight)", "`open` is refused: the Python builtin 'open' is not allowed"),
    ],
)
def test_calling_a_builtin_name_stays_refused_though_a_parameter_has_it(value, refused):
    model = _model(
        Parameter(id="input", value=INPUT),
        Parameter(id="__import__", value=1),
        Parameter(id="open", value=1),
        Parameter(id="weight", value=WEIGHT),
        Parameter(id="bad", value=value),
        outputs={"out": "bad"},
    )
    (problem,) = find_unsafe(model)
    assert problem.path == "graphs.g.nodes.layer.parameters.bad.value"
    assert problem.message.startswith(refused), problem.message
    with pytest.raises(UnsafeExpressionError, match="nothing was evaluated"):
        mdf_loops.run(model, backend="scheduler")


def test_a_builtin_name_read_before_its_parameter_is_evaluated_is_refused_with_advice():
    # modeci-mdf orders parameters counting builtins as known: 'scaled' would meet the
    # builtin input (trusted: a TypeError; never the node's value)
    model = _model(
        Parameter(id="scaled", value="input * 2"),
        Parameter(id="input", value=INPUT),
        outputs={"out": "scaled"},
    )
    (problem,) = find_unsafe(model)
    assert problem.path == "graphs.g.nodes.layer.parameters.scaled.value"
    assert "read before the node's parameter 'input' is evaluated" in problem.message
    assert "list parameter 'input' before the one that reads it" in problem.message
    model.graphs[0].nodes[0].parameters.reverse()  # as the advice says
    assert find_unsafe(model) == []
    np.testing.assert_array_equal(mdf_loops.run(model)["layer.out"], np.array(INPUT) * 2)

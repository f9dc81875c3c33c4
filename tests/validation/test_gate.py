"""mdf_loops.validation.gate: run, gradients and torch modules refuse the same models,
with the same message, and a model edited after it passed is checked again.

The oracle for "refused" is each entry point itself on a model with one mistake (an
unknown function, an expression outside the allow-list); for a model that passes, the
value worked out in the test.
"""

from __future__ import annotations

import pytest
from modeci_mdf.mdf import Graph, Model, Node, OutputPort, Parameter

import mdf_loops
from mdf_loops.errors import ModelError, UnsafeExpressionError
from mdf_loops.model.compat import INPUT_DEFAULTS
from mdf_loops.model.interface import select_graph


def _model(*parameters: Parameter) -> Model:
    node = Node(id="n", parameters=list(parameters), output_ports=[OutputPort(id="o", value="p")])
    return Model(id="m", graphs=[Graph(id="g", nodes=[node])])


def _unknown_function() -> Model:
    args = {"variable0": "w", "slope": 2, "intercept": 0}
    return _model(Parameter(id="w", value=2.0), Parameter(id="p", function="linaer", args=args))


def _doubling() -> Model:
    return _model(Parameter(id="w", value=3.0), Parameter(id="p", value="w * 2"))


def _entry_points():
    yield "run", lambda model: mdf_loops.run(model, backend="scheduler")
    try:
        import jax  # noqa: F401
    except ImportError:
        pass
    else:
        yield "grad", lambda model: mdf_loops.grad(model, "n.o", "n.w")
    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    else:
        yield "to_pytorch", lambda model: mdf_loops.to_pytorch(model)


def test_every_entry_point_refuses_an_unknown_function_with_one_message():
    messages = {}
    for name, call in _entry_points():
        with pytest.raises(ModelError) as caught:
            call(_unknown_function())
        messages[name] = str(caught.value)
    assert "unknown function 'linaer'" in messages["run"]
    assert len(set(messages.values())) == 1, messages


def test_a_model_edited_after_it_passed_is_checked_again():
    model = _doubling()
    assert float(mdf_loops.run(model, backend="scheduler")["n.o"]) == 6.0
    model.graphs[0].nodes[0].parameters[1].value = "__import__('os').getcwd()"
    with pytest.raises(UnsafeExpressionError, match="__import__"):
        mdf_loops.run(model, backend="scheduler")
    model.graphs[0].nodes[0].parameters[1].value = "w * 5"
    assert float(mdf_loops.run(model, backend="scheduler")["n.o"]) == 15.0


def test_select_graph_names_the_graphs_there_are():
    model = _doubling()
    assert select_graph(model) is model.graphs[0]
    assert select_graph(model, "g") is model.graphs[0]
    with pytest.raises(ModelError, match=r"model 'm' has no graph 'other'; its graphs: 'g'"):
        select_graph(model, "other")
    with pytest.raises(ModelError, match="model 'empty' has no graph"):
        select_graph(Model(id="empty"))
    entry_points = [
        lambda: mdf_loops.run(model, graph="other"),
        lambda: mdf_loops.mdf_to_onnx(model, graph="other"),
    ]
    if INPUT_DEFAULTS:  # time loops need modeci-mdf >= 0.4.14 (older ones are refused first)
        entry_points.append(lambda: mdf_loops.to_time_loop(model, graph="other", dt=0.1, steps=2))
    for call in entry_points:
        with pytest.raises(ModelError, match=r"has no graph 'other'; its graphs: 'g'"):
            call()

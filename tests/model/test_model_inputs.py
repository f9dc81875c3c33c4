"""mdf_loops/model/inputs.py: what an input nobody gives holds, against stock modeci-mdf.

An input port with no ``default_value`` holds zeros of its ``shape`` in modeci-mdf's
engine (``numpy.full(shape, 0)``, ``0.0`` for a float ``type``); ModECI/MDF's own
examples (FN, the condition examples, the files its ONNX importer writes) rely on it.
A port whose ``reduce`` adds or multiplies and that no edge feeds reads
``numpy.full(shape, 0.0)`` there (its NeuroML and PyNN examples).
The oracle is stock's ``EvaluableGraph`` in a subprocess without ``import mdf_loops``
(tests/stock_files.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from modeci_mdf.mdf import Edge, Graph, InputPort, Model, Node, OutputPort, Parameter
from conftest import needs_input_port_fields
from stock_files import stock_outputs

import mdf_loops
from mdf_loops.errors import InputError
from mdf_loops.model.compat import INPUT_DEFAULTS
from mdf_loops.model.inputs import check_inputs


def _node(node_id: str, port: InputPort, value: str) -> Node:
    return Node(
        id=node_id,
        input_ports=[port],
        parameters=[Parameter(id="k", value=3), Parameter(id="y", value=value)],
        output_ports=[OutputPort(id="out", value="y")],
    )


def _models() -> dict[str, Model]:
    float_port = InputPort(id="x", shape=(2,), type="float")
    int_port = InputPort(id="n", shape=(3,))
    scalar_port = InputPort(id="s")
    return {
        "float_zeros": Model(
            id="float_zeros", graphs=[Graph(id="g", nodes=[_node("a", float_port, "x * k + 1")])]
        ),
        "int_zeros": Model(
            id="int_zeros", graphs=[Graph(id="g", nodes=[_node("b", int_port, "n + k")])]
        ),
        "scalar_zero": Model(
            id="scalar_zero", graphs=[Graph(id="g", nodes=[_node("c", scalar_port, "s - k")])]
        ),
    }


@pytest.fixture(scope="module")
def stock_and_files(tmp_path_factory):
    """Stock's outputs for every model of this file (one subprocess: about 3 s), and the
    files it ran."""
    folder = tmp_path_factory.mktemp("engine_zeros")
    models = {**_models(), **(_reducing_models() if INPUT_DEFAULTS else {})}
    return stock_outputs(models, folder), {name: folder / f"{name}.json" for name in models}


@pytest.mark.parametrize("backend", ["auto", "scheduler", "onnxruntime"])
@pytest.mark.parametrize("name", ["float_zeros", "int_zeros", "scalar_zero"])
def test_a_shaped_input_without_default_holds_stock_zeros(stock_and_files, name, backend):
    stock, paths = stock_and_files
    expected = stock[name]
    assert not isinstance(expected, str), expected
    assert mdf_loops.validate(paths[name]) == []
    ours = mdf_loops.run(paths[name], backend=backend)
    assert {key: _exact(value) for key, value in ours.items()} == {
        key: _exact(value) for key, value in expected.items()
    }


def _exact(value) -> tuple[str, tuple, bytes]:
    """Dtype, shape and bytes of a value (``run`` returns a 0-d array for stock's scalar)."""
    array = np.asarray(value)
    return array.dtype.str, array.shape, array.tobytes()


def test_the_zeros_are_what_the_numbers_say(caplog):
    with caplog.at_level("WARNING", logger="mdf_loops"):
        ours = mdf_loops.run(_models()["float_zeros"])
    assert "inputs ['x'] not given and without a default_value read zeros" in caplog.text
    assert ours["a.out"].tolist() == [1.0, 1.0] and ours["a.out"].dtype == np.float64
    given = mdf_loops.run(_models()["float_zeros"], {"x": [1.0, 2.0]})
    assert given["a.out"].tolist() == [4.0, 7.0]


def test_a_scalar_input_without_default_holds_a_stock_zero():
    port = InputPort(id="x")
    model = Model(id="m", graphs=[Graph(id="g", nodes=[_node("a", port, "x * k + 1")])])
    assert mdf_loops.run(model)["a.out"] == 1
    assert mdf_loops.run(model, {"x": 2.0})["a.out"] == 7.0


def _reducing_models() -> dict[str, Model]:
    """Input ports that add or multiply, and that no edge feeds (as in the NeuroML and PyNN
    examples of ModECI/MDF: an event port no projection reaches)."""
    add = InputPort(id="x", shape=(3,), reduce="add")
    multiply = InputPort(id="m", shape=(2,), type="float", reduce="multiply")
    fed = InputPort(id="syn", reduce="add")
    unfed = InputPort(id="spike_in", shape=(2,), reduce="add")
    pre = Node(
        id="pre",
        parameters=[Parameter(id="w", value=2.5)],
        output_ports=[OutputPort(id="out", value="w")],
    )
    post = Node(
        id="post",
        input_ports=[fed, unfed],
        parameters=[Parameter(id="v", value="syn + spike_in")],
        output_ports=[OutputPort(id="out", value="v")],
    )
    edge = Edge(id="e", sender="pre", sender_port="out", receiver="post", receiver_port="syn")
    return {
        "add_zeros": Model(
            id="add_zeros", graphs=[Graph(id="g", nodes=[_node("a", add, "x * k + 1")])]
        ),
        "multiply_zeros": Model(
            id="multiply_zeros", graphs=[Graph(id="g", nodes=[_node("b", multiply, "m + k")])]
        ),
        "unfed_event_port": Model(
            id="unfed_event_port", graphs=[Graph(id="g", nodes=[pre, post], edges=[edge])]
        ),
    }


@needs_input_port_fields  # InputPort.reduce is a field from modeci-mdf 0.4.14
@pytest.mark.parametrize("backend", ["auto", "scheduler", "onnxruntime", "jax", "torch"])
@pytest.mark.parametrize("name", ["add_zeros", "multiply_zeros", "unfed_event_port"])
def test_a_reducing_input_no_edge_feeds_reads_stock_float_zeros(stock_and_files, name, backend):
    if backend in ("jax", "torch"):
        pytest.importorskip(backend)
    stock, paths = stock_and_files
    expected = stock[name]
    assert not isinstance(expected, str), expected
    assert mdf_loops.validate(paths[name]) == []
    ours = mdf_loops.run(paths[name], backend=backend)  # the outputs no edge leaves
    assert ours and set(ours) <= set(expected)
    assert {key: _exact(value) for key, value in ours.items()} == {
        key: _exact(expected[key]) for key in ours
    }


@needs_input_port_fields
def test_a_reducing_input_reads_float_zeros_and_takes_what_is_given():
    models = _reducing_models()
    ours = mdf_loops.run(models["add_zeros"])["a.out"]
    assert ours.dtype == np.float64 and ours.tolist() == [1.0, 1.0, 1.0]  # 0.0 * 3 + 1
    multiplied = mdf_loops.run(models["multiply_zeros"])["b.out"]
    assert multiplied.tolist() == [3.0, 3.0]  # zeros, not ones: 0.0 + 3
    given = mdf_loops.run(models["unfed_event_port"], {"spike_in": np.array([1.0, -1.0])})
    assert given["post.out"].tolist() == [3.5, 1.5]


def test_the_warning_of_inputs_read_as_zeros_comes_once_per_model(caplog):
    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if "read zeros" in r.getMessage()]

    model = _models()["float_zeros"]
    with caplog.at_level("WARNING", logger="mdf_loops"):
        for backend in ("scheduler", "scheduler", "auto", "onnxruntime"):
            mdf_loops.run(model, backend=backend)
        assert len(warnings()) == 1
        mdf_loops.run(_models()["float_zeros"], backend="scheduler")  # another model object
        assert len(warnings()) == 2
        model.graphs[0].nodes[0].parameters[0].value = 4  # an edit: k = 4
        assert mdf_loops.run(model, backend="scheduler")["a.out"].tolist() == [1.0, 1.0]
        assert len(warnings()) == 3
        graph = model.graphs[0]  # the one check of other entry points: once per graph
        for _ in range(2):
            check_inputs(graph, {"x": "x"}, {})
        assert len(warnings()) == 4
    assert warnings()[0] == (
        "graph 'g': inputs ['x'] not given and without a default_value read zeros of their "
        "ports' shape, as modeci-mdf's engine does; give them to set them"
    )


def test_zeros_that_do_not_fit_the_declared_type_leave_the_input_missing():
    port = InputPort(id="x", metadata=mdf_loops.model.port_type("n"))
    model = Model(id="m", graphs=[Graph(id="g", nodes=[_node("a", port, "x * k")])])
    with pytest.raises(InputError, match=r"missing inputs \['x'\]"):
        mdf_loops.run(model)

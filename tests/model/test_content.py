"""mdf_loops/model/content.py: a model's content key, and edits seen without a full walk.

The oracle of every edit is a fresh walk (``model_digest``) and, for runs, numpy.
"""

import copy
from pathlib import Path

import numpy as np
import pytest
from modeci_mdf.mdf import Graph, InputPort, Model, Node, OutputPort, Parameter

import mdf_loops
from mdf_loops.model.content import content_key, content_version, model_digest

EXAMPLES = Path(__file__).parents[2] / "examples"


def _model():
    node = Node(
        id="n",
        input_ports=[InputPort(id="x", shape=(2,), type="float64")],
        parameters=[
            Parameter(id="k", value=3.0),
            Parameter(id="tags", value=[1, [2, "red"]]),
            Parameter(id="W", value=np.ones((2, 2))),
            Parameter(id="rows", value=[[1.0, 2.0], [3.0, 4.0]]),
        ],
        output_ports=[OutputPort(id="y", value="k * x")],
        metadata={"note": {"depth": ["a", "b"]}},
    )
    return Model(id="m", graphs=[Graph(id="main", nodes=[node])])


EDITS = {
    "field assigned": lambda m: setattr(m.graphs[0].nodes[0].parameters[0], "value", 4.0),
    "expression text": lambda m: setattr(m.graphs[0].nodes[0].output_ports[0], "value", "x"),
    "item appended": lambda m: m.graphs[0].nodes[0].parameters.append(Parameter(id="z", value=1)),
    "item removed": lambda m: m.graphs[0].nodes[0].parameters.pop(1),
    "nested list item": lambda m: m.graphs[0].nodes[0].parameters[1].value[1].__setitem__(1, "x"),
    "dict value at depth": lambda m: m.graphs[0].nodes[0].metadata["note"]["depth"].append("c"),
    "dict key added": lambda m: m.graphs[0].nodes[0].metadata.__setitem__("other", 1),
    "dict key renamed, its value kept": lambda m: m.graphs[0].nodes[0].metadata.__setitem__(
        "other", m.graphs[0].nodes[0].metadata.pop("note")
    ),
    "node added": lambda m: m.graphs[0].nodes.append(Node(id="n2")),
    "number replaced by an equal one of another type": lambda m: setattr(
        m.graphs[0].nodes[0].parameters[0], "value", 3
    ),
    "array replaced by a new shape": lambda m: setattr(
        m.graphs[0].nodes[0].parameters[2], "value", np.ones((3, 3))
    ),
    "number written into an array in place": lambda m: (
        m.graphs[0].nodes[0].parameters[2].value.__setitem__((0, 0), 7.0)
    ),
    "number in a nested row replaced": lambda m: (
        m.graphs[0].nodes[0].parameters[3].value[1].__setitem__(0, 5.0)
    ),
    "row appended": lambda m: m.graphs[0].nodes[0].parameters[3].value.append([5.0, 6.0]),
    "row replaced": lambda m: m.graphs[0].nodes[0].parameters[3].value.__setitem__(0, [1.0, 2.5]),
    "list of numbers made an array of them": lambda m: setattr(
        m.graphs[0].nodes[0].parameters[3], "value", np.array([[1.0, 2.0], [3.0, 4.0]])
    ),
    "array made a list of its numbers": lambda m: setattr(
        m.graphs[0].nodes[0].parameters[2], "value", [[1.0, 1.0], [1.0, 1.0]]
    ),
    "number made a list of it": lambda m: setattr(
        m.graphs[0].nodes[0].parameters[0], "value", [3.0]
    ),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edit_is_seen_and_the_key_is_that_of_a_fresh_walk(edit):
    model = _model()
    key, version = content_key(model), content_version(model)
    assert content_key(model) == key == model_digest(model)
    EDITS[edit](model)
    assert content_version(model) == version + 1
    assert content_key(model) == model_digest(model)
    assert content_version(model) == version + 1  # seen once


def test_a_list_replaced_by_an_equal_one_is_watched_from_then_on():
    model = _model()
    content_key(model)
    node = model.graphs[0].nodes[0]
    node.parameters = list(node.parameters)  # the same items, a new list
    version = content_version(model)
    node.parameters.append(Parameter(id="late", value="open('f')"))
    assert content_version(model) == version + 1
    assert content_key(model) == model_digest(model)


# (where, in a node, a container holding the number 1.0 sits)
REPLACED = {
    "dict": (lambda node: node.metadata, lambda node, new: setattr(node, "metadata", new)),
    "tuple holding a dict": (
        lambda node: node.metadata["pair"],
        lambda node, new: node.metadata.__setitem__("pair", new),
    ),
    "parameter": (
        lambda node: node.parameters[0],
        lambda node, new: node.parameters.__setitem__(0, new),
    ),
}


@pytest.mark.parametrize("kind", sorted(REPLACED))
def test_a_container_replaced_by_an_equal_copy_is_watched_from_then_on(kind):
    """An equal copy compares equal to what it replaced even after 1.0 in it becomes 1
    (another content): only the copy's identity shows it must be watched instead."""
    model = _model()
    node = model.graphs[0].nodes[0]
    node.metadata["one"] = 1.0
    node.metadata["pair"] = ({"one": 1.0},)
    node.parameters[0].value = 1.0
    get, put = REPLACED[kind]
    content_key(model)
    put(node, copy.deepcopy(get(node)))
    content_key(model)
    version = content_version(model)
    edited = get(node)
    edited = edited[0] if isinstance(edited, tuple) else edited
    if isinstance(edited, dict):
        edited["one"] = 1
    else:
        edited.value = 1
    assert content_version(model) == version + 1
    assert content_key(model) == model_digest(model)


def test_an_array_read_again_unchanged_is_not_an_edit():
    """Arrays compare by their bytes: NaN (unequal to itself) is the same content."""
    model = _model()
    model.graphs[0].nodes[0].parameters[2].value = np.array([[np.nan, 1.0], [-0.0, 2.0]])
    version = content_version(model)
    for _ in range(2):
        assert content_version(model) == version
    model.graphs[0].nodes[0].parameters[2].value[1, 0] = 0.0  # -0.0 is not 0.0
    assert content_version(model) == version + 1


def test_a_set_is_watched_by_what_the_digest_reads_of_it():
    model = _model()
    model.graphs[0].nodes[0].metadata["odd"] = {1, 2}
    key, version = content_key(model), content_version(model)
    model.graphs[0].nodes[0].metadata["odd"].add("open('f')")
    assert content_version(model) == version + 1
    assert content_key(model) != key
    assert content_key(model) == model_digest(model)


def _weighted(metadata):
    """out = w * x with w a list of numbers (weights as a JSON file holds them)."""
    node = Node(
        id="n",
        input_ports=[InputPort(id="x", shape=(2,), type="float64")],
        parameters=[Parameter(id="w", value=[2.0, 3.0]), Parameter(id="y", value="w * x")],
        output_ports=[OutputPort(id="out", value="y")],
        metadata=metadata,
    )
    return Model(id="m", graphs=[Graph(id="main", nodes=[node])])


@pytest.mark.parametrize("odd", ["set", "object array", "the model itself"])
@pytest.mark.parametrize("backend", ["onnxruntime", "jax"])
def test_numbers_written_into_a_list_in_place_are_seen_in_any_model(odd, backend):
    """Also where no snapshot can be taken (an object array, a model that holds itself):
    then the digest that decides whether it changed reads the numbers."""
    if backend == "jax":
        pytest.importorskip("jax")
    model = _weighted({})
    model.graphs[0].nodes[0].metadata["odd"] = {
        "set": {1, 2},
        "object array": np.array(["a", {"b": 1}], dtype=object),
        "the model itself": model,
    }[odd]
    x = {"x": np.ones(2)}
    for _ in range(2):
        np.testing.assert_allclose(mdf_loops.run(model, x, backend=backend)["n.out"], [2, 3])
    model.graphs[0].nodes[0].parameters[0].value[0] = 10.0
    np.testing.assert_allclose(mdf_loops.run(model, x, backend=backend)["n.out"], [10, 3])


@pytest.mark.parametrize("backend", ["onnxruntime", "scheduler"])
def test_a_compiled_model_is_compiled_again_after_an_edit(backend):
    node = Node(
        id="n",
        input_ports=[InputPort(id="x", shape=(3,), type="float64")],
        parameters=[Parameter(id="k", value=2.0), Parameter(id="y", value="k * x")],
        output_ports=[OutputPort(id="out", value="y")],
    )
    model = Model(id="m", graphs=[Graph(id="main", nodes=[node])])
    x = np.array([1.0, 2.0, 3.0])
    first = mdf_loops.run(model, {"x": x}, backend=backend)
    np.testing.assert_allclose(next(iter(first.values())), 2.0 * x)
    node.parameters[0].value = 5.0
    second = mdf_loops.run(model, {"x": x}, backend=backend)
    np.testing.assert_allclose(next(iter(second.values())), 5.0 * x)


@pytest.mark.parametrize("backend", ["onnxruntime", "jax"])
def test_weights_written_into_an_array_in_place_are_run(backend):
    """The compiled forms hold the weights: an edit in place compiles again (oracle: numpy)."""
    if backend == "jax":
        pytest.importorskip("jax")
    model = _weighted({})
    weights = np.array([2.0, 3.0])
    model.graphs[0].nodes[0].parameters[0].value = weights
    x = {"x": np.array([1.0, 2.0])}
    for _ in range(2):
        np.testing.assert_allclose(mdf_loops.run(model, x, backend=backend)["n.out"], [2, 6])
    weights[1] = -1.0
    np.testing.assert_allclose(mdf_loops.run(model, x, backend=backend)["n.out"], [2, -2])


@pytest.mark.parametrize("source", ["file", "onnx"])
def test_an_edit_to_a_loop_body_is_seen(source):
    if source == "file":  # a body read from JSON is a dict of dicts
        model = mdf_loops.load_model(EXAMPLES / "elman_rnn.json")
    else:  # a body built by the importer is a Graph object
        from mdf_loops.workloads import elman_rnn

        model = mdf_loops.onnx_to_mdf(elman_rnn(3).model)
    version = content_version(model)
    bodies = [
        graph
        for node in model.graphs[0].nodes
        for p in node.parameters or []
        if isinstance(p.value, dict)
        for graph in p.value.values()
        if isinstance(graph, (Graph, dict))
    ]
    assert bodies, "the model has a Scan body"
    body = bodies[0]
    nodes = body.nodes if isinstance(body, Graph) else list(body["nodes"].values())
    if isinstance(body, Graph):
        nodes[0].parameters[0].args = {"A": "open('f')"}
    else:
        nodes[0]["parameters"] = {"p": {"value": "open('f')"}}
    assert content_version(model) == version + 1
    assert content_key(model) == model_digest(model)


def test_fields_in_an_instance_dict_are_watched_too():
    import attr

    @attr.s(slots=False)
    class Note:  # an attrs object without slots: its fields live in __dict__
        text = attr.ib(default="ok")

    model = _model()
    note = Note()
    model.graphs[0].nodes[0].metadata["note"] = note
    version = content_version(model)
    note.text = "open('f')"
    assert content_version(model) == version + 1
    assert content_key(model) == model_digest(model)


@pytest.mark.parametrize("backend", ["scheduler", "onnxruntime", "jax"])
def test_a_model_run_and_dropped_is_freed(backend):
    """The snapshot and the caches are keyed weakly by the model and hold nothing that
    keeps it alive."""
    import gc
    import weakref

    if backend == "jax":
        pytest.importorskip("jax")
    from mdf_loops.workloads import elman_rnn

    work = elman_rnn(5)
    model = mdf_loops.onnx_to_mdf(work.model)
    for _ in range(2):
        mdf_loops.run(model, work.inputs, backend=backend)
    alive = weakref.ref(model)
    del model
    gc.collect()
    assert alive() is None


def test_a_model_that_holds_itself_is_walked_every_time_and_freed():
    import gc
    import weakref

    model = _model()
    model.graphs[0].nodes[0].metadata["owner"] = model  # a cycle through the model
    key = content_key(model)
    model.graphs[0].nodes[0].output_ports[0].value = "x"
    edited = content_key(model)
    assert edited != key and edited == model_digest(model, numbers=True)
    alive = weakref.ref(model)
    del model
    gc.collect()
    assert alive() is None

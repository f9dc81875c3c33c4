"""The loop-node convention (mdf_loops/model/convention.py) and its JSON Schema."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import yaml
from modeci_mdf.mdf import Edge, Graph, InputPort, Node, OutputPort
from modeci_mdf.utils import load_mdf

import mdf_loops
from conftest import (control_flow_cases, expression_node, input_port, loop_node, mdf_body,
                      mdf_model, needs_input_port_fields, run_mdf)

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schemas" / "loop-node.schema.json").read_text())
EXAMPLE_FILES = sorted((ROOT / "examples").glob("*.json")) + sorted((ROOT / "examples").glob("*.yaml"))


def _two_node_body() -> Graph:
    """``a`` feeds ``b`` by an edge; formal inputs in non-alphabetical order; ``b.scale`` has a default."""
    a = expression_node("a", ["z_in", "m_in"], {"diff": "z_in - m_in"})
    b = expression_node("b", ["diff", "w"], {"scaled": "diff * w * scale"})
    b.input_ports.append(input_port("scale", 2.0))
    edge = Edge(id="a_b", sender="a", sender_port="diff", receiver="b", receiver_port="diff")
    return mdf_body("pair", [a, b], ["z_in", "m_in"], ["b.scaled", "a.diff", "b.scaled"],
                    outer_scope_inputs=["w"], edges=[edge])


# ------------------------------------------------ body_signature


def test_body_signature_reads_the_order_written():
    signature = mdf_loops.model.body_signature(_two_node_body())
    assert signature.formal_inputs == ("z_in", "m_in")
    assert signature.formal_outputs == (("b", "scaled"), ("a", "diff"), ("b", "scaled"))
    assert signature.outer_scope_inputs == ("w",)


def _broken(change) -> Graph:
    graph = _two_node_body()
    change(graph)
    return graph


def _drop(key):
    def change(graph):
        del graph.metadata[key]
    return change


def _set(key, value):
    def change(graph):
        graph.metadata[key] = value
    return change


def _add_unbound_port(graph):
    graph.nodes[0].input_ports.append(InputPort(id="stray"))


@pytest.mark.parametrize("change,fragments", [
    (_drop("formal_inputs"), ["graph 'pair'", "formal_inputs"]),
    (_drop("formal_outputs"), ["graph 'pair'", "formal_outputs"]),
    (_set("formal_outputs", ["b.missing"]), ["graph 'pair'", "b.missing"]),
    (_set("formal_outputs", ["nowhere.scaled"]), ["graph 'pair'", "nowhere.scaled"]),
    (_set("formal_outputs", ["b_scaled"]), ["graph 'pair'", "b_scaled", "node_id.port_id"]),
    (_set("formal_inputs", ["z_in", "z_in"]), ["graph 'pair'", "repeat"]),
    (_set("outer_scope_inputs", ["w", "m_in"]), ["graph 'pair'", "m_in"]),
    (_set("outer_scope_inputs", []), ["graph 'pair'", "b.w"]),
    (_add_unbound_port, ["graph 'pair'", "a.stray"]),
], ids=["no_formal_inputs", "no_formal_outputs", "missing_port", "missing_node", "not_node_dot_port",
        "repeated_input", "formal_and_outer", "outer_read_not_listed", "unbound_port"])
def test_body_signature_errors(change, fragments):
    with pytest.raises(mdf_loops.errors.ModelError) as info:
        mdf_loops.model.body_signature(_broken(change))
    for fragment in fragments:
        assert fragment in str(info.value)


def test_set_body_signature_rejects_bad_output_reference():
    graph = Graph(id="g", nodes=[expression_node("n", ["x"], {"y": "x"})])
    with pytest.raises(mdf_loops.errors.ModelError, match="'g'.*node_id.port_id"):
        mdf_loops.model.set_body_signature(graph, ["x"], ["n.y.z"])


@pytest.mark.parametrize("value", [42, {"graph_x": 3}, {"not_a_graph": {}}, "body"])
def test_body_graph_rejects_non_graph_values(value):
    with pytest.raises(mdf_loops.errors.ModelError, match="where_it_is"):
        mdf_loops.model.body_graph(value, "where_it_is")


def test_body_graph_accepts_stored_forms():
    body = _two_node_body()
    assert mdf_loops.model.body_graph(mdf_loops.model.wrap_body(body)) is body
    assert mdf_loops.model.body_graph(body) is body
    assert mdf_loops.model.body_graph({"graph_pair": json.loads(body.to_json())["pair"] | {"id": "pair"}}).id == "pair"


# ------------------------------------------------ round trip through files


def _pair_model():
    node = loop_node("apply", "Scan", {"initial_state_and_scan_inputs": "[z0, ms]"},
                     {"body": _two_node_body()}, ["z0", "ms", "w"], 3, {"num_scan_inputs": 1})
    return mdf_model(node)


@needs_input_port_fields  # the file keeps a port default as a field
@pytest.mark.parametrize("suffix", ["json", "yaml"])
def test_signature_round_trips_through_files(suffix, tmp_path):
    path = tmp_path / f"pair.{suffix}"
    model = _pair_model()
    (model.to_json_file if suffix == "json" else model.to_yaml_file)(str(path))
    loaded = load_mdf(str(path))
    body = mdf_loops.model.body_graph(loaded.graphs[0].nodes[0].get_parameter("body").value)
    assert mdf_loops.model.body_signature(body) == mdf_loops.model.body_signature(_two_node_body())
    assert [p.id for p in body.nodes[0].input_ports] == ["z_in", "m_in"]

    # and it runs to the same numbers as a numpy loop
    ms, w = np.array([1.0, 4.0, -2.0]), np.array(0.5)
    results = run_mdf(loaded, {"z0": 3.0, "ms": ms, "w": w})
    z, scaled, diffs = 3.0, [], []
    for m in ms:
        diff = z - m
        z = diff * w * 2.0
        scaled.append(z)
        diffs.append(diff)
    np.testing.assert_allclose(results["apply.out0"], z)
    np.testing.assert_allclose(results["apply.out1"], diffs)
    np.testing.assert_allclose(results["apply.out2"], scaled)


# ------------------------------------------------ JSON Schema


@pytest.fixture(scope="module")
def validator():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    return jsonschema.Draft202012Validator(SCHEMA)


def _errors(validator, document) -> list[str]:
    return [error.message for error in validator.iter_errors(document)]


def test_examples_exist():
    assert any(p.name == "leaky_integrator.json" for p in EXAMPLE_FILES)
    assert any(p.name == "leaky_integrator.yaml" for p in EXAMPLE_FILES)


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_schema_accepts_example(path, validator):
    document = json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())
    assert _errors(validator, document) == []


@pytest.mark.parametrize("name", ["test_loop16_seq_none", "test_scan9_sum", "test_if_opt",
                                  "test_range_float_type_positive_delta_expanded"])
def test_schema_accepts_imported_conformance_model(name, validator):
    model = mdf_loops.onnx_to_mdf(control_flow_cases()[name].model)
    assert _errors(validator, json.loads(model.to_json())) == []


def _bodies(document):
    """Every body graph dict inside a model document."""
    if isinstance(document, dict):
        for key, value in document.items():
            if key.startswith("graph_") and isinstance(value, dict):
                yield value
            yield from _bodies(value)
    elif isinstance(document, list):
        for item in document:
            yield from _bodies(item)


@pytest.mark.parametrize("key", ["formal_inputs", "formal_outputs"])
def test_schema_rejects_body_without_signature(key, validator):
    document = json.loads(_pair_model().to_json())
    assert _errors(validator, document) == []
    broken = copy.deepcopy(document)
    (body,) = list(_bodies(broken))
    del body["metadata"][key]
    assert _errors(validator, broken)


def test_schema_rejects_loop_call_without_args(validator):
    document = json.loads(_pair_model().to_json())
    del document["model"]["graphs"]["main"]["nodes"]["apply"]["parameters"]["apply"]["args"]
    assert _errors(validator, document)


def test_body_without_metadata_is_rejected_by_schema_and_engine(validator):
    bare = Graph(id="bare", nodes=[Node(id="n", input_ports=[InputPort(id="x")],
                                        output_ports=[OutputPort(id="y", value="x")])])
    node = loop_node("apply", "Scan", {"initial_state_and_scan_inputs": "[x0, xs]"}, {"body": bare},
                     ["x0", "xs"], 1, {"num_scan_inputs": 1})
    document = json.loads(mdf_model(node).to_json())
    assert _errors(validator, document)
    with pytest.raises(mdf_loops.errors.ModelError, match="apply"):
        run_mdf(mdf_model(node), {"x0": 0.0, "xs": np.ones(2)})

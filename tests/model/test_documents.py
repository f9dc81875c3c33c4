"""mdf_loops/model/documents.py (and load_model's checks of what it reads): keys a JSON
file repeats are found at any depth, and JSON content, which has no aliases, is never
larger than as written."""

import json
import re

import pytest

import mdf_loops
from mdf_loops.model.documents import read_document
from mdf_loops.safety.checks import check_aliases

MODEL = '{"m": {"graphs": {"g": {"nodes": {"n": {"parameters": {"p": {"value": 1}}}}}}}}'


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (MODEL.replace('{"value": 1}', '{"value": 1, "value": 2}'), "graphs.g.nodes.n.parameters.p"),
        (MODEL.replace('"graphs"', '"id": "a", "id"'), "top level"),
        (MODEL[:-2] + ', "metadata": {"l": [0, {"k": 1, "k": 2}]}}}', "metadata.l[1]"),
    ],
)
def test_a_key_json_repeats_is_refused_where_it_is(tmp_path, text, where):
    path = tmp_path / "m.json"
    path.write_text(text)
    with pytest.raises(mdf_loops.errors.ModelError, match=rf"m\.json: {re.escape(where)}: '\w+' is defined"):
        mdf_loops.load_model(str(path))


def test_json_content_is_never_larger_than_written(tmp_path):
    """What load_model leaves to YAML: JSON shares only one-character texts (Python's own
    singletons), which count no more than as written."""
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"m": {"metadata": {"a": ["x"] * 50_000, "b": [""] * 50_000}}}))
    check_aliases(read_document(path), str(path))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("[1, %s]" % ("9" * 4250), r"p\.value\[1\]: an integer of 14119 bits is too long to use"),
        ("-%s" % ("9" * 4250), r"p\.value: an integer of 14119 bits is too long to use"),
        ("9" * 5000, r"not a readable model file \(Exceeds the limit \(4300 digits\)"),
    ],
)
def test_a_json_integer_too_long_to_use_is_refused_where_it_is(tmp_path, value, message):
    path = tmp_path / "m.json"
    path.write_text(MODEL.replace('{"value": 1}', '{"value": %s}' % value))
    with pytest.raises(mdf_loops.errors.ModelError, match=message):
        read_document(path)


def test_json_numbers_and_constants_are_read_as_json_reads_them(tmp_path):
    path = tmp_path / "m.json"
    text = '{"a": [1, -2, 3.5, 1e400, NaN, -Infinity, true, null, "x"], "b": {"c": 0}}'
    path.write_text(text)
    assert json.dumps(read_document(path)) == json.dumps(json.loads(text))


@pytest.mark.parametrize(
    ("node", "where"),
    [
        ('{"nodes": {"x": {}}}', "graphs.g.nodes.n"),
        ('{"parameters": {"body": {"value": {"graph_b": {"nodes": {"inner": {"nodes": {}}}}}}}}',
         "graphs.g.nodes.n.parameters.body.value.graph_b.nodes.inner"),
    ],
)
def test_a_graph_a_json_file_puts_among_nodes_is_refused_at_any_depth(tmp_path, node, where):
    path = tmp_path / "m.json"
    path.write_text(MODEL.replace('{"parameters": {"p": {"value": 1}}}', node))
    with pytest.raises(mdf_loops.errors.ModelError,
                       match=rf"m\.json: {re.escape(where)}: '\w+' is a graph, not a node"):
        mdf_loops.load_model(str(path))

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

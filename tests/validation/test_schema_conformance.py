"""mdf_loops/validation/conformance.py: the schema's verdict without jsonschema.

Oracle: ``jsonschema`` on the same schema, on every example model and on thousands of
edits of them (values of other JSON types, bad identifiers, keys removed or renamed,
repeated items), plus the corners where Python and JSON disagree.
"""

from __future__ import annotations

import copy
import functools
import json
import random
from pathlib import Path

import jsonschema
import pytest

from mdf_loops.model.documents import read_document
from mdf_loops.validation.conformance import KEYWORDS, conforms
from mdf_loops.validation.report import schema

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DOCUMENTS = sorted(EXAMPLES.glob("*.json")) + sorted(EXAMPLES.glob("*.yaml"))[:2]

#: values put in place of others: every JSON type, and the corners of the schema's rules
REPLACEMENTS = [
    None,
    True,
    False,
    0,
    1,
    -1,
    2.0,
    1.5,
    "x",
    "",
    "bad-id",
    "9x",
    "a.b",
    "id\n",
    [],
    [1, True],
    [1, 1.0],
    ["a", "a"],
    ["a", "b"],
    [2.0, 3],
    [-1],
    {},
    {"a": 1},
    {"graph_x": {}},
    {"graph_x": {"id": "x", "metadata": {}}},
    {"dtype": "float32", "shape": [2], "data": [1, 2]},
    {"dtype": "float32", "shape": [2], "data": [1, 2], "extra": 1},
    {"function": "onnx::Scan"},
    {"function": "onnx::Scan", "args": {}},
]
BAD_KEYS = ["bad-id", "9x", "graph_x", "", "ok_key"]


@functools.lru_cache(maxsize=1)
def _validator():
    return jsonschema.validators.validator_for(schema())(schema())


def _oracle(document) -> bool:
    return _validator().is_valid(document)


def _places(value, path=()):
    """Every (container path, key or index) in ``value``."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield path, key
            yield from _places(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:3]):  # long data lists: their first items
            yield path, index
            yield from _places(item, (*path, index))


def _edited(document, rng: random.Random):
    edited = copy.deepcopy(document)
    path, key = rng.choice(list(_places(edited)))
    container = edited
    for part in path:
        container = container[part]
    action = rng.randrange(4)
    if action == 0 or isinstance(container, list):
        container[key] = copy.deepcopy(rng.choice(REPLACEMENTS))
    elif action == 1:
        del container[key]
    elif action == 2:
        container[rng.choice(BAD_KEYS)] = container.pop(key)
    else:
        container[key] = [container[key], container[key]]
    return edited


def _keywords(value, found: set) -> set:
    if isinstance(value, dict):
        for key, item in value.items():
            if key not in ("properties", "$defs"):
                found.add(key)
            children = item.values() if key in ("properties", "$defs") else [item]
            for child in children:
                _keywords(child, found)
    elif isinstance(value, list):
        for item in value:
            _keywords(item, found)
    return found


def test_every_keyword_of_the_schema_is_interpreted():
    described = {"$schema", "$id", "$defs", "title", "description", "then", "else"}
    assert _keywords(schema(), set()) - described <= set(KEYWORDS)


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_the_verdict_is_jsonschemas_on_the_examples_and_their_edits(path):
    document = json.loads(json.dumps(read_document(path)))  # plain dicts
    assert conforms(document, schema()) and _oracle(document)
    rng = random.Random(path.name)
    verdicts = []
    for _ in range(30):
        edited = _edited(document, rng)
        verdict = conforms(edited, schema())
        assert verdict == _oracle(edited), json.dumps(edited)[:2000]
        verdicts.append(verdict)
    assert verdicts.count(False) >= 3  # the edits break the schema often enough to tell


def _model(document: dict) -> dict:
    return document["leaky_integrator"]


def _parameters(document: dict) -> dict:
    return _model(document)["graphs"]["main"]["nodes"]["integrate"]["parameters"]


CORNERS = {  # edit of the leaky-integrator document, and whether the result conforms
    "an integer-valued float is an integer": (
        lambda d: _model(d).__setitem__("onnx_opset_version", 15.0),
        True,
    ),
    "a boolean is not an integer": (
        lambda d: _model(d).__setitem__("onnx_opset_version", True),
        False,
    ),
    "a fraction is not an integer": (
        lambda d: _model(d).__setitem__("onnx_opset_version", 15.5),
        False,
    ),
    "a body without its signature": (
        lambda d: _parameters(d).__setitem__("p", {"value": {"graph_b": {"id": "b"}}}),
        False,
    ),
    "a body with its signature": (
        lambda d: _parameters(d).__setitem__(
            "p",
            {
                "value": {
                    "graph_b": {
                        "id": "b",
                        "metadata": {"formal_inputs": ["a"], "formal_outputs": ["n.y"]},
                    }
                }
            },
        ),
        True,
    ),
    "a tensor of negative size is some other value": (
        lambda d: _parameters(d).__setitem__(
            "p", {"value": {"dtype": "f", "shape": [-1], "data": []}}
        ),
        True,
    ),
    "a loop function without args": (
        lambda d: _parameters(d).__setitem__("p", {"function": "onnx::Loop"}),
        False,
    ),
    "an id ending in a newline (Python's re.search, as jsonschema)": (
        lambda d: _parameters(d).__setitem__("p\n", {"value": 1}),
        True,
    ),
    "an id with a dash (modeci-mdf's ONNX importer writes '/A/Add')": (
        lambda d: _parameters(d).__setitem__("/p-q", {"value": 1}),
        True,
    ),
    "an id with a dot": (lambda d: _parameters(d).__setitem__("p.q", {"value": 1}), False),
    "an empty id": (lambda d: _parameters(d).__setitem__("", {"value": 1}), False),
    "a repeated formal input": (
        lambda d: _parameters(d)["body"]["value"]["graph_integrator_step"]["metadata"][
            "formal_inputs"
        ].append("x_prev"),
        False,
    ),
}


@pytest.mark.parametrize("corner", sorted(CORNERS))
def test_corners_where_python_and_json_differ(corner, leaky_document):
    edit, expected = CORNERS[corner]
    edit(leaky_document)
    assert conforms(leaky_document, schema()) is expected
    assert _oracle(leaky_document) is expected


@pytest.mark.parametrize(
    "items, unique",
    [
        (["a", "b"], True),
        (["a", "a"], False),
        ([1, True], True),
        ([1, 1.0], False),
        ([[1], [True]], True),
        ([{"a": 1}, {"a": 1}], False),
    ],
)
def test_unique_items_compare_as_json_values(items, unique):
    scheme = {"type": "array", "uniqueItems": True}
    assert conforms(items, scheme) is unique
    assert jsonschema.Draft202012Validator(scheme).is_valid(items) is unique


@pytest.mark.parametrize(
    "scheme",
    [
        {"format": "email"},
        {"$ref": "https://example.com/other.json"},
        {"$ref": "#/$defs/none"},
        {"type": "decimal"},
        {"patternProperties": {"a": {}}, "additionalProperties": False},
    ],
    ids=[
        "unknown keyword",
        "remote reference",
        "missing reference",
        "unknown type",
        "pattern properties",
    ],
)
def test_what_it_cannot_tell_is_a_no(scheme):
    """jsonschema then decides (mdf_loops.validation.report asks it)."""
    assert conforms({"a": 1}, scheme) is False


def test_a_document_too_deep_to_walk_is_a_no():
    deep: dict = {}
    inner = deep
    for _ in range(5000):
        inner["a"] = {}
        inner = inner["a"]
    nested = {"$defs": {"n": {"properties": {"a": {"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"}
    assert jsonschema.Draft202012Validator(nested).is_valid({"a": {"a": {}}})
    assert conforms({"a": {"a": {}}}, nested) is True
    assert conforms(deep, nested) is False


@pytest.fixture
def leaky_document() -> dict:
    return json.loads((EXAMPLES / "leaky_integrator.json").read_text())

"""Fuzzing the loader, the validator and the runner with mutated model files.

Each example takes the JSON of a real model (an example, an imported ONNX
conformance case), mutates it (drops keys, puts values of the wrong type, swaps
ids, writes random and hostile expressions, truncates the text) and feeds the
file to ``load_model``, ``validate`` and ``run``. Every outcome must be a run
that returns outputs or an :class:`~mdf_loops.MdfLoopsError`; no other exception,
no hang, no code run (a marker file an attack would create must not appear).

The default run tries ``FUZZ_EXAMPLES`` examples, derandomized so that CI is
reproducible; set ``MDF_LOOPS_FUZZ_EXAMPLES=5000`` for a longer, random run.
"""

from __future__ import annotations

import copy
import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mdf_loops
from conftest import control_flow_cases
from mdf_loops.validation.report import validate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FUZZ_EXAMPLES = int(os.environ.get("MDF_LOOPS_FUZZ_EXAMPLES", "0")) or 200
SECONDS_PER_EXAMPLE = 30
LIMITS = {"max_iterations": 1_000, "max_total_iterations": 10_000, "max_elements": 1_000_000}

_SETTINGS = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize="MDF_LOOPS_FUZZ_EXAMPLES" not in os.environ,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture],
)


class _Hung(BaseException):
    pass


def _base_documents() -> dict:
    leaky = json.loads((EXAMPLES / "leaky_integrator.json").read_text())
    case = control_flow_cases()["test_loop11"]
    loop11 = json.loads(mdf_loops.onnx_to_mdf(case.model).to_json())
    inputs = dict(zip([vi.name for vi in case.model.graph.input], case.data_sets[0][0]))
    return {
        "leaky_integrator": (leaky, {"x0": np.array(0.0), "I": np.linspace(0.0, 1.0, 5)}),
        "test_loop11": (loop11, inputs),
    }


_BASES = _base_documents()

_WRONG_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=True),
    st.text(max_size=12), st.lists(st.integers(-3, 3), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    st.builds(lambda: {"graph_x": {"id": "x"}}), st.builds(lambda: [[[[]]]]),  # fresh objects
)

_HOSTILE = [
    "__import__('os').system('touch {marker}')",
    "().__class__.__bases__[0].__subclasses__()",
    "open('{marker}', 'w').write('x')",
    "numpy.zeros(10**9)",
    "[0] * 10**9",
    "10 ** 10 ** 10",
    "lambda: 0",
    "[c for c in ().__class__.__mro__]",
    "numpy.load('{marker}')",
    "getattr(numpy, 'save')('{marker}', 1)",
]


def _expressions(names: list[str]) -> st.SearchStrategy[str]:
    atoms = st.one_of(
        st.sampled_from(names or ["x"]), st.integers(-5, 5).map(str),
        st.floats(-2, 2, allow_nan=False).map(repr), st.sampled_from(_HOSTILE),
        st.sampled_from(["nan", "inf", "True", "None", "[]", "()"]),
    )

    def combine(inner):
        return st.one_of(
            st.tuples(inner, st.sampled_from([" + ", " * ", " - ", " / ", " @ ", " ** ", " < "]),
                      inner).map("".join),
            st.tuples(st.sampled_from(["numpy.tanh", "numpy.abs", "abs", "numpy.sum",
                                       "numpy.ones", "numpy.concatenate"]), inner)
            .map(lambda t: f"{t[0]}({t[1]})"),
            st.tuples(inner, st.integers(-2, 2)).map(lambda t: f"({t[0]})[{t[1]}]"),
            st.tuples(inner, inner).map(lambda t: f"[{t[0]}, {t[1]}]"),
        )

    return st.recursive(atoms, combine, max_leaves=6)


def _places(document) -> list[tuple]:
    """Every (container, key) of a document, in a stable order."""
    places, stack = [], [document]
    while stack:
        item = stack.pop()
        keys = list(item) if isinstance(item, dict) else range(len(item)) \
            if isinstance(item, list) else []
        for key in keys:
            places.append((item, key))
            stack.append(item[key])
    return places


def _names(document) -> list[str]:
    """Ids used in the document: the names an expression could refer to."""
    names = set()
    for container, key in _places(document):
        if isinstance(container, dict) and isinstance(key, str) and key.isidentifier():
            names.add(key)
    return sorted(names)[:50]


@st.composite
def _mutated(draw, marker: Path):
    name = draw(st.sampled_from(sorted(_BASES)))
    document, inputs = _BASES[name]
    document = copy.deepcopy(document)
    names = _names(document)
    for _ in range(draw(st.integers(1, 3))):
        places = _places(document)
        if not places:
            break
        container, key = places[draw(st.integers(0, len(places) - 1))]
        kind = draw(st.sampled_from(["drop", "wrong type", "swap ids", "expression"]))
        if kind == "drop":
            del container[key]
        elif kind == "wrong type":
            container[key] = draw(_WRONG_VALUES)
        elif kind == "swap ids" and isinstance(container, dict):
            other = draw(st.sampled_from(names + sorted(map(str, container))))
            value = container.pop(key)
            container[other] = value
        else:
            container[key] = draw(_expressions(names)).format(marker=marker)
    text = json.dumps(document, allow_nan=True)
    if draw(st.integers(0, 9)) == 0:
        text = text[: draw(st.integers(0, len(text)))]  # a truncated file
    return name, text, inputs


def _alarm(signum, frame):
    raise _Hung(f"one fuzz example ran longer than {SECONDS_PER_EXAMPLE} s")


@pytest.fixture
def marker(tmp_path):
    return tmp_path / "pwned"


@_SETTINGS
@given(data=st.data())
def test_mutated_models_run_or_fail_with_a_project_error(tmp_path, marker, data):
    name, text, inputs = data.draw(_mutated(marker))
    path = tmp_path / f"{name}.json"
    path.write_text(text)
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(SECONDS_PER_EXAMPLE)
    try:
        _outcome(lambda: mdf_loops.load_model(path), Exception)
        problems = _outcome(lambda: validate(path), list)
        assert problems is None or all(isinstance(p.message, str) for p in problems)
        outputs = _outcome(lambda: mdf_loops.run(path, inputs, **LIMITS), dict)
        if outputs is not None:  # a run: outputs by name (values are whatever the model says)
            assert all(isinstance(name, str) for name in outputs)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert not marker.exists(), "an expression in the file ran code"


def _outcome(call, expected_type):
    """The call's result, or None when it raised MdfLoopsError; anything else fails the test."""
    try:
        result = call()
    except mdf_loops.MdfLoopsError:
        return None
    assert expected_type is Exception or isinstance(result, expected_type)
    return result


def test_the_unmutated_documents_run(tmp_path):
    """The fuzz starts from documents that run (checked against numpy and ONNX's outputs)."""
    leaky, inputs = _BASES["leaky_integrator"]
    path = tmp_path / "leaky.json"
    path.write_text(json.dumps(leaky))
    outputs = mdf_loops.run(path, inputs, backend="scheduler")
    x, trace = 0.0, []
    for i_t in inputs["I"]:  # the model's equation
        x = x + 0.1 * (-x + i_t) / 2.0
        trace.append(x)
    np.testing.assert_allclose(outputs["integrate.trace"], trace, rtol=1e-12)
    loop11, feeds = _BASES["test_loop11"]
    path = tmp_path / "loop11.json"
    path.write_text(json.dumps(loop11))
    case = control_flow_cases()["test_loop11"]
    results = mdf_loops.run(path, feeds, backend="scheduler")
    for vi, expected in zip(case.model.graph.output, case.data_sets[0][1]):
        np.testing.assert_allclose(results[vi.name], expected)

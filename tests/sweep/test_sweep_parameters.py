"""Swept parameters lifted to graph inputs (mdf_loops/sweep/parameters.py), no cluster.

The oracle: the example's own JSON document with the parameter's value set in
it, run by mdf_loops.run; and, for the swept model, the unchanged original where
the value is the one the file already holds.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from modeci_mdf.mdf import Model

import mdf_loops
from mdf_loops.sweep import SweepError
from mdf_loops.sweep.parameters import find_parameter, lift_parameters

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def example_inputs(name: str) -> dict:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.example_inputs()


def with_value(name: str, path: list[str], parameter: str, value) -> Model:
    """The example's JSON with ``parameter`` of the node at ``path`` (loop ids, node) set."""
    document = json.loads((EXAMPLES / f"{name}.json").read_text())
    (model,) = document.values()
    nodes = next(iter(model["graphs"].values()))["nodes"]
    for loop in path[:-1]:
        body = nodes[loop]["parameters"]["body"]["value"]
        nodes = next(iter(body.values()))["nodes"]
    nodes[path[-1]]["parameters"][parameter]["value"] = value
    return Model.from_dict(document)


CASES = [  # example, node path, parameter, values
    ("nested_trials", ["trials", "time_steps", "integrate"], "dt", [0.05, 0.3]),  # two loops deep
    ("nested_trials", ["trials", "reset"], "carryover", [0.0, 0.9]),
    ("nested_trials", ["constants"], "tau", [0.5, 3.0]),  # top level
    ("rescorla_wagner", ["trials", "learn"], "alpha", [0.05, 0.6]),
    ("newton", ["newton", "step"], "c0", [-3.0, -11.0]),  # a Loop with a condition
]


@pytest.mark.parametrize("backend", ["scheduler", "onnxruntime"])
@pytest.mark.parametrize("name, path, parameter, values", CASES)
def test_a_lifted_parameter_computes_what_the_set_parameter_computes(name, path, parameter,
                                                                     values, backend):
    model = mdf_loops.load_model(EXAMPLES / f"{name}.json")
    address = f"{path[-1]}.{parameter}"
    lifted, inputs_of = lift_parameters(model, model.graphs[0].id, [address])
    inputs = example_inputs(name)
    for value in values:
        expected = mdf_loops.run(with_value(name, path, parameter, value), inputs, backend=backend)
        got = mdf_loops.run(lifted, {**inputs, inputs_of[address]: np.float64(value)},
                            backend=backend)
        assert set(got) == set(expected)
        for output in expected:
            np.testing.assert_allclose(got[output], expected[output], rtol=1e-12, atol=1e-14)
        changed = mdf_loops.run(model, inputs, backend=backend)
        assert any(not np.allclose(changed[o], expected[o]) for o in expected), \
            "the value must matter, or the test proves nothing"


def test_the_original_model_is_not_changed():
    model = mdf_loops.load_model(EXAMPLES / "nested_trials.json")
    before = model.to_json()
    lift_parameters(model, model.graphs[0].id, ["integrate.dt", "reset.carryover"])
    assert model.to_json() == before


def test_a_path_tells_apart_and_errors_name_the_element():
    model = mdf_loops.load_model(EXAMPLES / "nested_trials.json")
    graph = model.graphs[0]
    site = find_parameter(graph, "trials/time_steps/integrate.dt")
    assert site.path == "trials/time_steps/integrate"
    assert find_parameter(graph, "time_steps/integrate.dt").path == site.path
    with pytest.raises(SweepError, match="no node 'reset/integrate'"):
        find_parameter(graph, "reset/integrate.dt")
    with pytest.raises(SweepError, match=r"has no parameter 'dtt'.*\['dt'\]"):
        find_parameter(graph, "integrate.dtt")
    with pytest.raises(SweepError, match="holds a loop body"):
        find_parameter(graph, "trials.body")
    with pytest.raises(SweepError, match="attribute of the node's ONNX operator"):
        find_parameter(graph, "trials.num_scan_inputs")
    ddm = mdf_loops.load_model(EXAMPLES / "drift_diffusion.json").graphs[0]
    with pytest.raises(SweepError, match="attribute of the node's ONNX operator"):
        find_parameter(ddm, "sample.axis")


def test_a_node_id_used_in_two_graphs_must_be_given_by_its_path():
    model = mdf_loops.load_model(EXAMPLES / "drift_diffusion.json")
    twice = lift_parameters(model, "main", [])[0]
    outer = twice.graphs[0]
    inner = next(n for n in outer.nodes if n.id == "ddm")
    body = mdf_loops.model.body_graph(next(p for p in inner.parameters if p.id == "body").value)
    accumulate = next(n for n in body.nodes if n.id == "accumulate")
    decide = next(n for n in outer.nodes if n.id == "decide")
    decide.id = "accumulate"  # the top-level node now shares the body node's id
    with pytest.raises(SweepError, match=r"used in several graphs.*'ddm/accumulate'"):
        find_parameter(outer, "accumulate.threshold")
    assert find_parameter(outer, "ddm/accumulate.threshold").node_id == accumulate.id

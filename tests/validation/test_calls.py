"""mdf_loops.validation.calls: what validate reports, run refuses, with the same message.

Each broken model is the leaky-integrator example with one mistake. The oracle
for "run refuses" is run itself on every backend, and for the valid variants the
numpy recurrence of the example; the differential test checks, over a set of
mistakes, that validate reports a problem exactly when run refuses the model.
"""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

import numpy as np
import pytest
from mdf_loops.model.compat import INPUT_DEFAULTS
from modeci_mdf.mdf import Graph, Model, Node, OutputPort, Parameter

import mdf_loops
from mdf_loops.errors import MdfLoopsError, ModelError
from mdf_loops.validation.report import validate

ROOT = Path(__file__).resolve().parents[2]
LEAKY = json.loads((ROOT / "examples" / "leaky_integrator.json").read_text())
SCAN = "graphs.main.nodes.integrate"
STEP = f"{SCAN}.parameters.body.value.graph_integrator_step.nodes.step"


def _node(d: dict) -> dict:
    return d["leaky_integrator"]["graphs"]["main"]["nodes"]["integrate"]


def _body(d: dict) -> dict:
    return _node(d)["parameters"]["body"]["value"]["graph_integrator_step"]


def _step(d: dict) -> dict:
    return _body(d)["nodes"]["step"]


def _leaky_trace(d: dict) -> np.ndarray:
    """The example's recurrence in numpy: x += dt * (-x + I) / tau."""
    inputs = _node(d)["input_ports"]
    x, trace = inputs["x0"]["default_value"], []
    for current in inputs["I"]["default_value"]:
        x = x + 0.1 * (-x + current) / 2.0
        trace.append(x)
    return np.array(trace)


def _written(tmp_path: Path, edit) -> Path:
    document = copy.deepcopy(LEAKY)
    edit(document)
    path = tmp_path / "model.json"
    path.write_text(json.dumps(document))
    return path


def _refusal(path: Path, backend: str) -> str:
    with pytest.raises(ModelError) as caught:
        mdf_loops.run(str(path), backend=backend)
    return str(caught.value)


BACKENDS = ["scheduler", "onnxruntime", "auto"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_misspelled_scan_argument_is_reported_and_refused_alike(tmp_path, backend):
    path = _written(tmp_path, lambda d: _node(d)["parameters"]["integrate"].update(
        args={"initial_state_and_scan_input": "[x0, I]"}))
    (problem,) = validate(path)
    assert problem.path == f"{SCAN}.parameters.integrate.args.initial_state_and_scan_input"
    assert "did you mean 'initial_state_and_scan_inputs'" in problem.message
    assert _refusal(path, backend) == str(problem)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_unknown_function_name_in_a_body_is_reported_and_refused_alike(tmp_path, backend):
    path = _written(tmp_path, lambda d: _step(d)["parameters"].update(
        lin={"function": "linaer", "args": {"variable0": "x_prev", "slope": 1, "intercept": 0}}))
    (problem,) = validate(path)
    assert problem.path == f"{STEP}.parameters.lin.function"
    assert "unknown function 'linaer'" in problem.message
    assert "did you mean 'linear'" in problem.message
    assert _refusal(path, backend) == str(problem)


def test_an_unknown_function_in_a_loop_free_model_is_refused_before_running():
    node = Node(id="extra", parameters=[Parameter(id="p", function="linaer",
                                                  args={"variable0": 1, "slope": 2, "intercept": 0})],
                output_ports=[OutputPort(id="o", value="p")])
    model = Model(id="m", graphs=[Graph(id="g", nodes=[node])])
    (problem,) = validate(model)
    assert problem.path == "graphs.g.nodes.extra.parameters.p.function"
    with pytest.raises(ModelError, match="unknown function 'linaer'.*did you mean 'linear'"):
        mdf_loops.run(model, backend="scheduler")


def test_a_function_naming_a_name_of_its_node_runs_as_before(tmp_path):
    """modeci-mdf reads a function that is no registered name as an expression of the node."""
    path = _written(tmp_path, lambda d: _step(d)["parameters"].update(
        same={"function": "x_prev", "args": {}}))
    assert validate(path) == []
    out = mdf_loops.run(str(path), backend="scheduler")
    np.testing.assert_allclose(out["integrate.trace"], _leaky_trace(LEAKY), rtol=1e-12)


@pytest.mark.parametrize("backend", ["scheduler", "auto"])
def test_a_value_that_is_one_unknown_name_is_reported_and_refused_alike(tmp_path, backend):
    """modeci-mdf fails on it with "Could not evaluate expression [tua]", naming nothing."""
    path = _written(tmp_path, lambda d: _step(d)["output_ports"].update(rate={"value": "tua"}))
    (problem,) = validate(path)
    assert problem.path == f"{STEP}.output_ports.rate.value"
    assert problem.message == (
        "'tua' is not a port, parameter or function of this node; did you mean 'tau'?")
    assert _refusal(path, backend) == str(problem)


def test_a_missing_required_argument(tmp_path):
    path = _written(tmp_path, lambda d: _node(d)["parameters"]["integrate"].update(args={}))
    paths = {p.path: p.message for p in validate(path)}
    assert paths[f"{SCAN}.parameters.integrate.args"] == (
        "onnx::Scan needs the argument 'initial_state_and_scan_inputs'")
    assert "needs the argument 'initial_state_and_scan_inputs'" in _refusal(path, "scheduler")


def test_an_if_argument_misspelled():
    from conftest import expression_node, loop_node, mdf_body, mdf_model

    branch = mdf_body("b", [expression_node("k", [], {"v": "1.0"})], (), ("k.v",))
    model = mdf_model(loop_node("choose", "If", {"cnd": "c"},
                                {"then_branch": branch, "else_branch": branch}, ["c"], 1))
    (problem,) = [p for p in validate(model) if p.path.endswith(".args.cnd")]
    assert "did you mean 'cond'" in problem.message
    with pytest.raises(ModelError, match="'cnd' is not an argument of onnx::If"):
        mdf_loops.run(model, {"c": True}, backend="scheduler")


def _graph_in_nodes() -> Model:
    """What stock pytorch_to_mdf writes for a loop: a Graph among a graph's nodes."""
    inner = Graph(id="loop_body", nodes=[Node(id="x", output_ports=[OutputPort(id="o", value="1")])])
    outer = Node(id="a", parameters=[Parameter(id="p", value=1)],
                 output_ports=[OutputPort(id="o", value="p")])
    return Model(id="m", graphs=[Graph(id="main", nodes=[outer, inner])])


def test_a_graph_among_nodes_is_reported_not_a_crash():
    (problem,) = validate(_graph_in_nodes())
    assert problem.path == "graphs.main.nodes.loop_body"
    assert "pytorch_to_mdf" in problem.message and "mdf_loops.onnx_to_mdf" in problem.message
    with pytest.raises(ModelError, match="'loop_body' is a graph, not a node"):
        mdf_loops.run(_graph_in_nodes(), backend="scheduler")


def test_a_graph_among_nodes_in_a_file_is_refused_not_dropped(tmp_path):
    """Loading such a file drops the inner graph: the run would answer without it."""
    path = tmp_path / "stock.json"
    _graph_in_nodes().to_json_file(str(path))
    (problem,) = validate(path)
    assert problem.path == "graphs.main.nodes.loop_body"
    with pytest.raises(ModelError, match=r"stock\.json: graphs\.main\.nodes\.loop_body: "):
        mdf_loops.run(str(path))


# ---------------------------------------------------------------- validate iff run refuses

_MISTAKES = {
    "valid": lambda d: None,
    "a known function": lambda d: _step(d)["parameters"].update(
        lin={"function": "linear", "args": {"variable0": "x_prev", "slope": 1, "intercept": 0}}),
    "misspelled argument": lambda d: _node(d)["parameters"]["integrate"].update(
        args={"initial_state_and_scan_input": "[x0, I]"}),
    "an argument that is an attribute": lambda d: _node(d)["parameters"]["integrate"][
        "args"].update(num_scan_input=1),
    "no arguments": lambda d: _node(d)["parameters"]["integrate"].pop("args"),
    "unknown function": lambda d: _step(d)["parameters"].update(lin={"function": "linaer"}),
    "unknown onnx operator": lambda d: _step(d)["parameters"].update(
        lin={"function": "onnx::Relux", "args": {"X": "x_prev"}}),
    "num_scan_inputs too large": lambda d: _node(d)["parameters"]["num_scan_inputs"].update(
        value=3),
    "no num_scan_inputs": lambda d: _node(d)["parameters"].pop("num_scan_inputs"),
    "a formal input too many": lambda d: _body(d)["metadata"]["formal_inputs"].append("z"),
    "a formal output that is no port": lambda d: _body(d)["metadata"]["formal_outputs"].__setitem__(
        0, "step.nope"),
    "an unbound body port": lambda d: _step(d)["input_ports"].update(y={}),
    "an output past the last": lambda d: _node(d)["output_ports"].update(
        z={"value": "integrate[5]"}),
    "no body": lambda d: _node(d)["parameters"].pop("body"),
    "an axis out of range": lambda d: _node(d)["parameters"].update(
        scan_input_axes={"value": [3]}),
    "a direction of 2": lambda d: _node(d)["parameters"].update(
        scan_input_directions={"value": [2]}),
    "an output value naming nothing": lambda d: _node(d)["output_ports"].update(
        z={"value": "linaer"}),
    "a parameter value naming nothing": lambda d: _step(d)["parameters"].update(
        q={"value": "linaer"}),
    "a value naming a port": lambda d: _step(d)["output_ports"].update(same={"value": "I_t"}),
    "a default that does not fit": lambda d: _node(d)["input_ports"]["I"][
        "default_value"].__setitem__(3, "x"),
    "an unreadable input type": lambda d: _node(d)["input_ports"]["I"]["metadata"][
        "onnx_type"]["tensorType"].update(shape={"dim": 3.5}),
    "a graph among nodes": lambda d: d["leaky_integrator"]["graphs"]["main"]["nodes"].update(
        sub={"nodes": {"a": {"parameters": {"p": {"value": 1}}}}}),
    "an edge to nowhere": lambda d: d["leaky_integrator"]["graphs"]["main"].update(
        edges={"e": {"sender": "integrate", "sender_port": "trace", "receiver": "nope",
                     "receiver_port": "i"}}),
    "an outer read of nothing": lambda d: _body(d)["metadata"]["outer_scope_inputs"].append(
        "nope"),
}


@pytest.mark.parametrize("mistake", list(_MISTAKES))
def test_validate_reports_exactly_when_run_refuses(tmp_path, mistake, caplog):
    if mistake == "a default that does not fit" and not INPUT_DEFAULTS:
        pytest.skip("InputPort.default_value needs modeci-mdf >= 0.4.14")
    path = _written(tmp_path, _MISTAKES[mistake])
    reported = validate(path)
    for backend in ("scheduler", "auto"):
        with caplog.at_level(logging.ERROR):
            try:
                out = mdf_loops.run(str(path), backend=backend)
            except MdfLoopsError:
                refused = True
            else:
                refused = False
                np.testing.assert_allclose(out["integrate.trace"], _leaky_trace(LEAKY), rtol=1e-9)
        assert refused == bool(reported), (backend, [str(p) for p in reported])


# ---------------------------------------------------------------- malformed documents

_ODD_VALUES = [None, 0, -1, 1.5, "x", "", [], {}, [1, "a"], {"a": 1}, True, {"nodes": {}},
               "linaer", "[x0, I"]


def _places(value, path=()):
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _places(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _places(item, path + (index,))


def test_validate_reports_and_never_crashes_on_malformed_documents():
    """150 copies of the example, each with one to three parts replaced by a value of
    another type (the same ones on every run): a list of problems, or a ModelError."""
    import random

    rng = random.Random(3)
    places = [p for p in _places(LEAKY) if p]
    for _ in range(150):
        document = copy.deepcopy(LEAKY)
        for _ in range(rng.randint(1, 3)):
            *outer, last = rng.choice(places)
            target = document
            try:
                for key in outer:
                    target = target[key]
                target[last] = copy.deepcopy(rng.choice(_ODD_VALUES))
            except (KeyError, IndexError, TypeError):
                continue  # an earlier replacement removed this place
        try:
            problems = validate(document)
        except ModelError:
            continue
        assert isinstance(problems, list)

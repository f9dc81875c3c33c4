"""mdf_loops.validation.report: the JSON Schema and the loop-node rules, each problem with its path.

Every rule is checked on a model with one deliberate mistake (built here by hand
or by editing the leaky-integrator example): the problem must be reported at the
path of the broken element with a message saying what was expected. Valid models
(every example, every ONNX conformance case with control flow) must give none.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from modeci_mdf.mdf import Node

import mdf_loops
from conftest import control_flow_cases, expression_node, loop_node, mdf_body, mdf_model
from mdf_loops.validation.report import Problem, read_document, validate

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
LEAKY = EXAMPLES / "leaky_integrator.json"
SCAN = "graphs.main.nodes.integrate"
BODY = f"{SCAN}.parameters.body.value.graph_integrator_step"


@pytest.fixture
def leaky() -> dict:
    """The leaky-integrator example as a document, with a handle on its parts."""
    return json.loads(LEAKY.read_text())


def _node(document: dict) -> dict:
    return document["leaky_integrator"]["graphs"]["main"]["nodes"]["integrate"]


def _body(document: dict) -> dict:
    return _node(document)["parameters"]["body"]["value"]["graph_integrator_step"]


def _messages(problems: list[Problem]) -> dict[str, str]:
    return {p.path: p.message for p in problems}


# ---------------------------------------------------------------- valid models


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.json")) + sorted(EXAMPLES.glob("*.yaml")),
                         ids=lambda p: p.name)
def test_every_example_file_is_valid(path):
    assert validate(path) == []


def test_every_onnx_conformance_case_with_control_flow_imports_valid():
    cases = control_flow_cases()
    assert len(cases) >= 38
    invalid = {name: validate(mdf_loops.onnx_to_mdf(case.model)) for name, case in cases.items()}
    assert {name: problems for name, problems in invalid.items() if problems} == {}


def test_a_model_object_and_its_document_are_both_accepted(leaky):
    assert validate(mdf_loops.load_model(LEAKY)) == []
    assert validate(leaky) == []


def test_an_onnx_file_is_imported_then_checked(tmp_path):
    case = control_flow_cases()["test_loop16_seq_none"]
    path = tmp_path / "loop16.onnx"
    path.write_bytes(case.model.SerializeToString())
    assert validate(path) == []


def test_the_packaged_schema_is_the_published_one():
    packaged = ROOT / "mdf_loops" / "schemas" / "loop-node.schema.json"
    assert json.loads(packaged.read_text()) == json.loads((ROOT / "schemas" / "loop-node.schema.json").read_text())


# ---------------------------------------------------------------- body signatures


def test_a_scan_body_with_one_formal_input_too_many(leaky):
    _body(leaky)["metadata"]["formal_inputs"].append("extra")
    problems = validate(leaky)
    assert [str(p) for p in problems] == [
        f"{SCAN}.parameters.body: expects 2 formal inputs (1 state + 1 scan input), found 3"
    ]


def test_a_scan_body_returning_fewer_values_than_its_states(leaky):
    _node(leaky)["input_ports"]["y0"] = {}
    _node(leaky)["parameters"]["integrate"]["args"]["initial_state_and_scan_inputs"] = "[x0, y0, I]"
    _body(leaky)["metadata"]["formal_inputs"] = ["x_prev", "y_prev", "I_t"]
    _body(leaky)["nodes"]["step"]["input_ports"]["y_prev"] = {}
    _body(leaky)["metadata"]["formal_outputs"] = ["step.x_next"]
    messages = _messages(validate(leaky))
    assert messages[f"{SCAN}.parameters.body"] == (
        "expects at least 2 formal outputs (the new 2 states, then scan-output elements), found 1")


def test_num_scan_inputs_larger_than_the_values_passed(leaky):
    _node(leaky)["parameters"]["num_scan_inputs"]["value"] = 3
    messages = _messages(validate(leaky))
    assert "is 3, but the node passes 2 values" in messages[f"{SCAN}.parameters.num_scan_inputs"]


def test_a_scan_without_num_scan_inputs(leaky):
    del _node(leaky)["parameters"]["num_scan_inputs"]
    messages = _messages(validate(leaky))
    assert messages[f"{SCAN}.parameters"] == "onnx::Scan needs an integer parameter 'num_scan_inputs'"


def _loop_model(carried_formals: int, body_outputs: int):
    """A Loop with two loop-carried values whose body declares ``carried_formals`` of them."""
    formals = ["i", "cond_in"] + [f"v{k}" for k in range(carried_formals)]
    node = expression_node("step", formals, {"cond_out": "cond_in", "a": "v0 + 1", "b": "v0 * 2"})
    outputs = ["step.cond_out", "step.a", "step.b"][:body_outputs]
    body = mdf_body("loop_body", [node], formals, outputs)
    loop = loop_node("counter", "Loop", {"M": "M", "v_initial": "[a0, b0]"}, {"body": body},
                     ["M", "a0", "b0"], n_outputs=2)
    return mdf_model(loop)


def test_a_loop_body_missing_a_loop_carried_formal_input():
    problems = validate(_loop_model(carried_formals=1, body_outputs=3))
    assert [str(p) for p in problems] == [
        "graphs.main.nodes.counter.parameters.body: expects 4 formal inputs (iteration number, "
        "condition, 2 loop-carried values), found 3"
    ]


def test_a_loop_body_returning_too_few_values():
    messages = _messages(validate(_loop_model(carried_formals=2, body_outputs=2)))
    assert messages["graphs.main.nodes.counter.parameters.body"].startswith(
        "expects at least 3 formal outputs (condition, 2 loop-carried values")


def test_a_correct_loop_has_no_problem():
    assert validate(_loop_model(carried_formals=2, body_outputs=3)) == []


def _if_model(else_outputs: int, then_formals=()):
    then = mdf_body("then_body", [expression_node("one", list(then_formals), {"y": "x + 1", "z": "x"})],
                    list(then_formals), ["one.y", "one.z"], outer_scope_inputs=["x"])
    other = mdf_body("else_body", [expression_node("two", [], {"y": "x - 1", "z": "x"})],
                     [], ["two.y", "two.z"][:else_outputs], outer_scope_inputs=["x"])
    branch = loop_node("choose", "If", {"cond": "c"}, {"then_branch": then, "else_branch": other},
                       ["c", "x"], n_outputs=2)
    return mdf_model(branch)


def test_if_branches_returning_different_numbers_of_values():
    messages = _messages(validate(_if_model(else_outputs=1)))
    assert messages["graphs.main.nodes.choose.parameters.else_branch"] == (
        "returns 1 value but then_branch returns 2; both must return the If node's outputs")


def test_an_if_branch_with_formal_inputs():
    messages = _messages(validate(_if_model(else_outputs=2, then_formals=["q"])))
    assert messages["graphs.main.nodes.choose.parameters.then_branch"].startswith(
        "expects no formal inputs")


def test_an_output_port_reading_past_the_last_output(leaky):
    _node(leaky)["output_ports"]["extra"] = {"value": "integrate[2]"}
    messages = _messages(validate(leaky))
    assert messages[f"{SCAN}.output_ports.extra.value"] == (
        "reads output 2 of 'integrate', but its body gives onnx::Scan 2 outputs")


def test_a_loop_node_without_its_body(leaky):
    del _node(leaky)["parameters"]["body"]
    messages = _messages(validate(leaky))
    assert messages[f"{SCAN}.parameters"] == "onnx::Scan needs a parameter 'body' holding its body graph"


# ---------------------------------------------------------------- axes


def test_a_scan_axis_out_of_range_for_a_declared_shape(leaky):
    _node(leaky)["input_ports"]["I"] = {"shape": [50]}
    _node(leaky)["parameters"]["scan_input_axes"] = {"value": [1]}
    messages = _messages(validate(leaky))
    assert messages[f"{SCAN}.parameters.scan_input_axes"] == (
        "axis 1 of entry 0 is out of range for a value of rank 1")


def test_a_scan_axis_out_of_range_for_a_declared_onnx_type(leaky):
    # the example declares I with mdf_loops.model.port_type("steps"): rank 1
    _node(leaky)["parameters"]["scan_input_axes"] = {"value": [1]}
    messages = _messages(validate(leaky))
    assert messages[f"{SCAN}.parameters.scan_input_axes"] == (
        "axis 1 of entry 0 is out of range for a value of rank 1")


def test_a_scan_axis_is_only_checked_where_the_shape_is_known(leaky):
    _node(leaky)["input_ports"]["I"] = {}  # no declared type: the rank is known only at run time
    _node(leaky)["parameters"]["scan_input_axes"] = {"value": [1]}
    assert validate(leaky) == []


def test_negative_axes_count_from_the_end(leaky):
    _node(leaky)["input_ports"]["I"] = {"shape": [50]}
    _node(leaky)["parameters"]["scan_input_axes"] = {"value": [-1]}
    assert validate(leaky) == []


def test_axis_and_direction_lists_of_the_wrong_length_and_values(leaky):
    _node(leaky)["parameters"]["scan_input_axes"] = {"value": [0, 0]}
    _node(leaky)["parameters"]["scan_output_directions"] = {"value": [2]}
    messages = _messages(validate(leaky))
    assert messages[f"{SCAN}.parameters.scan_input_axes"] == "has 2 entries, expected 1"
    assert messages[f"{SCAN}.parameters.scan_output_directions"] == (
        "entries must be 0 (forward) or 1 (backward), found [2]")


def test_an_output_axis_checked_against_the_onnx_type_of_the_output_port(leaky):
    trace_type = {"tensorType": {"elemType": 11, "shape": {"dim": [{"dimValue": "50"}]}}}
    _node(leaky)["output_ports"]["trace"]["metadata"] = {"onnx_type": trace_type}
    _node(leaky)["parameters"]["scan_output_axes"] = {"value": [1]}
    messages = _messages(validate(leaky))
    assert messages[f"{SCAN}.parameters.scan_output_axes"] == (
        "axis 1 of entry 0 is out of range for a value of rank 1")


# ---------------------------------------------------------------- ids, edges, references


def test_edges_whose_endpoints_do_not_exist(leaky):
    graph = leaky["leaky_integrator"]["graphs"]["main"]
    graph["nodes"]["source"] = {"output_ports": {"y": {"value": "1.0"}}}
    graph["edges"] = {
        "e1": {"sender": "ghost", "sender_port": "y", "receiver": "integrate", "receiver_port": "x0"},
        "e2": {"sender": "source", "sender_port": "y", "receiver": "integrate", "receiver_port": "zz"},
        "e3": {"sender": "source", "sender_port": "nope", "receiver": "integrate", "receiver_port": "I"},
    }
    messages = _messages(validate(leaky))
    assert messages["graphs.main.edges.e1.sender"] == "'ghost' is not a node of graph 'main'"
    assert messages["graphs.main.edges.e2.receiver_port"] == (
        "'zz' is not an input port of node 'integrate' (it has ['I', 'x0'])")
    assert messages["graphs.main.edges.e3.sender_port"] == (
        "'nope' is not an output port of node 'source' (it has ['y'])")


def test_an_outer_scope_read_the_loop_node_does_not_provide(leaky):
    _body(leaky)["metadata"]["outer_scope_inputs"] = ["gain"]
    messages = _messages(validate(leaky))
    assert messages[f"{BODY}.metadata.outer_scope_inputs[0]"] == (
        "'gain' is not an input port or parameter of the loop node 'integrate', so the body "
        "cannot read it")


def test_an_outer_scope_read_of_a_loop_parameter_resolves(leaky):
    _node(leaky)["parameters"]["gain"] = {"value": 2.0}
    _body(leaky)["metadata"]["outer_scope_inputs"] = ["gain"]
    _body(leaky)["nodes"]["step"]["input_ports"]["gain"] = {}
    assert validate(leaky) == []


def test_a_body_input_port_bound_by_nothing(leaky):
    _body(leaky)["nodes"]["step"]["input_ports"]["gain"] = {}
    messages = _messages(validate(leaky))
    assert messages[f"{BODY}.nodes.step.input_ports.gain"].startswith("is bound by nothing")


def test_a_body_input_port_with_a_default_is_bound(leaky):
    _body(leaky)["nodes"]["step"]["input_ports"]["gain"] = {"default_value": 1.0}
    assert validate(leaky) == []


def test_a_formal_output_that_is_no_output_port(leaky):
    _body(leaky)["metadata"]["formal_outputs"][1] = "step.x_nxt"
    messages = _messages(validate(leaky))
    assert messages[f"{BODY}.metadata.formal_outputs[1]"] == (
        "'step.x_nxt' is not an output port of a node of this graph")


def test_a_parameter_sharing_its_id_with_an_input_port(leaky):
    _body(leaky)["nodes"]["step"]["parameters"]["I_t"] = {"value": 1.0}
    messages = _messages(validate(leaky))
    assert messages[f"{BODY}.nodes.step.parameters.I_t"].startswith("has the same id as an input port")


def test_ids_repeated_in_a_json_file(tmp_path):
    text = LEAKY.read_text().replace('"x0": {', '"x0": {}, "x0": {', 1)
    path = tmp_path / "repeated.json"
    path.write_text(text)
    assert _messages(validate(path))[f"{SCAN}.input_ports"] == "'x0' is defined more than once"


def test_ids_repeated_in_a_yaml_file(tmp_path):
    text = (EXAMPLES / "leaky_integrator.yaml").read_text()
    line = "\n" + " " * 40 + "step:\n"
    assert text.count(line) == 1
    text = text.replace(line, "\n" + " " * 40 + "step: {}" + line)
    path = tmp_path / "repeated.yaml"
    path.write_text(text)
    assert _messages(validate(path))[f"{BODY}.nodes"] == "'step' is defined more than once"


def test_ids_repeated_in_a_model_object():
    model = _loop_model(carried_formals=2, body_outputs=3)
    model.graphs[0].nodes.append(Node(id="counter"))
    messages = _messages(validate(model))
    assert messages["graphs.main.nodes"] == "'counter' is defined more than once"


# ---------------------------------------------------------------- nesting, schema, all at once


def test_problems_deep_in_a_nested_body_have_their_full_path():
    document = json.loads((EXAMPLES / "nested_trials.json").read_text())
    model = document["nested_trials"]
    outer = model["graphs"]["main"]["nodes"]["trials"]["parameters"]["body"]["value"]
    (outer_key, outer_body), = outer.items()
    inner = outer_body["nodes"]["time_steps"]["parameters"]["body"]["value"]
    (inner_key, inner_body), = inner.items()
    inner_body["metadata"]["formal_inputs"].append("spare")
    problems = validate(document)
    assert [p.path for p in problems] == [
        f"graphs.main.nodes.trials.parameters.body.value.{outer_key}.nodes.time_steps.parameters.body"
    ]
    assert problems[0].message.startswith("expects 2 formal inputs")


def test_schema_problems_name_the_element_and_the_expectation(leaky):
    leaky["leaky_integrator"]["graphs"]["main"]["edges"] = 5
    del _body(leaky)["metadata"]
    messages = _messages(validate(leaky))
    assert messages["graphs.main.edges"] == "expected object, found integer"
    assert messages[BODY] == "'metadata' is a required property"


def test_a_bad_identifier_is_reported_where_it_is(leaky):
    _node(leaky)["input_ports"]["x.2"] = {}
    messages = _messages(validate(leaky))
    assert messages[f"{SCAN}.input_ports"] == (
        "'x.2' is not an id: an id is not empty and holds no '.', which splits the "
        "'node.port' of edges and output names; rename it"
    )


def test_an_id_modeci_mdf_onnx_importer_writes_is_valid_and_named_only_whole():
    # modeci-mdf's onnx_to_mdf names nodes and parameters by ONNX node names ('/A/Add')
    # and an output port's value by that parameter's id, which stock looks up whole
    # (tests/model/test_references.py runs such models against stock)
    def document(value: str) -> dict:
        return {"m": {"graphs": {"g": {"nodes": {"/A/Add": {
            "input_ports": {"x": {"shape": [2]}},
            "parameters": {"/A/Add": {"function": "onnx::Add", "args": {"A": "x", "B": "x"}}},
            "output_ports": {"out": {"value": value}},
        }}}}}}

    assert validate(document("/A/Add")) == []
    (problem,) = validate(document("/A/Add * 2"))
    assert problem.path == "graphs.g.nodes./A/Add.output_ports.out.value"
    assert "'/A/Add' is an id but not a Python name" in problem.message
    assert "exactly '/A/Add'" in problem.message


@pytest.mark.parametrize(
    "document, found",
    [([{"m": {}}], "expected object, found array"), (None, "expected object, found null"),
     ({"a": {"graphs": {}}, "b": {"graphs": {}}}, "expected at most 1 entries, found 2")],
)
def test_a_file_that_is_not_one_model_says_so(tmp_path, document, found):
    path = tmp_path / "not_a_model.json"
    path.write_text(json.dumps(document))
    messages = _messages(validate(path))
    assert messages[""] == f"an MDF file holds one model, {{model_id: {{...}}}}: {found}"


def test_every_problem_is_reported_not_only_the_first(leaky):
    _body(leaky)["metadata"]["formal_inputs"].append("extra")
    _body(leaky)["metadata"]["formal_outputs"][0] = "step.missing"
    _node(leaky)["output_ports"]["extra"] = {"value": "integrate[7]"}
    leaky["leaky_integrator"]["graphs"]["main"]["edges"] = {
        "e": {"sender": "a", "sender_port": "b", "receiver": "integrate", "receiver_port": "x0"}}
    assert len(validate(leaky)) == 4


def test_validate_leaves_the_document_unchanged(leaky):
    before = copy.deepcopy(leaky)
    _body(leaky)["metadata"]["formal_inputs"].append("extra")
    after_edit = copy.deepcopy(leaky)
    validate(leaky)
    assert leaky == after_edit != before


# ---------------------------------------------------------------- unreadable files


def test_a_missing_file(tmp_path):
    with pytest.raises(mdf_loops.errors.ModelError, match=r"absent\.json: no such file"):
        validate(tmp_path / "absent.json")


def test_malformed_json_names_line_and_column(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{\n  "m": {"graphs": }\n}\n')
    with pytest.raises(mdf_loops.errors.ModelError, match=r"broken\.json: not valid JSON: .*\(line 2, column 19\)"):
        read_document(path)


def test_malformed_yaml_names_line_and_column(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("m:\n  graphs: [1, 2\n")
    with pytest.raises(mdf_loops.errors.ModelError, match=r"broken\.yaml: not valid YAML: .*\(line 3, column 1\)"):
        validate(path)


def test_a_file_of_another_kind(tmp_path):
    path = tmp_path / "model.txt"
    path.write_text("{}")
    with pytest.raises(mdf_loops.errors.ModelError, match=r"model\.txt: expected a \.json, \.yaml"):
        validate(path)


def test_an_empty_yaml_file_is_one_problem(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert [str(p) for p in validate(path)] == [
        "an MDF file holds one model, {model_id: {...}}: expected object, found null"
    ]


def test_validate_reports_what_run_refuses(tmp_path):
    """The hostile files of the safety tests: validate names each problem run refuses."""
    import subprocess
    import sys

    from modeci_mdf.mdf import Condition, ConditionSet, Edge, Graph, InputPort, Model, Node
    from modeci_mdf.mdf import OutputPort, Parameter

    a = Node(id="a", input_ports=[InputPort(id="i")], output_ports=[OutputPort(id="o", value="i")],
             parameters=[Parameter(id="p", function="chunk # actr.chunk_to_string",
                                   args={"chunk": {"x": "1"}}),
                         Parameter(id="q", function="chunk_to_string",
                                   args={"chunk": {"x": "open('f', 'w')"}})])
    b = Node(id="b", input_ports=[InputPort(id="i")], output_ports=[OutputPort(id="o", value="i")])
    graph = Graph(id="g", nodes=[a, b], edges=[
        Edge(id="e", sender="a", sender_port="o", receiver="b", receiver_port="i",
             parameters={"weight": "x"})])
    graph.conditions = ConditionSet(termination={"t": Condition(type="NoSuchCondition")})
    path = tmp_path / "hostile.json"
    Model(id="m", graphs=[graph]).to_json_file(str(path))
    expected = {"graphs.g.nodes.a.parameters.p.function", "graphs.g.nodes.a.parameters.q.function",
                "graphs.g.nodes.a.parameters.q.args.chunk.x", "graphs.g.edges.e.parameters.weight",
                "graphs.g.conditions.termination.t"}
    assert {p.path for p in mdf_loops.validate(str(path))} >= expected
    with pytest.raises(mdf_loops.MdfLoopsError):
        mdf_loops.run(str(path))
    done = subprocess.run([sys.executable, "-m", "mdf_loops", "validate", str(path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert all(any(line.startswith(p) for line in done.stdout.splitlines()) for p in expected)

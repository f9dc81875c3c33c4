"""Model text never becomes code in an untrusted run, whatever path modeci-mdf takes.

Every payload here would create a marker file (or set a marker environment
variable) if it ran; each test asserts that nothing appears, and a control run
with ``trusted=True`` shows that the payload is live.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from modeci_mdf.functions.standard import mdf_functions
from modeci_mdf.mdf import Function, Graph, InputPort, Model, Node, OutputPort, Parameter

import mdf_loops
from mdf_loops.errors import MdfLoopsError
from mdf_loops.safety.checks import UnsafeExpressionError

MARKER_ENV = "MDF_LOOPS_TEST_MARKER"


def _payloads(marker: Path) -> list[str]:
    """Text that, evaluated anywhere, would leave a marker."""
    write = f"open({str(marker)!r}, 'w').write('ran')"
    env = f"__import__('os').environ.__setitem__({MARKER_ENV!r}, 'ran')"
    return [write, env, repr(write), repr(env), f"{write} # actr.chunk_to_string", "'exec'"]


def _nothing_ran(marker: Path) -> None:
    assert not marker.exists(), "a payload ran"
    assert MARKER_ENV not in os.environ, "a payload ran"


def _document(node: dict) -> dict:
    return {"m": {"format": "ModECI MDF v0.4", "graphs": {"main": {"nodes": {"n": node}}}}}


def _run_file(tmp_path: Path, node: dict, **kwargs):
    path = tmp_path / "model.json"
    path.write_text(json.dumps(_document(node)))
    return mdf_loops.run(str(path), backend="scheduler", **kwargs)


@pytest.fixture
def marker(tmp_path):
    os.environ.pop(MARKER_ENV, None)
    path = tmp_path / "marker"
    yield path
    os.environ.pop(MARKER_ENV, None)


def test_an_actr_function_with_code_in_a_chunk_is_refused_and_trusted_shows_it_is_live(
        tmp_path, marker):
    code = f"open({str(marker)!r}, 'w').write('ran') and 1"
    node = {"parameters": {"p": {"function": "chunk_to_string", "args": {"chunk": {"a": code}}}},
            "output_ports": {"out": {"value": "p"}}}
    with pytest.raises(UnsafeExpressionError) as error:
        _run_file(tmp_path, node)
    refused = {problem.path: problem.message for problem in error.value.problems}
    assert "chunk_to_string" in refused["graphs.main.nodes.n.parameters.p.function"]
    assert "graphs.main.nodes.n.parameters.p.args.chunk.a" in refused
    assert "\n" not in str(error.value)
    _nothing_ran(marker)
    _run_file(tmp_path, node, trusted=True)
    assert marker.exists()  # the control: stock modeci-mdf runs the chunk's text


@pytest.mark.parametrize("where", ["parameters", "functions"])
@pytest.mark.parametrize("function", ["pattern_to_string", "chunk # actr.chunk_to_string",
                                      "x # ddm.drift_diffusion_integrator",
                                      "y # onnx_ops.get_onnx_schema"])
def test_functions_modeci_mdf_dispatches_by_substring_are_refused(tmp_path, marker, where,
                                                                  function):
    node = {where: {"f": {"function": function, "args": {"chunk": {"a": "'1'"}}}},
            "output_ports": {"out": {"value": "f"}}}
    with pytest.raises(UnsafeExpressionError) as error:
        _run_file(tmp_path, node)
    assert f"graphs.main.nodes.n.{where}.f.function" in {p.path for p in error.value.problems}
    problems = mdf_loops.validate(str(tmp_path / "model.json"))
    assert any(p.path == f"graphs.main.nodes.n.{where}.f.function" for p in problems)
    _nothing_ran(marker)


def test_a_parameter_holding_a_builtins_name_gives_the_name_not_the_builtin(tmp_path):
    node = {"parameters": {"e": {"value": "'exec'"}}, "output_ports": {"out": {"value": "e"}}}
    assert str(_run_file(tmp_path, node)["n.out"]) == "exec"
    assert callable(_run_file(tmp_path, node, trusted=True)["n.out"])  # stock: the builtin


def test_an_input_port_default_read_by_name_is_data(tmp_path, marker):
    code = f"open({str(marker)!r}, 'w').write('ran')"
    node = {"input_ports": {"x": {"default_value": code}},
            "parameters": {"p": {"value": "x"}}, "output_ports": {"out": {"value": "p"}}}
    with pytest.raises(UnsafeExpressionError):
        _run_file(tmp_path, node)
    node["input_ports"]["x"]["default_value"] = repr(code)  # text whose text is code
    node["parameters"]["n"] = {"value": "y"}
    node["input_ports"]["y"] = {"default_value": "12"}
    node["output_ports"]["number"] = {"value": "n"}
    outputs = _run_file(tmp_path, node)
    assert str(outputs["n.out"]) == repr(code) and outputs["n.number"] == 12
    _nothing_ran(marker)
    node["input_ports"]["x"]["default_value"] = code
    _run_file(tmp_path, node, trusted=True)
    assert marker.exists()  # the control: modelspec evaluates the text a name holds


def test_code_nested_in_dict_and_list_args_is_refused(tmp_path, marker):
    code = f"open({str(marker)!r}, 'w')"
    node = {"parameters": {"p": {"function": "linear", "args": {
        "variable0": 1, "slope": [1, {"deep": [[code]]}], "intercept": 0}}},
        "output_ports": {"out": {"value": "p"}}}
    with pytest.raises(UnsafeExpressionError) as error:
        _run_file(tmp_path, node)
    assert "parameters.p.args.slope[1].deep[0][0]" in str(error.value)
    _nothing_ran(marker)


def test_an_edited_model_is_checked_again(marker):
    node = Node(id="n", input_ports=[InputPort(id="x")],
                output_ports=[OutputPort(id="y", value="x + 1")])
    model = Model(id="m", graphs=[Graph(id="main", nodes=[node])])
    assert mdf_loops.run(model, {"x": 1}, backend="scheduler")["n.y"] == 2
    node.output_ports[0].value = f"open({str(marker)!r}, 'w')"
    with pytest.raises(UnsafeExpressionError):
        mdf_loops.run(model, {"x": 1}, backend="scheduler")
    _nothing_ran(marker)


# ---------------------------------------------------------------- every standard function


def _carriers(payload: str) -> list:
    return [payload, {"a": payload, "b": {"c": [payload]}}, [payload, [payload]]]


def _standard_function_model(name: str, carrier, as_function: bool) -> Model:
    arguments = list(mdf_functions[name].get("arguments") or ["x"])
    args = {argument: carrier for argument in arguments}
    if as_function:
        node = Node(id="n", functions=[Function(id="f", function=name, args=args)],
                    output_ports=[OutputPort(id="out", value="f")])
    else:
        node = Node(id="n", parameters=[Parameter(id="f", function=name, args=args)],
                    output_ports=[OutputPort(id="out", value="f")])
    return Model(id="m", graphs=[Graph(id="main", nodes=[node])])


def _run_untrusted(model: Model) -> None:
    try:
        mdf_loops.run(model, backend="scheduler")
    except MdfLoopsError:
        pass  # refused, or failed on garbage arguments: both are fine, as long as nothing ran


def test_every_standard_function_with_payload_arguments_runs_nothing(marker):
    mdf_loops.register()
    for name in sorted(mdf_functions):
        for payload in _payloads(marker):
            for carrier in _carriers(payload):
                _run_untrusted(_standard_function_model(name, carrier, as_function=False))
                _nothing_ran(marker)


_JSON_LEAF = st.one_of(st.integers(-3, 3), st.just("x"), st.just("'text'"))


@settings(max_examples=150, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_standard_functions_with_nested_payloads_run_nothing(marker, data):
    mdf_loops.register()
    name = data.draw(st.sampled_from(sorted(mdf_functions)), label="function")
    payload = data.draw(st.sampled_from(_payloads(marker)), label="payload")
    leaves = st.one_of(_JSON_LEAF, st.just(payload))
    carrier = data.draw(st.recursive(leaves, lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("abc"), inner, max_size=3)),
        max_leaves=6), label="argument")
    as_function = data.draw(st.booleans(), label="in functions")
    _run_untrusted(_standard_function_model(name, carrier, as_function))
    _nothing_ran(marker)

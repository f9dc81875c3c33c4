"""Every error case of a loop node: one MdfLoopsError subclass naming the node (and iteration)."""

from __future__ import annotations

import numpy as np
import pytest
from modeci_mdf.mdf import Graph
from onnx import helper as oh

import mdf_loops
from conftest import (
    BOOL,
    FLOAT,
    INT64,
    body_graph,
    expression_node,
    loop_node,
    mdf_body,
    mdf_model,
    onnx_model,
    run_imported,
    run_mdf,
    value_info,
    input_port,
)


def _scan(body, inputs=("s0", "xs"), n_outputs=2, **attributes):
    args = {"initial_state_and_scan_inputs": "[" + ", ".join(inputs) + "]"}
    attributes.setdefault("num_scan_inputs", 1)
    return mdf_model(loop_node("my_scan", "Scan", args, {"body": body}, list(inputs), n_outputs,
                               attributes))


def _accumulate_body(formal_inputs=("s", "x"), formal_outputs=("step.s_next", "step.s_next")):
    step = expression_node("step", ["s", "x"], {"s_next": "s + x"})
    return mdf_body("accumulate", [step], formal_inputs, formal_outputs)


def _raises(error_type, model, inputs, *fragments, **run_kwargs):
    with pytest.raises(error_type) as info:
        run_mdf(model, inputs, **run_kwargs)
    assert isinstance(info.value, mdf_loops.MdfLoopsError)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


# ------------------------------------------------ Scan


def test_scan_state_changing_shape_names_node_and_iteration():
    step = expression_node("step", ["s", "x"], {"s_next": "s if x < 2 else numpy.append(s, x)"})
    body = mdf_body("grow", [step], ["s", "x"], ["step.s_next"])
    _raises(mdf_loops.errors.LoopError, _scan(body, n_outputs=1), {"s0": np.zeros(1), "xs": np.arange(5.0)},
            "my_scan", "iteration 2", "shape")


def test_imported_scan_state_changing_shape():
    body = body_graph([oh.make_node("Concat", ["s", "x"], ["s_next"], axis=0)],
                      [value_info("s", FLOAT, None), value_info("x", FLOAT, [1])],
                      [value_info("s_next", FLOAT, None)])
    model = onnx_model([oh.make_node("Scan", ["s0", "xs"], ["s_final"], name="growing_scan",
                                     body=body, num_scan_inputs=1)],
                       [value_info("s0", FLOAT, [1]), value_info("xs", FLOAT, [3, 1])],
                       [value_info("s_final", FLOAT, None)])
    with pytest.raises(mdf_loops.errors.LoopError, match=r"growing_scan.*iteration 0"):
        run_imported(model, {"s0": np.zeros(1, np.float32), "xs": np.ones((3, 1), np.float32)})


def test_scan_body_with_too_many_formal_inputs():
    step = expression_node("step", ["s", "x", "extra"], {"s_next": "s + x + extra"})
    body = mdf_body("b", [step], ["s", "x", "extra"], ["step.s_next"])
    _raises(mdf_loops.errors.LoopError, _scan(body, n_outputs=1), {"s0": 0.0, "xs": np.arange(3.0)},
            "my_scan", "3 formal inputs", "passes 2")


def test_imported_scan_body_with_wrong_number_of_inputs():
    body = body_graph([oh.make_node("Add", ["s", "x"], ["s_next"])],
                      [value_info("s", FLOAT, []), value_info("x", FLOAT, []),
                       value_info("unused", FLOAT, [])],
                      [value_info("s_next", FLOAT, [])])
    model = onnx_model([oh.make_node("Scan", ["s0", "xs"], ["s_final"], name="bad_scan",
                                     body=body, num_scan_inputs=1)],
                       [value_info("s0", FLOAT, []), value_info("xs", FLOAT, [3])],
                       [value_info("s_final", FLOAT, None)])
    with pytest.raises(mdf_loops.errors.LoopError, match="bad_scan"):
        run_imported(model, {"s0": np.zeros((), np.float32), "xs": np.ones(3, np.float32)})


def test_scan_body_with_fewer_outputs_than_states():
    step = expression_node("step", ["s", "t", "x"], {"s_next": "s + x"})
    body = mdf_body("b", [step], ["s", "t", "x"], ["step.s_next"])
    _raises(mdf_loops.errors.LoopError, _scan(body, inputs=("s0", "t0", "xs"), n_outputs=2),
            {"s0": 0.0, "t0": 0.0, "xs": np.arange(3.0)}, "my_scan", "1 outputs", "2 states")


def test_scan_inputs_of_different_lengths():
    step = expression_node("step", ["s", "x", "y"], {"s_next": "s + x * y"})
    body = mdf_body("b", [step], ["s", "x", "y"], ["step.s_next"])
    model = _scan(body, inputs=("s0", "xs", "ys"), n_outputs=1, num_scan_inputs=2)
    _raises(mdf_loops.errors.LoopError, model, {"s0": 0.0, "xs": np.arange(3.0), "ys": np.arange(4.0)},
            "my_scan", "input 0: 3", "input 1: 4")


@pytest.mark.parametrize("attribute,axes,fragment", [
    ("scan_input_axes", [2], "scan_input_axes[0] = 2"),
    ("scan_input_axes", [-3], "scan_input_axes[0] = -3"),
    ("scan_output_axes", [2], "scan_output_axes[0] = 2"),
    ("scan_output_axes", [-3], "scan_output_axes[0] = -3"),
])
def test_scan_axis_out_of_range(attribute, axes, fragment):
    model = _scan(_accumulate_body(), **{attribute: axes})
    _raises(mdf_loops.errors.LoopError, model, {"s0": np.zeros(2), "xs": np.ones((3, 2))},
            "my_scan", fragment, "out of range")


def test_scan_attribute_list_of_wrong_length():
    model = _scan(_accumulate_body(), scan_input_directions=[0, 1])
    _raises(mdf_loops.errors.LoopError, model, {"s0": np.zeros(2), "xs": np.ones((3, 2))},
            "my_scan", "scan_input_directions")


# ------------------------------------------------ bodies that break the convention


def test_body_port_not_bound():
    step = expression_node("step", ["s", "x", "ghost"], {"s_next": "s + x + ghost"})
    body = mdf_body("haunted", [step], ["s", "x"], ["step.s_next"])
    _raises(mdf_loops.errors.ModelError, _scan(body, n_outputs=1), {"s0": 0.0, "xs": np.arange(3.0)},
            "my_scan", "step.ghost")


def test_body_reads_outer_value_the_node_does_not_carry():
    step = expression_node("step", ["s", "x", "w"], {"s_next": "s + x * w"})
    body = mdf_body("b", [step], ["s", "x"], ["step.s_next"], outer_scope_inputs=["w"])
    _raises(mdf_loops.errors.ModelError, _scan(body, n_outputs=1), {"s0": 0.0, "xs": np.arange(3.0)},
            "my_scan", "'w'")


def test_body_without_signature():
    bare = Graph(id="bare", nodes=[expression_node("step", ["s", "x"], {"s_next": "s + x"})])
    _raises(mdf_loops.errors.ModelError, _scan(bare, n_outputs=1), {"s0": 0.0, "xs": np.arange(3.0)},
            "my_scan", "formal_inputs")


def test_error_inside_body_names_node_iteration_and_body_node():
    step = expression_node("step", ["s", "x"], {"s_next": "s + numpy.ones(2)[int(x)]"})
    body = mdf_body("b", [step], ["s", "x"], ["step.s_next"])
    _raises(mdf_loops.errors.EvaluationError, _scan(body, n_outputs=1),
            {"s0": np.zeros(1), "xs": np.arange(5.0)}, "my_scan", "iteration 2", "step")


# ------------------------------------------------ Loop and If


def _loop(body, args, inputs, n_outputs):
    return mdf_model(loop_node("my_loop", "Loop", args, {"body": body}, inputs, n_outputs))


def test_loop_body_with_wrong_number_of_inputs():
    step = expression_node("step", ["i", "v"], {"c_out": "True", "v_out": "v"})
    body = mdf_body("b", [step], ["i", "v"], ["step.c_out", "step.v_out"])
    model = _loop(body, {"M": "M", "v_initial": "[v0]"}, ["M", "v0"], 1)
    _raises(mdf_loops.errors.LoopError, model, {"M": np.array(5), "v0": np.zeros(1)},
            "my_loop", "2 formal inputs")


def test_loop_body_with_too_few_outputs():
    step = expression_node("step", ["i", "c", "v", "w"], {"c_out": "c", "v_out": "v"})
    body = mdf_body("b", [step], ["i", "c", "v", "w"], ["step.c_out", "step.v_out"])
    model = _loop(body, {"M": "M", "v_initial": "[v0, w0]"}, ["M", "v0", "w0"], 2)
    _raises(mdf_loops.errors.LoopError, model, {"M": np.array(5), "v0": np.zeros(1), "w0": np.zeros(1)},
            "my_loop", "2 outputs")


def test_loop_scan_output_changing_shape():
    step = expression_node("step", ["i", "c", "v"],
                           {"c_out": "c", "v_out": "v", "y": "numpy.ones(int(i) // 3 + 1)"})
    body = mdf_body("b", [step], ["i", "c", "v"], ["step.c_out", "step.v_out", "step.y"])
    model = _loop(body, {"M": "M", "v_initial": "[v0]"}, ["M", "v0"], 2)
    _raises(mdf_loops.errors.LoopError, model, {"M": np.array(5), "v0": np.zeros(1)},
            "my_loop", "iteration 3", "scan output 0")


def test_loop_condition_not_a_scalar():
    step = expression_node("step", ["i", "c", "v"],
                           {"c_out": "numpy.array([True, True])", "v_out": "v"})
    body = mdf_body("b", [step], ["i", "c", "v"], ["step.c_out", "step.v_out"])
    model = _loop(body, {"M": "M", "cond": "c0", "v_initial": "[v0]"}, ["M", "c0", "v0"], 1)
    _raises(mdf_loops.errors.LoopError, model,
            {"M": np.array(5), "c0": np.array(True), "v0": np.zeros(1)},
            "my_loop", "iteration 0", "one boolean")


@pytest.mark.parametrize("backend", ["scheduler", "torch", "jax", "onnxruntime"])
def test_loop_condition_not_one_boolean_is_one_error_on_every_backend(backend):
    # the reference (ops/loop.py, run by the scheduler) refuses a body condition of two
    # booleans; the compiled backends refuse it with its words and name the node
    # (onnxruntime itself runs such a loop: the guard of an untrusted model sees it)
    pytest.importorskip(backend if backend in ("torch", "jax") else "numpy")
    step = expression_node("step", ["i", "c", "v"], {"c_out": "v > -1", "v_out": "v"})
    body = mdf_body("b", [step], ["i", "c", "v"], ["step.c_out", "step.v_out"])
    model = _loop(body, {"M": "M", "cond": "c0", "v_initial": "[v0]"}, ["M", "c0", "v0"], 1)
    inputs = {"M": np.array(5), "c0": np.array(True), "v0": np.zeros(2)}
    with pytest.raises(mdf_loops.errors.LoopError) as info:
        mdf_loops.run(model, inputs, backend=backend)
    message = str(info.value)
    assert "node 'my_loop'" in message
    assert "body condition output must hold one boolean, got shape (2,)" in message


@pytest.mark.parametrize("how", ["run_argument", "limits_context"])
def test_loop_without_end_hits_the_iteration_limit(how):
    # the body's condition stays true: only the iteration limit stops the loop
    step = expression_node("step", ["i", "c", "v"], {"c_out": "True", "v_out": "v + 1"})
    body = mdf_body("b", [step], ["i", "c", "v"], ["step.c_out", "step.v_out"])
    model = _loop(body, {"v_initial": "[v0]"}, ["v0"], 1)
    if how == "run_argument":
        message = _raises(mdf_loops.errors.IterationLimitError, model, {"v0": np.zeros(1)},
                          "my_loop", "50", max_iterations=50)
    else:
        with mdf_loops.safety.limits(max_iterations=50):
            message = _raises(mdf_loops.errors.IterationLimitError, model, {"v0": np.zeros(1)},
                              "my_loop", "50")
    assert "max_iterations" in message  # how to raise the limit


def test_imported_infinite_loop_hits_the_iteration_limit():
    body = body_graph(
        [oh.make_node("Add", ["v", "one"], ["v_next"]), oh.make_node("Identity", ["c"], ["c_out"])],
        [value_info("i", INT64, []), value_info("c", BOOL, []), value_info("v", FLOAT, [])],
        [value_info("c_out", BOOL, []), value_info("v_next", FLOAT, [])],
    )
    model = onnx_model([oh.make_node("Loop", ["", "", "v0"], ["v_final"], name="forever", body=body)],
                       [value_info("v0", FLOAT, [])], [value_info("v_final", FLOAT, None)],
                       initializers=[oh.make_tensor("one", FLOAT, [], [1.0])])
    with pytest.raises(mdf_loops.errors.IterationLimitError, match=r"forever.*max_iterations"):
        run_imported(model, {"v0": np.zeros((), np.float32)}, max_iterations=20)


def test_if_condition_not_a_scalar():
    pick = expression_node("pick", ["u"], {"out": "u"})
    branch = mdf_body("branch", [pick], [], ["pick.out"], outer_scope_inputs=["u"])
    model = mdf_model(loop_node("my_if", "If", {"cond": "flag"},
                                {"then_branch": branch, "else_branch": branch}, ["flag", "u"], 1))
    _raises(mdf_loops.errors.LoopError, model, {"flag": np.array([True, False]), "u": np.zeros(1)},
            "my_if", "one boolean")


# ------------------------------------------------ quiet execution


def test_nothing_is_printed_per_iteration(capfd):
    step = expression_node("step", ["s", "x"], {"s_next": "s * 0.5 + x"})
    body = mdf_body("b", [step], ["s", "x"], ["step.s_next", "step.s_next"])
    xs = np.ones(2000)
    results = run_mdf(_scan(body), {"s0": 0.0, "xs": xs})
    captured = capfd.readouterr()
    assert captured.out == ""
    assert captured.err == ""
    assert results["my_scan.out1"].shape == (2000,)
    np.testing.assert_allclose(results["my_scan.out0"], 2.0 * (1 - 0.5 ** 2000))


def test_imported_scan_prints_nothing(capfd):
    """The same for a body of ONNX operators (the engine's onnx_ops path)."""
    body = body_graph([oh.make_node("Add", ["s", "x"], ["s_next"]),
                       oh.make_node("Identity", ["s_next"], ["y"])],
                      [value_info("s", FLOAT, []), value_info("x", FLOAT, [])],
                      [value_info("s_next", FLOAT, []), value_info("y", FLOAT, [])])
    model = onnx_model([oh.make_node("Scan", ["s0", "xs"], ["s_final", "ys"], body=body,
                                     num_scan_inputs=1)],
                       [value_info("s0", FLOAT, []), value_info("xs", FLOAT, ["T"])],
                       [value_info("s_final", FLOAT, None), value_info("ys", FLOAT, None)])
    results = run_imported(model, {"s0": np.zeros((), np.float32), "xs": np.ones(300, np.float32)})
    captured = capfd.readouterr()
    assert captured.out == ""
    assert captured.err == ""
    np.testing.assert_array_equal(results["ys"], np.arange(1, 301, dtype=np.float32))


# ------------------------------------------------ mistakes of a model written by hand, and of inputs

import copy  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
from pathlib import Path  # noqa: E402

LEAKY = Path(__file__).resolve().parent.parent / "examples" / "leaky_integrator.json"


def _leaky_variant(tmp_path: Path, edit) -> Path:
    """The leaky integrator example with one mistake written into its file."""
    document = json.loads(LEAKY.read_text())
    model = document["leaky_integrator"]
    node = model["graphs"]["main"]["nodes"]["integrate"]
    edit(node, node["parameters"]["body"]["value"]["graph_integrator_step"])
    path = tmp_path / "variant.json"
    path.write_text(json.dumps(document))
    return path


def _validate_and_run(path: Path, *fragments: str) -> None:
    """``validate`` lists the problem and ``run`` refuses the model, both naming the cause."""
    problems = [str(p) for p in mdf_loops.validate(path)]
    assert any(all(f in p for f in fragments) for p in problems), problems
    with pytest.raises(mdf_loops.errors.ModelError) as info:
        mdf_loops.run(path)
    assert all(f in str(info.value) for f in fragments), str(info.value)


def test_unknown_function_name_names_the_nearest_registered_one(tmp_path):
    def edit(node, body):
        node["parameters"]["integrate"]["function"] = "onnx::scan"
    _validate_and_run(_leaky_variant(tmp_path, edit), "parameters.integrate.function",
                      "unknown function 'onnx::scan'; did you mean 'onnx::Scan'")


def test_a_syntax_error_gives_its_position(tmp_path):
    def edit(node, body):
        body["nodes"]["step"]["output_ports"]["x_next"]["value"] = "x_prev + dt * (-x_prev + I_t"
    _validate_and_run(_leaky_variant(tmp_path, edit), "output_ports.x_next.value",
                      "is not a valid expression: '(' was never closed",
                      "column 15: `x_prev + dt * (` <- here")


def test_an_unknown_name_in_an_expression_names_the_nearest(tmp_path):
    def edit(node, body):
        body["nodes"]["step"]["output_ports"]["x_next"]["value"] = "x_prev + dt * (I_t - x_prev) / tua"
    problems = [str(p) for p in mdf_loops.validate(_leaky_variant(tmp_path, edit))]
    assert len(problems) == 1
    assert "'tua' is not a port, parameter or function of this node; did you mean 'tau'?" \
        in problems[0]


def test_an_unbound_body_port_names_the_formal_input_it_probably_is(tmp_path):
    def edit(node, body):
        ports = body["nodes"]["step"]["input_ports"]
        ports["xt"] = ports.pop("I_t")
    problems = [str(p) for p in mdf_loops.validate(_leaky_variant(tmp_path, edit))]
    assert any("input_ports.xt: is bound by nothing" in p and "did you mean 'I_t'" in p
               for p in problems), problems


def test_a_body_graph_without_id_is_caught_by_validate_and_by_the_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    path = _leaky_variant(tmp_path, lambda node, body: body.pop("id"))
    problems = [str(p) for p in mdf_loops.validate(path)]
    assert any("the body graph has no 'id'; write \"id\": \"integrator_step\"" in p
               for p in problems), problems
    schema = json.loads((Path(mdf_loops.__file__).parent / "schemas" /
                         "loop-node.schema.json").read_text())
    def messages(errors):
        for error in errors:
            yield error.message
            yield from messages(error.context or ())
    errors = jsonschema.Draft202012Validator(schema).iter_errors(json.loads(path.read_text()))
    assert "'id' is a required property" in set(messages(errors))
    with pytest.raises(mdf_loops.errors.ModelError, match="got a graph without 'id'"):
        mdf_loops.run(mdf_loops.load_model(path), backend="scheduler")


def test_export_of_an_untyped_input_names_example_inputs_and_port_type(tmp_path):
    def edit(node, body):
        for port in node["input_ports"].values():
            port.pop("metadata")
            port.pop("default_value")
    with pytest.raises(mdf_loops.errors.ModelError) as info:
        mdf_loops.mdf_to_onnx(_leaky_variant(tmp_path, edit))
    message = str(info.value)
    assert "input 'x0': its type and rank are unknown" in message
    assert "example_inputs={'x0': ...}" in message and "mdf_loops.model.port_type(" in message


def test_export_of_an_untyped_input_on_the_command_line_names_dash_i(tmp_path, capsys):
    from mdf_loops.cli import main

    def edit(node, body):
        for port in node["input_ports"].values():
            port.pop("metadata")
            port.pop("default_value")
    path = _leaky_variant(tmp_path, edit)
    assert main(["export", str(path), "-o", str(tmp_path / "out.onnx")]) == 1
    err = capsys.readouterr().err
    assert "give an example value with -i x0=VALUE" in err and "example_inputs" not in err


# ------------------------------------------------ inputs of run(): declared types, shapes, defaults


def test_run_refuses_a_string_input_naming_it():
    with pytest.raises(mdf_loops.errors.ModelError, match="input 'x0': expected numbers or booleans"):
        mdf_loops.run(LEAKY, {"x0": "zero"})


def test_run_refuses_a_float_for_a_declared_integer_input():
    power = Path(LEAKY).parent / "theano_power.json"
    with pytest.raises(mdf_loops.errors.ModelError, match="input 'k': float64 values .* int32"):
        mdf_loops.run(power, {"k": 2.5})
    out = mdf_loops.run(power, {"k": 3})  # a Python int takes the declared int32
    np.testing.assert_array_equal(out["A_to_the_k"], np.arange(10, dtype=np.float32) ** 3)


def test_run_refuses_a_shape_the_model_does_not_declare():
    with pytest.raises(mdf_loops.errors.ModelError, match=r"input 'I': expected shape \[\?\].*got \[2, 2\]"):
        mdf_loops.run(LEAKY, {"I": np.ones((2, 2))})


def _counting_loop(typed: bool):
    """A hand-written Loop: ``total`` counts the iterations; its trip count ``n`` is an input."""
    from modeci_mdf.mdf import InputPort, Model, Node, OutputPort, Parameter

    step = expression_node("step", ["i", "c", "total"], {"cond_out": "c", "total_next": "total + 1"})
    body = mdf_body("count", [step], ("i", "c", "total"), ("step.cond_out", "step.total_next"))
    node = Node(id="counter")
    node.input_ports += [InputPort(id="n", metadata=mdf_loops.model.port_type(dtype="int64") if typed else None),
                         input_port("go", True), input_port("zero", 0.0)]
    node.parameters += [Parameter(id="body", value=mdf_loops.model.wrap_body(body)),
                        Parameter(id="counter", function="onnx::Loop",
                                  args={"M": "n", "cond": "go", "v_initial": "[zero]"})]
    node.output_ports.append(OutputPort(id="total", value="counter[0]"))
    return Model(id="counting", graphs=[Graph(id="main", nodes=[node])])


@pytest.mark.parametrize("typed", [True, False], ids=["declared", "undeclared"])
def test_a_trip_count_given_as_a_python_int_is_int64_and_compiles(typed, caplog):
    caplog.set_level(logging.INFO, logger="mdf_loops")
    out = mdf_loops.run(_counting_loop(typed), {"n": 3})
    assert float(out["counter.total"]) == 3.0
    assert not [r for r in caplog.records if "runs on the scheduler" in r.getMessage()]


def test_auto_falls_back_at_compile_time_with_a_warning_giving_the_reason(caplog):
    from modeci_mdf.mdf import Parameter

    model = _counting_loop(True)
    # a stateful MDF parameter (a value that changes from run to run) cannot be compiled
    model.graphs[0].nodes[0].parameters.append(Parameter(id="runs", value="runs + 1",
                                                         default_initial_value=0))
    with caplog.at_level(logging.WARNING, logger="mdf_loops"):
        out = mdf_loops.run(model, {"n": 2})
    assert float(out["counter.total"]) == 2.0
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "model 'counting' runs on the scheduler, not onnxruntime" in warnings[0].getMessage()
    assert "runs" in warnings[0].getMessage().split(":", 1)[1]  # the reason names the parameter


def test_auto_reruns_on_the_scheduler_after_a_failure_on_onnxruntime_and_gives_its_error(
        monkeypatch, caplog):
    import importlib

    run_module = importlib.import_module("mdf_loops.run")
    from mdf_loops.backends.onnxruntime.compiled import CompiledModel

    def fail(self, inputs):
        raise RuntimeError("onnxruntime failed")

    def scheduler_fails(*args):
        raise mdf_loops.errors.EvaluationError("the scheduler's own error", "node 'counter'")

    monkeypatch.setattr(CompiledModel, "run", fail)
    with caplog.at_level(logging.WARNING, logger="mdf_loops"):
        assert float(mdf_loops.run(_counting_loop(True), {"n": 2})["counter.total"]) == 2.0
    assert "onnxruntime cannot run it: onnxruntime failed" in caplog.text
    monkeypatch.setattr(run_module, "_run_scheduler", scheduler_fails)
    with pytest.raises(mdf_loops.errors.EvaluationError, match="node 'counter': the scheduler's"):
        mdf_loops.run(_counting_loop(True), {"n": 2})
    with pytest.raises(mdf_loops.errors.EvaluationError,
                       match="onnxruntime failed; backend='auto' or 'scheduler'") as info:
        mdf_loops.run(_counting_loop(True), {"n": 2}, backend="onnxruntime")
    assert info.value.__suppress_context__  # no traceback of onnxruntime's under ours


@pytest.mark.parametrize("declaration", [{"tensorType": {"elemType": "A"}},
                                         {"tensorType": {"elemType": -1}},
                                         {"tensorType": {"shape": {"dim": [{"dimValue": {}}]}}},
                                         {"tensorType": {"shape": 3}}])
def test_a_malformed_input_declaration_is_a_model_error_naming_the_port(declaration):
    model = mdf_loops.load_model(LEAKY)
    model.graphs[0].nodes[0].input_ports[0].metadata = {"onnx_type": declaration}
    with pytest.raises(mdf_loops.errors.ModelError, match="input port 'x0': metadata 'onnx_type' is not an ONNX type"):
        mdf_loops.run(model, {"x0": 0.0})


def test_an_undeclared_trip_count_takes_whole_floats_and_refuses_fractions():
    out = mdf_loops.run(_counting_loop(False), {"n": 4.0})
    assert float(out["counter.total"]) == 4.0
    with pytest.raises(mdf_loops.errors.ModelError, match="input 'n': float64 values .* trip count of "
                                                   "loop node 'counter', which is int64"):
        mdf_loops.run(_counting_loop(False), {"n": 2.5})


# ---------------------------------------------------------------- message templates

#: words a sentence does not end with: a message ending so was cut short
_DANGLING = {"a", "an", "and", "as", "at", "by", "for", "from", "in", "is", "named", "of", "on",
             "or", "than", "that", "the", "to", "which", "with"}


def _message_tails():
    """The literal end of each message the package raises or logs, with its place."""
    import ast
    from pathlib import Path

    def tail(expr):
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return expr.value
        if isinstance(expr, ast.JoinedStr) and expr.values:
            return tail(expr.values[-1])
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            return tail(expr.right)
        return None  # ends with a formatted value: the value completes it

    package = Path(mdf_loops.__file__).parent
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            call = node.exc if isinstance(node, ast.Raise) else node
            if not isinstance(call, ast.Call) or not call.args:
                continue
            logged = isinstance(call.func, ast.Attribute) and call.func.attr in (
                "warning", "error", "critical", "warn")
            if isinstance(node, ast.Raise) or logged:
                text = tail(call.args[0])
                if text:
                    yield f"{path.relative_to(package)}:{call.lineno}", text


def test_every_message_template_ends_in_a_whole_sentence():
    tails = dict(_message_tails())
    assert len(tails) > 200  # the walk finds the package's messages
    cut = {where: text[-50:] for where, text in tails.items()
           if text.rstrip()[-1:].isalpha() and text.split()[-1].lower() in _DANGLING
           or text.rstrip().endswith((",", "(", ":"))}
    assert cut == {}


def test_the_export_checker_refusal_ends_in_a_whole_sentence():
    """The refusal auto's fallback WARNING quotes: it named a node and then stopped."""
    from onnx import TensorProto

    from mdf_loops.onnx.export import _check

    bad = oh.make_model(oh.make_graph(
        [oh.make_node("Add", ["x", "y"], ["z"], name="adder")], "g",
        [oh.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
         oh.make_tensor_value_info("y", TensorProto.INT64, [2])],
        [oh.make_tensor_value_info("z", TensorProto.FLOAT, [2])]))
    with pytest.raises(mdf_loops.errors.ModelError) as caught:
        _check(bad, "main")
    message = str(caught.value)
    assert message.startswith("graph 'main': the exported ONNX model fails onnx.checker")
    assert "adder" in message  # the checker's text names the node
    assert message.endswith("or fix the node the checker names")

"""MDF -> ONNX (mdf_loops/onnx/export.py): conformance cases, loop bodies, types and errors.

Oracles: the ONNX conformance cases' expected outputs, numpy computations written
here, and onnxruntime (one thread) on the exported model compared with
``mdf_loops.run`` on modeci-mdf's scheduler (``run_mdf``).
"""

from __future__ import annotations

import functools
import json

import numpy as np
import onnx
import onnxruntime
import pytest
from modeci_mdf.mdf import Edge, Graph, InputPort, Model, Node, OutputPort, Parameter
from onnx.reference import ReferenceEvaluator

import mdf_loops
from conftest import (
    assert_same,
    control_flow_cases,
    expression_node,
    loop_node,
    mdf_body,
    mdf_model,
    onnxruntime_runs_case,
    ort_run,
    run_mdf,
)
from mdf_loops.onnx.export import DEFAULT_OPSET, export_model, mdf_to_onnx, save_onnx

#: float32 tolerance
RTOL, ATOL = 1e-5, 1e-6


def _exported(model, **kwargs) -> onnx.ModelProto:
    """``mdf_to_onnx`` whose result must pass the full checker."""
    result = mdf_to_onnx(model, **kwargs)
    onnx.checker.check_model(result, full_check=True)
    return result


# ---------------------------------------------------------------- conformance cases


def test_onnxruntime_runs_the_conformance_cases_of_older_opsets():
    """Cases every supported onnxruntime runs (the rest are decided per case)."""
    for name in ("test_loop11", "test_loop13_seq", "test_loop16_seq_none", "test_scan9_sum",
                 "test_if", "test_if_seq", "test_if_opt"):
        assert onnxruntime_runs_case(name), name


@pytest.mark.parametrize("name", sorted(control_flow_cases()))
def test_conformance_case_exports(name):
    """Every case exports and passes the full checker. Where onnxruntime accepts the original,
    it runs the export, which must give the expected outputs and those of ``mdf_loops.run``;
    the others (opsets newer than onnxruntime's) run in onnx's reference evaluator, which
    must give the same outputs for the export and the original."""
    case = control_flow_cases()[name]
    model = mdf_loops.onnx_to_mdf(case.model)
    exported = _exported(model)
    original_opset = next(o.version for o in case.model.opset_import if o.domain in ("", "ai.onnx"))
    assert next(o.version for o in exported.opset_import if o.domain == "") == original_opset
    input_names = [vi.name for vi in case.model.graph.input]
    output_names = [vi.name for vi in case.model.graph.output]
    assert [vi.name for vi in exported.graph.input] == input_names
    assert [vi.name for vi in exported.graph.output] == output_names
    for inputs, expected_outputs in case.data_sets:
        feeds = {k: v if isinstance(v, list) else np.asarray(v) for k, v in zip(input_names, inputs)}
        if not onnxruntime_runs_case(name):
            expected = ReferenceEvaluator(case.model).run(None, feeds)
            actual = ReferenceEvaluator(exported).run(None, feeds)
            for a, e in zip(actual, expected, strict=True):
                assert_same(np.asarray(a), np.asarray(e), RTOL, ATOL)
            continue
        exported_outputs = ort_run(exported, feeds)
        scheduled = run_mdf(model, feeds)
        for output_name, expected in zip(output_names, expected_outputs):
            assert_same(exported_outputs[output_name], expected, RTOL, ATOL)
            assert_same(exported_outputs[output_name], scheduled[output_name], RTOL, ATOL)


# ---------------------------------------------------------------- graphs without loops


def _chain_model() -> Model:
    """y = relu(a + b) * 3, as an onnx:: node, an onnx:: node and a value expression."""
    add = Node(id="add", input_ports=[InputPort(id="a"), InputPort(id="b")],
               parameters=[Parameter(id="sum", function="onnx::Add", args={"A": "a", "B": "b"})],
               output_ports=[OutputPort(id="out", value="sum")])
    relu = Node(id="relu", input_ports=[InputPort(id="x")],
                parameters=[Parameter(id="r", function="onnx::Relu", args={"X": "x"})],
                output_ports=[OutputPort(id="out", value="r")])
    scale = expression_node("scale", ["x"], {"y": "x * 3"})
    edges = [Edge(id="e1", sender="add", sender_port="out", receiver="relu", receiver_port="x"),
             Edge(id="e2", sender="relu", sender_port="out", receiver="scale", receiver_port="x")]
    return mdf_model(add, relu, scale, edges=edges)


def test_graph_without_loops_exports(rng):
    a, b = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    exported = _exported(_chain_model(), example_inputs={"a": a, "b": b})
    assert [i.name for i in exported.graph.input] == ["a", "b"]
    assert [o.name for o in exported.graph.output] == ["scale.y"]
    out = ort_run(exported, {"a": a, "b": b})["scale.y"]
    assert_same(out, np.maximum(a + b, 0) * 3)


def test_edge_weight_multiplies_the_value(rng):
    source = expression_node("source", ["x"], {"y": "x + 1"})
    sink = expression_node("sink", ["v"], {"z": "v"})
    edge = Edge(id="e", sender="source", sender_port="y", receiver="sink", receiver_port="v",
                parameters={"weight": 2.5})
    x = rng.normal(size=4)
    out = ort_run(_exported(mdf_model(source, sink, edges=[edge]), example_inputs={"x": x}), {"x": x})
    assert_same(out["sink.z"], (x + 1) * 2.5)


def test_save_onnx_writes_a_loadable_model(tmp_path, rng):
    a, b = rng.normal(size=3), rng.normal(size=3)
    path = tmp_path / "chain.onnx"
    save_onnx(_chain_model(), path, example_inputs={"a": a, "b": b})
    loaded = onnx.load(str(path))
    onnx.checker.check_model(loaded, full_check=True)
    assert_same(ort_run(loaded, {"a": a, "b": b})["scale.y"], np.maximum(a + b, 0) * 3)


def test_opset_default_declared_and_from_the_model():
    a = np.zeros(2)
    exported = _exported(_chain_model(), example_inputs={"a": a, "b": a})
    assert [(o.domain, o.version) for o in exported.opset_import] == [("", DEFAULT_OPSET)]
    assert exported.ir_version == onnx.helper.find_min_ir_version_for(list(exported.opset_import))
    model = _chain_model()
    model.onnx_opset_version = 17
    assert _exported(model, example_inputs={"a": a, "b": a}).opset_import[0].version == 17
    assert _exported(_chain_model(), example_inputs={"a": a, "b": a}, opset=18).opset_import[0].version == 18


# ---------------------------------------------------------------- types of inputs and outputs


def _tensor_type(value_info: onnx.ValueInfoProto) -> tuple:
    tensor = value_info.type.tensor_type
    dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)
    return onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type), dims


def test_untyped_input_port_with_a_shape_is_float64():
    node = expression_node("n", ["x"], {"y": "x * 2"})
    node.input_ports[0].shape = (3,)
    exported = _exported(mdf_model(node))
    assert _tensor_type(exported.graph.input[0]) == (np.float64, (3,))
    assert _tensor_type(exported.graph.output[0]) == (np.float64, (3,))


def test_declared_port_type_and_shape_are_kept():
    node = expression_node("n", ["x"], {"y": "x * 0.5 + 1"})
    node.input_ports[0].shape, node.input_ports[0].type = (2, 3), "float32"
    exported = _exported(mdf_model(node))
    assert _tensor_type(exported.graph.input[0]) == (np.float32, (2, 3))
    assert _tensor_type(exported.graph.output[0]) == (np.float32, (2, 3))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert_same(ort_run(exported, {"x": x})["n.y"], x * np.float32(0.5) + np.float32(1))


def test_example_inputs_give_element_type_and_rank():
    node = expression_node("n", ["k", "x"], {"y": "x * k"})
    exported = _exported(mdf_model(node), example_inputs={"k": np.array(3, np.int32),
                                                          "x": np.ones((2, 5), np.int32)})
    types = {vi.name: _tensor_type(vi) for vi in exported.graph.input}
    assert types == {"k": (np.int32, ()), "x": (np.int32, (None, None))}  # rank, not size
    x = np.arange(12, dtype=np.int32).reshape(3, 4)  # other sizes run too
    assert_same(ort_run(exported, {"k": np.array(3, np.int32), "x": x})["n.y"], x * 3)


def test_input_of_unknown_rank_is_an_error_naming_the_input():
    with pytest.raises(mdf_loops.errors.ModelError, match="input 'x'.*example_inputs"):
        mdf_to_onnx(mdf_model(expression_node("n", ["x"], {"y": "x + 1"})))


def test_input_no_port_reads_needs_example_inputs(rng):
    """MDF keeps no type for an ONNX graph input no node reads: example_inputs give it."""
    from conftest import FLOAT, onnx_model, value_info

    original = onnx_model([onnx.helper.make_node("Neg", ["x"], ["y"])],
                          [value_info("x", FLOAT, [2]), value_info("unused", FLOAT, [3])],
                          [value_info("y", FLOAT, [2])])
    model = mdf_loops.onnx_to_mdf(original)
    with pytest.raises(mdf_loops.errors.ModelError, match="input 'unused'.*example_inputs"):
        mdf_to_onnx(model)
    feeds = {"x": rng.normal(size=2).astype(np.float32), "unused": np.zeros(3, np.float32)}
    exported = _exported(model, example_inputs=feeds)
    assert_same(ort_run(exported, feeds)["y"], -feeds["x"])


def test_unknown_port_type_is_an_error_naming_the_port():
    node = expression_node("n", ["x"], {"y": "x + 1"})
    node.input_ports[0].type, node.input_ports[0].shape = "quaternion", (2,)
    with pytest.raises(mdf_loops.errors.ModelError, match="port 'x'.*quaternion"):
        mdf_to_onnx(mdf_model(node))


# ---------------------------------------------------------------- loop nodes


def _leaky_integrator(dt: float, tau: float) -> Model:
    """x <- x + dt * (-x + I_t) / tau over I: a Scan whose body is one MDF value expression."""
    step = expression_node("step", ["x_prev", "I_t"], {"x_next": "x_prev + dt * (-x_prev + I_t) / tau"},
                           parameters={"dt": dt, "tau": tau})
    body = mdf_body("step_body", [step], ["x_prev", "I_t"], ["step.x_next", "step.x_next"])
    scan = loop_node("integrate", "Scan", {"initial_state_and_scan_inputs": "[x0, I]"},
                     {"body": body}, ["x0", "I"], 2, {"num_scan_inputs": 1},
                     output_ids=["x_final", "trace"])
    return mdf_model(scan)


def _euler(x0, current, dt, tau):
    x, trace = x0, []
    for i_t in current:
        x = x + dt * (-x + i_t) / tau
        trace.append(x)
    return x, np.array(trace, dtype=np.asarray(x0).dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_leaky_integrator_with_an_expression_body_runs_in_onnxruntime(dtype):
    model = _leaky_integrator(dt=0.1, tau=2.0)
    # no onnx:: function in the body: it is plain MDF
    body = mdf_loops.model.body_graph(model.graphs[0].nodes[0].parameters[0].value)
    assert all(not p.function for n in body.nodes for p in n.parameters)
    current = np.where(np.arange(40) < 20, 1.0, 0.0).astype(dtype)
    x0 = np.asarray(0.25, dtype=dtype)
    exported = _exported(model, example_inputs={"x0": x0, "I": current})
    out = ort_run(exported, {"x0": x0, "I": current})
    x_final, trace = _euler(x0, current, dtype(0.1), dtype(2.0))
    assert_same(out["integrate.trace"], trace, RTOL, ATOL)  # element type kept: float32 stays
    assert_same(out["integrate.x_final"], np.asarray(x_final, dtype), RTOL, ATOL)
    scheduled = run_mdf(model, {"x0": x0, "I": current})
    assert_same(out["integrate.trace"], scheduled["integrate.trace"].astype(dtype), RTOL, ATOL)


def test_nested_loop_reads_the_top_level_through_outer_scope(rng):
    """Loop over trials (M given); inside, a Scan over time reads W from the top level."""
    inner_step = expression_node("inner", ["h", "x_t", "W"], {"h_next": "numpy.tanh(W @ h + x_t)"})
    inner_body = mdf_body("time", [inner_step], ["h", "x_t"], ["inner.h_next", "inner.h_next"],
                          outer_scope_inputs=["W"])
    scan = loop_node("over_time", "Scan", {"initial_state_and_scan_inputs": "[h0, xs]"},
                     {"body": inner_body}, ["h0", "xs", "W"], 2, {"num_scan_inputs": 1})
    decay = expression_node("decay", ["h_carried"], {"h0": "0.5 * h_carried"})
    outer_body = mdf_body("trial", [decay, scan], ["trial", "cond", "h_carried"],
                          ["keep.c", "over_time.out0", "over_time.out0"],
                          outer_scope_inputs=["xs", "W"],
                          edges=[Edge(id="d", sender="decay", sender_port="h0",
                                      receiver="over_time", receiver_port="h0")])
    outer_body.nodes.append(expression_node("keep", ["cond"], {"c": "cond"}))
    trials = loop_node("trials", "Loop", {"M": "n", "v_initial": "[h_init]"}, {"body": outer_body},
                       ["n", "h_init", "xs", "W"], 2, output_ids=["h_final", "per_trial"])
    model = mdf_model(trials)
    W, xs, h_init = rng.normal(scale=0.5, size=(3, 3)), rng.normal(size=(5, 3)), rng.normal(size=3)
    feeds = {"n": np.array(4), "h_init": h_init, "xs": xs, "W": W}
    exported = _exported(model, example_inputs=feeds)
    # the Loop as exported, before make_safe wraps it in an If for zero trips
    loop = export_model(model, example_inputs=feeds).model.graph.node[-1]
    assert loop.op_type == "Loop"
    body = next(a.g for a in loop.attribute if a.name == "body")
    assert "W" not in [i.name for i in body.input]  # an outer-scope reference again
    h, per_trial = h_init, []
    for _ in range(4):
        h = 0.5 * h
        for x_t in xs:
            h = np.tanh(W @ h + x_t)
        per_trial.append(h)
    out = ort_run(exported, feeds)
    assert_same(out["trials.h_final"], h)
    assert_same(out["trials.per_trial"], np.array(per_trial))
    scheduled = run_mdf(model, feeds)
    assert_same(out["trials.per_trial"], scheduled["trials.per_trial"])


def test_loop_carried_value_that_grows_exports(rng):
    """A Loop whose carried vector grows by one element per iteration (its shape changes)."""
    grow = Node(id="grow", input_ports=[InputPort(id="v"), InputPort(id="i")], parameters=[
        Parameter(id="i_float", function="onnx::Cast", args={"input": "i"}),
        Parameter(id="to", value=11),
        Parameter(id="one", function="onnx::Unsqueeze", args={"data": "i_float", "axes": "axes"}),
        Parameter(id="axes", value={"dtype": "int64", "shape": [1], "data": [0]}),
        Parameter(id="joined", function="onnx::Concat", args={"inputs": "[v, one]"}),
        Parameter(id="axis", value=0),
    ], output_ports=[OutputPort(id="v_next", value="joined"),
                     OutputPort(id="total", value="numpy.sum(joined)")])
    keep = expression_node("keep", ["cond"], {"c": "cond"})
    body = mdf_body("step", [grow, keep], ["i", "cond", "v"], ["keep.c", "grow.v_next", "grow.total"])
    node = loop_node("loop", "Loop", {"M": "n", "v_initial": "[v0]"}, {"body": body}, ["n", "v0"], 2,
                     output_ids=["v_final", "totals"])
    feeds = {"n": np.array(4), "v0": np.array([10.0])}
    out = ort_run(_exported(mdf_model(node), example_inputs=feeds), feeds)
    assert_same(out["loop.v_final"], np.array([10.0, 0, 1, 2, 3]))
    assert_same(out["loop.totals"], np.array([10.0, 11, 13, 16]))


def test_if_node_exports_both_branches(rng):
    then = mdf_body("then", [expression_node("t", ["x"], {"y": "x * 2"})], [], ["t.y"],
                    outer_scope_inputs=["x"])
    other = mdf_body("else", [expression_node("e", ["x"], {"y": "-x"})], [], ["e.y"],
                     outer_scope_inputs=["x"])
    node = loop_node("choose", "If", {"cond": "c"}, {"then_branch": then, "else_branch": other},
                     ["c", "x"], 1)
    x = rng.normal(size=3)
    exported = _exported(mdf_model(node), example_inputs={"c": np.array(True), "x": x})
    assert_same(ort_run(exported, {"c": np.array(True), "x": x})["choose.out0"], x * 2)
    assert_same(ort_run(exported, {"c": np.array(False), "x": x})["choose.out0"], -x)


def test_loop_node_parameter_read_by_the_body_stays_weak():
    """A number parameter of the loop node, read by the body from the outer scope, is a Python
    number in the engine: the float32 state stays float32 (the body does not ask for float64)."""
    step = expression_node("step", ["s", "x", "gain"], {"y": "s * gain + x"})
    body = mdf_body("b", [step], ["s", "x"], ["step.y", "step.y"], outer_scope_inputs=["gain"])
    scan = loop_node("scan", "Scan", {"initial_state_and_scan_inputs": "[s0, xs]"}, {"body": body},
                     ["s0", "xs"], 2, {"num_scan_inputs": 1})
    scan.parameters.append(Parameter(id="gain", value=0.5))  # after the call: order is free
    feeds = {"s0": np.zeros(2, np.float32), "xs": np.arange(6, dtype=np.float32).reshape(3, 2)}
    out = ort_run(_exported(mdf_model(scan), example_inputs=feeds), feeds)
    s, trace = feeds["s0"], []
    for x in feeds["xs"]:
        s = s * np.float32(0.5) + x
        trace.append(s)
    assert_same(out["scan.out1"], np.array(trace))


def test_state_that_changes_element_type_names_the_body_port():
    step = expression_node("step", ["s", "x"], {"y": "s @ W + x"},
                           parameters={"W": [[1.0, 0.0], [0.0, 1.0]]})  # a float64 array
    body = mdf_body("b", [step], ["s", "x"], ["step.y", "step.y"])
    scan = loop_node("scan", "Scan", {"initial_state_and_scan_inputs": "[s0, xs]"}, {"body": body},
                     ["s0", "xs"], 2, {"num_scan_inputs": 1})
    feeds = {"s0": np.zeros(2, np.float32), "xs": np.ones((3, 2), np.float32)}
    with pytest.raises(mdf_loops.errors.ModelError,
                       match="node 'scan'.*'step.y' as float64 for 's', which comes in as float32"):
        mdf_to_onnx(mdf_model(scan), example_inputs=feeds)
    with pytest.raises(mdf_loops.errors.LoopError, match="node 'scan'.*float32 to float64"):
        run_mdf(mdf_model(scan), feeds)  # the scheduler refuses it the same way


# ---------------------------------------------------------------- errors naming the element


def _scan_of(body: Graph, inputs=("s0", "xs"), args="[s0, xs]") -> Model:
    return mdf_model(loop_node("scan", "Scan", {"initial_state_and_scan_inputs": args},
                               {"body": body}, list(inputs), 2, {"num_scan_inputs": 1}))


def test_body_with_the_wrong_number_of_formal_inputs_names_the_node():
    step = expression_node("step", ["s", "x"], {"y": "s + x"})
    body = mdf_body("body", [step], ["s", "x", "extra"], ["step.y", "step.y"])
    with pytest.raises(mdf_loops.errors.ModelError, match="node 'scan'.*3 formal inputs.*passes 2"):
        mdf_to_onnx(_scan_of(body), example_inputs={"s0": np.zeros(2), "xs": np.zeros((3, 2))})


def test_outer_scope_read_the_loop_node_does_not_carry_names_it():
    step = expression_node("step", ["s", "x", "W"], {"y": "s + x * W"})
    body = mdf_body("body", [step], ["s", "x"], ["step.y", "step.y"], outer_scope_inputs=["W"])
    with pytest.raises(mdf_loops.errors.ModelError, match="node 'scan'.*reads 'W'"):
        mdf_to_onnx(_scan_of(body), example_inputs={"s0": np.zeros(2), "xs": np.zeros((3, 2))})


def test_unknown_graph_id_is_an_error():
    with pytest.raises(mdf_loops.errors.ModelError, match="no graph 'other'"):
        mdf_to_onnx(_chain_model(), graph="other")


def test_cycle_is_an_error_naming_the_nodes():
    a = expression_node("a", ["x"], {"y": "x"})
    b = expression_node("b", ["x"], {"y": "x"})
    edges = [Edge(id="ab", sender="a", sender_port="y", receiver="b", receiver_port="x"),
             Edge(id="ba", sender="b", sender_port="y", receiver="a", receiver_port="x")]
    with pytest.raises(mdf_loops.errors.ModelError, match="cycle.*'a', 'b'"):
        mdf_to_onnx(mdf_model(a, b, edges=edges))


def test_two_edges_into_one_port_is_an_error_naming_the_port():
    a = expression_node("a", ["x"], {"y": "x"})
    b = expression_node("b", ["x"], {"y": "x"})
    c = expression_node("c", ["v"], {"w": "v"})
    edges = [Edge(id="ac", sender="a", sender_port="y", receiver="c", receiver_port="v"),
             Edge(id="bc", sender="b", sender_port="y", receiver="c", receiver_port="v")]
    with pytest.raises(mdf_loops.errors.ModelError, match="node 'c' port 'v': receives 2 edges"):
        mdf_to_onnx(mdf_model(a, b, c, edges=edges), example_inputs={"x": np.zeros(1)})


def test_unknown_onnx_operator_names_the_node():
    node = Node(id="n", input_ports=[InputPort(id="x", shape=(2,))],
                parameters=[Parameter(id="f", function="onnx::NoSuchOp", args={"X": "x"})],
                output_ports=[OutputPort(id="y", value="f")])
    with pytest.raises(mdf_loops.errors.ModelError, match="node 'n'.*onnx::NoSuchOp.*no such operator"):
        mdf_to_onnx(mdf_model(node))


def test_a_formal_output_naming_no_node_port_is_a_model_error(tmp_path):
    # found by the fuzz test: the nodes gone, the interface still naming them
    graph = {"metadata": {"formal_inputs": ["y"], "formal_outputs": ["Loop_0.res_y"]},
             "nodes": {"n": {"input_ports": {"y": {"type": "float32"}},
                             "output_ports": {"out": {"value": "y"}}}}}
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"m": {"format": "ModECI MDF v0.4", "graphs": {"g": graph}}}))
    with pytest.raises(mdf_loops.errors.ModelError,
                       match="graph 'g': its output 'Loop_0.res_y' is read from node 'Loop_0' "
                             "port 'res_y', which the graph does not have"):
        mdf_to_onnx(mdf_loops.load_model(path), example_inputs={"y": np.zeros(1, np.float32)})

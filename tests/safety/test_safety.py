"""The expression allow-list and the structure checks of mdf_loops.safety.checks, and no false refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from modeci_mdf.mdf import Edge, Graph, InputPort, Model, Node, OutputPort, Parameter

import mdf_loops
from mdf_loops.errors import SizeLimitError
from conftest import control_flow_cases, expression_node, loop_node, mdf_body, mdf_model, input_port
from mdf_loops.safety.allowlist import expression_refusal
from mdf_loops.safety.guarded_numpy import expression_numpy, untrusted_expressions
from mdf_loops.safety.checks import UnsafeExpressionError, check_model, check_structure, find_unsafe

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NAMES = frozenset({"x", "y", "w", "h_prev", "f"})

ALLOWED = [
    "x + y * 2 - w / 3 // 1 % 2 ** 2",
    "x @ w",
    "-x if x > 0 and not y else +w",
    "x[0], x[1:3], x[::-1], x[..., 0], x[None, :]",
    "[x, y, w]",
    "(x, y)",
    "{'a': x}",
    "numpy.tanh(w @ x + h_prev)",
    "1 / (1 + numpy.exp(-(x + y)))",
    "numpy.where(x >= y, 1, numpy.where(x <= -y, -1, 0))",
    "numpy.abs(x) < w",
    "numpy.maximum(*x)",
    "numpy.sum(x, axis=0, keepdims=True)",
    "numpy.concatenate([x, y], axis=0)",
    "numpy.linalg.norm(x)",
    "numpy.zeros(3) + numpy.ones((2, 3)) + numpy.eye(4)[0]",
    "numpy.ones(int(x) // 3 + 1)",  # a computed size: checked when evaluated
    "numpy.pi * math.sin(x) + math.exp(y) + math.pi",
    "abs(x) + max(x, y) + min(1, 2) + round(x, 2) + int(x) + float(y) + len(w)",
    "x == y != w is not None",
    "f[0]",
    "2 ** 64",
    "nan", "inf", "-inf", "1e-3", " 3 ", "1_000",
    "constant",  # a bare unknown name evaluates to its own text at worst
]

REFUSED = [  # expression, the refused piece
    ("__import__('os').system('ls')", "`__import__`"),
    ("().__class__.__bases__[0].__subclasses__()", "`().__class__`"),
    ("x.__class__", "`x.__class__`"),
    ("numpy.__dict__", "`numpy.__dict__`"),
    ("open('/etc/passwd').read()", "`open`"),
    ("eval('1')", "`eval`"),
    ("exec('1')", "`exec`"),
    ("getattr(numpy, 'load')", "`getattr`"),
    ("compile('1', 'f', 'eval')", "`compile`"),
    ("globals()", "`globals`"),
    ("breakpoint()", "`breakpoint`"),
    ("input()", "`input`"),
    ("lambda: 1", "`lambda: 1`"),
    ("[c for c in x]", "`[c for c in x]`"),
    ("{c: 1 for c in x}", "`{c: 1 for c in x}`"),
    ("sum(c for c in x)", "`(c for c in x)`"),
    ("(z := 1)", "`z := 1`"),
    ("f'{x}'", "`f'{x}'`"),
    ("x.tofile('a')", "`x.tofile`"),
    ("numpy.load('a')", "`numpy.load`"),
    ("numpy.fromfile('a')", "`numpy.fromfile`"),
    ("numpy.random.rand(3)", "`numpy.random`"),
    ("numpy.add.outer(x, x)", "`numpy.add.outer`"),
    ("numpy.linalg", "`numpy.linalg`"),
    ("math.factorial(10 ** 6)", "`math.factorial`"),
    ("numpy + 1", "`numpy`"),
    ("f(1)", "`f`"),
    ("x[0](1)", "`x[0](1)`"),
    ("max(x, key=f)", "`max(x, key=f)`"),
    ("unknown + 1", "`unknown`"),
    ("numpy.zeros(10**9)", "`numpy.zeros(10**9)`"),
    ("numpy.ones((10**5, 10**5))", "`numpy.ones((10**5, 10**5))`"),
    ("numpy.arange(10**10)", "`numpy.arange(10**10)`"),
    ("numpy.ones_like(x, shape=(10**9,))", "`numpy.ones_like(x, shape=(10**9,))`"),
    ("10 ** 10 ** 10", "`10 ** 10 ** 10`"),
    ("1 << 100000", "`1 << 100000`"),
    ("[0] * 10 ** 9", "`[0] * 10 ** 9`"),
    ("'a' * x", "`'a' * x`"),
    ("'a' * 3", "`'a' * 3`"),
    ("[0] * 10", "`[0] * 10`"),
    ("'%02500000000d' % 1", "`'%02500000000d' % 1`"),
    ("x +", None),  # not an expression at all
]


@pytest.mark.parametrize("expression", ALLOWED)
def test_allowed_expressions(expression):
    assert expression_refusal(expression, NAMES) is None


@pytest.mark.parametrize("expression, piece", REFUSED)
def test_refused_expressions_name_the_piece(expression, piece):
    reason = expression_refusal(expression, NAMES)
    assert reason is not None
    if piece is None:
        assert "not a valid expression" in reason
    else:
        assert reason.startswith(piece + " is refused"), reason
        assert expression.strip() in reason  # the whole expression for context


def test_size_of_literal_allocations_follows_max_elements():
    assert expression_refusal("numpy.zeros(1000)", NAMES) is None
    with mdf_loops.safety.limits(max_elements=999):
        assert "1000 elements" in expression_refusal("numpy.zeros(1000)", NAMES)


def test_text_that_is_not_an_expression_is_accepted_as_data_only_for_defaults():
    assert expression_refusal("hello world", NAMES, text_is_data=True) is None
    assert expression_refusal("hello world", NAMES) is not None
    assert expression_refusal("__import__('os')", NAMES, text_is_data=True) is not None


def test_guarded_numpy_checks_computed_sizes_and_lacks_other_functions():
    assert expression_numpy() is np  # outside an untrusted run: numpy itself
    with untrusted_expressions(), mdf_loops.safety.limits(max_elements=100):
        guarded = expression_numpy()
        assert guarded is not np
        np.testing.assert_array_equal(guarded.ones(10), np.ones(10))
        with pytest.raises(SizeLimitError, match="numpy.ones.*1000 elements"):
            guarded.ones((10, 100))
        with pytest.raises(SizeLimitError, match="numpy.zeros_like"):
            guarded.zeros_like(np.zeros(3), shape=(1000,))
        assert not hasattr(guarded, "load") and not hasattr(guarded, "fromfile")
        assert guarded.linalg.norm([3.0, 4.0]) == 5.0


# ---------------------------------------------------------------- names a node binds


def _one_node_model(node: Node) -> Model:
    return Model(id="m", graphs=[Graph(id="main", nodes=[node])])


def test_a_parameter_named_like_a_builtin_does_not_make_the_builtin_allowed():
    # parameters are evaluated in order: 'p' would meet the builtin open, not parameter 'open'
    node = Node(id="n", parameters=[Parameter(id="p", value="open('x')"),
                                    Parameter(id="open", value=1)])
    problems = find_unsafe(_one_node_model(node))
    assert [p.path for p in problems] == ["graphs.main.nodes.n.parameters.p.value"]
    assert "`open` is refused" in problems[0].message


def test_an_input_port_may_share_a_builtin_name():
    node = expression_node("n", ["input", "filter"], {"y": "input + filter"})
    assert find_unsafe(_one_node_model(node)) == []


def test_function_arguments_are_bound_in_the_call():
    node = Node(id="n", input_ports=[InputPort(id="x")],
                parameters=[Parameter(id="f", function="linear",
                                      args={"variable0": "x", "slope": 2,
                                            "intercept": "slope + 1"})],
                output_ports=[OutputPort(id="y", value="f")])
    assert find_unsafe(_one_node_model(node)) == []
    node.parameters[0].args["intercept"] = "__import__('os')"
    (problem,) = find_unsafe(_one_node_model(node))
    assert problem.path == "graphs.main.nodes.n.parameters.f.args.intercept"


def test_every_expression_field_is_checked():
    attack = "__import__('os')"
    node = Node(
        id="n", input_ports=[input_port("x", attack)],
        parameters=[
            Parameter(id="a", value=attack),
            Parameter(id="b", function=attack),  # not an MDF function: evaluated as code
            Parameter(id="c", default_initial_value=attack, time_derivative=attack),
            Parameter(id="d", value=1, conditions=[{"id": "k", "test": attack, "value": attack}]),
        ],
        output_ports=[OutputPort(id="y", value=attack)],
    )
    paths = sorted(p.path for p in find_unsafe(_one_node_model(node)))
    base = "graphs.main.nodes.n."
    assert paths == sorted(base + field for field in [
        "input_ports.x.default_value", "parameters.a.value", "parameters.b.function",
        "parameters.c.default_initial_value", "parameters.c.time_derivative",
        "parameters.d.conditions.k.test", "parameters.d.conditions.k.value",
        "output_ports.y.value"])


def test_bodies_are_checked_at_every_depth_with_their_paths():
    inner_step = expression_node("evil", ["s", "x"], {"s_next": "s + x.__class__"})
    inner = mdf_body("inner_body", [inner_step], ["s", "x"], ["evil.s_next", "evil.s_next"])
    inner_scan = loop_node("inner", "Scan", {"initial_state_and_scan_inputs": "[s, x]"},
                           {"body": inner}, ["s", "x"], 2, {"num_scan_inputs": 1})
    outer = mdf_body("outer_body", [inner_scan], ["s", "x"], ["inner.out0", "inner.out1"])
    model = mdf_model(loop_node("outer", "Scan", {"initial_state_and_scan_inputs": "[s, x]"},
                                {"body": outer}, ["s", "x"], 2, {"num_scan_inputs": 1}))
    (problem,) = find_unsafe(model)
    assert problem.path == ("graphs.main.nodes.outer.parameters.body.value.graph_outer_body."
                            "nodes.inner.parameters.body.value.graph_inner_body."
                            "nodes.evil.output_ports.s_next.value")
    assert "`x.__class__` is refused: a dunder attribute" in problem.message
    with pytest.raises(UnsafeExpressionError) as info:
        check_model(model)
    assert info.value.problems == [problem]
    assert "evil" in str(info.value) and "trusted=True" in str(info.value)


def test_a_body_stored_as_a_plain_dict_is_checked(tmp_path):
    model = mdf_loops.load_model(EXAMPLES / "leaky_integrator.json")
    stored = model.graphs[0].nodes[0].parameters[0].value
    assert isinstance(next(iter(stored.values())), dict)  # JSON keeps bodies as dicts
    body = next(iter(stored.values()))
    body["nodes"]["step"]["output_ports"]["x_next"]["value"] = "open('/etc/passwd')"
    (problem,) = find_unsafe(model)
    assert problem.path.endswith("graph_integrator_step.nodes.step.output_ports.x_next.value")


# ---------------------------------------------------------------- structure


def test_structure_problems():
    a = expression_node("a", ["x"], {"y": "x + 1"})
    b = expression_node("b", ["x"], {"y": "x * 2"})
    dangling = Edge(id="e1", sender="ghost", sender_port="y", receiver="b", receiver_port="x")
    no_port = Edge(id="e2", sender="a", sender_port="nope", receiver="b", receiver_port="x")
    text_weight = Edge(id="e3", sender="a", sender_port="y", receiver="b", receiver_port="x",
                       parameters={"weight": "__import__('os')"})
    model = Model(id="m", graphs=[Graph(id="main", nodes=[a, b, a],
                                        edges=[dangling, no_port, text_weight])])
    messages = {str(p) for p in find_unsafe(model)}
    assert "graphs.main.nodes: 'a' is defined more than once" in messages
    assert "graphs.main.edges.e1: sender 'ghost' is not a node of graph 'main'" in messages
    assert any(m.startswith("graphs.main.edges.e2: sender port 'nope'") for m in messages)
    assert any(m.startswith("graphs.main.edges.e3.parameters.weight: weight") for m in messages)
    with pytest.raises(mdf_loops.errors.ModelError, match="defined more than once"):
        check_structure(model)


def test_a_cycle_without_entry_is_refused_and_one_with_an_entry_is_not():
    b = expression_node("b", ["x", "z"], {"y": "x + z"})
    c = expression_node("c", ["x"], {"y": "x * 2"})
    cycle = [Edge(id="e2", sender="b", sender_port="y", receiver="c", receiver_port="x"),
             Edge(id="e3", sender="c", sender_port="y", receiver="b", receiver_port="z")]
    with pytest.raises(mdf_loops.errors.ModelError, match=r"edges \['e2', 'e3'\].*never finish"):
        check_structure(Model(id="m", graphs=[Graph(id="main", nodes=[b, c], edges=cycle)]))
    root = expression_node("r", [], {"o": "1"})
    entry = Edge(id="e1", sender="r", sender_port="o", receiver="b", receiver_port="x")
    check_structure(Model(id="m", graphs=[Graph(id="main", nodes=[root, b, c],
                                                edges=[entry] + cycle)]))


def test_unknown_scheduler_condition_is_refused():
    from modeci_mdf.mdf import Condition, ConditionSet

    graph = Graph(id="main", nodes=[expression_node("a", ["x"], {"y": "x"})])
    graph.conditions = ConditionSet(node_specific={"a": Condition(type="call_with_pruned_args")})
    with pytest.raises(mdf_loops.errors.ModelError, match="'call_with_pruned_args' is not a scheduler"):
        check_structure(Model(id="m", graphs=[graph]))
    graph.conditions = ConditionSet(node_specific={"a": Condition(type="EveryNCalls", n=1,
                                                                  dependency="a")})
    check_structure(Model(id="m", graphs=[graph]))


# ---------------------------------------------------------------- trusted


def test_trusted_skips_the_expression_check_only():
    node = expression_node("n", ["x"], {"y": "x.real"})  # harmless, but outside the list
    model = _one_node_model(node)
    with pytest.raises(UnsafeExpressionError, match="x.real"):
        mdf_loops.run(model, {"x": np.array(2.0)})
    assert mdf_loops.run(model, {"x": np.array(2.0)}, trusted=True, backend="scheduler") == {
        "n.y": 2.0}
    broken = Model(id="m", graphs=[Graph(id="main", nodes=[node], edges=[
        Edge(id="e", sender="ghost", sender_port="o", receiver="n", receiver_port="x")])])
    with pytest.raises(mdf_loops.errors.ModelError, match="ghost"):  # structure is always checked
        mdf_loops.run(broken, {}, trusted=True)


# ---------------------------------------------------------------- no false refusals


@pytest.mark.parametrize("path", sorted(p.name for p in EXAMPLES.glob("*.json"))
                         + sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_no_false_refusal_of_examples(path):
    assert find_unsafe(mdf_loops.load_model(EXAMPLES / path)) == []


def test_no_false_refusal_of_conformance_cases():
    cases = control_flow_cases()
    assert len(cases) == 38
    refused = {name: find_unsafe(mdf_loops.onnx_to_mdf(case.model))
               for name, case in cases.items()}
    assert {name: problems for name, problems in refused.items() if problems} == {}


def test_checked_and_trusted_runs_agree_on_an_example():
    current = np.where(np.arange(30) < 15, 1.0, 0.0)
    inputs = {"x0": np.array(0.0), "I": current}
    path = EXAMPLES / "leaky_integrator.json"
    checked = mdf_loops.run(path, inputs, backend="scheduler")
    trusted = mdf_loops.run(path, inputs, backend="scheduler", trusted=True)
    x, trace = 0.0, []
    for i_t in current:  # the model's own equation, as the oracle
        x = x + 0.1 * (-x + i_t) / 2.0
        trace.append(x)
    np.testing.assert_allclose(checked["integrate.trace"], trace, rtol=1e-12)
    np.testing.assert_array_equal(checked["integrate.trace"], trusted["integrate.trace"])


def test_find_unsafe_can_leave_structure_to_the_validator():
    node = expression_node("n", ["x"], {"y": "open('f')"})
    twin = expression_node("n", ["x"], {"y": "x"})
    model = Model(id="m", graphs=[Graph(id="main", nodes=[node, twin])])
    assert len(find_unsafe(model)) == 2
    (only,) = find_unsafe(model, structure=False)
    assert only.path == "graphs.main.nodes.n.output_ports.y.value"


def test_a_flat_file_of_a_million_keys_is_no_alias_bomb():
    from mdf_loops.safety.checks import check_aliases

    check_aliases({"m": {f"k{k}": k for k in range(1_000_000)}}, "keys.yaml")
    shared = [1] * 10
    for _ in range(6):
        shared = [shared] * 10
    with pytest.raises(mdf_loops.errors.ModelError, match="YAML aliases expand"):
        check_aliases(shared, "bomb.yaml")


def test_an_alias_of_long_text_repeated_is_counted_by_its_bytes(tmp_path):
    path = tmp_path / "m.yaml"
    text = "x" * 100_000
    path.write_text(f"m:\n  metadata:\n    a: &t {text}\n    b: [{', '.join(['*t'] * 3000)}]\n"
                    "  graphs: {}\n")
    for call in (mdf_loops.load_model, mdf_loops.validate):
        with pytest.raises(mdf_loops.errors.ModelError, match="into 30010"):
            call(str(path))
    path.write_text(f"m:\n  metadata:\n    a: &t {text}\n    b: [*t, *t]\n  graphs: {{}}\n")
    assert mdf_loops.load_model(str(path)).metadata["b"] == [text, text]  # a few: allowed

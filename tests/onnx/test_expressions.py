"""MDF value expressions and standard functions exported as ONNX nodes
(mdf_loops/onnx/expressions.py, expression_calls.py, expression_tables.py).

Each expression is exported in a top-level node and in a Scan body, run by
onnxruntime, and compared with the same expression computed by numpy here:
values, element types and shapes.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from modeci_mdf.mdf import Node, OutputPort, Parameter

import mdf_loops
from conftest import assert_same, expression_node, loop_node, mdf_body, mdf_model, ort_run, run_mdf
from mdf_loops.onnx.expressions import ExpressionError
from mdf_loops.onnx.export import mdf_to_onnx

_rng = np.random.default_rng(7)
X = _rng.uniform(0.1, 0.9, (3, 4))  # inside every function's domain (log, sqrt, arcsin)
X32 = X.astype(np.float32)
W = _rng.uniform(-1, 1, (4, 2))
B = _rng.uniform(-1, 1, (3, 4))
I64 = np.arange(-5, 7).reshape(3, 4)
S = np.array(0.75)  # a scalar


def _export_and_run(model, inputs: dict) -> dict:
    exported = mdf_to_onnx(model, example_inputs=inputs)
    onnx.checker.check_model(exported, full_check=True)
    return ort_run(exported, {k: np.asarray(v) for k, v in inputs.items()})


#: (expression, inputs, numpy computation of the same thing)
EXPRESSIONS = [
    ("x * w + b", {"x": X, "w": X[::-1], "b": B}, lambda x, w, b: x * w + b),
    ("numpy.tanh(x) * 2", {"x": X}, lambda x: np.tanh(x) * 2),
    ("tanh(x) * 2", {"x": X}, lambda x: np.tanh(x) * 2),
    ("numpy.maximum(x - 0.5, 0)", {"x": X}, lambda x: np.maximum(x - 0.5, 0)),
    ("maximum(x - 0.5, 0)", {"x": X}, lambda x: np.maximum(x - 0.5, 0)),
    ("numpy.minimum(x, b)", {"x": X, "b": B}, lambda x, b: np.minimum(x, b)),
    ("numpy.where(x > 0.5, x, -x)", {"x": X}, lambda x: np.where(x > 0.5, x, -x)),
    ("numpy.where(x > 0.5, 1.0, -1.0)", {"x": X}, lambda x: np.where(x > 0.5, 1.0, -1.0)),
    ("numpy.where(x > 0.5, 1, 0)", {"x": X}, lambda x: np.where(x > 0.5, 1, 0)),
    ("numpy.sum(x, axis=0)", {"x": X}, lambda x: np.sum(x, axis=0)),
    ("sum(x, axis=0)", {"x": X}, lambda x: np.sum(x, axis=0)),
    ("sum(x)", {"x": X}, lambda x: sum(x)),  # Python's sum: over the first axis
    ("numpy.sum(x)", {"x": X}, lambda x: np.sum(x)),
    ("numpy.sum(x, axis=-1, keepdims=True)", {"x": X}, lambda x: np.sum(x, axis=-1, keepdims=True)),
    ("numpy.mean(x, axis=1)", {"x": X}, lambda x: np.mean(x, axis=1)),
    ("numpy.mean(i)", {"i": I64}, lambda i: np.mean(i)),
    ("numpy.max(x, axis=-1) - numpy.min(x, axis=0)[0]", {"x": X},
     lambda x: np.max(x, axis=-1) - np.min(x, axis=0)[0]),
    ("numpy.prod(x, axis=(0, 1))", {"x": X}, lambda x: np.prod(x, axis=(0, 1))),
    ("numpy.sum(x > 0.5)", {"x": X}, lambda x: np.sum(x > 0.5)),
    ("max(a, c)", {"a": S, "c": np.array(0.2)}, lambda a, c: np.asarray(max(a, c))),
    ("x @ w", {"x": X, "w": W}, lambda x, w: x @ w),
    ("numpy.dot(x, w)", {"x": X, "w": W}, lambda x, w: np.dot(x, w)),
    ("numpy.matmul(x, w) @ numpy.transpose(w)", {"x": X, "w": W}, lambda x, w: x @ w @ w.T),
    ("x.T", {"x": X}, lambda x: x.T),
    ("x[0]", {"x": X}, lambda x: x[0]),
    ("x[-1]", {"x": X}, lambda x: x[-1]),
    ("x[1:3]", {"x": X}, lambda x: x[1:3]),
    ("x[:, 0]", {"x": X}, lambda x: x[:, 0]),
    ("x[:, -1]", {"x": X}, lambda x: x[:, -1]),
    ("x[::-1]", {"x": X}, lambda x: x[::-1]),
    ("x[::-2, 1:]", {"x": X}, lambda x: x[::-2, 1:]),
    ("x[1, 2]", {"x": X}, lambda x: x[1, 2]),
    ("x[-2:, :-1]", {"x": X}, lambda x: x[-2:, :-1]),
    ("x[2:0:-1]", {"x": X}, lambda x: x[2:0:-1]),
    ("x[k]", {"x": X, "k": np.array(2)}, lambda x, k: x[k]),
    ("x[k]", {"x": X, "k": np.array(-1)}, lambda x, k: x[k]),
    ("[x[0], x[1] * 2]", {"x": X}, lambda x: np.array([x[0], x[1] * 2])),
    # a tuple of values of different shapes, indexed by a constant: Python's indexing
    ("(x, x[0], k + 1)[1] * (x, k)[-1]", {"x": X, "k": np.array(2.0)},
     lambda x, k: (x, x[0], k + 1)[1] * (x, k)[-1]),
    ("[x, x[0] * 2, 1.5][1:][0]", {"x": X}, lambda x: [x, x[0] * 2, 1.5][1:][0]),
    ("x > 0.5", {"x": X}, lambda x: x > 0.5),
    ("x != b", {"x": X, "b": B}, lambda x, b: x != b),
    ("(x > 0.3) & (x < 0.6)", {"x": X}, lambda x: (x > 0.3) & (x < 0.6)),
    ("(x > 0.7) | ~(x > 0.2)", {"x": X}, lambda x: (x > 0.7) | ~(x > 0.2)),
    # booleans times and plus booleans: numpy's logical and, or (NeuroML's regime tests)
    ("(x > 0.3) * (x < 0.6)", {"x": X}, lambda x: (x > 0.3) * (x < 0.6)),
    ("(x > 0.7) + (x < 0.2)", {"x": X}, lambda x: (x > 0.7) + (x < 0.2)),
    ("(x > 0.3) * (x < 0.6) * 2.5", {"x": X}, lambda x: (x > 0.3) * (x < 0.6) * 2.5),
    ("(x > 0.3) / (x < 0.6 + 1)", {"x": X}, lambda x: (x > 0.3) / (x < 0.6 + 1)),
    ("0.3 < a < 0.8", {"a": S}, lambda a: np.asarray(0.3 < a < 0.8)),
    ("a > 0.5 and c > 0.5", {"a": S, "c": np.array(0.2)}, lambda a, c: np.asarray(a > 0.5 and c > 0.5)),
    ("a > 0.5 or c > 0.5", {"a": S, "c": np.array(0.2)}, lambda a, c: np.asarray(a > 0.5 or c > 0.5)),
    ("a and c", {"a": S, "c": np.array(0.2)}, lambda a, c: np.asarray(a and c)),  # Python: c
    ("a and c", {"a": np.array(0.0), "c": np.array(0.2)}, lambda a, c: np.asarray(a and c)),
    ("a or c", {"a": np.array(0.0), "c": np.array(0.2)}, lambda a, c: np.asarray(a or c)),
    ("not a", {"a": np.array(0.0)}, lambda a: np.asarray(not a)),
    ("a if a > c else c", {"a": S, "c": np.array(0.2)}, lambda a, c: a if a > c else c),
    ("a if a < c else -1", {"a": S, "c": np.array(0.2)}, lambda a, c: np.asarray(a if a < c else -1.0)),
    ("math.pi * x + numpy.e", {"x": X}, lambda x: math.pi * x + np.e),
    ("numpy.exp(x) + numpy.log(x) + numpy.sqrt(x) + numpy.abs(-x)", {"x": X},
     lambda x: np.exp(x) + np.log(x) + np.sqrt(x) + np.abs(-x)),
    ("numpy.sin(x) * numpy.cos(x) - numpy.tan(x)", {"x": X}, lambda x: np.sin(x) * np.cos(x) - np.tan(x)),
    ("numpy.arcsin(x) + numpy.arccos(x) * numpy.arctan(x)", {"x": X},
     lambda x: np.arcsin(x) + np.arccos(x) * np.arctan(x)),
    ("numpy.sinh(x) / numpy.cosh(x)", {"x": X}, lambda x: np.sinh(x) / np.cosh(x)),
    ("numpy.floor(3 * x) + numpy.ceil(3 * x) + numpy.sign(x - 0.5)", {"x": X},
     lambda x: np.floor(3 * x) + np.ceil(3 * x) + np.sign(x - 0.5)),
    ("numpy.clip(x, 0.2, 0.6)", {"x": X}, lambda x: np.clip(x, 0.2, 0.6)),
    ("numpy.exp2(x) + numpy.power(x, 3)", {"x": X}, lambda x: np.exp2(x) + np.power(x, 3)),
    ("numpy.zeros_like(x) + numpy.ones_like(x) * 2", {"x": X},
     lambda x: np.zeros_like(x) + np.ones_like(x) * 2),
    ("numpy.divide(x, b) + numpy.mod(x, 0.3)", {"x": X, "b": B}, lambda x, b: np.divide(x, b) + np.mod(x, 0.3)),
    ("x ** 2 - x % 0.3 + x // 0.2", {"x": X}, lambda x: x ** 2 - x % 0.3 + x // 0.2),
    ("-x", {"x": X32}, lambda x: -x),
    ("abs(x - 0.5)", {"x": X}, lambda x: abs(x - 0.5)),
    ("float(k) / 4 + int(a * 10)", {"k": np.array(3), "a": S},
     lambda k, a: np.asarray(float(k) / 4 + int(a * 10))),
    ("numpy.tanh(i)", {"i": I64}, lambda i: np.tanh(i)),
    # integers: Python's operators
    ("i / 4", {"i": I64}, lambda i: i / 4),
    ("i // 4", {"i": I64}, lambda i: i // 4),
    ("i % 4", {"i": I64}, lambda i: i % 4),
    ("i % -4", {"i": I64}, lambda i: i % -4),
    ("i ** 2", {"i": I64}, lambda i: i ** 2),
    ("(i & 6) | (i ^ 3)", {"i": I64}, lambda i: (i & 6) | (i ^ 3)),
    ("~i", {"i": I64}, lambda i: ~i),
]


def _id(entry) -> str:
    expression, inputs, _ = entry
    return f"{expression} [{','.join(f'{k}:{np.asarray(v).dtype}' for k, v in inputs.items())}]"


@pytest.mark.parametrize("expression, inputs, numpy_fn", EXPRESSIONS, ids=[_id(e) for e in EXPRESSIONS])
def test_expression_in_a_node(expression, inputs, numpy_fn):
    model = mdf_model(expression_node("n", list(inputs), {"y": expression}))
    out = _export_and_run(model, inputs)["n.y"]
    assert_same(out, np.asarray(numpy_fn(**inputs)), rtol=1e-12, atol=1e-12)


#: expressions of a sequence element x (scanned) and of values read from the top level
LOOP_EXPRESSIONS = [
    ("x * w + b", {"w": X[0], "b": B[0]}, lambda x, w, b: x * w + b),
    ("numpy.tanh(x) * gain", {}, lambda x: np.tanh(x) * 0.5),
    ("numpy.maximum(x - 0.5, 0)", {}, lambda x: np.maximum(x - 0.5, 0)),
    ("numpy.where(x > 0.5, x, b)", {"b": B[0]}, lambda x, b: np.where(x > 0.5, x, b)),
    ("numpy.sum(x, axis=0)", {}, lambda x: np.sum(x, axis=0)),
    ("x @ w", {"w": W}, lambda x, w: x @ w),
    ("x[1:3] * x[-1]", {}, lambda x: x[1:3] * x[-1]),
    ("x / 2 if gain > 0 else x", {}, lambda x: x / 2),
    ("(x > 0.5) & (x < 0.8)", {}, lambda x: (x > 0.5) & (x < 0.8)),
]


@pytest.mark.parametrize("expression, outer, numpy_fn", LOOP_EXPRESSIONS,
                         ids=[e[0] for e in LOOP_EXPRESSIONS])
def test_expression_in_a_loop_body(expression, outer, numpy_fn):
    """A Scan without state maps the expression over x's first axis; the body reads the
    other values from the top level and a constant parameter ``gain`` of its own."""
    step = expression_node("f", ["x", *outer], {"y": expression}, parameters={"gain": 0.5})
    body = mdf_body("map", [step], ["x"], ["f.y"], outer_scope_inputs=list(outer))
    scan = loop_node("scan", "Scan", {"initial_state_and_scan_inputs": "[xs]"}, {"body": body},
                     ["xs", *outer], 1, {"num_scan_inputs": 1})
    inputs = {"xs": np.stack([X, X[::-1] * 0.5]).reshape(-1, 4)[:5], **outer}
    out = _export_and_run(mdf_model(scan), inputs)["scan.out0"]
    expected = np.stack([numpy_fn(x, **{k: v for k, v in outer.items()}) for x in inputs["xs"]])
    assert_same(out, expected, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- MDF standard functions


def _scaled(fn):
    return {"scale": 1.5}, lambda v, scale: scale * fn(v)


STANDARD_FUNCTIONS = {
    "linear": ({"slope": 2.0, "intercept": -1.0}, lambda v, slope, intercept: v * slope + intercept),
    "logistic": ({"gain": 2.0, "bias": 0.5, "offset": 0.1},
                 lambda v, gain, bias, offset: 1 / (1 + np.exp(-gain * (v + bias) + offset))),
    "exponential": ({"scale": 2.0, "rate": 0.5, "bias": 0.1, "offset": -1.0},
                    lambda v, scale, rate, bias, offset: scale * np.exp(rate * v + bias) + offset),
    "sin": _scaled(np.sin), "cos": _scaled(np.cos), "tan": _scaled(np.tan),
    "sinh": _scaled(np.sinh), "cosh": _scaled(np.cosh), "tanh": _scaled(np.tanh),
    "arctan": _scaled(np.arctan), "arcsin": _scaled(np.arcsin), "arccos": _scaled(np.arccos),
}


def _standard_node(name: str, arguments: dict, argument_name: str = "variable0") -> Node:
    node = expression_node("n", ["x"], {"y": "f"})
    node.parameters.append(Parameter(id="f", function=name, args={argument_name: "x", **arguments}))
    return node


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(STANDARD_FUNCTIONS))
def test_standard_function(name, dtype):
    arguments, numpy_fn = STANDARD_FUNCTIONS[name]
    x = (X - 0.5).astype(dtype)  # in (-0.4, 0.4): every function's domain
    out = _export_and_run(mdf_model(_standard_node(name, arguments)), {"x": x})["n.y"]
    # float32 stays float32: the arguments are Python numbers
    assert_same(out, np.asarray(numpy_fn(x, **arguments)), rtol=1e-6, atol=1e-7)


def test_standard_matmul_and_relu():
    node = expression_node("n", ["a", "b"], {"y": "r"})
    node.parameters += [Parameter(id="m", function="MatMul", args={"A": "a", "B": "b"}),
                        Parameter(id="r", function="Relu", args={"A": "m"})]
    out = _export_and_run(mdf_model(node), {"a": X - 0.5, "b": W})["n.y"]
    assert_same(out, np.maximum((X - 0.5) @ W, 0), rtol=1e-12, atol=1e-12)


def test_standard_functions_in_a_loop_body():
    """x <- logistic(linear(x, 0.9, I_t)): standard functions inside a Scan body."""
    step = Node(id="step")
    step.input_ports += expression_node("p", ["x_prev", "I_t"], {}).input_ports
    step.parameters += [
        Parameter(id="drive", function="linear",
                  args={"variable0": "x_prev", "slope": 0.9, "intercept": "I_t"}),
        Parameter(id="x", function="logistic",
                  args={"variable0": "drive", "gain": 1.0, "bias": 0.0, "offset": 0.0}),
    ]
    step.output_ports.append(OutputPort(id="x", value="x"))
    body = mdf_body("step", [step], ["x_prev", "I_t"], ["step.x", "step.x"])
    scan = loop_node("scan", "Scan", {"initial_state_and_scan_inputs": "[x0, I]"}, {"body": body},
                     ["x0", "I"], 2, {"num_scan_inputs": 1})
    current = np.linspace(-1, 1, 9)
    inputs = {"x0": np.array(0.1), "I": current}
    out = _export_and_run(mdf_model(scan), inputs)
    x, trace = 0.1, []
    for i_t in current:
        x = 1 / (1 + np.exp(-(0.9 * x + i_t)))
        trace.append(x)
    assert_same(out["scan.out1"], np.array(trace), rtol=1e-12, atol=1e-12)
    assert_same(out["scan.out1"], run_mdf(mdf_model(scan), inputs)["scan.out1"])


def test_every_mdf_standard_function_exports_or_names_the_node():
    """Each non-ONNX standard function exports, or fails with an error naming node and function
    (the ACT-R and DDM ones call Python code ONNX cannot express)."""
    from modeci_mdf.functions.standard import mdf_functions

    from mdf_loops.onnx.domains import domain_of_function

    refused = []
    for name, spec in mdf_functions.items():
        if domain_of_function(name) is not None:  # onnx::<Op>, onnxml::<Op>
            continue
        node = Node(id="n", output_ports=[OutputPort(id="y", value="f")])
        node.input_ports += expression_node("p", spec["arguments"], {}).input_ports
        node.parameters.append(Parameter(id="f", function=name,
                                         args={a: a for a in spec["arguments"]}))
        inputs = {a: np.full((2, 2), 0.25) for a in spec["arguments"]}
        try:
            mdf_to_onnx(mdf_model(node), example_inputs=inputs)
        except mdf_loops.errors.ModelError as exc:
            assert "node 'n'" in str(exc) and name in str(exc), str(exc)
            refused.append(name)
    assert set(refused) == {n for n, s in mdf_functions.items()
                            if s["expression_string"].startswith(("actr.", "ddm."))}


# ---------------------------------------------------------------- element types


@pytest.mark.parametrize("expression, inputs, parameters, dtype", [
    ("x * 0.5 + 1", {"x": X32}, {}, np.float32),           # float literals stay weak
    ("x * g + h", {"x": X32}, {"g": 0.5, "h": 2}, np.float32),  # so do number parameters
    ("x / 3", {"x": X32}, {}, np.float32),
    ("i / 2", {"i": I64}, {}, np.float64),                  # / on integers gives floats
    ("i * 0.5", {"i": I64}, {}, np.float64),                # a float meeting integers
    ("k + 1", {"k": I64.astype(np.int32)}, {}, np.int32),
    ("flag + 1", {"flag": X > 0.5}, {}, np.int64),
    ("x + y", {"x": X32, "y": X}, {}, np.float64),          # two tensors: numpy promotion
    ("x @ m", {"x": X32}, {"m": W.tolist()}, np.float64),   # a list parameter is an array
])
def test_element_types_follow_numpy(expression, inputs, parameters, dtype):
    model = mdf_model(expression_node("n", list(inputs), {"y": expression}, parameters=parameters))
    out = _export_and_run(model, inputs)["n.y"]
    assert out.dtype == dtype
    scheduled = run_mdf(model, inputs)["n.y"]
    assert scheduled.dtype == dtype  # the engine (numpy) agrees
    np.testing.assert_allclose(out, scheduled, rtol=1e-6)


# ---------------------------------------------------------------- what does not export


@pytest.mark.parametrize("expression, why", [
    ("foo(x)", "function 'foo'"),
    ("(lambda v: v)(x)", "not a numpy/math function"),
    ("x + 'a'", "numeric literals"),
    ("x.shape", "attribute access"),
    ("[v for v in x]", "ListComp"),
    ("x[:k]", "computed slice bound"),
    ("x[k, 0]", "computed index among several"),
    ("numpy.sum(x, out=x)", "arguments ['out']"),
    ("numpy.tanh(x, out=x)", "keyword arguments"),
    ("unknown + x", "unknown name 'unknown'"),
    ("x <<", "cannot parse"),
    ("x << 2", "LShift"),
    ("(x > 0.3) - (x < 0.6)", "operator Sub on two boolean values"),  # numpy refuses it
    ("(x > 0.3) ** (x < 0.6)", "operator Pow on two boolean values"),  # numpy: int8
    ("(x, x[0]) * 2", "different shapes ([?, ?], [?])"),
    ("(x, k)[2]", "index 2 of 2 items"),
    ("x + (0)[0]", "does not fit a constant of shape []"),
    ("x + (1.0)[0, 0]", "does not fit a constant of shape []"),
])
def test_expression_that_onnx_cannot_express_names_node_and_expression(expression, why):
    model = mdf_model(expression_node("n", ["x", "k"], {"y": expression}))
    with pytest.raises(ExpressionError) as info:
        mdf_to_onnx(model, example_inputs={"x": X, "k": np.array(1)})
    message = str(info.value)
    assert "node 'n' output port 'y'" in message and expression in message and why in message


@pytest.mark.parametrize("parameter, why", [
    (Parameter(id="s", value="s + x"), "refers to itself"),
    (Parameter(id="s", value="x", default_initial_value=0.0), "stateful"),
    (Parameter(id="s", default_initial_value=0.0, time_derivative="-s + x"), "stateful"),
    (Parameter(id="s", value={"a": 1}), "dict value"),
    (Parameter(id="s", function="change_goal", args={"pattern": "x", "curr_goal": "x"}),
     "actr.change_goal"),
])
def test_parameter_that_does_not_export_names_node_and_parameter(parameter, why):
    node = expression_node("n", ["x"], {"y": "s"})
    node.parameters.append(parameter)
    with pytest.raises(mdf_loops.errors.ModelError) as info:
        mdf_to_onnx(mdf_model(node), example_inputs={"x": X})
    message = str(info.value)
    assert "node 'n' parameter 's'" in message and why in message


def test_tuple_parameter_of_different_shapes_is_indexed_item_by_item():
    """PsyNeuLink's Runge-Kutta value ``f[0], f[1], t + h``: a parameter holding a tuple
    of arrays of different shapes, read by constant indices in other expressions."""
    node = expression_node("n", ["x", "t"], {"v": "f[0] + f[2]", "w": "f[1]", "s": "g[-1]"},
                           parameters={"f": "x * 2, x[0], t + 0.5", "g": "[x, f[2]]"})
    inputs = {"x": X, "t": np.array(1.0)}
    f = (X * 2, X[0], 1.0 + 0.5)
    out = _export_and_run(mdf_model(node), inputs)
    assert_same(out["n.v"], f[0] + f[2], rtol=1e-15, atol=0)
    assert_same(out["n.w"], f[1], rtol=1e-15, atol=0)
    assert_same(out["n.s"], np.asarray(f[2]), rtol=1e-15, atol=0)


def test_error_inside_a_loop_body_names_the_body_node():
    step = expression_node("step", ["s", "x"], {"y": "s + foo(x)"})
    body = mdf_body("body", [step], ["s", "x"], ["step.y", "step.y"])
    scan = loop_node("scan", "Scan", {"initial_state_and_scan_inputs": "[s0, xs]"}, {"body": body},
                     ["s0", "xs"], 2, {"num_scan_inputs": 1})
    with pytest.raises(ExpressionError, match=r"node 'step' output port 'y'.*s \+ foo\(x\)"):
        mdf_to_onnx(mdf_model(scan), example_inputs={"s0": np.zeros(2), "xs": np.zeros((3, 2))})


_rng_wide = np.random.default_rng(3)
#: float64 arguments over the whole range, with infinities, NaN and the branch points
_WIDE = np.concatenate([[-np.inf, -1e300, -1e10, -2.414213562373095, -1.0, -0.66, -1e-300, 0.0,
                         1e-8, 0.66, 0.6600001, 1.0, 2.4142135623730951, 1e10, np.inf, np.nan],
                        _rng_wide.normal(0, 5, 200)])
_UNIT = np.concatenate([[-1.0, -0.9999999999, 0.0, 1e-9, 0.99999999, 1.0, 1.5, np.nan],
                        _rng_wide.uniform(-1, 1, 200)])
_HYPERBOLIC = np.concatenate([[-700.0, -1e-9, 0.0, 1e-300, 1e-5, 700.0, 711.0, -711.0, np.inf, np.nan],
                              _rng_wide.normal(0, 5, 200)])


@pytest.mark.parametrize("name, x", [
    ("arctan", _WIDE), ("arcsin", _UNIT), ("arccos", _UNIT), ("sinh", _HYPERBOLIC),
    ("cosh", _HYPERBOLIC), ("tan", _WIDE[np.abs(_WIDE) < 1e5]),
])
def test_float64_functions_onnxruntime_has_no_float64_kernel_for_keep_float64_precision(name, x):
    """onnxruntime runs Atan, Asin, Acos, Sinh, Cosh and Tan on float32 only: their float64
    forms are built from other operators, to within a few ulp of numpy (NaN and inf too)."""
    out = _export_and_run(mdf_model(expression_node("n", ["x"], {"y": f"numpy.{name}(x)"})), {"x": x})["n.y"]
    with np.errstate(all="ignore"):
        expected = getattr(np, name)(x)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, expected, rtol=1e-12 if name == "tan" else 2e-15, atol=0)

"""mdf_loops/safety/interpreter.py: expressions of untrusted models are evaluated over
numbers and numeric arrays, each result sized before it is made."""

from __future__ import annotations

import json
import re
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from conftest import child_peak
from test_untrusted import _document

import mdf_loops
from mdf_loops.errors import EvaluationError, MdfLoopsError, SizeLimitError
from mdf_loops.safety.allowlist import MATH_FUNCTIONS
from mdf_loops.safety.guarded_numpy import untrusted_expressions
from mdf_loops.safety.interpreter import MAX_INTEGER_BITS, evaluate_untrusted
from mdf_loops.safety.numpy_sizes import held_elements

SCOPE = {
    "a": np.linspace(0, 1, 150).reshape(150, 1),
    "x": np.linspace(-1, 1, 150),
    "m": np.ones((20, 30)),
    "s": 2.5,
    "n": 10**50,
    "l": [0.0, 1.0],
    "t": "text",
}


def _evaluate(expression: str, max_elements: int = 10**8):
    with untrusted_expressions(), mdf_loops.safety.limits(max_elements=max_elements):
        return evaluate_untrusted(expression, SCOPE)


@pytest.mark.parametrize("expression, oracle", [
    ("x * 2 + s", lambda: SCOPE["x"] * 2 + 2.5),
    ("numpy.tanh(m @ numpy.ones(30))", lambda: np.tanh(np.full(20, 30.0))),
    ("a[::2, 0][x[:75] > 0]", lambda: SCOPE["a"][::2, 0][SCOPE["x"][:75] > 0]),
    ("numpy.einsum('ij,j->i', m, numpy.arange(30.0))", lambda: np.ones((20, 30)) @ np.arange(30.0)),
    ("sum(x) if 1 < s <= 3 else -1", lambda: sum(SCOPE["x"])),
    ("max(l) + len(l) + abs(-s) + round(s) + int(s)", lambda: 1.0 + 2 + 2.5 + 2 + 2),
    ("[x[0], (s, 1)][1][0]", lambda: 2.5),
    ("2 ** 64 + (n // 3) % 7", lambda: 2**64 + (10**50 // 3) % 7),
    ("numpy.outer(x[:3], x[:2]) - numpy.tril(m)[:3, :2]",
     lambda: np.outer(SCOPE["x"][:3], SCOPE["x"][:2]) - np.tril(np.ones((20, 30)))[:3, :2]),
    ("not t == 'text' or numpy.pi", lambda: np.pi),
])
def test_allowed_expressions_give_numpy_s_values(expression, oracle):
    expected = oracle()
    if isinstance(expected, int):
        assert _evaluate(expression) == expected
    else:
        np.testing.assert_allclose(_evaluate(expression), expected)


@pytest.mark.parametrize("expression, error, message", [
    ("t % 1", EvaluationError, "`%` on text"),
    ("l * 10000 * 10000 * 10", EvaluationError, "`*` on a list"),
    ("l + l", EvaluationError, "`+` on a list"),
    ("sum([l, l], [])", EvaluationError, "`+` on a list"),
    ("(n ** 9999)", SizeLimitError, "integer of up to"),
    ("1 << 10 ** 6", SizeLimitError, "integer of up to"),
    ("math.prod([n] * 1)", EvaluationError, "`*` on a list"),
    ("math.prod([n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, "
     "n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, "
     "n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n, n])",
     SizeLimitError, "math.prod"),
    ("a * numpy.transpose(a)", SizeLimitError, "22500 elements"),
    ("a @ numpy.transpose(a)", SizeLimitError, "22500 elements"),
    ("numpy.ones_like(x, None, 'K', True, (1000, 1000))", SizeLimitError, "numpy.ones_like"),
    ("numpy.concatenate([m, m, m, m, m, m, m, m, m, m, m, m, m, m, m, m, m])", SizeLimitError,
     "numpy.concatenate"),
    ("numpy.einsum('i,j->ij', x, x)", SizeLimitError, "numpy.einsum"),
    ("x[numpy.zeros(100, dtype='int64')][:, None] + x", SizeLimitError, "15000 elements"),
    ("a == numpy.transpose(a)", SizeLimitError, "a comparison"),
    ("x.tofile('f')", EvaluationError, "not an allowed function"),
    ("(lambda: 1)()", EvaluationError, "not part of MDF expressions"),
    ("numpy.add(x, x, out=x)", EvaluationError, "writing into an argument"),
])
def test_python_semantics_and_oversized_results_are_refused_before_computing(
        expression, error, message):
    with pytest.raises(error, match=re.escape(message)):
        _evaluate(expression, max_elements=10_000)


def test_an_unknown_name_is_left_to_the_engine():
    with pytest.raises(NameError):
        _evaluate("unknown + 1")


def test_math_prod_of_arrays_plans_each_product():
    # math.prod multiplies its factors with Python's *: numpy broadcasts a (150, 1) and a
    # (150,) to 22,500 elements, which the property below once found unplanned
    with pytest.raises(SizeLimitError, match=r"the result of `\*` has 22500 elements"):
        _evaluate("math.prod([a, x])", max_elements=10_000)
    np.testing.assert_array_equal(_evaluate("math.prod([0.5, x, 2])"), 0.5 * SCOPE["x"] * 2)
    assert _evaluate("math.prod([2, 3, 4])") == 24 and _evaluate("math.prod([])") == 1
    with pytest.raises(SizeLimitError, match="integer of up to"):
        _evaluate("math.prod([10 ** 4000, 10 ** 4000, 10 ** 4000, 10 ** 4000])")


@pytest.mark.parametrize("expression", [
    "divmod(a, x)", "sum(numpy.ones((3, 150)), a)", "max(a, x)", "min([x, a])", "max(x, 1.0, a)",
])
def test_builtins_that_broadcast_plan_their_results(expression):
    # divmod's two results, sum's array start, max's and min's comparisons (made before
    # Python finds their truth ambiguous) broadcast (150, 1) with (150,) rows
    with pytest.raises(SizeLimitError, match="22500 elements"):
        _evaluate(expression, max_elements=10_000)
    tracemalloc.start()  # again, traced (the first call fills caches)
    with pytest.raises(SizeLimitError):
        _evaluate(expression, max_elements=10_000)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 22500  # no comparison of 22,500 booleans was made


def test_max_and_min_give_pythons_values():
    assert _evaluate("max(2, 7.5, 3)") == 7.5 and _evaluate("min([3, -1, 2])") == -1
    assert _evaluate("max(x)") == max(SCOPE["x"]) and _evaluate("min(x[0], a[0, 0])") == -1.0


def test_divmod_and_sum_give_pythons_and_numpys_values():
    x = SCOPE["x"]
    quotient, remainder = _evaluate("divmod(x, 0.3)")
    np.testing.assert_array_equal(quotient, np.floor_divide(x, 0.3))
    np.testing.assert_array_equal(remainder, np.remainder(x, 0.3))
    assert _evaluate("divmod(-7, 2)") == divmod(-7, 2) == (-4, 1)
    assert _evaluate("divmod(7.5, -2)") == divmod(7.5, -2) == (-4.0, -0.5)
    np.testing.assert_array_equal(_evaluate("sum(numpy.ones((3, 150)), x)"), x + 3.0)
    assert _evaluate("sum(x, 1)") == sum(x, 1)


# ---------------------------------------------------------------- a property over the grammar

_LEAVES = st.sampled_from(["a", "x", "m", "s", "n", "l", "t", "3", "10 ** 40", "0.5", "[1, 2]",
                           "'%0999d'", "(1, 2)", "numpy.pi"])
_BINARY = st.sampled_from(["+", "-", "*", "/", "//", "%", "**", "@", "<<", "&", "==", "<"])
_CALLS = st.sampled_from(["numpy.outer", "numpy.transpose", "numpy.ravel", "numpy.diag",
                          "numpy.tril", "numpy.concatenate", "numpy.stack", "numpy.ones",
                          "numpy.arange", "numpy.ones_like", "sum", "max", "abs", "int",
                          "numpy.tensordot", "numpy.dot", "numpy.inner", "math.prod", "len",
                          "divmod"])


def _expressions() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, _BINARY, inner).map(lambda p: f"({p[0]} {p[1]} {p[2]})"),
            st.tuples(_CALLS, st.lists(inner, min_size=1, max_size=3)).map(
                lambda p: f"{p[0]}({', '.join(p[1])})"),
            st.lists(inner, min_size=1, max_size=4).map(lambda p: f"[{', '.join(p)}]"),
            inner.map(lambda e: f"-{e}"),
            st.tuples(inner, inner).map(lambda p: f"{p[0]}[{p[1]}]"),
            st.tuples(inner, inner, inner).map(lambda p: f"({p[0]} if {p[1]} else {p[2]})"),
        )

    return st.recursive(_LEAVES, extend, max_leaves=8)


def _sizes_within(value, limit: int) -> bool:
    if isinstance(value, int):
        return abs(value).bit_length() <= MAX_INTEGER_BITS
    return held_elements(value) <= limit


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(_expressions())
def test_no_expression_of_the_grammar_makes_more_than_max_elements(expression):
    limit = 10_000
    tracemalloc.start()
    try:
        value = _evaluate(expression, max_elements=limit)
    except (MdfLoopsError, NameError, ArithmeticError, TypeError, ValueError, IndexError,
            KeyError, np.exceptions.AxisError):
        value = None  # refused, or an error numpy or Python raises for such operands
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert _sizes_within(value, limit), expression
    # every array made is planned: nothing near what an unplanned product would take
    assert peak < 64 * 8 * limit, (expression, peak)


# ---------------------------------------------------------------- end to end, in a child


def test_the_issue_s_expressions_through_run_stay_small_in_memory(tmp_path):
    parameters = {"a": {"value": np.zeros((11000, 1)).tolist()}, "big": {"value": 10**999},
                  "x": {"value": [1.0, 2.0]}}
    attacks = ["'%02500000000d' % 1", "[0] * 10000 * 10000 * 10", "(big ** 9999) ** 9999",
               "numpy.ones_like(x, None, 'K', True, (100000, 100000))", "a * numpy.transpose(a)",
               "sum(((0,) * 10000,) * 10000, ())"]
    paths = []
    for k, attack in enumerate(attacks):
        node = {"parameters": parameters, "output_ports": {"y": {"value": attack}}}
        path = tmp_path / f"m{k}.json"
        path.write_text(json.dumps(_document(node)))
        paths.append(str(path))
    code = ("import mdf_loops\n"
            "errors = []\n"
            "for path in sys.argv[1:]:\n"
            "    try:\n"
            "        mdf_loops.run(path, backend='scheduler')\n"
            "        errors.append('none')\n"
            "    except mdf_loops.MdfLoopsError as exc:\n"
            "        errors.append(type(exc).__name__)\n"
            "raise ValueError(','.join(errors))\n")
    result, peak = child_peak(code, *paths)
    assert result.split(": ")[1].split(",") == [
        "UnsafeExpressionError", "UnsafeExpressionError", "SizeLimitError", "SizeLimitError",
        "SizeLimitError", "UnsafeExpressionError"], result
    assert peak < 900, peak


@pytest.mark.parametrize("expression", ["x + l", "l + x", "x * l", "l * x", "x > l", "l < x",
                                        "z * i", "i * z", "k * l", "l * k", "k + l"])
def test_a_list_beside_an_array_is_what_numpy_makes_of_it_and_else_refused(expression):
    """Where Python hands the list to numpy the interpreter gives eval's value or refuses
    (it converts only where numpy surely takes over); where Python would repeat or join
    the list (``numpy.int64(3) * [0]``) it refuses. Never another value."""
    scope = {"x": np.arange(3.0), "z": np.array(2), "l": [1.0, 2.0, 3.0], "k": np.int64(3),
             "i": [1, 2]}
    expected = eval(expression, dict(scope))  # noqa: S307 - the oracle: Python itself
    with untrusted_expressions():
        try:
            value = evaluate_untrusted(expression, scope)
        except EvaluationError as error:
            assert "on a list" in str(error)
            return
    assert not isinstance(expected, list)
    np.testing.assert_array_equal(value, expected)


def test_numpy_arithmetic_with_a_list_is_kept_where_numpy_surely_takes_over():
    scope = {"x": np.arange(3.0), "l": [1.0, 2.0, 3.0]}
    with untrusted_expressions():
        for expression in ("x + l", "l + x", "x * l", "l * x", "x > l", "l < x"):
            np.testing.assert_array_equal(evaluate_untrusted(expression, scope),
                                          eval(expression, dict(scope)))  # noqa: S307


def test_a_math_function_a_later_python_adds_is_refused_until_planned():
    # math.sumprod (Python 3.12) multiplies its items unplanned: arrays broadcast, integers
    # grow; a name this Python lacks is refused all the same
    assert "sumprod" not in MATH_FUNCTIONS and "prod" in MATH_FUNCTIONS
    with pytest.raises(EvaluationError, match="not an allowed function"):
        _evaluate("math.sumprod([a], [x])")


def test_round_of_an_integer_to_more_digits_than_it_has_computes_no_power_of_ten():
    # Python computes 10 ** 3,000,000 (1.2 MB) for round(7, -3 * 10**6); 10**9 digits: hours
    _evaluate("round(7, -3)")
    tracemalloc.start()
    assert _evaluate("round(7, -3 * 10 ** 6)") == 0 == _evaluate("round(n, -(3 * 10 ** 6))")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 100_000
    for number in [7, 5, 50, 51, -150, 10**30 + 1, 5 * 10**30, -5 * 10**30, 2**70, True]:
        for digits in range(-35, 3):  # Python's round is the oracle, value and type
            value = _evaluate(f"round({number}, {digits})")
            assert value == round(number, digits) and type(value) is type(round(number, digits))


def test_math_lcm_of_numpy_integers_is_planned_in_bits_before_it_is_computed():
    # math.lcm(*p) of 20,000 int64s made an integer of 358,034 bits (1.2 s; 100,000: 25 s)
    # before the result's check; each factor's bits now count, numpy's integers too
    # (the result's own check says `an integer`: it was computed)
    scope = {"p": np.arange(10**9, 10**9 + 20_000)}
    with untrusted_expressions(), pytest.raises(SizeLimitError, match="result of `math.lcm`"):
        evaluate_untrusted("math.lcm(*p)", scope)
    with untrusted_expressions():
        assert evaluate_untrusted("math.lcm(*p)", {"p": np.array([4, 6, 10])}) == 60

"""The size plans of numpy's functions in expressions that are not trusted
(``mdf_loops/safety/numpy_sizes.py``), against the sizes numpy's own results have."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import mdf_loops
from mdf_loops.errors import EvaluationError, SizeLimitError
from mdf_loops.safety.guarded_numpy import untrusted_expressions
from mdf_loops.safety.interpreter import evaluate_untrusted
from mdf_loops.safety.numpy_sizes import _generalized, held_elements, plan_for

SCOPE = {
    "a": np.linspace(0, 1, 150).reshape(150, 1),
    "x": np.linspace(-1, 1, 150),
    "r": np.ones((1, 150)),
    "m": np.ones((20, 30)),
    "i": np.arange(150).reshape(150, 1),
    "n": 10**1200,
}


@pytest.mark.parametrize("shapes", [
    [(3, 4), (4, 5)], [(4,), (4, 5)], [(3, 4), (4,)], [(4,), (4,)], [(7, 1, 3, 4), (6, 4, 2)],
    [(150, 1), (1, 150)], [(2, 3, 4), (4,)],
])
def test_a_generalized_signature_plans_what_matmul_makes(shapes):
    # matmul's signature has the optional dimensions: its results are the oracle
    arrays = [np.ones(s) for s in shapes]
    assert _generalized("(n?,k),(k,m?)->(n?,m?)")(*arrays) == np.matmul(*arrays).size


@pytest.mark.parametrize("signature, shapes, expected", [
    ("(m,n),(n)->(m)", [(150, 1), (150, 1)], 150 * 150),  # matvec: loop (150,) x m 150
    ("(m,n),(n)->(m)", [(2, 1, 3, 5), (6, 5)], 2 * 6 * 3),
    ("(n),(n)->()", [(150, 5), (5,)], 150),  # vecdot
    ("(n),(n,m)->(m)", [(5,), (5, 7)], 7),  # vecmat
    ("(3),(3)->(3)", [(10, 3), (3,)], 30),  # a fixed core dimension
])
def test_a_generalized_signature_plans_its_loop_and_core_dimensions(signature, shapes, expected):
    assert _generalized(signature)(*[np.ones(s) for s in shapes]) == expected


def test_every_generalized_ufunc_of_this_numpy_is_planned_as_it_computes():
    # matvec, vecmat and vecdot where this numpy has them (2.x): each planned by its
    # signature, and its plan equals the size of its result on broadcasting operands
    for name in dir(np):
        function = getattr(np, name, None)
        if not (isinstance(function, np.ufunc) and function.signature) or name == "matmul":
            continue
        core = function.signature.split("->")[0]
        args = [np.ones((4, 1, 3, 3)) if "," in part else np.ones((5, 3))
                for part in core.split("),(")]
        assert plan_for(name)(*args) == function(*args).size, name


def _evaluate(expression: str, max_elements: int = 10**8):
    with untrusted_expressions(), mdf_loops.safety.limits(max_elements=max_elements):
        return evaluate_untrusted(expression, SCOPE)


def test_linspace_with_array_ends_plans_a_row_of_each_per_point():
    with pytest.raises(SizeLimitError, match="1125000 elements"):
        _evaluate("numpy.linspace(a, x)", max_elements=10_000)
    np.testing.assert_array_equal(_evaluate("numpy.linspace(x, x + 1, 3)"),
                                  np.linspace(SCOPE["x"], SCOPE["x"] + 1, 3))
    assert plan_for("linspace")(0, 1, 7) == np.linspace(0, 1, 7).size


# Each call below made more than max_elements (10,000) unchecked before its plan: the
# result's size (numpy's own, computed here without limits) is the oracle.
@pytest.mark.parametrize("expression", [
    "numpy.diag(x[:1], 1000)",  # a vector's k-th diagonal: (n + |k|) squared
    "numpy.take(numpy.ones((100, 60)), i, axis=1, mode='wrap')",  # a column per index
    "numpy.matmul(r, r, axes=[(1, 0), (0, 1), (0, 1)])",  # core axes moved: 150 x 150
    "numpy.cross(a[:, :, None] * numpy.ones(2), x[:, None] * numpy.ones(3))",  # 2- with 3-vectors
    "numpy.modf(numpy.ones((100, 60)))",  # two results
    "numpy.where(numpy.ones((100, 60)))",  # an index array per dimension
])
def test_a_result_past_max_elements_is_refused_before_it_is_made(expression):
    with np.errstate(all="ignore"):
        made = held_elements(_evaluate(expression))
    assert made > 10_000
    with pytest.raises(SizeLimitError, match=f"{made} elements"):
        _evaluate(expression, max_elements=10_000)


@pytest.mark.parametrize("expression", [
    "numpy.allclose(a, x)",  # isclose's 150 x 150 booleans, reduced to one
    "numpy.std(a, mean=x)",  # a - mean, 150 x 150, before the reduction
])
def test_a_broadcast_computed_inside_a_reduction_is_planned(expression):
    tracemalloc.start()
    _evaluate(expression)  # numpy's own peak: the oracle that the broadcast is made
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak > 150 * 150
    with pytest.raises(SizeLimitError, match="22500 elements"):
        _evaluate(expression, max_elements=10_000)


@pytest.mark.parametrize("expression", [
    "numpy.add(x, x, x)", "numpy.dot(x, x, numpy.zeros(()))", "numpy.sum(m, 0, None, m[0])",
    "numpy.concatenate([x, x], 0, numpy.zeros(2 * len(x)))",
    "numpy.nan_to_num(x, False)", "numpy.nan_to_num(x, copy=False)", "numpy.median(x, 0, None, True)",
])
def test_no_call_writes_into_a_value(expression):
    before = {name: np.copy(value) for name, value in SCOPE.items()}
    with pytest.raises(EvaluationError, match="writing into an argument"):
        _evaluate(expression)
    for name, value in SCOPE.items():
        np.testing.assert_array_equal(value, before[name])
    np.testing.assert_array_equal(_evaluate("numpy.nan_to_num(x, True)"), SCOPE["x"])


@pytest.mark.parametrize("expression", [
    "numpy.square(numpy.square(numpy.square(numpy.square(numpy.array([n])))))",
    "numpy.prod([n, n, n, n, n, n, n, n])", "numpy.asarray(n)", "numpy.outer([n], [n])",
])
def test_an_integer_no_numpy_number_holds_is_refused(expression):
    # numpy makes an array of Python integers of it, whose products have no bound
    assert np.asarray([SCOPE["n"]]).dtype == object
    with pytest.raises(EvaluationError, match="3987 bits is no numpy number"):
        _evaluate(expression)
    assert _evaluate("numpy.square(numpy.array([2 ** 62 - 1]))").dtype == np.int64


def test_diff_of_more_differences_than_values_is_refused_not_looped():
    # numpy loops n times over an empty array: minutes for n = 10**9
    with pytest.raises(EvaluationError, match="n is more than the 150 values"):
        _evaluate("numpy.diff(x, 10 ** 9)")
    np.testing.assert_array_equal(_evaluate("numpy.diff(x, 2)"), np.diff(SCOPE["x"], 2))


def test_an_unoptimized_einsum_is_planned_by_the_loop_it_runs():
    # numpy loops over every combination of i, j, k, l, m (40**5 = 102,400,000 steps) for
    # one number; optimize=True contracts two at a time (numpy's own product the oracle)
    expression = "numpy.einsum('i,j,k,l,m->', v, v, v, v, v{})"
    scope = {"v": np.ones(40)}
    with untrusted_expressions(), mdf_loops.safety.limits(max_elements=10**6):
        with pytest.raises(SizeLimitError, match="loops over 102400000 combinations"):
            evaluate_untrusted(expression.format(""), scope)
        assert evaluate_untrusted(expression.format(", optimize=True"), scope) == 40.0**5
        np.testing.assert_allclose(evaluate_untrusted("numpy.einsum('ij,j->i', m, x[:30])", SCOPE),
                                   SCOPE["m"] @ SCOPE["x"][:30])


def test_arguments_by_keyword_are_planned_or_the_call_refused():
    # numpy.arange(stop=n) made n elements unplanned: its plan read only positions
    with pytest.raises(SizeLimitError, match="1000000 elements"):
        _evaluate("numpy.arange(stop=10 ** 6)", max_elements=10_000)
    np.testing.assert_array_equal(_evaluate("numpy.arange(stop=5)"), np.arange(5))
    np.testing.assert_array_equal(_evaluate("numpy.arange(start=2, stop=5)"), np.arange(2, 5))
    # a keyword the plan does not name: refused, never run unplanned
    with pytest.raises(EvaluationError, match=r"numpy.cross\(...\): the size of its result"):
        _evaluate("numpy.cross(x, x, extra=1)")


def test_an_exhaustive_einsum_path_search_of_many_operands_is_refused():
    # optimize='optimal' tries every contraction order: 9 operands of 2 x 2 take numpy
    # seconds, 10 half a minute (greedy, optimize=True, gives the same number at once)
    scope = {"v": np.ones((2, 2))}
    chain = ",".join("abcdefghijk"[k : k + 2] for k in range(9)) + "->"
    call = f"numpy.einsum('{chain}', " + ", ".join(["v"] * 9) + ", optimize={})"
    with untrusted_expressions(), mdf_loops.safety.limits(max_elements=10**6):
        with pytest.raises(EvaluationError, match="9 operands: its search"):
            evaluate_untrusted(call.format("'optimal'"), scope)
        assert evaluate_untrusted(call.format("True"), scope) == 2.0**10
        assert evaluate_untrusted("numpy.einsum('ab,bc->', v, v, optimize='optimal')",
                                  scope) == 8.0


@pytest.mark.parametrize("dtype", ["datetime64[m]", "M8[s]", "timedelta64[s]"])
def test_dates_and_times_are_no_dtype_of_an_untrusted_expression(dtype):
    # numpy.arange of two dates counts the minutes between them (44,640 in January 2000):
    # texts no plan reads as numbers
    made = np.arange("2000-01-01", "2000-02-01", dtype="datetime64[m]").size
    assert made == 31 * 24 * 60 > 10_000
    with pytest.raises((EvaluationError, SizeLimitError), match="only plain element types"):
        _evaluate(f"numpy.arange('2000-01-01', '2000-02-01', dtype='{dtype}')", 10_000)


@pytest.mark.parametrize("expression", [
    "numpy.full(1000, t)", "numpy.where(numpy.ones(1000) > 0, t, t)",
    "numpy.zeros_like(numpy.array([t]), shape=1000)",
])
def test_text_is_counted_by_its_bytes_as_numpy_stores_it(expression):
    # 1,000 texts of 10,000 characters: 40 MB (numpy's nbytes the oracle), 5,000,000
    # float64-sized elements, where a count of items saw 1,000
    scope = {"t": "x" * 10_000}
    with untrusted_expressions():
        assert evaluate_untrusted(expression, scope).nbytes == 40_000_000
    with untrusted_expressions(), mdf_loops.safety.limits(max_elements=10_000):
        with pytest.raises(SizeLimitError, match="5000000 elements"):
            evaluate_untrusted(expression, scope)
        assert evaluate_untrusted("numpy.full(3, 'ab')", scope).tolist() == ["ab"] * 3

"""The size plans of numpy's functions in expressions that are not trusted
(``mdf_loops/safety/numpy_sizes.py``), against the sizes numpy's own results have."""

from __future__ import annotations

import numpy as np
import pytest

import mdf_loops
from mdf_loops.errors import SizeLimitError
from mdf_loops.safety.allowlist import untrusted_expressions
from mdf_loops.safety.interpreter import evaluate_untrusted
from mdf_loops.safety.numpy_sizes import _generalized, plan_for

SCOPE = {"a": np.linspace(0, 1, 150).reshape(150, 1), "x": np.linspace(-1, 1, 150)}


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

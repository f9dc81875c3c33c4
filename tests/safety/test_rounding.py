"""Rounding to a huge number of digits in a model that is not trusted: numpy's own result,
without numpy's computing ``10**decimals`` one multiplication at a time (about 0.7 s a
call at ``-10**9``, so a loop of a few thousand steps would run for hours)."""

import json
import time

import numpy as np
import pytest
from conftest import needs_input_port_fields

import mdf_loops
from mdf_loops.safety.guarded_numpy import (
    SATURATED_DECIMALS,
    bounded_decimals,
    expression_numpy,
    untrusted_expressions,
)
from mdf_loops.safety.untrusted_values import BUILTINS

VALUES = [
    np.array([0.0, 1.5, -2.5, 1e300, 1e-300, np.inf, np.nan]),
    np.array([0.25, -3.5], dtype=np.float32),
    np.array([0, 1, -7, 123456789, 2**62], dtype=np.int64),
    np.array([0, 5, 255], dtype=np.uint8),
    np.array([1 + 2j, 0j]),
    np.float64(7.5),
    np.int64(5),
    np.int32(-12),
]


def _outcome(call):
    """A result as bytes and dtype, or the type of the error raised."""
    try:
        result = np.asarray(call())
    except Exception as exc:  # noqa: BLE001 - numpy's own refusal is part of what is compared
        return type(exc).__name__
    nans = np.isnan(result) if result.dtype.kind in "fc" else np.zeros(result.shape, bool)
    return result.dtype, result.shape, np.where(nans, 0, result).tobytes(), nans.tobytes()


def _ours(name, value, decimals):
    with untrusted_expressions():
        if name == "builtins.round":
            return _outcome(lambda: BUILTINS["round"](value, decimals))
        function = getattr(expression_numpy(), name)
        return _outcome(lambda: function(value, decimals=decimals))


@pytest.mark.parametrize("name", ["round", "around"])
@pytest.mark.parametrize("decimals", [-(10**9), 10**9, -(2**31) + 1, 2**31 - 1])
def test_numpy_rounding_to_huge_decimals_gives_numpys_result(name, decimals):
    for value in VALUES:
        # the oracle: numpy itself, at decimals it computes in well under a second, which
        # give what any larger ones give (a float's 10**d is infinite, an int's wraps to 0)
        expected = _outcome(lambda v=value: np.round(v, 100_000 if decimals > 0 else -100_000))
        assert _ours(name, value, decimals) == expected, (value, decimals)


@pytest.mark.parametrize("value", [np.float64(7.5), np.int64(5), np.array(2.5)])
def test_builtin_round_of_a_numpy_number_to_huge_decimals(value):
    for decimals in (-(10**9), 10**9):
        expected = _outcome(lambda d=decimals: round(value, 100_000 if d > 0 else -100_000))
        assert _ours("builtins.round", value, decimals) == expected


def test_the_bound_is_numpys_own_result_at_the_bound():
    """One honest check at the full size: numpy at -10**9 (its slow loop, once) gives what
    it gives at the bound."""
    value = np.array([1.5, -2.0, 1e300])
    assert _outcome(lambda: np.round(value, -(10**9))) == _outcome(
        lambda: np.round(value, -SATURATED_DECIMALS)
    )


@pytest.mark.parametrize(
    ("decimals", "expected"),
    [
        (3, 3),
        (-SATURATED_DECIMALS - 1, -SATURATED_DECIMALS),
        (10**9, SATURATED_DECIMALS),
        (np.int64(-(10**9)), -SATURATED_DECIMALS),
        (2**40, 2**40),  # no C int: numpy's own OverflowError
        (True, True),
        (1.5, 1.5),  # no integer: numpy's own TypeError
    ],
)
def test_bounded_decimals(decimals, expected):
    assert bounded_decimals(decimals) == expected


def test_numpy_refuses_decimals_past_a_c_int_as_before():
    with untrusted_expressions(), pytest.raises(OverflowError):
        np.round(np.float64(1.5), 2**40)  # the oracle
    assert _ours("round", np.float64(1.5), 2**40) == "OverflowError"


@needs_input_port_fields  # a time loop
def test_a_model_that_rounds_to_a_billion_digits_each_step_finishes(tmp_path):
    """Through the python backend, not trusted: 40 steps, each of which cost numpy's slow
    loop before (about 30 s in all); the result is numpy's (NaN)."""
    node = {
        "parameters": {
            "x": {"default_initial_value": 1.5, "time_derivative": "0.1"},
            "r": {"value": "numpy.round(x, -1000000000)"},
        },
        "output_ports": {"out": {"value": "r"}},
    }
    path = tmp_path / "m.json"
    path.write_text(
        json.dumps({"m": {"format": "ModECI MDF v0.4", "graphs": {"g": {"nodes": {"n": node}}}}})
    )
    start = time.perf_counter()
    traces = mdf_loops.simulate(path, dt=0.1, steps=40, record=["n.out"], backend="python")
    assert time.perf_counter() - start < 15  # 30 s before; milliseconds now
    assert np.isnan(traces["n.out"]).all()

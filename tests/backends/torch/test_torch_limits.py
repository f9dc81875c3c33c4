"""The limits of an untrusted model on the torch backend (mdf_loops/backends/torch/limits.py):
every operator sized by the scheduler's size plan before its torch kernel runs, each
iteration's carried values and stacked scan outputs held to max_elements, and a limit
passed anywhere naming the loop nodes and iterations, as the scheduler does."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

import mdf_loops  # noqa: E402
from limit_models import (  # noqa: E402
    doubling_loop,
    growing_scan_output,
    loop_in_scan,
    passes_at_the_count_and_fails_below,
    totals_inputs,
)
from mdf_loops.errors import IterationLimitError, SizeLimitError  # noqa: E402


@pytest.mark.parametrize("stop", [False, True], ids=["trips", "condition"])
def test_the_total_is_the_scheduler_s_and_names_the_loops_and_iterations(stop):
    model = loop_in_scan(stop)
    inner = 3 if stop else 5
    need = 6 * (1 + inner)
    results = passes_at_the_count_and_fails_below(
        model, totals_inputs(6, 5, stop=3.0), need, ("scheduler", "torch"))
    assert float(results["torch"]["s"]) == float(results["scheduler"]["s"]) == 6.0 * inner
    with pytest.raises(IterationLimitError) as info:
        mdf_loops.run(model, totals_inputs(6, 5, stop=3.0), backend="torch",
                      max_total_iterations=need - 1)
    assert str(info.value).startswith(
        f"node 'Scan_0' (Scan), iteration 5 > node 'Loop_0' (Loop) (torch backend): Loop "
        f"stopped at iteration {inner - 1}: the loops of this run have run {need - 1} "
        "iterations together"), str(info.value)


def test_a_loop_past_max_iterations_names_itself():
    model = loop_in_scan(False)
    with pytest.raises(IterationLimitError,
                       match=r"^node 'Scan_0' \(Scan\), iteration 0 > node 'Loop_0' \(Loop\) "
                             r"\(torch backend\): Loop stopped at iteration 7"):
        mdf_loops.run(model, totals_inputs(2, 100), backend="torch", max_iterations=7)


def test_a_carried_value_that_doubles_stops_at_the_iteration_that_passes_the_limit():
    model = doubling_loop()
    feeds = {"n": np.int64(40), "x0": np.ones(1, np.float32)}  # 2^40 elements at the end
    with pytest.raises(SizeLimitError,
                       match=r"^node 'Loop_0' \(Loop\), iteration 9 > node 'Concat_0_node' "
                             r"\(Concat\) \(torch backend\): the output of onnx::Concat has 1024"):
        mdf_loops.run(model, feeds, backend="torch", max_elements=1000)
    small = {"n": np.int64(5), "x0": np.ones(1, np.float32)}
    np.testing.assert_array_equal(mdf_loops.run(model, small, backend="torch")["x"],
                                  mdf_loops.run(model, small, backend="onnxruntime")["x"])


def test_stacked_scan_outputs_are_held_to_the_limit_each_iteration():
    model = growing_scan_output()
    feeds = {"n": np.int64(10**6), "row": np.arange(100, dtype=np.float32)}
    with pytest.raises(SizeLimitError, match=r"^node 'Loop_0' \(Loop\), iteration 10 \(torch "
                                             r"backend\): scan output 0 \(stacked\) has 1100"):
        mdf_loops.run(model, feeds, backend="torch", max_elements=1000)
    small = {"n": np.int64(4), "row": feeds["row"]}
    np.testing.assert_array_equal(mdf_loops.run(model, small, backend="torch")["ys"],
                                  mdf_loops.run(model, small, backend="onnxruntime")["ys"])

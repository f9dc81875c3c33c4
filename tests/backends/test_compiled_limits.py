"""What the jax and torch backends hold an untrusted model to, in the same words: the
loops of a branch counted when it runs (the scheduler's count as the oracle), an
operator asking for gigabytes refused before it allocates, and a trusted model not
sized. Each backend's own cases are in tests/backends/jax/test_jax_limits.py and
tests/backends/torch/test_torch_limits.py."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import mdf_loops
from limit_models import HOSTILE, loop_in_branch, one_operator, passes_at_the_count_and_fails_below
from mdf_loops.errors import IterationLimitError, SizeLimitError

BACKENDS = [
    pytest.param(name, marks=pytest.mark.skipif(importlib.util.find_spec(name) is None,
                                                reason=f"{name} is not installed"))
    for name in ("jax", "torch")
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_loops_in_a_branch_decided_at_run_time_are_counted_when_it_runs(backend):
    model = loop_in_branch()
    inputs = {"s0": np.float64(0), "xs": np.array([1.0, -1, 1, 1, -1, 1]), "n": np.int64(5)}
    need = 6 + 4 * 5  # 6 steps, 4 of them running the Loop's 5 iterations
    results = passes_at_the_count_and_fails_below(model, inputs, need, ("scheduler", backend))
    assert float(results[backend]["s"]) == float(results["scheduler"]["s"]) == 20.0
    with pytest.raises(IterationLimitError, match="node 'Loop_0' .*Loop stopped at iteration 4"):
        mdf_loops.run(model, inputs, backend=backend, max_total_iterations=need - 1)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", sorted(HOSTILE))
def test_an_operator_asking_for_gigabytes_is_refused_before_it_allocates(op, backend):
    node, types, feeds = HOSTILE[op]
    with pytest.raises(SizeLimitError, match=rf"^node '{op}_0_node' \({op}\) \({backend} backend\): "
                                             rf"the output of onnx::{op} has 2500000000 elements"):
        mdf_loops.run(one_operator(node, types), feeds, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_trusted_models_are_not_sized(backend):
    node, types, feeds = HOSTILE["Expand"]
    model = one_operator(node, types)
    feeds = {"a": feeds["a"], "s": np.array([3, 4])}
    with mdf_loops.safety.limits(max_elements=5):
        with pytest.raises(SizeLimitError):
            mdf_loops.run(model, feeds, backend=backend)
        assert mdf_loops.run(model, feeds, backend=backend, trusted=True)["y"].shape == (3, 4)
    expected = mdf_loops.run(model, feeds, backend="onnxruntime")["y"]
    np.testing.assert_array_equal(mdf_loops.run(model, feeds, backend=backend)["y"], expected)

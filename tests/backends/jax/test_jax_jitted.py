"""The compiled functions a lowered model keeps (mdf_loops/backends/jax/jitted.py): a new
objective function on each call is compiled once while it closes over the same objects,
again (never stale) when it closes over new ones, and the cache stays bounded."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import mdf_loops  # noqa: E402
from mdf_loops import ops  # noqa: E402
from mdf_loops.backends.jax import jitted  # noqa: E402
from mdf_loops.backends.jax.grad import prepare  # noqa: E402
from mdf_loops.backends.jax.jitted import JittedFunctions, objective_key  # noqa: E402
from conftest import expression_node, mdf_model  # noqa: E402

X = np.array([1.0, 2.0, -1.0])


def _gain_model():
    return mdf_model(expression_node("amplify", ["x"], {"y": "gain * x * x"}, {"gain": 3.0}))


def _cached(model) -> JittedFunctions:
    lowered, _, _ = prepare(model, {"x": X}, ["gain"], limits=ops.current_limits())  # as grad
    return lowered._jitted


def test_a_fresh_lambda_over_the_same_objects_compiles_once():
    model, weights = _gain_model(), np.array([1.0, -2.0, 0.5])
    for _ in range(40):
        grads = mdf_loops.grad(model, lambda out: (out["amplify.y"] * weights).sum(), "gain",
                               {"x": X})
        np.testing.assert_allclose(grads["gain"], (X * X * weights).sum())
    assert sum(key[0] == "grad" for key in _cached(model)) == 1


def test_new_closed_over_values_give_new_answers_and_the_cache_stays_bounded(monkeypatch):
    monkeypatch.setattr(jitted, "JITTED_LIMIT", 4)  # a bound of 4 for a model lowered now
    model, rng = _gain_model(), np.random.default_rng(0)
    for _ in range(10):  # 10 objectives, each over a new array
        weights = rng.normal(size=3)
        grads = mdf_loops.grad(model, lambda out: (out["amplify.y"] * weights).sum(), "gain",
                               {"x": X})
        np.testing.assert_allclose(grads["gain"], (X * X * weights).sum())  # never stale
        assert len(_cached(model)) <= 4


def test_objective_keys():
    a = np.ones(3)
    make = lambda w: lambda out: out * w  # noqa: E731
    assert objective_key(make(a)) == objective_key(make(a))
    assert objective_key(make(a)) != objective_key(make(np.ones(3)))
    assert objective_key("amplify.y") == "amplify.y"

    class Loss:
        def __call__(self, out):
            return out

    loss = Loss()
    assert objective_key(loss) == objective_key(loss) != objective_key(Loss())


def test_the_least_recently_used_goes_first():
    cache = JittedFunctions(limit=2)
    cache["a"], cache["b"] = 1, 2
    assert cache.get("a") == 1  # "b" is now the least recently used
    cache["c"] = 3
    assert list(cache) == ["a", "c"] and cache.get("b") is None

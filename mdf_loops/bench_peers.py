"""Hand-written peers of the benchmark workloads: the same loops written directly in JAX and
PyTensor, each the way a user of that library would write it (optional: absent when the
library is not installed)."""

from __future__ import annotations

from typing import Callable

import numpy as np
from onnx import numpy_helper

from mdf_loops.workloads import Workload

__all__ = ["jax_peer", "pytensor_peer"]


def _initializers(work: Workload) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in work.model.graph.initializer}


def _kind(work: Workload) -> str:
    return work.name.rsplit("_", 1)[0] if not work.name.startswith("elman") else "elman_rnn"


def jax_peer(work: Workload) -> Callable[[], list] | None:
    """``jax.jit`` of ``lax.scan`` / ``lax.while_loop``; outputs copied to numpy like ours."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    kind, inputs = _kind(work), work.inputs
    if kind == "elman_rnn":
        w = _initializers(work)
        wx, wh, b = w["Wx"], w["Wh"], w["b"]

        @jax.jit
        def rnn(h0, xs):
            def step(h, x):
                h = jnp.tanh(x @ wx + h @ wh + b)
                return h, h
            return jax.lax.scan(step, h0, xs)

        return lambda: [np.asarray(v) for v in rnn(inputs["h0"], inputs["X"])]
    if kind == "running_sum":
        @jax.jit
        def total(s0, xs):
            return jax.lax.scan(lambda s, x: (s + x, s + x), s0, xs)

        return lambda: [np.asarray(v) for v in total(inputs["s0"], inputs["x"])]
    if kind == "while_loop":
        @jax.jit
        def count(x0, limit):
            def step(state):
                return state[0] + np.float32(1), state[0] + np.float32(1) < limit
            return jax.lax.while_loop(lambda s: s[1], step, (x0, jnp.asarray(True)))[0]

        return lambda: [np.asarray(count(inputs["x0"], inputs["limit"]))]
    return None


def pytensor_peer(work: Workload) -> Callable[[], list] | None:
    """``pytensor.scan`` compiled with PyTensor's default mode."""
    try:
        import pytensor
        import pytensor.tensor as pt
    except ImportError:
        return None
    kind, inputs = _kind(work), work.inputs
    if kind == "elman_rnn":
        w = _initializers(work)
        h0, xs = pt.vector("h0", dtype="float32"), pt.matrix("X", dtype="float32")
        wx, wh, b = (pytensor.shared(w[k]) for k in ("Wx", "Wh", "b"))
        hs, _ = pytensor.scan(lambda x, h: pt.tanh(pt.dot(x, wx) + pt.dot(h, wh) + b),
                              sequences=xs, outputs_info=h0)
        fn = pytensor.function([h0, xs], [hs[-1], hs])
        return lambda: fn(inputs["h0"], inputs["X"])
    if kind == "running_sum":
        s0, xs = pt.scalar("s0", dtype="float32"), pt.vector("x", dtype="float32")
        partial, _ = pytensor.scan(lambda x, s: s + x, sequences=xs, outputs_info=s0)
        fn = pytensor.function([s0, xs], [partial[-1], partial])
        return lambda: fn(inputs["s0"], inputs["x"])
    return None

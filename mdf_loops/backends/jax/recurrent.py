"""ONNX's ``RNN``, ``GRU`` and ``LSTM`` in JAX: :mod:`mdf_loops.backends.recurrent`'s
semantics, stepped through time with ``lax.scan`` (JAX is imported when a node runs)."""

from __future__ import annotations

import functools

from mdf_loops.backends.jax.registry import op
from mdf_loops.backends.recurrent import ArrayOps, register_recurrent


@functools.cache
def _array_ops() -> ArrayOps:
    import jax
    import jax.numpy as jnp

    def scan(step, carry, xs):
        xs = jnp.asarray(xs)
        return jax.lax.scan(step, tuple(jnp.asarray(c, dtype=xs.dtype) for c in carry), xs)

    return ArrayOps(
        activations={
            "tanh": jnp.tanh,
            "sigmoid": jax.nn.sigmoid,
            "relu": jax.nn.relu,
            "softsign": jax.nn.soft_sign,
            "softplus": jax.nn.softplus,
        },
        stack=lambda values, axis: jnp.stack(list(values), axis=axis),
        flip=lambda x: jnp.flip(x, axis=0),
        transpose=lambda x, perm: jnp.transpose(x, perm),
        zeros=lambda shape, like: jnp.zeros(shape, dtype=like.dtype),
        scan=scan,
        backend="JAX",
    )


register_recurrent(op, _array_ops)

"""The JAX backend: an MDF model lowered to one jit-compiled JAX function.

Needs ``mdf-loops[jax]``.

Entry point :func:`compile` (``compile(model, example_inputs) -> JaxModel``); JAX
itself is imported only when a model is compiled, so this package imports without it.
"""

from mdf_loops.backends.jax.compiled import JaxModel, cached_compile, clear_compiled, compile

__all__ = ["JaxModel", "compile", "cached_compile", "clear_compiled"]

"""Backends: the ways a model is evaluated (docs/architecture.md).

``scheduler`` runs every node through modeci-mdf's ``EvaluableGraph``; ``onnxruntime``
lowers the model to one ONNX model; ``jax`` to one ``jax.jit`` function; ``torch`` to torch
operations run eagerly (and trainable modules, ``to_pytorch``); ``python`` (time
loops only) writes a model's steps out as one Python loop.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["Backend", "BACKENDS", "SimulateBackend", "SIMULATE_BACKENDS"]

#: the execution modes of :func:`mdf_loops.run` (and sweeps, batches)
Backend = Literal["auto", "scheduler", "onnxruntime", "jax", "torch"]
BACKENDS: tuple[str, ...] = get_args(Backend)

#: the execution modes of :func:`mdf_loops.simulate` (time loops)
SimulateBackend = Literal["auto", "python", "onnxruntime", "scheduler"]
SIMULATE_BACKENDS: tuple[str, ...] = get_args(SimulateBackend)

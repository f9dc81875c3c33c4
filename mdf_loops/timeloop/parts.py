"""A time loop in parts: what a backend compiles and runs it from, without its Loop node.

The model :func:`~mdf_loops.timeloop.convert.to_time_loop` returns holds a time loop as
one ``onnx::Loop`` node: the body graph as a parameter value, the initial values as
parameters, the trip count and the input series as ports, each port typed in metadata.
The python backend needs the same facts as plain values (:class:`LoopParts`): it reads
them from a stored time-loop model (:mod:`mdf_loops.backends.python.compiled`), and a
conversion that runs at once (``simulate`` of a stateful model) hands them over as
the converter holds them (:class:`ConvertedLoop`), making the Loop-node model only for
a backend that reads a model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from modeci_mdf.mdf import Graph, Model

from mdf_loops.model.convention import BodySignature
from mdf_loops.timeloop.spec import TimeLoopSpec

__all__ = ["ConvertedLoop", "LoopParts", "LoopStart"]


@dataclass(frozen=True)
class LoopStart:
    """What a time loop starts from: the Loop node's inputs."""

    #: the trip count
    steps: int
    #: the carried values' initial values, in the order the body takes them (as the
    #: Loop node's parameters hold them: Python numbers, numeric arrays, nested lists)
    initial: tuple[Any, ...]
    #: per outer-scope input of the body (its order), the series it reads (axis 0 =
    #: step), or None where it is given at run time
    series: tuple[Any, ...]
    #: the Loop's condition before the first step
    cond: bool


@dataclass(frozen=True)
class LoopParts:
    """A time loop as the python backend compiles and runs it."""

    model_id: str
    graph_id: str
    body: Graph
    signature: BodySignature
    #: the Loop node's parameters that hold ``start.initial``, in order
    initial_names: tuple[str, ...]
    #: per scan output of the body (after the carried values): the dtype of the scalar
    #: it records each step, or None (an array a step, or no declared type)
    scalar_scans: tuple[np.dtype | None, ...]
    start: LoopStart


@dataclass(frozen=True)
class ConvertedLoop:
    """A stateful model's time loop as its converter holds it: the ``parts`` and the
    ``spec`` at once, the Loop-node model (:attr:`model`) made when first asked for."""

    parts: LoopParts
    spec: TimeLoopSpec
    make_model: Callable[[], Model]

    @cached_property
    def model(self) -> Model:
        """The model :func:`~mdf_loops.timeloop.convert.to_time_loop` returns."""
        return self.make_model()

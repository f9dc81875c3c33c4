"""ONNX graphs planned once into torch programs, then run eagerly (one walker for every graph).

:class:`Program` plans a graph: each node's lowering looked up in
:data:`~mdf_loops.backends.torch.registry.OPS` (an operator without one is a
:class:`~mdf_loops.errors.CompileError` naming the node), subgraphs planned
recursively, and every constant tensor (an initializer, a ``Constant`` node) entered
in the :class:`ConstantTable`, so the module can hold it as a parameter or a buffer.
Running a program walks its steps over a dict of values; a loop body is bound to its
enclosing scope once per loop, not once per iteration.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from mdf_loops.backends.jax.control import free_names
from mdf_loops.backends.torch import (  # noqa: F401  (fill the table)
    control,
    convolution,
    elementwise,
    recurrent,
    reductions,
    sequences,
    shapes,
)
from mdf_loops.backends.torch.limits import sized
from mdf_loops.backends.torch.registry import OPS, NodeCall
from mdf_loops.backends.torch.straight import write_out
from mdf_loops.backends.torch.values import label
from mdf_loops.errors import CompileError, EvaluationError, MdfLoopsError
from mdf_loops.safety.operator_sizes import node_size_check

__all__ = ["Program", "ConstantTable", "ConstantSite", "Frame"]

_GRAPH = onnx.AttributeProto.GRAPH


@dataclass(frozen=True)
class ConstantSite:
    """One constant tensor of the exported model: where it is, and its value."""

    key: str  # the name the module holds it by
    graph_path: tuple[str, ...]  # the loop nodes' (MDF id, attribute) pairs above it, flattened
    name: str  # the ONNX value it defines
    value: np.ndarray


@dataclass
class ConstantTable:
    """Every constant of a planned model, in order of appearance."""

    sites: list[ConstantSite] = field(default_factory=list)

    def add(self, graph_path: tuple[str, ...], name: str, value: np.ndarray) -> str:
        if value.dtype.kind in "OUS":
            raise CompileError(
                f"constant '{name}' holds strings, and torch has no string tensors; run the "
                "model with backend='onnxruntime' or 'scheduler'"
            )
        key = f"c{len(self.sites)}"
        self.sites.append(ConstantSite(key, graph_path, name, value))
        return key


@dataclass(frozen=True)
class Frame:
    """The values a node that runs subgraphs sees: its graph's, and the model's constants."""

    env: Mapping[str, Any]
    constants: Mapping[str, Any]


class Program:
    """One ONNX graph, planned: call :meth:`bind` with the enclosing scope, then run it."""

    def __init__(
        self,
        graph: onnx.GraphProto,
        opset: int,
        table: ConstantTable,
        path: tuple[str, ...] = (),
        *,
        sized: bool = False,
    ):
        #: a model that is not trusted: operators sized, loops' values held (:mod:`.limits`)
        self.sized = sized
        self.name = graph.name
        self.input_names = tuple(i.name for i in graph.input)
        self.output_names = tuple(o.name for o in graph.output)
        self.free = tuple(sorted(free_names(graph)))
        self.constants: dict[str, str] = {}  # value name -> constant key
        for init in graph.initializer:
            self.constants[init.name] = table.add(path, init.name, numpy_helper.to_array(init))
        self.steps: list[_Step] = []
        #: an Identity's output -> its input, read directly (no step) unless a subgraph reads it
        self._alias: dict[str, str] = {}
        self._read_by_bodies = frozenset().union(
            *(free_names(a.g) for n in graph.node for a in n.attribute if a.type == _GRAPH)
        )
        for node in graph.node:
            self._plan(node, opset, table, path)
        self._unpacked = [(s.kind, s.fn, s.read, s.output, s) for s in self.steps]
        self._collect = _tuple_reader(tuple(self._alias.get(n, n) for n in self.output_names))
        self._straight = None
        if self.steps and not any(step.kind == _SCOPED for step in self.steps):
            outputs = [self._alias.get(n, n) for n in self.output_names]
            self._straight = write_out(self.name, self.input_names, self.steps, outputs)

    def _plan(self, node: onnx.NodeProto, opset: int, table: ConstantTable, path: tuple) -> None:
        where = label(node)
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            self.constants[node.output[0]] = table.add(path, node.output[0], _constant(node, where))
            return
        standard = node.domain in ("", "ai.onnx")
        inputs = [self._alias.get(name, name) for name in node.input]
        if standard and node.op_type == "Identity" and node.output[0] not in self._read_by_bodies:
            self._alias[node.output[0]] = inputs[0]
            return
        lowering = OPS.lowering_of(node, where)
        call = NodeCall(node, where, opset, sized=self.sized)
        owner = (node.doc_string or "").removeprefix("MDF node ") or node.name
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                sub = path + (owner, attribute.name)
                call.bodies[attribute.name] = Program(
                    attribute.g, opset, table, sub, sized=self.sized
                )
        while inputs and not inputs[-1]:
            inputs.pop()
        check = None
        if self.sized:
            check = node_size_check(
                node.op_type, {k: call.attr(k) for k in call.attrs}, node.domain
            )
        self.steps.append(_Step.of(lowering, call, tuple(inputs), tuple(node.output), check))

    def bind(self, frame: Frame) -> Callable[[Sequence[Any]], Sequence]:
        """``run(formal inputs) -> outputs``, reading ``frame`` for the names from outside."""
        base = {name: frame.env[name] for name in self.free if name in frame.env}
        base.update({name: frame.constants[key] for name, key in self.constants.items()})
        base[""] = None  # an absent optional input
        if self._straight is not None:  # a graph without subgraphs: one Python function
            return self._straight(base)
        return functools.partial(self.run, base, frame.constants)

    def run(self, base: Mapping[str, Any], constants: Mapping, values: Sequence[Any]) -> Sequence:
        """The outputs of this graph on ``values`` (its formal inputs in order)."""
        if len(values) != len(self.input_names):
            raise EvaluationError(
                f"graph '{self.name}' takes {len(self.input_names)} inputs, got {len(values)}"
            )
        env = dict(base)
        env.update(zip(self.input_names, values, strict=False))  # lengths checked above
        for kind, fn, read, output, step in self._unpacked:
            try:
                if kind == _ONE:
                    env[output] = fn(read(env))
                elif kind == _MANY:
                    env[output] = fn(*read(env))
                else:
                    step.store(
                        env,
                        fn(Frame(env, constants), *read(env))
                        if kind == _SCOPED
                        else fn(*read(env)),
                    )
            except MdfLoopsError:
                raise
            except KeyError as exc:
                raise EvaluationError(f"{step.call.where}: input {exc} is not defined") from None
            except Exception as exc:  # torch's own errors name no node
                raise EvaluationError(f"{step.call.where}: {type(exc).__name__}: {exc}") from exc
        try:
            return self._collect(env)
        except KeyError as exc:
            raise EvaluationError(f"graph '{self.name}': output {exc} is never computed") from None


#: how a step is called: one input and one output, several inputs and one output,
#: any inputs and several outputs, or a node that runs subgraphs
_ONE, _MANY, _OUTPUTS, _SCOPED = range(4)


@dataclass(frozen=True)
class _Step:
    """One planned node: ``fn`` takes its inputs (a plain torch function where it can be),
    ``read`` picks them from the values (C-level ``itemgetter``)."""

    kind: int
    fn: Callable[..., Any]
    read: Callable[[Mapping[str, Any]], Any]
    output: str
    outputs: tuple[str, ...]
    call: NodeCall
    inputs: tuple[str, ...]

    @classmethod
    def of(cls, lowering, call: NodeCall, inputs: tuple[str, ...], outputs: tuple[str, ...],
           check: Callable[[Sequence[Any]], None] | None = None):  # fmt: skip
        fn = lowering.fn if lowering.plain else functools.partial(lowering.fn, call)
        if check is not None:  # sized before it runs (a model that is not trusted)
            fn = sized(fn, check, call.where)
        if lowering.scoped or len(outputs) != 1:
            kind = _SCOPED if lowering.scoped else _OUTPUTS
            return cls(kind, fn, _tuple_reader(inputs), "", outputs, call, inputs)
        if len(inputs) == 1:
            return cls(_ONE, fn, operator.itemgetter(inputs[0]), outputs[0], outputs, call, inputs)
        return cls(_MANY, fn, _tuple_reader(inputs), outputs[0], outputs, call, inputs)

    def store(self, env: dict, result: Any) -> None:
        if not isinstance(result, tuple):
            env[self.outputs[0]] = result
            return
        # strict=False: a node may leave out trailing outputs (a loop's scan outputs)
        for name, value in zip(self.outputs, result, strict=False):
            if name:
                env[name] = value


def _tuple_reader(names: tuple[str, ...]) -> Callable[[Mapping[str, Any]], tuple]:
    """``env -> tuple of the values of names`` (itemgetter returns a bare value for one name)."""
    if len(names) >= 2:
        return operator.itemgetter(*names)
    if len(names) == 1:
        (name,) = names
        return lambda env: (env[name],)
    return lambda env: ()


def _constant(node: onnx.NodeProto, where: str) -> np.ndarray:
    """The tensor of a ``Constant`` node, whichever attribute holds it."""
    (attribute,) = node.attribute
    name = attribute.name
    if name == "value":
        return numpy_helper.to_array(attribute.t)
    if name == "value_float":
        return np.array(attribute.f, np.float32)
    if name == "value_floats":
        return np.array(list(attribute.floats), np.float32)
    if name == "value_int":
        return np.array(attribute.i, np.int64)
    if name == "value_ints":
        return np.array(list(attribute.ints), np.int64)
    if name == "sparse_value":
        sparse = attribute.sparse_tensor
        dense = np.zeros(tuple(sparse.dims), numpy_helper.to_array(sparse.values).dtype)
        indices = numpy_helper.to_array(sparse.indices)
        flat = indices if indices.ndim == 1 else np.ravel_multi_index(indices.T, dense.shape)
        dense.reshape(-1)[flat] = numpy_helper.to_array(sparse.values)
        return dense
    raise CompileError(f"{where}: a Constant of {name} (strings) has no torch form")

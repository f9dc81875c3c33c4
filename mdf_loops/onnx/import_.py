"""ONNX -> MDF: every ONNX node becomes an MDF node; subgraphs become body graphs.

The result follows the loop-node convention of :mod:`mdf_loops.model.convention`:

* each ONNX value gets one identifier, shared by its producer's output port and
  every consumer's input port, model-wide (so a body reading an outer value uses
  the same port id as the loop node that carries it);
* an ONNX node becomes a node with one function parameter ``onnx::<Op>``
  (``onnxml::<Op>`` for the ``ai.onnx.ml`` domain, :mod:`mdf_loops.onnx.domains`; id =
  node id), one parameter per attribute, input ports for the values it reads and
  output ports ``<node id>`` or ``<node id>[i]``;
* initializers become ``onnx::Constant`` nodes holding a typed tensor;
* values a subgraph reads from enclosing scopes become input ports of the node
  that owns the subgraph (with edges from their producers) and are listed in the
  body's ``outer_scope_inputs``;
* graph inputs and outputs are the graph's ``formal_inputs`` / ``formal_outputs``.
"""

from __future__ import annotations

import functools
import keyword
import os
import re
from dataclasses import dataclass, field

import numpy as np
import onnx
from google.protobuf import json_format
from modeci_mdf.mdf import Edge, Graph, InputPort, Model, Node, OutputPort, Parameter
from onnx import AttributeProto, numpy_helper

from mdf_loops.errors import ModelError
from mdf_loops.files import read_file
from mdf_loops.model.compat import set_input_default
from mdf_loops.model.convention import set_body_signature, wrap_body
from mdf_loops.model.semantics import mark_onnx_semantics
from mdf_loops.model.values import encode_tensor
from mdf_loops.onnx.builder import NameAllocator, all_nodes
from mdf_loops.onnx.domains import DEFAULT, OTHER_OPSETS_KEY, OperatorDomain, domain_of_node
from mdf_loops.onnx.functions import inline_functions
from mdf_loops.safety.onnx_files import checked_onnx

__all__ = ["onnx_to_mdf", "load_onnx"]

_RESERVED = {"numpy", "math", "rng", "random", "onnx_ops", "True", "False", "None"}


def load_onnx(model_or_path) -> onnx.ModelProto:
    """Read an ONNX model from a path (or return a ModelProto as it is)."""
    if isinstance(model_or_path, onnx.ModelProto):
        return checked_onnx(model_or_path, None)
    path = os.fspath(model_or_path)
    data = read_file(path)  # a regular file, of bounded size (mdf_loops.files)
    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # protobuf DecodeError and friends
        raise ModelError(
            f"{path}: not a readable ONNX model ({type(exc).__name__}: {exc})"
        ) from exc
    return checked_onnx(model, path)  # external data and sizes: docs/safety.md


def onnx_to_mdf(
    model_or_path: onnx.ModelProto | str | os.PathLike, model_id: str | None = None
) -> Model:
    """Convert an ONNX model (a ``ModelProto`` or a path) into an MDF ``Model``.

    Model-local functions are inlined first, whatever their opset
    (:mod:`mdf_loops.onnx.functions`). Operators of the default domain become
    ``onnx::<Op>`` functions, those of ``ai.onnx.ml`` ``onnxml::<Op>``
    (:mod:`mdf_loops.onnx.domains`); any other domain is a ModelError. The
    model's default-domain opset is kept in ``Model.onnx_opset_version`` and in
    the graph's ONNX-semantics marker (:mod:`mdf_loops.model.semantics`), the
    opsets of the other domains its nodes use in the graph's
    ``metadata["onnx_other_opsets"]``; the graph's inputs and outputs in its
    metadata (``formal_inputs``, ``formal_outputs`` and ``onnx_names``), which
    :func:`mdf_loops.run` uses.
    """
    model = inline_functions(load_onnx(model_or_path))
    opsets = {o.domain: o.version for o in model.opset_import}
    version = opsets.get("", opsets.get("ai.onnx"))
    if version is None:
        raise ModelError("the ONNX model imports no default-domain opset")
    converter = _Converter(version, _reserved_names(model.graph), opsets)
    # since IR version 4 an initializer named like a graph input is that input's default
    converter.input_defaults = model.ir_version >= 4
    graph = converter.graph(model.graph, is_body=False)
    others = {d.name: converter.version_of(d) for d in converter.domains_used if d is not DEFAULT}
    if others:
        graph.metadata[OTHER_OPSETS_KEY] = dict(sorted(others.items()))
    mdf = Model(id=_identifier(model_id or model.graph.name or "onnx_model"))
    mdf.onnx_opset_version = str(version)
    mdf.graphs.append(graph)
    return mark_onnx_semantics(mdf, version)  # the stock engine then runs it as run() does


def _reserved_names(graph: onnx.GraphProto) -> set[str]:
    """Names a value must not take: formal-input and attribute names of the ops used."""
    names = set(_RESERVED)
    for node in all_nodes(graph):
        try:
            schema = onnx.defs.get_schema(node.op_type, domain=node.domain)
        except onnx.defs.SchemaError:
            continue
        names.update(f.name for f in schema.inputs)
        names.update(schema.attributes)
    return names


def _mdf_id(hint: str, reserved: set[str]) -> str:
    """An MDF id for ``hint``: an identifier that is no keyword and no reserved name."""
    base = _identifier(hint)
    return base + "_" if keyword.iskeyword(base) or base in reserved else base


def _identifier(name: str) -> str:
    ident = re.sub(r"\W", "_", name)
    if not ident or ident[0].isdigit() or ident.startswith("__"):
        ident = "v_" + ident  # no leading digit, and nothing that looks like a dunder name
    return ident


@dataclass
class _Scope:
    """What one ONNX graph defines, and what its subgraphs need from outside it."""

    producers: dict[str, tuple[str, str]] = field(default_factory=dict)  # value -> (node, port)
    bound: set[str] = field(default_factory=set)  # formal/graph inputs: bound at run time
    outer_reads: list[str] = field(default_factory=list)  # ONNX names read from outside


class _Converter:
    def __init__(self, opset_version: int, reserved: set[str], opsets: dict[str, int]):
        self.opset = opset_version
        self.opsets = opsets  # every opset the model imports, by domain
        self.domains_used: set[OperatorDomain] = set()
        self.names = NameAllocator(normalize=functools.partial(_mdf_id, reserved=reserved))
        self.ids: dict[str, str] = {}  # ONNX value name -> port id, model-wide
        # whether an initializer named like a graph input is its default (set by onnx_to_mdf)
        self.input_defaults = False

    def version_of(self, domain: OperatorDomain) -> int:
        """The model's opset of ``domain`` (the newest known when the model imports none)."""
        if domain is DEFAULT:
            return self.opset
        return self.opsets.get(domain.name) or domain.latest_version()

    # -- names
    def fresh(self, hint: str) -> str:
        return self.names.fresh(hint)

    def value_id(self, name: str) -> str:
        if name not in self.ids:
            self.ids[name] = self.fresh(name)
        return self.ids[name]

    # -- graphs
    def graph(self, g: onnx.GraphProto, is_body: bool) -> Graph:
        mdf = Graph(id=self.fresh(g.name or "graph"))
        scope = _Scope()
        input_names = [vi.name for vi in g.input]
        initializer_names = {t.name for t in g.initializer} | {
            t.values.name for t in g.sparse_initializer
        }
        # old-style models list initializers among the inputs: those are constants
        defaulted = (
            {}
            if is_body or not getattr(self, "input_defaults", False)
            else {t.name: t for t in g.initializer if t.name in input_names}
        )
        formal = [n for n in input_names if n not in initializer_names or is_body or n in defaulted]
        scope.bound.update(formal)
        for name in formal:
            self.value_id(name)

        for tensor in g.initializer:
            if tensor.name in defaulted:
                continue
            self._constant_node(mdf, scope, tensor.name, numpy_helper.to_array(tensor))
        for sparse in g.sparse_initializer:
            self._constant_node(mdf, scope, sparse.values.name, _sparse_to_dense(sparse))

        for index, node in enumerate(g.node):
            self._node(mdf, scope, node, index)

        outputs = []
        for vi in g.output:
            outputs.append(self._output_ref(mdf, scope, vi.name))

        types = {vi.name: vi.type for vi in list(g.input) + list(g.output)}
        self._annotate_ports(
            mdf, formal, list(zip(outputs, [vi.name for vi in g.output], strict=True)), types
        )
        for name, tensor in defaulted.items():  # the input's ports take it as default_value
            for p in (p for n in mdf.nodes for p in n.input_ports if p.id == self.ids[name]):
                set_input_default(p, numpy_helper.to_array(tensor).tolist())
        outer = [self.value_id(n) for n in dict.fromkeys(scope.outer_reads)]
        set_body_signature(
            mdf,
            [self.ids[n] for n in formal],
            [f"{node}.{port}" for node, port in outputs],
            outer,
        )
        names = {self.ids[n]: n for n in formal if self.ids[n] != n}
        names.update(
            {f"{node}.{port}": vi.name for (node, port), vi in zip(outputs, g.output, strict=True)}
        )
        mdf.metadata["onnx_names"] = names
        mdf.metadata["outer_reads_onnx"] = list(dict.fromkeys(scope.outer_reads))
        if not is_body and scope.outer_reads:
            raise ModelError(
                f"graph '{g.name}': values {sorted(set(scope.outer_reads))} are used but "
                "never produced, initialized or declared as graph inputs"
            )
        return mdf

    def _constant_node(self, mdf: Graph, scope: _Scope, name: str, array) -> None:
        node = Node(id=self.fresh(f"{name}_constant"))
        node.parameters.append(Parameter(id="value", value=encode_tensor(array)))
        node.parameters.append(Parameter(id=node.id, function="onnx::Constant", args={}))
        port = self.value_id(name)
        node.output_ports.append(OutputPort(id=port, value=node.id))
        mdf.nodes.append(node)
        scope.producers[name] = (node.id, port)

    def _read(self, mdf: Graph, scope: _Scope, node: Node, name: str) -> str:
        """Connect value ``name`` to an input port of ``node``; return the port id."""
        port = self.value_id(name)
        if all(p.id != port for p in node.input_ports):
            node.input_ports.append(InputPort(id=port))
            if name in scope.producers:
                sender, sender_port = scope.producers[name]
                mdf.edges.append(
                    Edge(
                        id=self.fresh(f"{sender}_{node.id}_{port}"),
                        sender=sender,
                        sender_port=sender_port,
                        receiver=node.id,
                        receiver_port=port,
                    )
                )
            elif name not in scope.bound:
                scope.outer_reads.append(name)
        return port

    def _node(self, mdf: Graph, scope: _Scope, onnx_node: onnx.NodeProto, index: int) -> None:
        where = f"node '{onnx_node.name or index}'"
        domain = domain_of_node(onnx_node, where)
        try:
            schema = domain.schema(onnx_node.op_type, self.version_of(domain))
        except ModelError as exc:
            raise ModelError(f"{where}: {exc}") from None
        self.domains_used.add(domain)
        node = Node(id=self.fresh(onnx_node.name or f"{onnx_node.op_type}_{index}"))
        if onnx_node.name and onnx_node.name != node.id:
            node.metadata = {"onnx_name": onnx_node.name}

        args: dict[str, str] = {}
        formals = list(schema.inputs)
        inputs = list(onnx_node.input)
        for position, formal in enumerate(formals):
            if formal.option == onnx.defs.OpSchema.FormalParameterOption.Variadic:
                rest = [self._read(mdf, scope, node, v) if v else None for v in inputs[position:]]
                if any(r is None for r in rest):
                    raise ModelError(f"node '{node.id}': empty name inside variadic input")
                if rest:
                    args[formal.name] = "[" + ", ".join(r for r in rest if r is not None) + "]"
                break
            if position < len(inputs) and inputs[position]:
                args[formal.name] = self._read(mdf, scope, node, inputs[position])

        for attr in onnx_node.attribute:
            node.parameters.append(
                Parameter(id=attr.name, value=self._attribute(attr, mdf, scope, node))
            )
        if (
            onnx_node.op_type == "Split"
            and not any(a.name in ("split", "num_outputs") for a in onnx_node.attribute)
            and not (len(inputs) > 1 and inputs[1])
            and "num_outputs" not in schema.attributes
        ):
            node.parameters.append(Parameter(id="num_outputs", value=len(onnx_node.output)))

        node.parameters.append(
            Parameter(id=node.id, function=domain.function(onnx_node.op_type), args=args)
        )
        single = schema.max_output == 1
        for k, out in enumerate(onnx_node.output):
            if not out:
                continue
            port = self.value_id(out)
            node.output_ports.append(
                OutputPort(id=port, value=node.id if single else f"{node.id}[{k}]")
            )
            scope.producers[out] = (node.id, port)
        mdf.nodes.append(node)

    def _attribute(self, attr: AttributeProto, mdf: Graph, scope: _Scope, node: Node):
        T = AttributeProto
        if attr.ref_attr_name:
            raise ModelError(f"node '{node.id}': attribute references need function inlining")
        if attr.type == T.GRAPH:
            body = self.graph(attr.g, is_body=True)
            for name in body.metadata["outer_reads_onnx"]:
                self._read(mdf, scope, node, name)
            return wrap_body(body)
        if attr.type == T.GRAPHS:
            raise ModelError(f"node '{node.id}': attribute '{attr.name}' holds a list of graphs")
        if attr.type == T.TENSOR:
            return encode_tensor(numpy_helper.to_array(attr.t))
        if attr.type == T.SPARSE_TENSOR:
            return encode_tensor(_sparse_to_dense(attr.sparse_tensor))
        if attr.type == T.STRING:
            return [attr.s.decode("utf-8", "replace")]
        if attr.type == T.STRINGS:
            return [s.decode("utf-8", "replace") for s in attr.strings]
        if attr.type == T.TYPE_PROTO:
            return json_format.MessageToDict(attr.tp)
        if attr.type == T.TYPE_PROTOS:
            return [json_format.MessageToDict(t) for t in attr.type_protos]
        if attr.type == T.FLOAT:
            return float(attr.f)
        if attr.type == T.INT:
            return int(attr.i)
        if attr.type == T.FLOATS:
            return [float(f) for f in attr.floats]
        if attr.type == T.INTS:
            return [int(i) for i in attr.ints]
        raise ModelError(f"node '{node.id}': attribute '{attr.name}' has an unsupported type")

    def _output_ref(self, mdf: Graph, scope: _Scope, name: str) -> tuple[str, str]:
        if name in scope.producers:
            return scope.producers[name]
        # a graph output that is a graph input or an outer value: pass it through
        node = Node(id=self.fresh(f"{name}_passthrough"))
        port = self._read(mdf, scope, node, name)
        node.parameters.append(
            Parameter(id=node.id, function="onnx::Identity", args={"input": port})
        )
        out = self.fresh(f"{name}_out")
        node.output_ports.append(OutputPort(id=out, value=node.id))
        mdf.nodes.append(node)
        return node.id, out

    def _annotate_ports(self, mdf: Graph, formal: list[str], outputs, types) -> None:
        """Record the ONNX types of the graph's inputs and outputs on their ports."""
        formal_ids = {self.ids[name]: types[name] for name in formal if name in types}
        for node in mdf.nodes:
            for p in node.input_ports:
                if p.id in formal_ids:
                    _annotate(p, formal_ids[p.id])
        by_id = {n.id: n for n in mdf.nodes}
        for (node_id, port_id), name in outputs:
            for p in by_id[node_id].output_ports:
                if p.id == port_id and name in types:
                    _annotate(p, types[name])


def _annotate(port, type_proto: onnx.TypeProto) -> None:
    if not type_proto.WhichOneof("value"):
        return
    port.metadata = {**(port.metadata or {}), "onnx_type": json_format.MessageToDict(type_proto)}
    if type_proto.HasField("tensor_type") and type_proto.tensor_type.elem_type:
        np_type = onnx.helper.tensor_dtype_to_np_dtype(type_proto.tensor_type.elem_type)
        port.type = np_type.name if hasattr(np_type, "name") else str(np_type)


def _sparse_to_dense(sparse: onnx.SparseTensorProto) -> np.ndarray:
    values = numpy_helper.to_array(sparse.values)
    indices = numpy_helper.to_array(sparse.indices)
    dense = np.zeros(tuple(sparse.dims), dtype=values.dtype)
    flat = dense.reshape(-1)
    if indices.ndim == 1:
        flat[indices] = values
    else:
        flat[np.ravel_multi_index(indices.T, dense.shape)] = values
    return dense

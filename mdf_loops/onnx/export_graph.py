"""MDF -> ONNX graphs and nodes: the exporter behind :func:`mdf_loops.onnx.export.mdf_to_onnx`.

Walks each graph in dependency order and translates, per node, its ONNX calls,
MDF standard functions and expressions into ONNX nodes; calls go to
:mod:`mdf_loops.onnx.export_calls`, loop nodes on to :mod:`mdf_loops.onnx.export_loops`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
from modeci_mdf.mdf import Graph, Node
from onnx import TypeProto, helper, numpy_helper

from mdf_loops.errors import ModelError, UntypedInputError
from mdf_loops.model.compat import input_default
from mdf_loops.model.convention import body_signature, output_reference
from mdf_loops.model.interface import graph_interface
from mdf_loops.model.values import decode_tensor, is_encoded_tensor
from mdf_loops.onnx.builder import GraphBuilder, NameAllocator, Weak, elem_dtype
from mdf_loops.onnx.domains import DEFAULT, DOMAINS, OperatorDomain, domain_of_function
from mdf_loops.onnx.export_calls import onnx_call, standard_call
from mdf_loops.onnx.export_items import (
    Outputs,
    attribute_parameter_names,
    dependencies,
    function_of,
    is_ready,
    refuse_state,
    topological,
)
from mdf_loops.onnx.expressions import translate
from mdf_loops.onnx.types import complete_output_shapes, declared_type, parsed_type

__all__ = ["Exporter", "UntypedInputError"]


class Exporter:
    """Exports MDF graphs (a model's graph, or loop bodies) into ONNX graphs, sharing one
    name allocator, so names are unique across the model and its subgraphs."""

    def __init__(self, opset: int, other_opsets: Mapping[str, int] | None = None):
        self.opset = opset
        self.names = NameAllocator()
        self.recorded = dict(other_opsets or {})  # from the graph's metadata; unused ones ignored
        self.domains_used: set[OperatorDomain] = set()
        self.domain_opsets = {d.name: self.version_of(d) for d in DOMAINS if d is not DEFAULT}
        self.labels: dict[str, str] = {}  # ONNX loop node name -> MDF node id

    def version_of(self, domain: OperatorDomain) -> int:
        """The opset of ``domain`` the exported model imports."""
        if domain is DEFAULT:
            return self.opset
        return self.recorded.get(domain.name) or domain.latest_version()

    def _builder(self) -> GraphBuilder:
        return GraphBuilder(self.names, self.opset, domain_opsets=self.domain_opsets)

    # ------------------------------------------------------------ graphs
    def top_graph(self, graph: Graph, examples: dict) -> onnx.GraphProto:
        interface = graph_interface(graph)
        builder = self._builder()
        bindings, inputs, defaults = {}, [], []
        ports = {p.id: p for n in graph.nodes for p in n.input_ports}
        for name, port_id in interface.inputs.items():
            port = ports.get(port_id)
            default = None
            if port is not None and input_default(port) is not None:
                default = translate(
                    input_default(port),
                    {},
                    builder,
                    f"graph '{graph.id}' input '{name}' default_value",
                )
                if not isinstance(default, Weak):
                    raise ModelError(
                        f"graph '{graph.id}' input '{name}': default_value must be "
                        "a constant to export"
                    )
            example = examples.get(name, None if default is None else default.array())
            type_proto = declared_type(port, example)
            if type_proto.HasField("tensor_type") and not type_proto.tensor_type.HasField("shape"):
                raise UntypedInputError(graph.id, name)
            onnx_name = self.names.reserve(name)
            bindings[port_id] = onnx_name
            builder.types[onnx_name] = type_proto
            inputs.append(helper.make_value_info(onnx_name, type_proto))
            if default is not None:  # an initializer of an input's name is its default
                dtype = elem_dtype(type_proto) or default.array().dtype
                defaults.append(numpy_helper.from_array(default.array().astype(dtype), onnx_name))
        values = self._nodes(graph, builder, bindings)
        by_id = {n.id: n for n in graph.nodes}
        outputs, used = [], set()
        for name, ref in interface.outputs.items():
            if ref not in values:
                raise ModelError(
                    f"graph '{graph.id}': its output '{name}' is read from node '{ref[0]}' "
                    f"port '{ref[1]}', which the graph does not have; name an output port "
                    "of one of its nodes in the graph's formal_outputs"
                )
            value = self._strong(builder, values, ref)
            if value != name:
                if builder.produced(value) and value not in used and not self.names.taken(name):
                    builder.rename(value, name)
                    values = {k: (name if v == value else v) for k, v in values.items()}
                else:
                    builder.op("Identity", [value], output_names=[self.names.reserve(name)])
            used.add(name)
            port = next(p for p in by_id[ref[0]].output_ports if p.id == ref[1])
            outputs.append(self._value_info(builder, name, graph.id, port))
        result = helper.make_graph(builder.nodes, graph.id, inputs, outputs, initializer=defaults)
        return complete_output_shapes(result, self.opset, self.domain_opsets)

    def body_graph(
        self,
        graph: Graph,
        input_types: list[TypeProto],
        outer: Mapping[str, str | Weak],
        outer_types: Mapping[str, TypeProto],
        owner: str,
    ) -> onnx.GraphProto:
        signature = body_signature(graph)
        if len(signature.formal_inputs) != len(input_types):
            raise ModelError(
                f"{owner}: body '{graph.id}' has {len(signature.formal_inputs)} formal inputs, "
                f"the operator passes {len(input_types)}"
            )
        builder = self._builder()
        bindings: dict[str, str | Weak] = {}
        inputs = []
        for port_id, type_proto in zip(signature.formal_inputs, input_types, strict=True):
            name = self.names.fresh(port_id)
            bindings[port_id] = name
            builder.types[name] = type_proto
            inputs.append(helper.make_value_info(name, type_proto))
        for port_id in signature.outer_scope_inputs:
            if port_id not in outer:
                raise ModelError(
                    f"{owner}: body '{graph.id}' reads '{port_id}' from the enclosing "
                    "scope, which the loop node does not carry"
                )
            value = bindings[port_id] = outer[port_id]  # a name, or a weak constant
            if isinstance(value, str) and value in outer_types:
                builder.types[value] = outer_types[value]
        values = self._nodes(graph, builder, bindings)
        outputs, used = [], set()
        for node_id, port_id in signature.formal_outputs:
            name = self._strong(builder, values, (node_id, port_id))
            if name in used or not builder.produced(name):
                # ONNX needs distinct output names computed inside the body
                (name,) = builder.op("Identity", [name], hint=f"{port_id}_out")
            used.add(name)
            outputs.append(self._value_info(builder, name, graph.id))
        return helper.make_graph(builder.nodes, graph.id, inputs, outputs)

    def _value_info(
        self, builder: GraphBuilder, name: str, graph_id: str, port=None
    ) -> onnx.ValueInfoProto:
        declared = (port.metadata or {}).get("onnx_type") if port is not None else None
        if declared:
            where = f"graph '{graph_id}' port '{port.id}'"
            return helper.make_value_info(name, parsed_type(declared, where))
        type_proto = builder.types.get(name)
        if type_proto is None:
            raise ModelError(f"graph '{graph_id}': cannot infer the type of output '{name}'")
        return helper.make_value_info(name, type_proto)

    def _strong(self, builder: GraphBuilder, values: dict, ref: tuple[str, str]) -> str:
        value = values[ref]
        return builder.strong(value) if isinstance(value, Weak) else value

    def _nodes(
        self, graph: Graph, builder: GraphBuilder, bindings: Mapping[str, str | Weak]
    ) -> dict:
        """Export every node; return {(node id, port id): value} of all output ports."""
        conditions = graph.conditions
        if conditions is not None and (conditions.node_specific or conditions.termination):
            raise ModelError(
                f"graph '{graph.id}': scheduling conditions (node_specific / "
                "termination) have no ONNX equivalent; they run on the scheduler only"
            )
        incoming: dict[tuple[str, str], list] = {}
        for edge in graph.edges:
            incoming.setdefault((edge.receiver, edge.receiver_port), []).append(edge)
        values: dict[tuple[str, str], Any] = {}
        for node in topological(graph):
            ports = {}
            for port in node.input_ports:
                ports[port.id] = self._port_value(
                    graph, node, port, incoming, values, bindings, builder
                )
            for port_id, value in self._node(node, ports, builder).items():
                values[(node.id, port_id)] = value
        return values

    def _port_value(self, graph, node, port, incoming, values, bindings, builder) -> Any:
        edges = incoming.get((node.id, port.id), [])
        where = f"graph '{graph.id}' node '{node.id}' port '{port.id}'"
        if len(edges) > 1:
            raise ModelError(f"{where}: receives {len(edges)} edges; export needs one")
        if edges:
            edge = edges[0]
            value = values[(edge.sender, edge.sender_port)]
            weight = (edge.parameters or {}).get("weight", 1)
            if isinstance(weight, (int, float)) and weight == 1:
                return value
            return translate(
                f"__value * {weight}" if not isinstance(weight, str) else f"__value * ({weight})",
                {"__value": value},
                builder,
                f"{where} edge '{edge.id}' weight",
            )
        if port.id in bindings:
            return bindings[port.id]
        if input_default(port) is not None:
            return translate(input_default(port), {}, builder, f"{where} default_value")
        raise ModelError(f"{where}: no edge, no input binding and no default value")

    # ------------------------------------------------------------ one node
    def _node(self, node: Node, ports: dict[str, Any], builder: GraphBuilder) -> dict[str, Any]:
        env: dict[str, Any] = dict(ports)
        attribute_names = attribute_parameter_names(node, self.version_of)
        pending = [p for p in node.parameters if p.id not in attribute_names]
        pending += list(node.functions)
        for item in pending:
            refuse_state(node, item)
        while pending:
            progressed = False
            for item in list(pending):
                if not is_ready(item, env, node):
                    continue
                env[item.id] = self._item(node, item, env, builder)
                pending.remove(item)
                progressed = True
            if not progressed:
                missing = {item.id: sorted(dependencies(item, node) - set(env)) for item in pending}
                raise ModelError(
                    f"node '{node.id}': cannot order parameters/functions; missing {missing}"
                )
        outputs = {}
        for port in node.output_ports:
            if port.value is None:
                raise ModelError(f"node '{node.id}' output port '{port.id}' has no value")
            outputs[port.id] = self.expression(
                port.value, env, builder, f"node '{node.id}' output port '{port.id}'"
            )
        return outputs

    def _item(self, node: Node, item, env: dict, builder: GraphBuilder) -> Any:
        where = f"node '{node.id}' parameter '{item.id}'"
        function, args = function_of(item)
        if function:
            call = domain_of_function(function)
            if call is not None:
                domain, op_type = call
                return onnx_call(self, node, item.id, op_type, args, env, builder, domain)
            return standard_call(self, node, item.id, function, args, env, builder)
        return self.expression(item.value, env, builder, where, keep_items=True)

    def expression(
        self, value: Any, env: dict, builder: GraphBuilder, where: str, keep_items: bool = False
    ) -> Any:
        """The ONNX value (or weak constant) of an MDF value: a tensor, a list, a reference
        to a call's output, or an expression; ``where`` names it for errors. With
        ``keep_items`` (a parameter's value), a tuple or list display stays
        :class:`~mdf_loops.onnx.expressions.Items` for later expressions to index."""
        if is_encoded_tensor(value):
            return builder.constant(decode_tensor(value))
        if isinstance(value, dict):
            raise ModelError(f"{where}: a dict value does not export")
        if isinstance(value, list) and any(
            isinstance(v, str) for v in np.asarray(value, dtype=object).ravel()
        ):
            display = "[" + ", ".join(map(str, value)) + "]"
            return translate(display, env, builder, where, keep_items=keep_items)
        reference = output_reference(value)
        if reference is not None and isinstance(env.get(reference[0]), Outputs):
            target, index = reference
            outputs = env[target]
            if index >= len(outputs.names):
                raise ModelError(
                    f"{where}: {target} has {len(outputs.names)} outputs, not {index + 1}"
                )
            return outputs.names[index]
        if isinstance(value, str) and isinstance(env.get(value.strip()), Outputs):
            return env[value.strip()].names[0]
        return translate(value, env, builder, where, keep_items=keep_items)

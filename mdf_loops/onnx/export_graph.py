"""MDF -> ONNX graphs and nodes: the exporter behind :func:`mdf_loops.onnx.export.mdf_to_onnx`.

Walks each graph in dependency order and translates, per node, its ONNX calls,
MDF standard functions and expressions into ONNX nodes; loop nodes go to
:mod:`mdf_loops.onnx.export_loops`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
from google.protobuf import json_format
from modeci_mdf.functions.standard import mdf_functions
from modeci_mdf.mdf import Graph, Node
from onnx import TypeProto, helper, numpy_helper

from mdf_loops.backends.scheduler.onnx_functions import attribute_value
from mdf_loops.errors import ModelError, UntypedInputError
from mdf_loops.model.compat import input_default
from mdf_loops.model.convention import (
    BODY_ATTRIBUTES,
    body_signature,
    output_reference,
    variadic_items,
)
from mdf_loops.model.interface import graph_interface
from mdf_loops.model.values import decode_tensor, is_encoded_tensor
from mdf_loops.onnx.builder import GraphBuilder, NameAllocator, Weak, elem_dtype
from mdf_loops.onnx.domains import DEFAULT, DOMAINS, OperatorDomain, domain_of_function
from mdf_loops.onnx.export_items import (
    Outputs,
    attribute_parameter_names,
    dependencies,
    function_of,
    is_ready,
    outputs_used,
    refuse_state,
    topological,
)
from mdf_loops.onnx.export_loops import export_control_flow
from mdf_loops.onnx.expressions import translate
from mdf_loops.onnx.types import (
    complete_output_shapes,
    conformed,
    declared_type,
    required_elem_type,
)

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
        for port_id, type_proto in zip(signature.formal_inputs, input_types):
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
            return helper.make_value_info(name, json_format.ParseDict(declared, TypeProto()))
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
            outputs[port.id] = self._expression(
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
                return self._onnx_call(node, item.id, op_type, args, env, builder, domain)
            return self._standard_call(node, item.id, function, args, env, builder)
        return self._expression(item.value, env, builder, where)

    def _expression(self, value: Any, env: dict, builder: GraphBuilder, where: str) -> Any:
        if is_encoded_tensor(value):
            return builder.constant(decode_tensor(value))
        if isinstance(value, dict):
            raise ModelError(f"{where}: a dict value does not export")
        if isinstance(value, list) and any(
            isinstance(v, str) for v in np.asarray(value, dtype=object).ravel()
        ):
            return translate("[" + ", ".join(map(str, value)) + "]", env, builder, where)
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
        return translate(value, env, builder, where)

    def _standard_call(self, node, item_id, function, args, env, builder) -> Any:
        if function not in mdf_functions:
            raise ModelError(
                f"node '{node.id}' parameter '{item_id}': unknown function '{function}'"
            )
        spec = mdf_functions[function]
        local = dict(env)
        for name, arg in args.items():
            local[name] = self._expression(
                arg, env, builder, f"node '{node.id}' parameter '{item_id}' arg '{name}'"
            )
        missing = [a for a in spec["arguments"] if a not in local]
        if missing:
            raise ModelError(f"node '{node.id}' parameter '{item_id}': {function} needs {missing}")
        return translate(
            spec["expression_string"],
            local,
            builder,
            f"node '{node.id}' parameter '{item_id}' ({function})",
        )

    def _onnx_call(
        self, node, item_id, op_type, args, env, builder, domain: OperatorDomain = DEFAULT
    ) -> Any:
        where = f"node '{node.id}' function '{item_id}' ({domain.function(op_type)})"
        version = self.version_of(domain)
        try:
            schema = onnx.defs.get_schema(op_type, version, domain.name)
        except onnx.defs.SchemaError:
            raise ModelError(
                f"{where}: no such operator in opset {version} of domain '{domain.label}'"
            ) from None
        self.domains_used.add(domain)
        inputs: list[str] = []
        constraint_of: list[str] = []
        for formal in schema.inputs:
            if formal.name not in args:
                inputs.append("")
                constraint_of.append(formal.type_str)
                continue
            expr = args[formal.name]
            if formal.option == onnx.defs.OpSchema.FormalParameterOption.Variadic:
                try:
                    items = variadic_items(expr) if isinstance(expr, str) else None
                except SyntaxError:
                    items = None
                items = items if items is not None else [expr]
                for item in items:
                    inputs.append(self._expression(item, env, builder, where))
                    constraint_of.append(formal.type_str)
            else:
                inputs.append(self._expression(expr, env, builder, where))
                constraint_of.append(formal.type_str)
        inputs = self._strong_inputs(builder, inputs, constraint_of)
        inputs = [
            conformed(builder, value, required_elem_type(schema, constraint))
            for value, constraint in zip(inputs, constraint_of)
        ]
        while len(inputs) > schema.min_input and inputs[-1] == "":  # Loop keeps its cond
            inputs.pop()

        attributes = {}
        for name in schema.attributes:
            if name in BODY_ATTRIBUTES.get(op_type, ()):
                continue
            param = next((p for p in node.parameters if p.id == name), None)
            if param is None or param.value is None:
                continue
            value = param.value
            if isinstance(value, str):
                weak = translate(value, env, builder, f"node '{node.id}' attribute '{name}'")
                if not isinstance(weak, Weak):
                    raise ModelError(
                        f"node '{node.id}': attribute '{name}' must be known at export time"
                    )
                value = weak.value
            attributes[name] = attribute_value(schema.attributes[name].type, value, op_type, name)

        if op_type in BODY_ATTRIBUTES and domain is DEFAULT:
            return export_control_flow(self, node, op_type, inputs, attributes, env, builder, where)
        n_outputs = outputs_used(node, item_id, schema)
        names = builder.op(
            op_type,
            inputs,
            hint=node.id,
            domain=domain.name,
            **attributes,
            output_names=self._output_names(node, item_id, n_outputs),
        )
        return names[0] if schema.max_output == 1 else Outputs(tuple(names))

    def _output_names(self, node: Node, function_id: str, n_outputs: int) -> list[str]:
        """ONNX names for a function's outputs: the ids of the ports that read them."""
        by_index: dict[int, str] = {}
        for port in node.output_ports:
            value = (port.value or "").strip()
            parsed = output_reference(value)
            if value == function_id:
                by_index.setdefault(0, port.id)
            elif parsed and parsed[0] == function_id:
                by_index.setdefault(parsed[1], port.id)
        return [self.names.fresh(by_index.get(k, f"{node.id}_{k}")) for k in range(n_outputs)]

    def _strong_inputs(self, builder, inputs: list, constraints: list[str]) -> list[str]:
        result = []
        for value, constraint in zip(inputs, constraints):
            if isinstance(value, Weak):
                like = next(
                    (
                        v
                        for v, c in zip(inputs, constraints)
                        if isinstance(v, str) and v and c == constraint
                    ),
                    None,
                )
                value = builder.strong(value, like)
            result.append(value)
        return result

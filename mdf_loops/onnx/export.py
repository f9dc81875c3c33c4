"""MDF -> ONNX: every node becomes ONNX nodes; loop bodies become subgraphs.

The exporter walks each graph in dependency order and translates, per node:

* a function parameter ``onnx::<Op>`` into that ONNX node (attributes from the
  node's parameters of the same names; ``onnx::Scan``/``Loop``/``If`` bodies
  exported recursively into ``GraphProto`` attributes, outer-scope inputs
  becoming references to the enclosing graph's values again);
* a function parameter or function with an MDF standard function (``linear``,
  ``logistic``, ``tanh``, ...) into the ONNX nodes of its expression;
* parameter values and output-port values written as expressions (``x * w + b``,
  ``tanh(a) * 2``, ``maximum(a, 0)``) into ONNX nodes, by parsing them
  (:mod:`mdf_loops.onnx.expressions`).

Element types follow the values: imported ONNX models keep theirs; an input port
of a hand-written model without a ``type`` is float64 (numpy's default), and
literals take the type of the tensor they meet.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import onnx
from google.protobuf import json_format
from modeci_mdf.functions.standard import mdf_functions
from modeci_mdf.mdf import Graph, Model, Node
from onnx import TypeProto, helper, numpy_helper

from mdf_loops.errors import ModelError
from mdf_loops.onnx.domains import (DEFAULT, DOMAINS, OperatorDomain, domain_of_function,
                                    other_opsets)
from mdf_loops.onnx.expressions import translate
from mdf_loops.onnx.builder import GraphBuilder, NameAllocator, Weak, elem_dtype
from mdf_loops.backends.scheduler.onnx_functions import attribute_value
from mdf_loops.model.convention import (
    BODY_ATTRIBUTES,
    CONTROL_FLOW_FUNCTIONS,
    output_reference,
    variadic_items,
    body_graph,
    body_signature,
    loop_bodies,
)
from mdf_loops.model.interface import graph_interface, load_model
from mdf_loops.model.signatures import LoopSignature, ScanSignature, mdf_signature
from mdf_loops.onnx.types import (
    check_state_types,
    complete_output_shapes,
    conformed,
    control_flow_output_types,
    declared_type,
    drop_axis,
    has_shape,
    known_type,
    loosened,
    required_elem_type,
    tensor_type,
    without_shape,
)
from mdf_loops.model.values import decode_tensor, is_encoded_tensor

__all__ = ["mdf_to_onnx", "save_onnx", "export_model", "ExportResult", "DEFAULT_OPSET"]

#: opset of exported models whose MDF model names none
DEFAULT_OPSET = 21

#: how often a Loop body is re-exported with looser carried types before they are declared shapeless
_LOOSENING_ROUNDS = 3


@dataclass(frozen=True)
class ExportResult:
    """An exported ONNX model, and which MDF loop node each of its loop nodes came from."""

    model: onnx.ModelProto
    #: ONNX node name -> id of the MDF node, for every Scan, Loop and If at any depth
    labels: Mapping[str, str]


def mdf_to_onnx(
    model: Model | str | os.PathLike,
    *,
    graph: str | None = None,
    example_inputs: Mapping[str, Any] | None = None,
    opset: int | None = None,
) -> onnx.ModelProto:
    """Export an MDF model (with or without loops) as an ONNX model.

    Args:
        model: an MDF ``Model`` or a path to MDF JSON/YAML.
        graph: id of the graph to export (default: the first).
        example_inputs: values by input name; their dtypes and shapes type the
            ONNX inputs where the model does not declare them.
        opset: ONNX opset to declare (default: ``Model.onnx_opset_version``, else
            :data:`DEFAULT_OPSET`).

    The inputs and outputs keep the names :func:`mdf_loops.run` uses. The model
    imports the default-domain opset and the opset of each other domain its nodes
    use (``onnxml::`` functions: ``ai.onnx.ml``, at the version the graph's
    ``metadata["onnx_other_opsets"]`` records, else the newest). Inputs of a
    fixed element type (a Loop's trip count is int64) are cast to it. The result
    passes ``onnx.checker.check_model(full_check=True)``; a model that would not
    is a ModelError saying why.
    """
    return export_model(model, graph=graph, example_inputs=example_inputs, opset=opset).model


def export_model(
    model: Model | str | os.PathLike,
    *,
    graph: str | None = None,
    example_inputs: Mapping[str, Any] | None = None,
    opset: int | None = None,
) -> ExportResult:
    """:func:`mdf_to_onnx`, with the MDF node id of each exported loop node (the
    onnxruntime backend names them in its errors)."""
    model = load_model(model)
    target = next((g for g in model.graphs if graph in (None, g.id)), None)
    if target is None:
        raise ModelError(f"model '{model.id}' has no graph '{graph}'")
    version = int(opset or model.onnx_opset_version or DEFAULT_OPSET)
    exporter = _Exporter(version, other_opsets(target.metadata))
    onnx_graph = exporter.top_graph(target, dict(example_inputs or {}))
    opsets = [helper.make_opsetid("", version)]
    for domain in sorted(exporter.domains_used - {DEFAULT}, key=lambda d: d.name):
        opsets.append(helper.make_opsetid(domain.name, exporter.version_of(domain)))
    result = helper.make_model(onnx_graph, opset_imports=opsets, producer_name="mdf-loops")
    result.ir_version = helper.find_min_ir_version_for(opsets)
    for output in result.graph.output:
        if output.type.HasField("tensor_type") and not output.type.tensor_type.HasField("shape"):
            raise ModelError(f"graph '{target.id}' output '{output.name}': its rank cannot be "
                             "inferred; give the inputs shapes (example_inputs)")
    _check(result, target.id)
    return ExportResult(result, dict(exporter.labels))


def _check(model: onnx.ModelProto, graph_id: str) -> None:
    """A ModelError when ``model`` fails ``onnx.checker.check_model(full_check=True)``."""
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:  # ValidationError, InferenceError, and the C++ checker's others
        reason = " ".join(str(exc).split())
        raise ModelError(
            f"graph '{graph_id}': the exported ONNX model fails onnx.checker "
            f"({type(exc).__name__}: {reason[:600]}); it was not written. Declare the types of "
            "the graph's inputs (input port 'type' or example_inputs) or fix the node named"
        ) from exc


def save_onnx(model: Model | str | os.PathLike, path: str | os.PathLike, **kwargs: Any) -> None:
    """Export ``model`` and write it to ``path``."""
    onnx.save(mdf_to_onnx(model, **kwargs), os.fspath(path))


@dataclass(frozen=True)
class _Outputs:
    """The outputs of an ONNX node called by an MDF function parameter (ports read ``f[i]``)."""

    names: tuple[str, ...]


class _Exporter:
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
            if port is not None and port.default_value is not None:
                default = translate(port.default_value, {}, builder,
                                    f"graph '{graph.id}' input '{name}' default_value")
                if not isinstance(default, Weak):
                    raise ModelError(f"graph '{graph.id}' input '{name}': default_value must be "
                                     "a constant to export")
            example = examples.get(name, None if default is None else default.array())
            type_proto = declared_type(port, example)
            if type_proto.HasField("tensor_type") and not type_proto.tensor_type.HasField("shape"):
                raise ModelError(
                    f"graph '{graph.id}' input '{name}': its rank is unknown; pass "
                    f"example_inputs={{'{name}': ...}} or give the input port a shape"
                )
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

    def body_graph(self, graph: Graph, input_types: list[TypeProto],
                   outer: Mapping[str, "str | Weak"], outer_types: Mapping[str, TypeProto],
                   owner: str) -> onnx.GraphProto:
        signature = body_signature(graph)
        if len(signature.formal_inputs) != len(input_types):
            raise ModelError(
                f"{owner}: body '{graph.id}' has {len(signature.formal_inputs)} formal inputs, "
                f"the operator passes {len(input_types)}"
            )
        builder = self._builder()
        bindings, inputs = {}, []
        for port_id, type_proto in zip(signature.formal_inputs, input_types):
            name = self.names.fresh(port_id)
            bindings[port_id] = name
            builder.types[name] = type_proto
            inputs.append(helper.make_value_info(name, type_proto))
        for port_id in signature.outer_scope_inputs:
            if port_id not in outer:
                raise ModelError(f"{owner}: body '{graph.id}' reads '{port_id}' from the enclosing "
                                 "scope, which the loop node does not carry")
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

    def _value_info(self, builder: GraphBuilder, name: str, graph_id: str,
                    port=None) -> onnx.ValueInfoProto:
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

    def _nodes(self, graph: Graph, builder: GraphBuilder, bindings: dict[str, str]) -> dict:
        """Export every node; return {(node id, port id): value} of all output ports."""
        conditions = graph.conditions
        if conditions is not None and (conditions.node_specific or conditions.termination):
            raise ModelError(f"graph '{graph.id}': scheduling conditions (node_specific / "
                             "termination) have no ONNX equivalent; they run on the scheduler only")
        incoming: dict[tuple[str, str], list] = {}
        for edge in graph.edges:
            incoming.setdefault((edge.receiver, edge.receiver_port), []).append(edge)
        values: dict[tuple[str, str], Any] = {}
        for node in _topological(graph):
            ports = {}
            for port in node.input_ports:
                ports[port.id] = self._port_value(graph, node, port, incoming, values, bindings, builder)
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
            return translate(f"__value * {weight}" if not isinstance(weight, str) else f"__value * ({weight})",
                             {"__value": value}, builder, f"{where} edge '{edge.id}' weight")
        if port.id in bindings:
            return bindings[port.id]
        if port.default_value is not None:
            return translate(port.default_value, {}, builder, f"{where} default_value")
        raise ModelError(f"{where}: no edge, no input binding and no default value")

    # ------------------------------------------------------------ one node
    def _node(self, node: Node, ports: dict[str, Any], builder: GraphBuilder) -> dict[str, Any]:
        env: dict[str, Any] = dict(ports)
        attribute_names = _attribute_parameter_names(node, self.version_of)
        pending = [p for p in node.parameters if p.id not in attribute_names]
        pending += list(node.functions)
        for item in pending:
            _refuse_state(node, item)
        while pending:
            progressed = False
            for item in list(pending):
                if not _ready(item, env, node):
                    continue
                env[item.id] = self._item(node, item, env, builder)
                pending.remove(item)
                progressed = True
            if not progressed:
                missing = {item.id: sorted(_dependencies(item, node) - set(env)) for item in pending}
                raise ModelError(f"node '{node.id}': cannot order parameters/functions; missing {missing}")
        outputs = {}
        for port in node.output_ports:
            if port.value is None:
                raise ModelError(f"node '{node.id}' output port '{port.id}' has no value")
            outputs[port.id] = self._expression(port.value, env, builder,
                                                f"node '{node.id}' output port '{port.id}'")
        return outputs

    def _item(self, node: Node, item, env: dict, builder: GraphBuilder) -> Any:
        where = f"node '{node.id}' parameter '{item.id}'"
        function, args = _function_of(item)
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
        if isinstance(value, list) and any(isinstance(v, str) for v in np.asarray(value, dtype=object).ravel()):
            return translate("[" + ", ".join(map(str, value)) + "]", env, builder, where)
        reference = output_reference(value)
        if reference is not None and isinstance(env.get(reference[0]), _Outputs):
            target, index = reference
            outputs = env[target]
            if index >= len(outputs.names):
                raise ModelError(f"{where}: {target} has {len(outputs.names)} outputs, not {index + 1}")
            return outputs.names[index]
        if isinstance(value, str) and isinstance(env.get(value.strip()), _Outputs):
            return env[value.strip()].names[0]
        return translate(value, env, builder, where)

    def _standard_call(self, node, item_id, function, args, env, builder) -> Any:
        if function not in mdf_functions:
            raise ModelError(f"node '{node.id}' parameter '{item_id}': unknown function '{function}'")
        spec = mdf_functions[function]
        local = dict(env)
        for name, arg in args.items():
            local[name] = self._expression(arg, env, builder, f"node '{node.id}' parameter '{item_id}' arg '{name}'")
        missing = [a for a in spec["arguments"] if a not in local]
        if missing:
            raise ModelError(f"node '{node.id}' parameter '{item_id}': {function} needs {missing}")
        return translate(spec["expression_string"], local, builder,
                         f"node '{node.id}' parameter '{item_id}' ({function})")

    def _onnx_call(self, node, item_id, op_type, args, env, builder,
                   domain: OperatorDomain = DEFAULT) -> Any:
        where = f"node '{node.id}' function '{item_id}' ({domain.function(op_type)})"
        version = self.version_of(domain)
        try:
            schema = onnx.defs.get_schema(op_type, version, domain.name)
        except onnx.defs.SchemaError:
            raise ModelError(f"{where}: no such operator in opset {version} of domain "
                             f"'{domain.label}'") from None
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
        inputs = [conformed(builder, value, required_elem_type(schema, constraint))
                  for value, constraint in zip(inputs, constraint_of)]
        while inputs and inputs[-1] == "":
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
                    raise ModelError(f"node '{node.id}': attribute '{name}' must be known at export time")
                value = weak.value
            attributes[name] = attribute_value(schema.attributes[name].type, value, op_type, name)

        if op_type in BODY_ATTRIBUTES and domain is DEFAULT:
            return self._control_flow(node, op_type, inputs, attributes, env, builder, where)
        n_outputs = _outputs_used(node, item_id, schema)
        names = builder.op(op_type, inputs, hint=node.id, domain=domain.name, **attributes,
                           output_names=self._output_names(node, item_id, n_outputs))
        return names[0] if schema.max_output == 1 else _Outputs(tuple(names))

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
                like = next((v for v, c in zip(inputs, constraints)
                             if isinstance(v, str) and v and c == constraint), None)
                value = builder.strong(value, like)
            result.append(value)
        return result

    def _control_flow(self, node, op_type, inputs, attributes, env, builder, where) -> _Outputs:
        bodies = {}
        params = {p.id: p for p in node.parameters}
        for attr in BODY_ATTRIBUTES[op_type]:
            if attr not in params:
                raise ModelError(f"{where}: missing body parameter '{attr}'")
            bodies[attr] = body_graph(params[attr].value, f"{where} parameter '{attr}'")
        signature = mdf_signature(node, self.opset)
        types = [builder.types.get(i) for i in inputs]
        if isinstance(signature, ScanSignature):
            body_inputs = self._scan_body_types(signature, types, attributes, where)
        elif isinstance(signature, LoopSignature):
            body_inputs = [tensor_type(np.int64, ())] * signature.num_body_inputs
            body_inputs[signature.BODY_CONDITION] = tensor_type(np.bool_, ())
            body_inputs[signature.body_carried] = [
                known_type(t, where) for t in types[signature.node_carried]]
        else:
            body_inputs = []
        for attr, body in bodies.items():
            outer = {}
            for port_id in body_signature(body).outer_scope_inputs:
                if port_id in env:
                    outer[port_id] = env[port_id]  # a constant stays weak inside the body
            if isinstance(signature, LoopSignature):
                exported = self._loop_body(body, signature, body_inputs, outer, builder,
                                           f"{where} {attr}")
                check_state_types(exported, body, signature.body_carried,
                                  signature.body_carried_outputs, f"{where} {attr}")
            else:
                exported = self.body_graph(body, body_inputs, outer, builder.types, f"{where} {attr}")
            if isinstance(signature, ScanSignature):
                check_state_types(exported, body, signature.body_states,
                                  signature.body_state_outputs, f"{where} {attr}")
            attributes[attr] = exported
        body = next(iter(attributes[a] for a in BODY_ATTRIBUTES[op_type]))
        names = builder.op(op_type, inputs, hint=node.id, doc_string=f"MDF node {node.id}",
                           **attributes, output_names=self._output_names(node, next(
                               p.id for p in node.parameters if p.function == f"onnx::{op_type}"),
                               signature.num_node_outputs))
        self.labels[builder.nodes[-1].name] = node.id
        # ONNX's inference cannot see the bodies' outer-scope values and drops the shapes of
        # loop-carried values: complete what it left unknown from the exported bodies
        derived = control_flow_output_types(signature, body, attributes, types)
        for name, t in zip(names, derived):
            if t is not None and not has_shape(builder.types.get(name)):
                builder.types[name] = t
        return _Outputs(tuple(names))

    def _loop_body(self, body: Graph, signature: LoopSignature, body_inputs: list[TypeProto],
                   outer: Mapping[str, "str | Weak"], builder: GraphBuilder,
                   owner: str) -> onnx.GraphProto:
        """A Loop body whose carried input types admit every iteration's values.

        A loop-carried value may change shape from one iteration to the next (a
        growing sequence, a fixed size the body computes): the body is exported
        again with the carried types loosened to what holds for both the given and
        the returned value, until they agree, or with no shape at all.
        """
        carried = signature.body_carried
        given = list(body_inputs)
        for _ in range(_LOOSENING_ROUNDS):
            exported = self.body_graph(body, given, outer, builder.types, owner)
            returned = [o.type for o in exported.output[signature.body_carried_outputs]]
            looser = list(given)
            looser[carried] = [loosened(g, r) for g, r in zip(given[carried], returned)]
            if looser == given:
                return exported
            given = looser
        given[carried] = [without_shape(t, owner) for t in given[carried]]
        return self.body_graph(body, given, outer, builder.types, owner)

    def _scan_body_types(self, signature: ScanSignature, types, attributes, where) -> list[TypeProto]:
        m, legacy = signature.num_scan_inputs, signature.sequence_lens
        values = types[signature.node_values]
        n = signature.num_states
        axes = list(attributes.get("scan_input_axes") or [0] * m)
        result = []
        for k, t in enumerate(values):
            if t is None:
                raise ModelError(f"{where}: the type of input {k} is unknown; declare the input "
                                 "port's type or pass example_inputs")
            if legacy:
                t = drop_axis(t, 0)
            result.append(t if k < n else drop_axis(t, axes[k - n] if not legacy else 0))
        return result


# ---------------------------------------------------------------- helpers


def _topological(graph: Graph) -> list[Node]:
    nodes = {n.id: n for n in graph.nodes}
    deps = {n.id: set() for n in graph.nodes}
    for e in graph.edges:
        if e.sender not in nodes or e.receiver not in nodes:
            raise ModelError(f"graph '{graph.id}': edge '{e.id}' connects unknown nodes")
        deps[e.receiver].add(e.sender)
    order, done = [], set()
    while len(order) < len(nodes):
        ready = [i for i in nodes if i not in done and deps[i] <= done]
        if not ready:
            raise ModelError(f"graph '{graph.id}': edges form a cycle among "
                             f"{sorted(set(nodes) - done)}")
        for i in ready:
            order.append(nodes[i])
            done.add(i)
    return order


def _refuse_state(node: Node, item) -> None:
    """A ModelError for a parameter that keeps state between evaluations of the graph."""
    where = f"node '{node.id}' parameter '{item.id}'"
    if getattr(item, "time_derivative", None) or getattr(item, "default_initial_value", None) is not None:
        raise ModelError(f"{where}: a stateful parameter (time_derivative / default_initial_value) "
                         "keeps state between evaluations, which ONNX cannot express; use a loop node")
    if getattr(item, "conditions", None):
        raise ModelError(f"{where}: parameter conditions do not export")
    value = getattr(item, "value", None)
    if isinstance(value, str) and item.id in _names_in(value):
        raise ModelError(f"{where}: value {value!r} refers to itself (stateful); it does not export")


def _function_of(item) -> tuple[str | None, dict]:
    """(function name, args) of a Parameter or Function, whichever form it uses."""
    function = getattr(item, "function", None)
    if isinstance(function, dict):
        (name, args), = function.items()
        return name, args or {}
    return function, getattr(item, "args", None) or {}


def _attribute_parameter_names(node: Node, version_of) -> set[str]:
    names = set()
    for item in list(node.parameters) + list(node.functions):
        function, _ = _function_of(item)
        call = domain_of_function(function)
        if call is not None:
            domain, op_type = call
            try:
                schema = onnx.defs.get_schema(op_type, version_of(domain), domain.name)
            except onnx.defs.SchemaError:
                continue
            names.update(schema.attributes)
            if schema.name == "Split":
                names.add("num_outputs")
    return names


def _names_in(expression: Any) -> set[str]:
    if not isinstance(expression, str):
        if isinstance(expression, list):
            return set().union(*(_names_in(e) for e in expression)) if expression else set()
        return set()
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _names_used(item) -> set[str]:
    used = _names_in(item.value) if getattr(item, "value", None) is not None else set()
    _, args = _function_of(item)
    for expr in args.values():
        used |= _names_in(expr)
    return used - {"numpy", "math", "np"}


def _dependencies(item, node: Node) -> set[str]:
    """Names ``item`` reads: its expressions' names, and for the control-flow call the
    values its bodies read from the enclosing scope (parameters of the loop node too)."""
    used = _names_used(item)
    function, _ = _function_of(item)
    if function in CONTROL_FLOW_FUNCTIONS:
        for body in loop_bodies(node).values():
            used |= set(body_signature(body).outer_scope_inputs)
    return used


def _ready(item, env: dict, node: Node) -> bool:
    own = {p.id for p in node.parameters} | {f.id for f in node.functions}
    return all(name in env or name not in own for name in _dependencies(item, node))


def _outputs_used(node: Node, function_id: str, schema) -> int:
    if schema.max_output == 1:
        return 1
    used = [0]
    for port in node.output_ports:
        parsed = output_reference(port.value or "")
        if parsed and parsed[0] == function_id:
            used.append(parsed[1] + 1)
    count = max(used)
    split = next((p for p in node.parameters if p.id == "num_outputs"), None)
    if schema.name == "Split" and split is not None:
        count = max(count, int(split.value))
    return max(count, schema.min_output)

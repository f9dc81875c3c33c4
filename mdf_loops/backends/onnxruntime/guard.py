"""Make an exported ONNX model enforce mdf-loops' work limits inside onnxruntime.

onnxruntime runs a ``Loop`` for as long as its trip count and condition say; a
model from an untrusted file could ask for 10**12 iterations or grow a value
until memory runs out. :func:`guard_model` rewrites every loop, at every depth:

* ``Loop``: the trip count is capped at ``max_iterations``; a loop that still
  wanted to go on (its condition true, its trip count larger) is over the limit.
  The body's condition output is kept (it stops the loop in every mode).
  Where a carried value can change shape, or an inner loop can pass a limit, the
  body's condition turns false as soon as a carried value or the stacked scan
  outputs pass ``max_elements``, or the inner loop passed its limit;
* ``Scan``: a sequence longer than ``max_iterations`` is flagged, an inner loop's
  flag carried as an extra state; ``If``: each branch returns its inner flag.

Each top-level loop node gets outputs named after :data:`LIMIT_OUTPUT`, nonzero
when the node ran ``max_iterations`` and wanted more, or when a limit was passed in
its body: a code (:mod:`~mdf_loops.backends.onnxruntime.limit_codes`) of the limit,
the loop node and the iteration, which ``CompiledModel.run`` turns into the error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import onnx
from onnx import TensorProto, helper

from mdf_loops.backends.onnxruntime.limit_codes import (
    LIMIT_OUTPUT,
    SITES,
    LimitFlag,
    LimitSite,
    label_of,
)
from mdf_loops.model.signatures import IfSignature, LoopSignature, ScanSignature
from mdf_loops.onnx.builder import NameAllocator
from mdf_loops.ops.common import Limits

__all__ = ["guard_model", "nesting_depth"]


def nesting_depth(graph: onnx.GraphProto) -> int:
    """How deep subgraphs nest below ``graph`` (0 for a graph without control flow)."""
    depth = 0
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                depth = max(depth, 1 + nesting_depth(attr.g))
    return depth


def guard_model(
    model: onnx.ModelProto, limits: Limits, labels: Mapping[str, str] | None = None
) -> tuple[onnx.ModelProto, dict[str, LimitFlag]]:
    """A copy of ``model`` whose loops stop at the limits, and its flag outputs.

    Each top-level loop node gets an output ``<LIMIT_OUTPUT>_<k>``, nonzero when it
    ran ``max_iterations`` and wanted more, and ``<LIMIT_OUTPUT>_<k>_within``, nonzero
    when its body passed a limit (each only where it can happen; limit_codes.py); the dict
    maps each such output to its :class:`LimitFlag`, labelled ``labels[node name]``
    (the exporter's :attr:`~mdf_loops.onnx.export.ExportResult.labels`: the MDF
    node id), else the ONNX node name.
    """
    guarded = onnx.ModelProto()
    guarded.CopyFrom(model)
    rewriter = _Rewriter(limits, NameAllocator.of_graph(guarded.graph), labels or {})
    outputs: dict[str, LimitFlag] = {}
    for k, (own, within, label) in enumerate(rewriter.loop_flags(guarded.graph)):
        for flag, name, kind in (
            (own, f"{LIMIT_OUTPUT}_{k}", False),
            (within, f"{LIMIT_OUTPUT}_{k}_within", True),
        ):
            if flag:
                guarded.graph.node.append(helper.make_node("Identity", [flag], [name]))
                guarded.graph.output.append(
                    helper.make_tensor_value_info(name, TensorProto.DOUBLE, [])
                )
                outputs[name] = LimitFlag(label, kind, sites=tuple(rewriter.sites))
    return guarded, outputs


class _Rewriter:
    def __init__(self, limits: Limits, names: NameAllocator, labels: Mapping[str, str]):
        self.limits = limits
        self.labels = labels
        self.names = names
        self.sites: list[LimitSite] = []
        self.scaled_iterations: dict[str, str] = {}  # iteration value -> SITES * it

    def coded(self, nodes, passed: str, site: LimitSite, iteration: str | int) -> str:
        """The code (limit_codes.py) of ``site`` at ``iteration`` where ``passed``, else 0."""
        self.sites.append(site)
        first = float(len(self.sites))  # 1 + the site's index
        if isinstance(iteration, int):
            code = self.const_double(nodes, first + SITES * min(iteration, 1 << 30))
        else:
            code = self.emit(
                nodes, "Add", [self.scaled(nodes, iteration), self.const_double(nodes, first)]
            )
        factor = self.emit(nodes, "Cast", [passed], to=TensorProto.DOUBLE)  # no Where at opset 8
        return self.emit(nodes, "Mul", [code, factor])

    def scaled(self, nodes, iteration: str) -> str:
        """``SITES * iteration``, once per body (clamped at 2^30: doubles are exact to 2^53)."""
        if iteration not in self.scaled_iterations:
            steps = self.emit(nodes, "Cast", [iteration], to=TensorProto.DOUBLE)
            if self.limits.max_iterations >= 1 << 30:
                steps = self.emit(nodes, "Min", [steps, self.const_double(nodes, float(1 << 30))])
            scale = self.const_double(nodes, float(SITES))
            self.scaled_iterations[iteration] = self.emit(nodes, "Mul", [steps, scale])
        return self.scaled_iterations[iteration]

    def const_double(self, nodes, value: float) -> str:
        return self.constant(nodes, TensorProto.DOUBLE, value)

    def constant(self, nodes, element: int, value) -> str:
        return self.emit(nodes, "Constant", [], value=helper.make_tensor("v", element, [], [value]))

    def name(self, hint: str) -> str:
        return self.names.fresh(f"mdf_loops_{hint}")

    def emit(self, nodes, op: str, inputs: list[str], **attrs) -> str:
        out = self.name(op.lower())
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def const_bool(self, nodes, value: bool) -> str:
        return self.constant(nodes, TensorProto.BOOL, value)

    def const_int(self, nodes, value: int) -> str:
        return self.constant(nodes, TensorProto.INT64, value)

    def any_of(self, nodes, flags: Sequence[str | None]) -> str | None:
        given = [f for f in flags if f]
        if len(given) < 2:
            return given[0] if given else None
        return self.emit(nodes, "Max", given)  # the codes of passed limits (limit_codes.py)

    def over_size(self, nodes, value: str, factor: str | None = None) -> str:
        size = self.emit(nodes, "Size", [value])
        if factor is not None:
            size = self.emit(nodes, "Mul", [size, factor])
        return self.emit(nodes, "Greater", [size, self.const_int(nodes, self.limits.max_elements)])

    # ------------------------------------------------------------------ graphs
    def graph(self, graph: onnx.GraphProto) -> str | None:
        """Rewrite ``graph``'s loops in place; return its flag value (or None: no loops)."""
        return self.graph_flags(graph, together=True)[0]

    def graph_flags(
        self, graph: onnx.GraphProto, together: bool = False
    ) -> tuple[str | None, str | None]:
        """Rewrite ``graph``'s loops in place; return whether one of them passed its own
        iteration limit, and whether a limit was passed within one of them (both in the
        first, ``together``)."""
        flags = self.loop_flags(graph)
        nodes = list(graph.node)
        pair: tuple[str | None, str | None] = (
            (self.any_of(nodes, [f for own, within, _ in flags for f in (own, within)]), None)
            if together
            else (
                self.any_of(nodes, [own for own, _, _ in flags]),
                self.any_of(nodes, [within for _, within, _ in flags]),
            )
        )
        del graph.node[:]
        graph.node.extend(nodes)
        return pair

    def loop_flags(self, graph: onnx.GraphProto) -> list[tuple[str | None, str | None, str]]:
        """Rewrite ``graph``'s loops in place; return per loop node its flag values (its own
        iterations, its body) and its label."""
        rewrite = {"Loop": self.loop, "Scan": self.scan, "If": self.if_}
        nodes: list = []
        flags: list[tuple[str | None, str | None, str]] = []
        for node in graph.node:
            if node.op_type in rewrite and node.domain in ("", "ai.onnx"):
                own, within = rewrite[node.op_type](node, nodes)
                if own or within:
                    flags.append((own, within, self.label(node)))
            else:
                nodes.append(node)
        del graph.node[:]
        graph.node.extend(nodes)
        return flags

    def label(self, node: onnx.NodeProto) -> str:
        return label_of(node, self.labels)

    def loop(self, node: onnx.NodeProto, nodes: list) -> tuple[str, str | None]:
        """Cap the trip count at the limit; flag a loop that still wanted to go on.

        The body's condition output is also returned as an extra loop-carried
        value (the same name twice: no operator per iteration), so after the loop
        its last value says whether the loop would have continued.
        """
        signature = LoopSignature.from_onnx(node)
        body = _graph_attribute(node, "body")
        inner = self.graph(body)
        inputs = list(node.input) + [""] * (2 - len(node.input))
        trip, cond = inputs[signature.TRIP_COUNT], inputs[signature.CONDITION]
        carried = inputs[signature.node_carried]
        trip, wants_more = self.capped_trip_count(nodes, trip)

        outputs = list(body.output)
        cond_out = outputs[signature.CONDITION_OUTPUT]
        carried_out = outputs[signature.body_carried_outputs]
        scans_out = outputs[signature.body_scan_outputs]
        b: list = list(body.node)
        label = self.label(node)
        stop = self.any_of(b, self.loop_body_stops(body, signature, nodes, b, inner, label))
        # the body's condition output stops the loop in every mode, also without a
        # condition input (docs/semantics.md): it is kept, and carried out as well
        if not cond:
            cond = self.const_bool(nodes, True)
        keep, extra_in, extra_out, initial = self.kept_condition(nodes, b, cond_out.name, stop)
        keep_in = self.name("keep_in")
        keep_info = helper.make_tensor_value_info(keep, TensorProto.BOOL, [])
        # the kept condition (and the limit flag) become loop-carried values after the others
        body.input.extend([helper.make_tensor_value_info(keep_in, TensorProto.BOOL, [])] + extra_in)
        del body.node[:]
        body.node.extend(b)
        del body.output[:]
        body.output.extend([keep_info] + carried_out + [keep_info] + extra_out + scans_out)

        outs = list(node.output) + [""] * (signature.num_node_outputs - len(node.output))
        keep_final = self.name("keep")
        hit_final = [self.name("hit")] if stop else []
        new = _with_inputs(node, [trip, cond] + carried + [cond] + initial)
        del new.output[:]
        new.output.extend(
            outs[signature.node_carried_outputs]
            + [keep_final]
            + hit_final
            + outs[signature.node_scan_outputs]
        )
        nodes.append(new)
        over = self.emit(nodes, "And", [keep_final, wants_more])
        site = LimitSite(label, "max_iterations", "Loop")
        own = self.coded(nodes, over, site, self.limits.max_iterations)
        return own, (hit_final[0] if stop else None)

    def capped_trip_count(self, nodes: list, trip: str) -> tuple[str, str]:
        """The trip count capped at ``max_iterations``, and whether it wanted more."""
        cap = self.const_int(nodes, self.limits.max_iterations)
        if not trip:
            return cap, self.const_bool(nodes, True)
        wants_more = self.emit(nodes, "Greater", [trip, cap])
        return self.emit(nodes, "Where", [wants_more, cap, trip]), wants_more  # Min: no int64

    def loop_body_stops(
        self, body: onnx.GraphProto, signature: LoopSignature, nodes: list, b: list, inner, label
    ) -> list[str]:
        """Flags, computed in the body, of carried values and stacked outputs past the size
        limit (only those whose shape can change), and of an inner loop past a limit."""
        stops = [inner] if inner else []
        self.scaled_iterations.clear()  # a body's copies (zero_steps) share value names
        iteration = body.input[signature.ITERATION].name
        carried_out = list(body.output)[signature.body_carried_outputs]
        carried = LimitSite(label, "max_elements", "a carried value")
        for given, value in zip(body.input[signature.body_carried], carried_out, strict=True):
            if value.type.HasField("tensor_type") and not _same_static_shape(given, value):
                stops.append(self.coded(b, self.over_size(b, value.name), carried, iteration))
        stacked = LimitSite(label, "max_elements", "the stacked scan outputs")
        for value in list(body.output)[signature.body_scan_outputs]:
            if value.type.HasField("tensor_type") and not _static(value):
                iterations = self.emit(b, "Add", [iteration, self.const_int(nodes, 1)])
                over = self.over_size(b, value.name, iterations)
                stops.append(self.coded(b, over, stacked, iteration))
        return stops

    def kept_condition(
        self, nodes: list, b: list, condition: str, stop: str | None
    ) -> tuple[str, list, list, list[str]]:
        """The body's condition, false once ``stop`` is; with a stop, the carried flag
        (its body input, body output and initial value)."""
        if not stop:
            return condition, [], [], []
        passed = self.emit(b, "Greater", [stop, self.const_double(b, 0.0)])
        keep = self.emit(b, "And", [condition, self.emit(b, "Not", [passed])])
        hit_in = self.name("hit_in")
        hit_out = self.emit(b, "Max", [hit_in, stop])
        return (
            keep,
            [helper.make_tensor_value_info(hit_in, TensorProto.DOUBLE, [])],
            [helper.make_tensor_value_info(hit_out, TensorProto.DOUBLE, [])],
            [self.const_double(nodes, 0.0)],
        )

    def scan(self, node: onnx.NodeProto, nodes: list) -> tuple[str, str | None]:
        signature = ScanSignature.from_onnx(node)  # opset 8's when it passes sequence_lens
        body = _graph_attribute(node, "body")
        inner = self.graph(body)
        too_long = self.scan_too_long(node, signature, nodes)
        if inner is None:
            nodes.append(node)
            return too_long, None
        # carry the inner flag as an extra state
        hit_in = self.name("hit_in")
        inputs = list(body.input)
        del body.input[:]
        body.input.extend(
            inputs[signature.body_states]
            + [helper.make_tensor_value_info(hit_in, TensorProto.DOUBLE, [])]
            + inputs[signature.body_scan_inputs]
        )
        b = list(body.node)
        hit_out = self.emit(b, "Max", [hit_in, inner])
        del body.node[:]
        body.node.extend(b)
        outputs = list(body.output)
        del body.output[:]
        body.output.extend(
            outputs[signature.body_state_outputs]
            + [helper.make_tensor_value_info(hit_out, TensorProto.DOUBLE, [])]
            + outputs[signature.body_scan_outputs]
        )
        hit0 = self.const_double(nodes, 0.0)
        hit_final = self.name("hit")
        new = onnx.NodeProto()
        new.CopyFrom(node)
        inputs = list(node.input)
        del new.input[:]
        new.input.extend(
            inputs[: signature.node_states.stop] + [hit0] + inputs[signature.node_scan_inputs]
        )
        outs = list(node.output)
        del new.output[:]
        new.output.extend(
            outs[signature.node_state_outputs] + [hit_final] + outs[signature.node_scan_outputs]
        )
        nodes.append(new)
        return too_long, hit_final

    def scan_too_long(self, node: onnx.NodeProto, signature: ScanSignature, nodes: list) -> str:
        """Whether the scanned sequences are longer than ``max_iterations``."""
        attrs = {a.name: a for a in node.attribute}
        m = signature.num_scan_inputs
        axes = list(attrs["scan_input_axes"].ints) if "scan_input_axes" in attrs else [0] * m
        axis = 1 if signature.sequence_lens else axes[0]  # opset 8: axis 0 is the batch
        first_sequence = node.input[signature.node_scan_inputs][0]
        shape = self.emit(nodes, "Shape", [first_sequence])
        length = self.emit(nodes, "Gather", [shape, self.const_int(nodes, axis)], axis=0)
        # compared as doubles: Greater takes no integers before opset 9
        length = self.emit(nodes, "Cast", [length], to=TensorProto.DOUBLE)
        limit = self.const_double(nodes, float(self.limits.max_iterations))
        too_long = self.emit(nodes, "Greater", [length, limit])
        return self.coded(
            nodes, too_long, LimitSite(self.label(node), "max_iterations", "Scan"), length
        )

    def if_(self, node: onnx.NodeProto, nodes: list) -> tuple[str | None, str | None]:
        """Each branch returns its loops' flags (own iterations, within), where any has one."""
        branches = [_graph_attribute(node, name) for name in IfSignature.BRANCHES]
        pairs = [self.graph_flags(branch) for branch in branches]
        kinds = [k for k in (0, 1) if any(pair[k] for pair in pairs)]
        if not kinds:
            nodes.append(node)
            return None, None
        for branch, pair in zip(branches, pairs, strict=True):
            b = list(branch.node)
            outs = [self.emit(b, "Identity", [pair[k] or self.const_double(b, 0.0)]) for k in kinds]
            del branch.node[:]
            branch.node.extend(b)
            branch.output.extend(
                helper.make_tensor_value_info(out, TensorProto.DOUBLE, []) for out in outs
            )
        hits = {k: self.name("hit") for k in kinds}
        new = onnx.NodeProto()
        new.CopyFrom(node)
        new.output.extend(hits.values())
        nodes.append(new)
        return hits.get(0), hits.get(1)


def _static(value: onnx.ValueInfoProto) -> bool:
    """A tensor whose every dimension is a known number."""
    tensor = value.type.tensor_type
    return tensor.HasField("shape") and all(d.HasField("dim_value") for d in tensor.shape.dim)


def _same_static_shape(given: onnx.ValueInfoProto, returned: onnx.ValueInfoProto) -> bool:
    """A loop-carried tensor that provably keeps one fixed shape (its size cannot grow)."""
    return _static(given) and _static(returned) and given.type == returned.type


def _with_inputs(node: onnx.NodeProto, inputs: list[str]) -> onnx.NodeProto:
    new = onnx.NodeProto()
    new.CopyFrom(node)
    del new.input[:]
    new.input.extend(inputs)
    return new


def _graph_attribute(node: onnx.NodeProto, name: str) -> onnx.GraphProto:
    for attr in node.attribute:
        if attr.name == name:
            return attr.g
    raise ValueError(f"{node.op_type} node '{node.name}' has no attribute '{name}'")

"""Count the iterations of all loops of a run together inside onnxruntime, and stop at the limit.

The scheduler counts every iteration of every loop of a run against
``max_total_iterations``; onnxruntime runs loops nested in loops without any count
of ours (a Loop of 10^6 iterations in a Scan of 10^5 steps is 10^11 iterations,
each within ``max_iterations``). :func:`count_total` threads one counter through the
guarded model (:mod:`~mdf_loops.backends.onnxruntime.guard`), at every depth:

* every ``Loop`` and ``Scan`` body gets the counter as one more carried value or
  state, adds 1 each iteration and hands it through the loops nested in it; an
  ``If`` hands it through the branch it runs;
* a ``Loop`` does not start, and stops after the iteration that passes the limit
  (its body's condition turns false); a ``Scan`` cannot stop, but every loop in its
  body then runs no iteration, so it finishes its own steps (at most
  ``max_iterations``) and nothing more;
* each top-level loop node gets a boolean output, true when the counter passed
  ``max_total_iterations`` by its end: the first such node is where the run's
  loops together passed the limit.

The counter is a double (exact to 2^53; ``Add`` and ``Greater`` take doubles at
every opset), a few operators per iteration.
"""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from mdf_loops.backends.onnxruntime.limit_codes import LIMIT_OUTPUT, LimitFlag, label_of
from mdf_loops.model.signatures import ScanSignature
from mdf_loops.onnx.builder import NameAllocator, all_nodes

__all__ = ["count_total"]


def count_total(
    model: onnx.ModelProto, max_total: int, labels: dict[str, str]
) -> tuple[onnx.ModelProto, dict[str, LimitFlag]]:
    """A copy of ``model`` that stops its loops once they ran ``max_total`` iterations
    together, and its flag outputs (one per top-level loop node, as in guard.py)."""
    counted = onnx.ModelProto()
    counted.CopyFrom(model)
    threader = _Threader(max_total, NameAllocator.of_graph(counted.graph))
    graph = counted.graph
    nodes: list = []
    start = threader.const(nodes, 0.0)
    after = threader.thread(graph, start, nodes)
    flags: dict[str, LimitFlag] = {}
    for k, (node, total) in enumerate(after):
        name = f"{LIMIT_OUTPUT}_total_{k}"
        over = threader.over(graph.node, total)
        graph.node.append(helper.make_node("Identity", [over], [name]))
        graph.output.append(helper.make_tensor_value_info(name, TensorProto.BOOL, []))
        flags[name] = LimitFlag(label_of(node, labels), within=True, limit="max_total_iterations")
    return counted, flags


class _Threader:
    def __init__(self, max_total: int, names: NameAllocator):
        self.max_total = float(max_total)
        self.names = names

    def emit(self, nodes, op: str, inputs: list[str], **attrs) -> str:
        out = self.names.fresh(f"mdf_loops_total_{op.lower()}")
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def const(self, nodes, value: float) -> str:
        tensor = helper.make_tensor("v", TensorProto.DOUBLE, [], [value])
        return self.emit(nodes, "Constant", [], value=tensor)

    def over(self, nodes, total: str) -> str:
        return self.emit(nodes, "Greater", [total, self.const(nodes, self.max_total)])

    def within(self, nodes, total: str) -> str:
        return self.emit(nodes, "Not", [self.over(nodes, total)])

    def thread(
        self, graph: onnx.GraphProto, total: str, nodes: list
    ) -> list[tuple[onnx.NodeProto, str]]:
        """Rewrite ``graph``'s loop nodes to carry the counter, starting from the value
        ``total``; ``nodes`` (which may hold nodes made for it) become the graph's nodes.
        Returns each loop node with the counter after it (the last one: the graph's)."""
        after: list[tuple[onnx.NodeProto, str]] = []
        for node in list(graph.node):
            rewrite = _REWRITES.get(node.op_type) if node.domain in ("", "ai.onnx") else None
            if rewrite is None:
                nodes.append(node)
                continue
            total = rewrite(self, node, total, nodes)
            after.append((node, total))
        del graph.node[:]
        graph.node.extend(nodes)
        return after

    def body(self, body: onnx.GraphProto) -> tuple[str, str]:
        """The body's counter input and its counter at the end of an iteration (+1, then
        through the loops nested in it)."""
        given = self.names.fresh("mdf_loops_total_in")
        nodes: list = []
        total = self.emit(nodes, "Add", [given, self.const(nodes, 1.0)])
        after = self.thread(body, total, nodes)
        return given, after[-1][1] if after else total

    def loop(self, node: onnx.NodeProto, total: str, nodes: list) -> str:
        if not _holds_loops(_graph(node, "body")):
            return self.innermost_loop(node, total, nodes)
        body = _graph(node, "body")
        n_carried = len(node.input) - 2
        given, end = self.body(body)
        b = list(body.node)
        condition = body.output[0].name
        keep = self.emit(b, "And", [condition, self.within(b, end)])
        _set(body.node, b)
        outputs = list(body.output)
        outputs[0] = _value(keep, TensorProto.BOOL)
        outputs.insert(1 + n_carried, _value(end, TensorProto.DOUBLE))
        _set(body.output, outputs)
        body.input.append(_value(given, TensorProto.DOUBLE))
        inputs = list(node.input) + [""] * (2 - len(node.input))
        start = self.within(nodes, total)  # a loop does not start past the limit
        cond = self.emit(nodes, "And", [inputs[1], start]) if inputs[1] else start
        result = self.names.fresh("mdf_loops_total")
        _set(node.input, [inputs[0], cond, *inputs[2:], total])
        _set(node.output, [*node.output[:n_carried], result, *node.output[n_carried:]])
        nodes.append(node)
        return result

    def innermost_loop(self, node: onnx.NodeProto, total: str, nodes: list) -> str:
        """A Loop with no loop in its body: its trip count is capped at what is left of
        the limit (plus one, so that passing it shows), and its iterations are counted
        after it: the capped trip count where the body hands its condition on unchanged,
        else the last iteration number, which the body hands on (one Identity a step)."""
        body = _graph(node, "body")
        left = self.emit(nodes, "Sub", [self.const(nodes, self.max_total + 1.0), total])
        left = self.emit(nodes, "Max", [left, self.const(nodes, 0.0)])
        left = self.emit(nodes, "Cast", [left], to=TensorProto.INT64)
        trip = node.input[0]  # guard.py always gives one: at most max_iterations
        capped = self.emit(nodes, "Where", [self.emit(nodes, "Less", [left, trip]), left, trip])
        node.input[0] = capped
        if _condition_unchanged(body):
            nodes.append(node)
            ran = self.emit(nodes, "Cast", [capped], to=TensorProto.DOUBLE)
            started = self.emit(nodes, "Cast", [node.input[1]], to=TensorProto.DOUBLE)
            return self.emit(nodes, "Add", [total, self.emit(nodes, "Mul", [ran, started])])
        n_carried = len(node.input) - 2
        # a copy: onnxruntime hands on the iteration number's own buffer, counted on by then
        iteration = self.emit(body.node, "Identity", [body.input[0].name])
        body.input.append(_value(self.names.fresh("mdf_loops_total_in"), TensorProto.INT64))
        outputs = list(body.output)
        outputs.insert(1 + n_carried, _value(iteration, TensorProto.INT64))
        _set(body.output, outputs)
        minus_one = helper.make_tensor("v", TensorProto.INT64, [], [-1])
        last = self.names.fresh("mdf_loops_total_last")
        _set(node.input, [*node.input, self.emit(nodes, "Constant", [], value=minus_one)])
        _set(node.output, [*node.output[:n_carried], last, *node.output[n_carried:]])
        nodes.append(node)
        ran = self.emit(nodes, "Cast", [last], to=TensorProto.DOUBLE)
        ran = self.emit(nodes, "Add", [ran, self.const(nodes, 1.0)])
        return self.emit(nodes, "Add", [total, ran])

    def scan(self, node: onnx.NodeProto, total: str, nodes: list) -> str:
        signature = ScanSignature.from_onnx(node)
        body = _graph(node, "body")
        if not _holds_loops(body):  # its steps: the length of its first scan input
            axis = 1 if signature.sequence_lens else _first_axis(node)
            first = node.input[signature.node_scan_inputs][0]
            shape = self.emit(nodes, "Shape", [first])
            axis_value = helper.make_tensor("v", TensorProto.INT64, [1], [axis])
            length = self.emit(
                nodes, "Gather", [shape, self.emit(nodes, "Constant", [], value=axis_value)]
            )
            length = self.emit(nodes, "Cast", [length], to=TensorProto.DOUBLE)
            nodes.append(node)
            steps = self.emit(nodes, "ReduceSum", [length], keepdims=0)
            return self.emit(nodes, "Add", [total, steps])
        given, end = self.body(body)
        states = signature.num_states
        inputs, outputs = list(body.input), list(body.output)
        inputs.insert(states, _value(given, TensorProto.DOUBLE))
        outputs.insert(states, _value(end, TensorProto.DOUBLE))
        _set(body.input, inputs)
        _set(body.output, outputs)
        result = self.names.fresh("mdf_loops_total")
        stop = signature.node_states.stop
        _set(node.input, [*node.input[:stop], total, *node.input[stop:]])
        _set(node.output, [*node.output[:states], result, *node.output[states:]])
        nodes.append(node)
        return result

    def if_(self, node: onnx.NodeProto, total: str, nodes: list) -> str:
        for name in ("then_branch", "else_branch"):
            branch = _graph(node, name)
            after = self.thread(branch, total, [])
            end = after[-1][1] if after else total
            b = list(branch.node)
            out = self.emit(b, "Identity", [end])
            _set(branch.node, b)
            branch.output.append(_value(out, TensorProto.DOUBLE))
        result = self.names.fresh("mdf_loops_total")
        node.output.append(result)
        nodes.append(node)
        return result


_REWRITES = {"Loop": _Threader.loop, "Scan": _Threader.scan, "If": _Threader.if_}


def _condition_unchanged(body: onnx.GraphProto) -> bool:
    """Whether the body's condition output is its condition input (or a copy of it)."""
    given, returned = body.input[1].name, body.output[0].name
    if returned == given:
        return True
    made = next((n for n in body.node if returned in n.output), None)
    return made is not None and made.op_type == "Identity" and list(made.input) == [given]


def _holds_loops(graph: onnx.GraphProto) -> bool:
    return any(n.op_type in _REWRITES for n in all_nodes(graph) if n.domain in ("", "ai.onnx"))


def _first_axis(node: onnx.NodeProto) -> int:
    for attribute in node.attribute:
        if attribute.name == "scan_input_axes" and attribute.ints:
            return int(attribute.ints[0])
    return 0


def _value(name: str, element: int) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, element, [])


def _set(field, values: list) -> None:
    values = list(values)
    del field[:]
    field.extend(values)


def _graph(node: onnx.NodeProto, name: str) -> onnx.GraphProto:
    for attribute in node.attribute:
        if attribute.name == name:
            return attribute.g
    raise ValueError(f"{node.op_type} node '{node.name}' has no attribute '{name}'")

"""onnxscript functions for tests/onnx/test_exporter_corpus.py (onnxscript compiles a function
from its module's source, so they live at module level here; import only with onnxscript)."""

from __future__ import annotations

from onnxscript import FLOAT, INT64, graph, script
from onnxscript import opset18 as op
from onnxscript.values import Opset

this = Opset("this", 1)


@script(default_opset=op)
def for_loop(x: FLOAT[3], n: INT64) -> FLOAT[3]:
    y = x
    for i in range(n):
        y = y * 0.5 + op.CastLike(i, y)
    return y


@script(default_opset=op)
def while_loop(x: FLOAT[3]) -> FLOAT[3]:
    y = x
    keep = op.ReduceSum(y, keepdims=0) < 100.0
    while keep:
        y = y * 2.0 + 1.0
        keep = op.ReduceSum(y, keepdims=0) < 100.0
    return y


@script(default_opset=op)
def for_break(x: FLOAT[3], n: INT64) -> FLOAT[3]:
    y = x
    for i in range(n):
        y = y + op.CastLike(i, y)
        big = op.ReduceSum(y, keepdims=0) > 20.0
        if big:
            break
    return y


@script(default_opset=op)
def if_else(x: FLOAT[3]) -> FLOAT[3]:
    if op.ReduceSum(x, keepdims=0) > 0.0:
        y = x * 2.0
    else:
        y = -x
    return y


@script(default_opset=op)
def nested_loops(x: FLOAT[3], n: INT64, m: INT64) -> FLOAT[3]:
    y = x
    for i in range(n):
        for j in range(m):
            y = y + op.CastLike(i * j, y)
        y = y * 0.5
    return y


@script(this, default_opset=op)
def gate(x: FLOAT[3]) -> FLOAT[3]:
    return x * op.Sigmoid(x * 1.702)


@script(default_opset=op)
def local_function(x: FLOAT[3], n: INT64) -> FLOAT[3]:
    y = x
    for i in range(n):
        y = gate(y) + 0.1
    return y


@script(default_opset=op)
def scan_outputs(xs: FLOAT[None, 3], s0: FLOAT[3]) -> FLOAT[None, 3]:
    @graph()
    def step(s: FLOAT[3], x: FLOAT[3]):
        s_next = s + x
        out = s_next * 2.0
        return s_next, out

    final, trace = op.Scan(s0, xs, body=step, num_scan_inputs=1)
    return trace


FUNCTIONS = {f.name: f for f in (for_loop, while_loop, for_break, if_else, nested_loops,
                                 local_function, scan_outputs)}

"""What counting an untrusted run's iterations costs on the jax backend.

A model that is not trusted counts the iterations of all its loops together against
``max_total_iterations`` inside the traced program (mdf_loops/backends/jax/totals.py).
A loop whose body holds no loop costs nothing per iteration (the Elman RNN and the
running sum of benchmarks/jax_grad.py trace to the same program trusted or not); the
count is carried only through loops that hold loops. This measures that case: a Scan of
100 steps whose every step runs a Loop of 2,000 iterations of ``acc = sin(acc) + 1``
from the step's element, stopped by its trip count or by a condition decided at run time.

The compiled functions of the trusted and the untrusted model run interleaved in this
process (synchronous CPU dispatch); CPU time per run, median and spread over the
repeats, and the ratio of untrusted to trusted.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
from onnx import TensorProto as T
from onnx import helper as oh

import mdf_loops
from mdf_loops import ops
from mdf_loops.backends.jax.compiled import compile
from mdf_loops.backends.jax.precision import x64

STEPS, TRIPS, REPEATS = 100, 2000, 21


def _value(name: str, element: int, shape=()):
    return oh.make_tensor_value_info(name, element, list(shape))


def _model(stop: bool) -> mdf_loops.Model:
    nodes = [oh.make_node("Sin", ["acc_in"], ["sine"]),
             oh.make_node("Add", ["sine", "one"], ["acc_out"])]  # fmt: skip
    if stop:
        nodes.append(oh.make_node("Less", ["acc_out", "stop"], ["c_out"]))
    else:
        nodes.append(oh.make_node("Identity", ["c_in"], ["c_out"]))
    loop_body = oh.make_graph(
        nodes, "loop_body",
        [_value("i", T.INT64), _value("c_in", T.BOOL), _value("acc_in", T.DOUBLE)],
        [_value("c_out", T.BOOL), _value("acc_out", T.DOUBLE)],
        initializer=[oh.make_tensor("one", T.DOUBLE, [], [1.0])],
    )  # fmt: skip
    scan_body = oh.make_graph(
        [oh.make_node("Loop", ["n", "go", "x"], ["count"], body=loop_body),
         oh.make_node("Add", ["s_in", "count"], ["s_out"])],
        "scan_body", [_value("s_in", T.DOUBLE), _value("x", T.DOUBLE)],
        [_value("s_out", T.DOUBLE)],
        initializer=[oh.make_tensor("go", T.BOOL, [], [True])],
    )  # fmt: skip
    graph = oh.make_graph(
        [oh.make_node("Scan", ["s0", "xs"], ["s"], body=scan_body, num_scan_inputs=1)],
        "g", [_value("s0", T.DOUBLE), _value("xs", T.DOUBLE, [None]), _value("n", T.INT64),
              _value("stop", T.DOUBLE)],
        [_value("s", T.DOUBLE)],
    )  # fmt: skip
    return mdf_loops.onnx_to_mdf(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]))


def _compiled(model, inputs, limits):
    lowered = compile(model, inputs, limits=limits)
    lowered.run(inputs)  # compiled, and run once
    static, dynamic = lowered.split(lowered.feed(inputs))
    return lowered._entry(static, dynamic)[0], dynamic


def main() -> None:
    import jax

    jax.config.update("jax_cpu_enable_async_dispatch", False)
    inputs = {"s0": np.float64(0), "xs": np.linspace(0, 1, STEPS), "n": np.int64(TRIPS),
              "stop": np.float64(1e300)}  # fmt: skip
    for stop in (False, True):
        model = _model(stop)
        runs = {"trusted": _compiled(model, inputs, None),
                "untrusted": _compiled(model, inputs, ops.current_limits())}  # fmt: skip
        times: dict[str, list[float]] = {name: [] for name in runs}
        ratios = []
        with x64():
            for _ in range(REPEATS):
                for name, (fn, dynamic) in runs.items():
                    started = time.process_time()
                    jax.block_until_ready(fn(dynamic))
                    times[name].append((time.process_time() - started) * 1e3)
                ratios.append(times["untrusted"][-1] / times["trusted"][-1])
        label = "Loop stopped by a condition" if stop else "Loop of a trip count"
        print(f"{label}, {STEPS} x {TRIPS} iterations:")
        for name, values in times.items():
            print(f"  {name:<10}{statistics.median(values):.3f} ms a run")
        print(
            f"  ratio (decides): median {statistics.median(ratios):.2f}, "
            f"{min(ratios):.2f} to {max(ratios):.2f} over {REPEATS} interleaved runs"
        )


if __name__ == "__main__":
    main()

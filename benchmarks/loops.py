"""Benchmark: mdf-loops' execution modes against onnxruntime, onnx.reference and numpy
(and, where installed, the JAX backend beside a hand-written ``jax.lax`` loop and PyTensor's scan).

Run ``python benchmarks/loops.py`` (``--help`` for options). Every row runs the
same model on the same inputs in this process; times are medians of several
runs after one warm-up; ratios are to onnxruntime with one intra-op thread
("x ORT") and to ``onnx.reference`` ("x ref", the peer of the scheduler mode).
Peak memory is Python-side (tracemalloc: numpy and the engine; not
onnxruntime's own arena), measured in a separate run.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import statistics
import sys
import time
import tracemalloc
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
import onnxruntime as ort
from onnx.reference import ReferenceEvaluator

import mdf_loops
from mdf_loops.workloads import Workload, elman_rnn, running_sum, while_loop

__all__ = ["Row", "measure", "main"]


@dataclass
class Row:
    workload: str
    runner: str
    median_ms: float
    runs: int
    ratio_to_onnxruntime: float | None = None
    ratio_to_reference: float | None = None  # to onnx.reference: the scheduler's peer
    peak_python_mb: float | None = None
    correct: bool | None = None
    compile_ms: float | None = None  # first call minus a warm call (compiling runners only)
    best_ms: float | None = None  # the fastest run: what the loop costs when nothing interferes


def _time_interleaved(runners: dict[str, tuple[Callable, int]], runs: int) -> dict[str, list]:
    """Run every runner once per round (so load on the machine hits all alike), in an order
    shuffled each round (seeded), so none always runs right after the same one."""
    times: dict[str, list] = {name: [] for name in runners}
    for fn, _ in runners.values():
        fn()  # warm-up: compiles, caches, first-touch
    shuffle = random.Random(0)
    for round_ in range(runs):
        # a new order each round, so no runner always follows the same (cache-cold or
        # thread-spinning) one
        for name in shuffle.sample(list(runners), len(runners)):
            fn, own_runs = runners[name]
            if round_ >= (own_runs or runs):
                continue
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


def _peak_mb(fn: Callable[[], object]) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def _runners(work: Workload, model, slow_runs: int) -> dict[str, tuple[Callable, int]]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(work.model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    reference = ReferenceEvaluator(work.model)
    inputs = work.inputs
    return {**_jit_runners(work, model), **{
        "onnxruntime": (lambda: session.run(None, inputs), 0),
        "mdf_loops auto": (lambda: mdf_loops.run(model, inputs), 0),
        "mdf_loops onnxruntime": (lambda: mdf_loops.run(model, inputs, backend="onnxruntime"), 0),
        "mdf_loops scheduler": (lambda: mdf_loops.run(model, inputs, backend="scheduler"), slow_runs),
        STOCK_ENGINE: (functools.partial(_stock_engine, model, inputs), slow_runs),
        "onnx.reference": (lambda: reference.run(None, inputs), slow_runs),
        "numpy loop": (lambda: work.numpy_loop(inputs), 0),
    }}


#: modeci-mdf's own engine after ``import mdf_loops``, run as its users run it
STOCK_ENGINE = "stock EvaluableGraph"


def _stock_engine(model, inputs: dict) -> dict:
    """Build the model's ``EvaluableGraph`` and evaluate it (as the README shows)."""
    from modeci_mdf.execution_engine import EvaluableGraph

    from mdf_loops.model import graph_interface

    graph = model.graphs[0]
    interface = graph_interface(graph)
    engine = EvaluableGraph(graph)
    engine.evaluate(initializer={interface.inputs[name]: value for name, value in inputs.items()})
    return {name: engine.enodes[node].evaluable_outputs[port].curr_value
            for name, (node, port) in interface.outputs.items()}


def _jit_runners(work: Workload, model) -> dict[str, tuple[Callable, int]]:
    """The JAX backend and hand-written JAX and PyTensor peers, where installed."""
    from peers import jax_peer, pytensor_peer

    runners = {}
    hand = jax_peer(work)
    if hand is not None:
        from mdf_loops.backends.jax import compile as jax_compile

        runners["mdf_loops jax"] = (lambda: mdf_loops.run(model, work.inputs, backend="jax"), 0)
        compiled = []  # compiled on the first call, so that call counts as compile time

        def jax_model():
            if not compiled:
                compiled.append(jax_compile(model, work.inputs, limits=mdf_loops.safety.Limits()))
            return compiled[0].run(work.inputs)

        runners["mdf_loops JaxModel"] = (jax_model, 0)
        runners["jax.lax (hand-written)"] = (hand, 0)
    pytensor = pytensor_peer(work)
    if pytensor is not None:
        runners["pytensor scan"] = (pytensor, 0)
    return runners


_COMPILED = ("mdf_loops jax", "mdf_loops JaxModel", "jax.lax (hand-written)", "pytensor scan")


def _compile_ms(fn: Callable) -> float:
    """How much longer the first call takes than the second: the compilation."""
    start = time.perf_counter()
    fn()
    first = time.perf_counter() - start
    start = time.perf_counter()
    fn()
    return max(first - (time.perf_counter() - start), 0.0) * 1e3


def measure(work: Workload, runs: int = 5, slow_runs: int = 1, memory: bool = True,
            skip: tuple[str, ...] = ()) -> list[Row]:
    """Time every runner on one workload; check mdf-loops' outputs against numpy's."""
    model = mdf_loops.onnx_to_mdf(work.model)
    expected = work.numpy_loop(work.inputs)
    runners = {k: v for k, v in _runners(work, model, slow_runs).items() if k not in skip}
    compile_ms = {k: _compile_ms(fn) for k, (fn, _) in runners.items()
                  if k in _COMPILED + ("mdf_loops onnxruntime",)}
    times = _time_interleaved(runners, runs)
    rows = []
    for name, (fn, _) in runners.items():
        row = Row(work.name, name, statistics.median(times[name]) * 1e3, len(times[name]),
                  compile_ms=compile_ms.get(name), best_ms=min(times[name]) * 1e3)
        if name.startswith("mdf_loops") or name in _COMPILED or name == STOCK_ENGINE:
            outputs = fn()
            outputs = list(outputs.values()) if isinstance(outputs, dict) else list(outputs)
            row.correct = all(np.allclose(a, b, rtol=1e-4, atol=1e-4)
                              for a, b in zip(outputs, expected))
        if memory:
            row.peak_python_mb = _peak_mb(fn)
        rows.append(row)
    base = next((r.median_ms for r in rows if r.runner == "onnxruntime"), None)
    reference = next((r.median_ms for r in rows if r.runner == "onnx.reference"), None)
    for row in rows:
        row.ratio_to_onnxruntime = row.median_ms / base if base else None
        row.ratio_to_reference = row.median_ms / reference if reference else None
    return rows


_MEMORY_PROBE = """
import json, resource, sys
import numpy as np
import mdf_loops
from mdf_loops.workloads import running_sum
steps, backend = int(sys.argv[1]), sys.argv[2]
work = running_sum(steps)
model = mdf_loops.onnx_to_mdf(work.model)
mdf_loops.run(model, running_sum(3).inputs, backend=backend)  # compile and warm up on 3 steps
def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 1e6
import threading, time
before = rss_mb()
peak = [before]
done = threading.Event()
def sample():
    while not done.is_set():
        peak[0] = max(peak[0], rss_mb())
        time.sleep(0.0005)
sampler = threading.Thread(target=sample)
sampler.start()
outputs = mdf_loops.run(model, work.inputs, backend=backend)
done.set()
sampler.join()
peak = max(peak[0], rss_mb())
data = (work.inputs["x"].nbytes + outputs["partial"].nbytes) / 1e6
print(json.dumps({"steps": steps, "backend": backend, "growth_mb": peak - before,
                  "inputs_outputs_mb": data}))
"""


def memory_growth(steps: int, backend: str) -> dict:
    """Peak resident memory a running-sum Scan of ``steps`` adds, in a fresh process.

    Compared with the size of its input and output arrays: a loop that keeps no
    per-step objects needs a small constant multiple of them.
    """
    import subprocess

    result = subprocess.run([sys.executable, "-c", _MEMORY_PROBE, str(steps), backend],
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def _print(rows: list[Row]) -> None:
    header = (f"{'workload':<22}{'runner':<24}{'median ms':>11}{'x ORT':>9}{'x ref':>9}"
              f"{'peak MB':>9}{'compile ms':>12}  ok")
    print(header)
    print("-" * len(header))
    for r in rows:
        ratio = f"{r.ratio_to_onnxruntime:.2f}" if r.ratio_to_onnxruntime is not None else "-"
        to_reference = f"{r.ratio_to_reference:.2f}" if r.ratio_to_reference is not None else "-"
        peak = f"{r.peak_python_mb:.1f}" if r.peak_python_mb is not None else "-"
        ok = {True: "yes", False: "NO", None: ""}[r.correct]
        compiled = f"{r.compile_ms:.0f}" if r.compile_ms is not None else "-"
        print(f"{r.workload:<22}{r.runner:<24}{r.median_ms:>11.2f}{ratio:>9}{to_reference:>9}"
              f"{peak:>9}{compiled:>12}  {ok}")


def _print_jax_ratios(rows: list[Row]) -> None:
    """The JAX backend against the hand-written JAX loop and onnxruntime, per workload."""
    by = {(r.workload, r.runner): r for r in rows}
    for workload in dict.fromkeys(r.workload for r in rows):
        hand = by.get((workload, "jax.lax (hand-written)"))
        for runner in ("mdf_loops jax", "mdf_loops JaxModel"):
            _print_jax_ratio(by, workload, by.get((workload, runner)), hand)


def _print_jax_ratio(by: dict, workload: str, ours: Row | None, hand: Row | None) -> None:
    ort = by.get((workload, "onnxruntime"))
    if ours is None or hand is None or ort is None:
        return
    print(f"{workload}: {ours.runner} / hand-written jax.lax = "
          f"{ours.median_ms / hand.median_ms:.2f} (medians), "
          f"{ours.best_ms / hand.best_ms:.2f} (best runs); onnxruntime / {ours.runner} = "
          f"{ort.median_ms / ours.median_ms:.1f} (medians), "
          f"{ort.best_ms / ours.best_ms:.1f} (best runs); compiled in {ours.compile_ms:.0f} ms")


def _synchronous_jax() -> None:
    """Run JAX computations on the calling thread (this process only).

    With asynchronous dispatch each call hands its work to an XLA worker thread;
    on a loaded machine, waking it costs milliseconds after other work has run,
    which would time the operating system rather than the loop.
    """
    try:
        import jax
    except ImportError:
        return
    jax.config.update("jax_cpu_enable_async_dispatch", False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/loops.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per fast runner (median)")
    parser.add_argument("--slow-runs", type=int, default=3,
                        help="timed runs of the scheduler and onnx.reference")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes (a smoke test of the benchmark itself)")
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc runs")
    parser.add_argument("--json", metavar="FILE", help="also write the table as JSON")
    parser.add_argument("--memory-steps", type=int, default=1_000_000,
                        help="steps of the memory probe on onnxruntime (the scheduler probe "
                             "uses 1/50 of them); 0 skips it")
    parser.add_argument("--jax-async", action="store_true",
                        help="keep JAX's asynchronous CPU dispatch (by default the benchmark "
                             "process turns it off, for both JAX rows alike)")
    args = parser.parse_args(argv)
    if not args.jax_async:
        _synchronous_jax()

    scale = 0.01 if args.quick else 1.0
    size = lambda n: max(int(n * scale), 2)  # noqa: E731
    workloads = [
        elman_rnn(size(1000)),
        running_sum(size(20_000)),
        while_loop(size(5000)),
        elman_rnn(size(100)),
        elman_rnn(size(10_000)),
    ]
    rows: list[Row] = []
    for work in workloads:
        rows += measure(work, args.runs, args.slow_runs, memory=not args.no_memory)
        print(f"measured {work.name}", file=sys.stderr)
    _print(rows)
    _print_jax_ratios(rows)
    memory = []
    if args.memory_steps:
        steps = size(args.memory_steps)
        for n, backend in ((steps, "auto"), (max(steps // 50, 2), "scheduler"),
                           (max(steps // 200, 2), "scheduler")):
            memory.append(memory_growth(n, backend))
        print()
        print(f"{'running sum steps':>18}{'backend':>12}{'peak growth MB':>16}{'in+out MB':>11}{'ratio':>8}")
        for m in memory:
            ratio = m["growth_mb"] / m["inputs_outputs_mb"]
            print(f"{m['steps']:>18,}{m['backend']:>12}{m['growth_mb']:>16.1f}"
                  f"{m['inputs_outputs_mb']:>11.2f}{ratio:>8.1f}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"timings": [asdict(r) for r in rows], "memory": memory}, handle, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

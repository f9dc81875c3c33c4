"""Benchmark: stock modeci-mdf's time loop vs ``mdf_loops.simulate`` vs a plain numpy loop.

``python benchmarks/timeloops.py [--steps 1000 10000 100000] [--stock-max 1000]``

For FitzHugh-Nagumo and the integrate-and-fire network of ``examples/timeloops/time_loops.py``:

* **stock**: ``EvaluableGraph.evaluate(time_increment=dt)`` in a loop, run by
  ``mdf_loops/timeloop/stock_loop.py`` in a fresh interpreter that does not import
  mdf_loops (the loop is timed inside it). Measured up to ``--stock-max`` steps and
  extrapolated linearly beyond (marked ``~``): it costs milliseconds a step.
* **simulate <backend>**: ``mdf_loops.simulate`` on the time-loop model (converted
  once; the conversion time is its own row), median of several runs.
* **simulate auto, first call**: ``mdf_loops.simulate(path, dt=..., steps=...)`` on the
  stateful model file, as a new user calls it: loading, checking, conversion, writing
  out and compiling the Python loop, and the run (every call does all of it; median).
* **numpy loop**: the same equations written by hand as a Python loop over floats,
  in modeci-mdf's update order.

Every simulate result is checked against the numpy loop. Peak memory (tracemalloc,
Python side) is measured at ``--memory-steps``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

import mdf_loops

ROOT = Path(__file__).resolve().parent.parent
STOCK_LOOP = ROOT / "mdf_loops" / "timeloop" / "stock_loop.py"


def _examples():
    script = ROOT / "examples" / "timeloops" / "time_loops.py"
    spec = importlib.util.spec_from_file_location("time_loops", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fhn_numpy(steps: int, dt: float) -> dict:
    v, w = -1.0, 1.0
    vs, ws = np.empty(steps), np.empty(steps)
    for k in range(steps):
        if k:
            v = v + (v - v**3 / 3 - w + 0.5) * dt
            w = w + ((v + 0.7 - 0.8 * w) / 12.5) * dt
        vs[k], ws[k] = v, w
    return {"fn.V": vs, "fn.W": ws}


def iaf_numpy(steps: int, dt: float) -> dict:
    tau, v_rest, v_th, v_reset, tau_syn, w_syn, level = 10.0, -70.0, -55.0, -75.0, 5.0, 60.0, 20.0
    v1, v2, g = -70.0, -70.0, 0.0
    out = {k: np.empty(steps) for k in ("cell1.v", "synapse.g", "cell2.v", "cell2.spike")}
    for k in range(steps):
        if k:
            new1 = v1 + ((-(v1 - v_rest) + level) / tau) * dt
            v1 = v_reset if v1 >= v_th else new1
        spike1 = 1.0 if v1 >= v_th else 0.0
        if k:
            decayed = g + (-g / tau_syn) * dt
            g = g + w_syn if spike1 > 0 else decayed
        elif spike1 > 0:
            g = g + w_syn
        if k:
            new2 = v2 + ((-(v2 - v_rest) + g) / tau) * dt
            v2 = v_reset if v2 >= v_th else new2
        out["cell1.v"][k], out["synapse.g"][k], out["cell2.v"][k] = v1, g, v2
        out["cell2.spike"][k] = 1.0 if v2 >= v_th else 0.0
    return out


def stock_seconds(path: Path, dt: float, steps: int, record: list[str]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, str(STOCK_LOOP), str(path), "--dt", repr(dt), "--steps",
                        str(steps), "--record", *record, "-o", f"{tmp}/o.npz"], check=True,
                       capture_output=True, cwd=tmp)
        return float(np.load(f"{tmp}/o.npz")["__seconds__"])


def _median(fn, runs: int) -> float:
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _peak_mb(fn) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


CASES = {"fitzhugh_nagumo": fhn_numpy, "iaf_network": iaf_numpy}


def run(steps_list: list[int], stock_max: int, scheduler_max: int, memory_steps: int,
        runs: int) -> dict:
    ex = _examples()
    rows, memory = [], []
    for name, numpy_loop in CASES.items():
        dt, _, record = ex.SIMULATIONS[name]
        path = ROOT / "examples" / "timeloops" / f"{name}.json"
        start = time.perf_counter()
        loop = mdf_loops.to_time_loop(path, dt=dt, steps=max(steps_list), record=record)
        rows.append({"model": name, "steps": max(steps_list), "runner": "to_time_loop (once)",
                     "seconds": time.perf_counter() - start, "measured": True})
        stock_per_step = None  # from the largest measured run, for the extrapolation
        scheduler_per_step = None
        for steps in sorted(steps_list):
            found = {}
            reference = numpy_loop(steps, dt)
            found["numpy loop"] = (_median(lambda: numpy_loop(steps, dt), runs), True)
            if steps <= stock_max or stock_per_step is None:
                seconds = stock_seconds(path, dt, steps, record)
                found["stock modeci-mdf"] = (seconds, True)
                stock_per_step = seconds / steps
            else:
                found["stock modeci-mdf"] = (stock_per_step * steps, False)
            first = mdf_loops.simulate(path, dt=dt, steps=steps, record=record)
            for ref in record:
                np.testing.assert_allclose(first[ref], reference[ref], rtol=1e-9, atol=1e-9)
            found["simulate auto, first call"] = (_median(
                lambda: mdf_loops.simulate(path, dt=dt, steps=steps, record=record), runs), True)
            for backend in ("auto", "python", "onnxruntime", "scheduler"):
                if backend == "scheduler" and steps > scheduler_max:
                    found["simulate scheduler"] = (scheduler_per_step * steps, False)
                    continue
                result = mdf_loops.simulate(loop, steps=steps, backend=backend)
                for ref in record:
                    np.testing.assert_allclose(result[ref], reference[ref], rtol=1e-9, atol=1e-9,
                                               err_msg=f"{name} {ref} {backend}")
                seconds = _median(lambda: mdf_loops.simulate(loop, steps=steps, backend=backend),
                                  1 if backend == "scheduler" else runs)
                if backend == "scheduler":
                    scheduler_per_step = seconds / steps
                found[f"simulate {backend}"] = (seconds, True)
            stock = found["stock modeci-mdf"][0]
            numpy_time = found["numpy loop"][0]
            for runner, (seconds, measured) in found.items():
                rows.append({"model": name, "steps": steps, "runner": runner, "seconds": seconds,
                             "measured": measured, "x_faster_than_stock": stock / seconds,
                             "x_numpy_time": seconds / numpy_time})
        if memory_steps:
            for runner, fn in (
                    ("simulate python", lambda: mdf_loops.simulate(loop, steps=memory_steps,
                                                                   backend="python")),
                    ("simulate onnxruntime", lambda: mdf_loops.simulate(
                        loop, steps=memory_steps, backend="onnxruntime")),
                    ("numpy loop", lambda: numpy_loop(memory_steps, dt))):
                memory.append({"model": name, "steps": memory_steps, "runner": runner,
                               "peak_python_mb": _peak_mb(fn),
                               "recorded_mb": 8 * memory_steps * (len(record) + 1) / 1e6})
    return {"timings": rows, "memory": memory, "stock_measured_up_to": stock_max}


def _print(table: dict) -> None:
    print(f"{'model':16s} {'steps':>7s} {'runner':26s} {'seconds':>10s} {'x stock':>9s} "
          f"{'x numpy time':>12s}")
    for r in table["timings"]:
        mark = "" if r["measured"] else "~"
        faster = f"{r['x_faster_than_stock']:.0f}" if "x_faster_than_stock" in r else ""
        numpy_ratio = f"{r['x_numpy_time']:.2f}" if "x_numpy_time" in r else ""
        print(f"{r['model']:16s} {r['steps']:7d} {r['runner']:26s} {mark + format(r['seconds'], '.4g'):>10s} "
              f"{faster:>9s} {numpy_ratio:>12s}")
    print(f"~ extrapolated linearly from the measured steps (stock measured up to "
          f"{table['stock_measured_up_to']} steps)")
    for r in table["memory"]:
        print(f"{r['model']:16s} {r['steps']:7d} {r['runner']:22s} peak {r['peak_python_mb']:.1f} MB "
              f"(recorded values: {r['recorded_mb']:.1f} MB)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--stock-max", type=int, default=1000)
    parser.add_argument("--scheduler-max", type=int, default=1000)
    parser.add_argument("--memory-steps", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", help="also write the table as JSON")
    args = parser.parse_args(argv)
    table = run(args.steps, args.stock_max, args.scheduler_max, args.memory_steps, args.runs)
    _print(table)
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

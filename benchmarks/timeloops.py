"""Benchmark: stock modeci-mdf's time loop vs ``mdf_loops.simulate`` vs a plain numpy loop.

``python benchmarks/timeloops.py [--steps 1000 10000 100000] [--stock-max 1000] [--repeat 3]``

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
  ``mdf_loops.clear_compiled()`` runs before each timed call (outside the timing), so
  no compiled loop or parsed expression is kept from the call before: each costs what
  the first call in a new process costs, once the imports are done. Beside the deciding
  row stands, not deciding, the call right after stock's run (the warm-up of the five):
  after any wait the caches are cold and a call costs about twice.
* **numpy loop**: the same equations written by hand as a Python loop over floats,
  in modeci-mdf's update order, giving what ``simulate`` gives: the recorded values
  and the time of each step.

Every simulate result is checked against the numpy loop. Peak memory (tracemalloc,
Python side) is measured at ``--memory-steps``. Stock and the scheduler beyond their
``--stock-max``/``--scheduler-max`` are extrapolated from one run at that many steps.

The last lines, DECIDING ROWS, hold the targets: the first call against stock from 2,000
steps, ``auto`` against the numpy loop from 10^4 steps (each ``--repeat`` times,
interleaved, with the median and the range of the ratio), and peak memory at
``--memory-steps`` against the recorded values' size.

``--stock-models FOLDER`` (a checkout's ``examples``) adds the first call against stock on
some of ModECI/MDF's own stateful files (``STOCK_FILES``), at the smallest ``--steps``:
not deciding rows, as the repository does not hold the files.
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
    ts, vs, ws = np.empty(steps), np.empty(steps), np.empty(steps)
    for k in range(steps):
        if k:
            v = v + (v - v**3 / 3 - w + 0.5) * dt
            w = w + ((v + 0.7 - 0.8 * w) / 12.5) * dt
        ts[k], vs[k], ws[k] = k * dt, v, w
    return {"time": ts, "fn.V": vs, "fn.W": ws}


def iaf_numpy(steps: int, dt: float) -> dict:
    tau, v_rest, v_th, v_reset, tau_syn, w_syn, level = 10.0, -70.0, -55.0, -75.0, 5.0, 60.0, 20.0
    v1, v2, g = -70.0, -70.0, 0.0
    out = {k: np.empty(steps) for k in ("time", "cell1.v", "synapse.g", "cell2.v", "cell2.spike")}
    for k in range(steps):
        out["time"][k] = k * dt
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


def _median(fn, runs: int, cold: bool = False) -> float:
    """Median seconds of ``runs`` calls after a warm-up; ``cold``: every cache of
    compiled code emptied before each call (outside the timing)."""
    return _warm_up_and_median(fn, runs, cold)[1]


def _warm_up_and_median(fn, runs: int, cold: bool = False) -> tuple[float, float]:
    """The warm-up call's seconds, and the median of the ``runs`` calls after it."""
    if cold:
        mdf_loops.clear_compiled()
    start = time.perf_counter()
    fn()
    warm_up = time.perf_counter() - start
    times = []
    for _ in range(runs):
        if cold:
            mdf_loops.clear_compiled()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return warm_up, statistics.median(times)


def _peak_mb(fn) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


CASES = {"fitzhugh_nagumo": fhn_numpy, "iaf_network": iaf_numpy}

#: the targets of the deciding rows (issue: time loops on MDF's own models)
FIRST_CALL_TARGET = 300.0  # simulate auto, first call, x faster than stock, from 2,000 steps
NUMPY_TARGET = 1.0  # simulate auto's time / the numpy loop's, from 10^4 steps
MEMORY_TARGET = 1.2  # peak Python-side memory / recorded values' size at --memory-steps
FIRST_CALL_FROM = 2000  # the steps from which the first-call target holds
NUMPY_FROM = 10_000  # the steps from which the numpy-loop target holds


def _spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def _per_step(cache: dict, key: str, limit: int, steps: int, measure) -> tuple[float, bool]:
    """Seconds for ``steps``: measured when ``steps <= limit``, else extrapolated from one
    run at ``limit`` steps (measured once per model and kept in ``cache``)."""
    if steps <= limit:
        seconds = measure(steps)
        cache[key] = seconds / steps
        return seconds, True
    if key not in cache:
        cache[key] = measure(limit) / limit
    return cache[key] * steps, False


def _check(result, reference: dict, record: list[str], what: str) -> None:
    for ref in record:
        np.testing.assert_allclose(result[ref], reference[ref], rtol=1e-9, atol=1e-9,
                                   err_msg=f"{what} {ref}")
    np.testing.assert_allclose(result.time, reference["time"], rtol=1e-9, atol=1e-9,
                               err_msg=f"{what} time")


def _measure_steps(name, path, loop, steps, dt, record, limits, runs, per_step) -> dict:
    """Every runner at ``steps``: seconds and whether measured (else extrapolated)."""
    numpy_loop = CASES[name]
    reference = numpy_loop(steps, dt)
    found = {"numpy loop": (_median(lambda: numpy_loop(steps, dt), runs), True)}
    found["stock modeci-mdf"] = _per_step(per_step, "stock", limits["stock"], steps,
                                          lambda n: stock_seconds(path, dt, n, record))
    _check(mdf_loops.simulate(path, dt=dt, steps=steps, record=record), reference, record,
           f"{name} first call")
    found["simulate auto, first call"] = (_median(
        lambda: mdf_loops.simulate(path, dt=dt, steps=steps, record=record), runs, cold=True),
        True)
    for backend in ("auto", "python", "onnxruntime", "scheduler"):
        def timed(n, backend=backend):
            _check(mdf_loops.simulate(loop, steps=n, backend=backend), numpy_loop(n, dt),
                   record, f"{name} {backend}")
            return _median(lambda: mdf_loops.simulate(loop, steps=n, backend=backend),
                           1 if backend == "scheduler" else runs)
        if backend == "scheduler":
            found["simulate scheduler"] = _per_step(per_step, "scheduler", limits["scheduler"],
                                                    steps, timed)
        else:
            found[f"simulate {backend}"] = (timed(steps), True)
    return found


def _first_call_ratios(name, path, steps, dt, record, stock_max, runs, repeat) -> dict:
    """The deciding row: stock's seconds / simulate's first call's, ``repeat`` times, each
    stock run next to a median of ``runs`` first calls (interleaved, so load shifts both)."""
    ratios, stock_runs, first_runs, after_waits = [], [], [], []
    for _ in range(repeat):
        stock = stock_seconds(path, dt, min(steps, stock_max), record) * steps / min(
            steps, stock_max)
        after_wait, first = _warm_up_and_median(
            lambda: mdf_loops.simulate(path, dt=dt, steps=steps, record=record), runs, cold=True)
        stock_runs.append(stock)
        first_runs.append(first)
        after_waits.append(after_wait)
        ratios.append(stock / first)
    return {"model": name, "steps": steps, "stock_measured": steps <= stock_max,
            "stock_seconds": _spread(stock_runs), "first_call_seconds": _spread(first_runs),
            "x_faster_than_stock": _spread(ratios), "target": FIRST_CALL_TARGET,
            # the warm-up: the first call after the wait for stock's run (not deciding)
            "first_call_after_wait_seconds": _spread(after_waits)}


def _numpy_ratios(name, loop, steps, dt, runs, repeat) -> dict:
    """The deciding row: simulate auto's time / the numpy loop's, interleaved ``repeat``
    times (each a median of ``runs``)."""
    numpy_loop = CASES[name]
    ratios = []
    for _ in range(repeat):
        auto = _median(lambda: mdf_loops.simulate(loop, steps=steps), runs)
        ratios.append(auto / _median(lambda: numpy_loop(steps, dt), runs))
    return {"model": name, "steps": steps, "x_numpy_time": _spread(ratios),
            "target": NUMPY_TARGET}


def _memory_rows(name, loop, dt, record, memory_steps) -> list[dict]:
    numpy_loop = CASES[name]
    rows = []
    for runner, fn in (
            ("simulate python", lambda: mdf_loops.simulate(loop, steps=memory_steps,
                                                           backend="python")),
            ("simulate onnxruntime", lambda: mdf_loops.simulate(
                loop, steps=memory_steps, backend="onnxruntime")),
            ("numpy loop", lambda: numpy_loop(memory_steps, dt))):
        recorded = 8 * memory_steps * (len(record) + 1) / 1e6
        peak = _peak_mb(fn)
        rows.append({"model": name, "steps": memory_steps, "runner": runner,
                     "peak_python_mb": peak, "recorded_mb": recorded,
                     "x_recorded": peak / recorded, "target": MEMORY_TARGET})
    return rows


def run(steps_list: list[int], stock_max: int, scheduler_max: int, memory_steps: int,
        runs: int, repeat: int = 1) -> dict:
    ex = _examples()
    rows, memory, deciding = [], [], []
    limits = {"stock": stock_max, "scheduler": scheduler_max}
    for name in CASES:
        dt, _, record = ex.SIMULATIONS[name]
        path = ROOT / "examples" / "timeloops" / f"{name}.json"
        start = time.perf_counter()
        loop = mdf_loops.to_time_loop(path, dt=dt, steps=max(steps_list), record=record)
        rows.append({"model": name, "steps": max(steps_list), "runner": "to_time_loop (once)",
                     "seconds": time.perf_counter() - start, "measured": True})
        per_step: dict = {}  # stock's and the scheduler's seconds a step, for extrapolation
        for steps in sorted(steps_list):
            found = _measure_steps(name, path, loop, steps, dt, record, limits, runs, per_step)
            stock, numpy_time = found["stock modeci-mdf"][0], found["numpy loop"][0]
            for runner, (seconds, measured) in found.items():
                rows.append({"model": name, "steps": steps, "runner": runner, "seconds": seconds,
                             "measured": measured, "x_faster_than_stock": stock / seconds,
                             "x_numpy_time": seconds / numpy_time})
            if steps >= FIRST_CALL_FROM:
                deciding.append(_first_call_ratios(name, path, steps, dt, record, stock_max,
                                                   runs, repeat))
            if steps >= NUMPY_FROM:
                deciding.append(_numpy_ratios(name, loop, steps, dt, runs, repeat))
        if memory_steps:
            memory += _memory_rows(name, loop, dt, record, memory_steps)
    return {"timings": rows, "memory": memory, "deciding": deciding,
            "stock_measured_up_to": stock_max}


#: ModECI/MDF's own stateful files (``--stock-models``, a checkout's ``examples``) and a
#: dt each runs without blowing up; every output port recorded
STOCK_FILES = {"MDF/FN.mdf.json": 5e-5, "NeuroML/FN.mdf.json": 5e-5,
               "MDF/NewtonCoolingModel.json": 0.01, "MDF/States.json": 0.01,
               "MDF/RNN/IAF_net2.json": 0.01, "NeuroML/IzhikevichTest.mdf.json": 5e-5}


def stock_file_rows(folder: Path, steps: int, stock_max: int, runs: int,
                    repeat: int) -> list[dict]:
    """The first call (not trusted, as a user calls it on a file) against stock's loop on
    ModECI/MDF's own files: not deciding (the repository does not hold them)."""
    from modeci_mdf.utils import load_mdf

    rows = []
    for name, dt in STOCK_FILES.items():
        path = folder / name
        if not path.exists():
            continue
        graph = load_mdf(str(path)).graphs[0]
        record = [f"{n.id}.{p.id}" for n in graph.nodes for p in n.output_ports]
        row = _first_call_ratios(name, path, steps, dt, record, stock_max, runs, repeat)
        rows.append(row)
    return rows


def _print(table: dict) -> None:
    print(f"{'model':16s} {'steps':>7s} {'runner':26s} {'seconds':>10s} {'x stock':>9s} "
          f"{'x numpy time':>12s}")
    for r in table["timings"]:
        mark = "" if r["measured"] else "~"
        faster = f"{r['x_faster_than_stock']:.0f}" if "x_faster_than_stock" in r else ""
        numpy_ratio = f"{r['x_numpy_time']:.2f}" if "x_numpy_time" in r else ""
        seconds = mark + format(r["seconds"], ".4g")
        print(f"{r['model']:16s} {r['steps']:7d} {r['runner']:26s} {seconds:>10s} "
              f"{faster:>9s} {numpy_ratio:>12s}")
    print(f"~ extrapolated linearly from the measured steps (stock measured up to "
          f"{table['stock_measured_up_to']} steps)")
    for r in table["memory"]:
        print(f"{r['model']:16s} {r['steps']:7d} {r['runner']:22s} "
              f"peak {r['peak_python_mb']:.1f} MB (recorded values: {r['recorded_mb']:.1f} MB)")
    _print_deciding(table)
    if table.get("stock_files"):
        print("\nMODECI/MDF'S OWN FILES (first call, not trusted, vs stock's loop; not deciding)")
        for r in table["stock_files"]:
            x, first = r["x_faster_than_stock"], r["first_call_seconds"]
            print(f"  {r['model']:34s} {r['steps']:>6d} steps: {x['median']:7.0f}x "
                  f"[{x['min']:.0f}-{x['max']:.0f}], first call {first['median'] * 1e3:.2f} ms, "
                  f"stock {r['stock_seconds']['median']:.2f} s")


def _print_deciding(table: dict) -> None:
    """The rows that decide the targets, with their spread over --repeat interleaved runs."""
    print("\nDECIDING ROWS (median [min-max] over the repeats; targets in brackets)")
    for r in table["deciding"]:
        if "x_faster_than_stock" in r:
            x, first = r["x_faster_than_stock"], r["first_call_seconds"]
            stock = "" if r["stock_measured"] else " (stock extrapolated)"
            verdict = "MET" if x["median"] >= r["target"] else "NOT MET"
            print(f"  first call vs stock  {r['model']:16s} {r['steps']:>8d} steps: "
                  f"{x['median']:7.0f}x [{x['min']:.0f}-{x['max']:.0f}], first call "
                  f"{first['median'] * 1e3:.2f} ms (target >= {r['target']:.0f}x) {verdict}{stock}")
            waited = r["first_call_after_wait_seconds"]["median"]
            print(f"{'':23s}(not deciding: the call right after stock's run, the caches "
                  f"cold, {waited * 1e3:.2f} ms, {r['stock_seconds']['median'] / waited:.0f}x)")
        else:
            x = r["x_numpy_time"]
            verdict = "MET" if x["median"] <= r["target"] else "NOT MET"
            print(f"  auto / numpy loop    {r['model']:16s} {r['steps']:>8d} steps: "
                  f"{x['median']:7.2f}x [{x['min']:.2f}-{x['max']:.2f}] "
                  f"(target <= {r['target']:.1f}x) {verdict}")
    for r in table["memory"]:
        if r["runner"] == "simulate python":
            verdict = "MET" if r["x_recorded"] <= r["target"] else "NOT MET"
            print(f"  peak / recorded      {r['model']:16s} {r['steps']:>8d} steps: "
                  f"{r['x_recorded']:7.2f}x (target <= {r['target']:.1f}x) {verdict}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--stock-max", type=int, default=1000)
    parser.add_argument("--scheduler-max", type=int, default=1000)
    parser.add_argument("--memory-steps", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5, help="calls per median")
    parser.add_argument("--repeat", type=int, default=3,
                        help="interleaved repeats of the deciding rows (their spread)")
    parser.add_argument("--json", help="also write the table as JSON")
    parser.add_argument("--stock-models", type=Path,
                        help="ModECI/MDF's examples folder: also time its own stateful files")
    args = parser.parse_args(argv)
    table = run(args.steps, args.stock_max, args.scheduler_max, args.memory_steps, args.runs,
                args.repeat)
    if args.stock_models:
        table["stock_files"] = stock_file_rows(args.stock_models, min(args.steps),
                                               args.stock_max, args.runs, args.repeat)
    _print(table)
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

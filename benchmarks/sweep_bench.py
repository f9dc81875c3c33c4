"""Benchmark: runs per second of ``mdf_loops.sweep`` on local Dask workers vs a loop of ``run``.

Run ``python benchmarks/sweep_bench.py`` (``--help`` for options). Rows:

* ``ddm subjects``: the drift-diffusion example, one run per simulated subject
  (its own noise sequence); the sequential peer is ``run`` on each input.
* ``ddm drift``: the same, each subject with its own drift rate, a parameter
  inside the loop body; the sequential peer sets the parameter on a copy of the
  model and runs it (each copy compiles once; the sweep compiles once per worker).
* ``rnn T=...``: the Elman RNN example on input sequences of ``--steps`` steps
  (``--scheduler-steps`` on the scheduler backend).

Each row runs on each of ``--backends`` (onnxruntime: runs of about a
millisecond, where a sweep's fixed costs show; scheduler: tens of milliseconds;
jax: a batch of settings is one vectorised call on each worker, against a loop
of ``run`` on jax), and on local clusters of each of ``--workers`` worker
processes (default 1, 2 and 4), in one run of the benchmark: the ratios of one
invocation were measured under the same load.

The cluster is started, and mdf_loops imported on its workers, before timing:
the sequential peer has imported it too. Each model's first compilation is timed
on both sides (each worker compiles its own), unless ``--warm`` keeps compiled
models between rounds on both sides (after one untimed round of each). ``--repeat``
rounds, the two sides interleaved: each row gives the median runs/s of each side and
the median and spread of the rounds' ratios. CPU time per run of the loop, of this
process during the sweep (the client and the local scheduler) and of the workers
shows the sweep's overhead even on a loaded machine, where wall-clock ratios say
little. The last lines print how each workload scales with workers (``SCALING ROW``:
runs/s at 2 workers over runs/s at 1 worker, and the same of the sweep/loop ratios, which
the load of the moment cancels in) and the rows that decide issue 28's target (``ddm
subjects`` on 2 workers: the sweep at least twice the loop's runs/s).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
from modeci_mdf.mdf import Model

import mdf_loops
from mdf_loops.backends.onnxruntime.compiled import clear_compiled

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _ddm_copy(drift: float) -> Model:
    document = json.loads((EXAMPLES / "drift_diffusion.json").read_text())
    body = document["drift_diffusion"]["graphs"]["main"]["nodes"]["ddm"]["parameters"]["body"]
    body["value"]["graph_ddm_step"]["nodes"]["accumulate"]["parameters"]["drift"]["value"] = drift
    return Model.from_dict(document)


def _workloads(backend: str, runs_ddm: int, runs_rnn: int, steps: int, runs_copies: int):
    """(name, runs, sequential runs, the sequential loop, the sweep's keywords)."""
    rng = np.random.default_rng(0)
    noises = [rng.standard_normal(200) for _ in range(runs_ddm)]
    drifts = np.linspace(0.0, 2.0, runs_ddm)
    ddm = str(EXAMPLES / "drift_diffusion.json")
    model = mdf_loops.load_model(ddm)
    sequences = [{"x": rng.normal(size=(steps, 3)), "h0": np.zeros(5)} for _ in range(runs_rnn)]
    rnn = mdf_loops.load_model(EXAMPLES / "elman_rnn.json")
    copies = list(zip(drifts, noises))[:runs_copies]
    return [
        ("ddm subjects", runs_ddm, runs_ddm,
         lambda: [mdf_loops.run(model, {"noise": n}, backend=backend) for n in noises],
         dict(model=ddm, samples=[{"noise": n} for n in noises])),
        # the sequential peer runs the first runs_copies settings (runs/s is the measure)
        ("ddm drift", runs_ddm, len(copies),
         lambda: [mdf_loops.run(_ddm_copy(float(v)), {"noise": n}, backend=backend)
                  for v, n in copies],
         dict(model=ddm, samples=[{"noise": n, "accumulate.drift": v}
                                  for n, v in zip(noises, drifts)])),
        (f"rnn T={steps}", runs_rnn, runs_rnn,
         lambda: [mdf_loops.run(rnn, s, backend=backend) for s in sequences],
         dict(model=str(EXAMPLES / "elman_rnn.json"), samples=sequences)),
    ]


def _forget() -> None:
    import importlib

    importlib.import_module("mdf_loops.sweep.worker")._MODELS.clear()
    importlib.import_module("mdf_loops.sweep.one_call")._CHECKED.clear()
    clear_compiled()


def _cpu_now(client) -> tuple[float, float]:
    """CPU seconds so far of this process (the client and the local scheduler) and of
    all the workers."""
    return time.process_time(), sum(client.run(time.process_time).values())


def _measure(client, workers, name, runs, seq_runs, sequential, swept, args, warm) -> dict:
    """Rounds of the loop and the sweep, interleaved; the ratio of each round, and the
    medians and spreads over the rounds."""
    if warm:  # one round of each side untimed: both compile before the timed ones
        sequential()
        mdf_loops.sweep(swept["model"], samples=swept["samples"], client=client,
                        backend=swept["backend"])
    seq_rates, sweep_rates, ratios = [], [], []
    seq_cpu = client_cpu = workers_cpu = 0.0
    for _ in range(args.repeat):
        if not warm:
            clear_compiled()
        start, cpu = time.perf_counter(), time.process_time()
        sequential()
        seq_rates.append(seq_runs / (time.perf_counter() - start))
        seq_cpu += time.process_time() - cpu
        if not warm:
            client.run(_forget)  # nothing loaded or compiled on the workers
        cpu_before = _cpu_now(client)
        start = time.perf_counter()
        result = mdf_loops.sweep(swept["model"], samples=swept["samples"], client=client,
                                 backend=swept["backend"])
        sweep_rates.append(runs / (time.perf_counter() - start))
        cpu_after = _cpu_now(client)
        client_cpu += cpu_after[0] - cpu_before[0]
        workers_cpu += cpu_after[1] - cpu_before[1]
        ratios.append(sweep_rates[-1] / seq_rates[-1])
        assert (result["error"] == "").all(), name
    rounds = args.repeat
    row = {"workload": name, "runs": runs, "workers": workers, "warm": warm,
           "rounds": rounds,
           "sequential_runs_per_s": round(float(np.median(seq_rates)), 1),
           "sweep_runs_per_s": round(float(np.median(sweep_rates)), 1),
           "ratio_median": round(float(np.median(ratios)), 2),
           "ratio_min": round(min(ratios), 2), "ratio_max": round(max(ratios), 2),
           "sequential_cpu_ms_per_run": round(1000 * seq_cpu / (seq_runs * rounds), 3),
           "client_cpu_ms_per_run": round(1000 * client_cpu / (runs * rounds), 3),
           "workers_cpu_ms_per_run": round(1000 * workers_cpu / (runs * rounds), 3)}
    print(f"{name:26s} {runs:5d} runs, {workers} workers, {'warm' if warm else 'cold'}: "
          f"loop {row['sequential_runs_per_s']:8.1f} runs/s, sweep "
          f"{row['sweep_runs_per_s']:8.1f} runs/s, ratio x{row['ratio_median']} "
          f"(rounds {row['ratio_min']}-{row['ratio_max']}); CPU ms per run: loop "
          f"{row['sequential_cpu_ms_per_run']}, sweep's client+scheduler "
          f"{row['client_cpu_ms_per_run']}, workers {row['workers_cpu_ms_per_run']}",
          flush=True)
    return row


def _deciding(rows: list[dict]) -> None:
    """Print the rows that decide issue 28's target: a sweep on 2 workers at least twice
    the runs per second of the loop of ``run``."""
    decisive = [r for r in rows if r["workers"] == 2 and r["workload"].startswith("ddm subjects")]
    for row in decisive:
        verdict = "MET" if row["ratio_median"] >= 2 else "not met"
        print(f"DECIDING ROW: {row['workload']}, 2 workers, {'warm' if row['warm'] else 'cold'}:"
              f" sweep/loop = x{row['ratio_median']} median of {row['rounds']} rounds "
              f"(spread {row['ratio_min']}-{row['ratio_max']}); target x2: {verdict}")


def _scaling(rows: list[dict]) -> None:
    """Print how each workload scales: runs/s at 2 workers over runs/s at 1 worker (and
    at 4), the sweep's own and divided by the loop's in the same rounds (the load of the
    moment cancels in the second)."""
    by_key = {(r["workload"], r["warm"], r["workers"]): r for r in rows}
    for (workload, warm, workers), row in sorted(by_key.items()):
        one = by_key.get((workload, warm, 1))
        if workers == 1 or one is None:
            continue
        plain = row["sweep_runs_per_s"] / one["sweep_runs_per_s"]
        relative = row["ratio_median"] / one["ratio_median"]
        print(f"SCALING ROW: {workload}, {'warm' if warm else 'cold'}: runs/s at {workers} "
              f"workers / runs/s at 1 worker = x{plain:.2f} (sweep/loop ratios: "
              f"x{row['ratio_median']} / x{one['ratio_median']} = x{relative:.2f})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2,4",
                        help="comma-separated worker counts, one local cluster each")
    parser.add_argument("--repeat", type=int, default=3,
                        help="timed rounds per row (the median and spread are reported)")
    parser.add_argument("--ddm-runs", type=int, default=1000)
    parser.add_argument("--rnn-runs", type=int, default=200)
    parser.add_argument("--steps", type=int, default=1000, help="RNN sequence length")
    parser.add_argument("--scheduler-steps", type=int, default=100,
                        help="RNN sequence length on the scheduler backend (slower per step)")
    parser.add_argument("--copies", type=int, default=100,
                        help="settings the sequential 'ddm drift' peer runs")
    parser.add_argument("--backends", default="onnxruntime,scheduler",
                        help="comma-separated backends of run (onnxruntime, scheduler, jax)")
    parser.add_argument("--only", metavar="NAME", help="only the rows whose name starts so")
    parser.add_argument("--modes", default="cold",
                        help="comma-separated: cold (each round compiles afresh on both sides) "
                             "and/or warm (compiled models kept between rounds on both sides, "
                             "a cluster kept between sweeps, after one untimed round of each)")
    parser.add_argument("--warm", action="store_true", help="the same as --modes warm")
    parser.add_argument("--json", metavar="FILE", help="also write the rows to this file")
    args = parser.parse_args(argv)
    if args.warm:
        args.modes = "warm"

    rows = []
    for workers in [int(n) for n in args.workers.split(",")]:
        rows += _on_cluster(workers, args)
    _scaling(rows)
    _deciding(rows)
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


def _on_cluster(workers: int, args) -> list[dict]:
    """The rows measured on a local cluster of ``workers`` single-threaded worker processes."""
    from mdf_loops.sweep.cluster import local_cluster

    rows = []
    with local_cluster(workers) as client:  # the cluster sweep starts when given no client
        client.run(lambda: __import__("mdf_loops") and None)
        # warm-up: the sweep's own imports (xarray) happen once per process, not per sweep
        mdf_loops.sweep(EXAMPLES / "elman_rnn.json", samples=[{"x": np.ones((2, 3))}] * 2,
                        inputs={"h0": np.zeros(5)}, client=client)
        for backend in args.backends.split(","):
            steps = args.scheduler_steps if backend == "scheduler" else args.steps
            for name, runs, seq_runs, sequential, swept in _workloads(
                    backend, args.ddm_runs, args.rnn_runs, steps, args.copies):
                if args.only and not name.startswith(args.only):
                    continue
                for mode in args.modes.split(","):
                    rows.append(_measure(client, workers, f"{name} ({backend})", runs,
                                         seq_runs, sequential, dict(swept, backend=backend),
                                         args, warm=mode == "warm"))
    return rows


if __name__ == "__main__":
    sys.exit(main())

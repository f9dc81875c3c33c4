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
models between rounds on both sides. Best of ``--repeat`` rounds, the two sides interleaved. CPU time
per run (this process, which holds the scheduler, plus the workers) shows the
sweep's overhead even on a loaded machine, where wall-clock ratios say little.
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
    from mdf_loops.sweep import worker

    worker._MODELS.clear()
    clear_compiled()


def _measure(client, workers, name, runs, seq_runs, sequential, swept, args) -> dict:
    best_seq = best_sweep = float("inf")
    for _ in range(args.repeat):
        if not args.warm:
            clear_compiled()
        start, cpu = time.perf_counter(), time.process_time()
        sequential()
        best_seq = min(best_seq, time.perf_counter() - start)
        seq_cpu = time.process_time() - cpu
        if not args.warm:
            client.run(_forget)  # nothing loaded or compiled on the workers
        workers_cpu = sum(client.run(time.process_time).values())
        start, cpu = time.perf_counter(), time.process_time()
        result = mdf_loops.sweep(swept["model"], samples=swept["samples"], client=client,
                                 backend=swept["backend"])
        best_sweep = min(best_sweep, time.perf_counter() - start)
        sweep_cpu = time.process_time() - cpu  # the client and the scheduler
        sweep_cpu += sum(client.run(time.process_time).values()) - workers_cpu
        assert (result["error"] == "").all(), name
    row = {"workload": name, "runs": runs, "workers": workers,
           "sequential_runs_per_s": round(seq_runs / best_seq, 1),
           "sweep_runs_per_s": round(runs / best_sweep, 1),
           "sequential_cpu_ms_per_run": round(1000 * seq_cpu / seq_runs, 2),
           "sweep_cpu_ms_per_run": round(1000 * sweep_cpu / runs, 2)}
    row["speedup"] = round(row["sweep_runs_per_s"] / row["sequential_runs_per_s"], 2)
    print(f"{name:26s} {runs:5d} runs: sequential {row['sequential_runs_per_s']:8.1f} "
          f"runs/s, sweep on {workers} workers {row['sweep_runs_per_s']:8.1f} runs/s, "
          f"x{row['speedup']}; CPU per run {row['sequential_cpu_ms_per_run']} ms vs "
          f"{row['sweep_cpu_ms_per_run']} ms (all sweep processes)", flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2,4",
                        help="comma-separated worker counts, one local cluster each")
    parser.add_argument("--repeat", type=int, default=2)
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
    parser.add_argument("--warm", action="store_true",
                        help="keep compiled models between rounds on both sides (a cluster "
                             "kept between sweeps); the best round is then a warm one")
    parser.add_argument("--json", metavar="FILE", help="also write the rows to this file")
    args = parser.parse_args(argv)

    rows = []
    for workers in [int(n) for n in args.workers.split(",")]:
        rows += _on_cluster(workers, args)
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
                rows.append(_measure(client, workers, f"{name} ({backend})", runs, seq_runs,
                                     sequential, dict(swept, backend=backend), args))
    return rows


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: an ``nn.LSTM`` through ``mdf_loops.from_pytorch`` and ``to_pytorch`` against the
``nn.LSTM`` itself.

Run ``python benchmarks/torch_lstm.py`` (``--help`` for options). The module is imported
at length 5 and run at ``--steps``; both run in this process on one CPU thread, on the
same weights and inputs (checked equal before timing), in rounds whose order is
shuffled; medians after one warm-up, of wall time and of CPU time
(``time.process_time``, steadier on a shared machine). The pass is forward and
backward of a loss on the outputs (one training step). The ratio is ours / nn.LSTM.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

import numpy as np
import torch

import mdf_loops

__all__ = ["measure", "main"]


class _Lstm(torch.nn.Module):
    def __init__(self, n_in: int, n_hidden: int):
        super().__init__()
        self.lstm = torch.nn.LSTM(n_in, n_hidden)

    def forward(self, x):
        return self.lstm(x)[0]


def measure(steps: int = 1000, runs: int = 21, n_in: int = 32, n_hidden: int = 64) -> dict:
    """Medians (ms, wall and CPU) of ours and nn.LSTM, and their ratios."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    theirs = _Lstm(n_in, n_hidden)
    model = mdf_loops.from_pytorch(theirs, (torch.randn(5, 1, n_in),))
    ours = mdf_loops.to_pytorch(model)
    x = torch.randn(steps, 1, n_in, generator=torch.Generator().manual_seed(1))
    (got,) = ours(x).values()
    np.testing.assert_allclose(got.detach(), theirs(x).detach(), rtol=1e-5, atol=1e-5)

    def step(fn):
        def run():
            fn(x.clone().requires_grad_()).pow(2).sum().backward()

        return run

    pair = {"ours": step(lambda v: next(iter(ours(v).values()))), "torch": step(theirs)}
    times: dict[str, list[tuple[float, float]]] = {"ours": [], "torch": []}
    for fn in pair.values():
        fn()  # warm-up
    shuffle = random.Random(0)
    for _ in range(runs):
        for who in shuffle.sample(list(pair), 2):
            wall, cpu = time.perf_counter(), time.process_time()
            pair[who]()
            times[who].append((time.perf_counter() - wall, time.process_time() - cpu))

    def median(who: str, k: int) -> float:
        return statistics.median(t[k] for t in times[who]) * 1e3

    row = {"workload": f"nn.LSTM({n_in}->{n_hidden}), T={steps}", "runs": runs}
    for k, clock in enumerate(("wall", "cpu")):
        row[f"ours_{clock}_ms"], row[f"torch_{clock}_ms"] = median("ours", k), median("torch", k)
        row[f"ratio_{clock}"] = row[f"ours_{clock}_ms"] / row[f"torch_{clock}_ms"]
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args(argv)
    r = measure(args.steps, args.runs)
    print(f"{r['workload']}, forward+backward, medians of {r['runs']} shuffled runs, 1 thread")
    print(f"  to_pytorch: {r['ours_wall_ms']:.2f} ms wall, {r['ours_cpu_ms']:.2f} ms CPU")
    print(f"  nn.LSTM:    {r['torch_wall_ms']:.2f} ms wall, {r['torch_cpu_ms']:.2f} ms CPU")
    print(f"DECIDING ROW  ratio ours/nn.LSTM: {r['ratio_wall']:.2f} wall, {r['ratio_cpu']:.2f} CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())

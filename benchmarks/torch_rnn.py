"""Benchmark: ``mdf_loops.to_pytorch`` on the Elman RNN against the same cell written in torch.

Run ``python benchmarks/torch_rnn.py`` (``--help`` for options). Both run in this process
on one CPU thread (``torch.set_num_threads(1)``), on the same weights and inputs, in
rounds whose order is shuffled; times are medians after one warm-up. Two rows: the
forward pass (under ``torch.no_grad()``), and the forward and backward pass of a loss
on the outputs (what one training step costs). The ratio is ours / hand-written.

``--device cuda`` runs both on the GPU instead (the module moved with ``.to("cuda")``,
the inputs made there; each timed run waits for the GPU to finish).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np
import onnx
import torch

import mdf_loops
from mdf_loops.workloads import elman_rnn

__all__ = ["measure", "main"]


def _hand_written(weights: dict[str, np.ndarray], device: str) -> Callable:
    wx, wh, b = (
        torch.nn.Parameter(torch.tensor(weights[k], device=device)) for k in ("Wx", "Wh", "b")
    )

    def rnn(h0: torch.Tensor, X: torch.Tensor) -> dict[str, torch.Tensor]:
        h, hs = h0, []
        for x in X.unbind(0):
            h = torch.tanh(x @ wx + h @ wh + b)
            hs.append(h)
        return {"h_last": h, "H": torch.stack(hs)}

    return rnn


def _runners(steps: int, device: str = "cpu") -> dict[str, tuple[Callable, Callable]]:
    work = elman_rnn(steps)
    weights = {t.name: onnx.numpy_helper.to_array(t) for t in work.model.graph.initializer}
    ours = mdf_loops.to_pytorch(mdf_loops.onnx_to_mdf(work.model)).to(device)
    hand = _hand_written(weights, device)
    h0 = torch.tensor(work.inputs["h0"], device=device)
    X = torch.tensor(work.inputs["X"], device=device)
    expected = work.numpy_loop(work.inputs)
    for fn in (ours, hand):  # both compute the RNN (checked against numpy before timing)
        out = fn(h0=h0, X=X)
        got = out["H"].detach().cpu().numpy()
        np.testing.assert_allclose(got, expected[1], rtol=1e-4, atol=1e-5)
    wait = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def forward(fn):
        def run():
            with torch.no_grad():
                fn(h0=h0, X=X)
            wait()

        return run

    def training_step(fn):
        def run():
            (fn(h0=h0, X=X)["H"] ** 2).sum().backward()
            wait()

        return run

    return {
        "forward": (forward(ours), forward(hand)),
        "forward+backward": (training_step(ours), training_step(hand)),
    }


def measure(steps: int = 1000, runs: int = 21, device: str = "cpu") -> list[dict]:
    """One row per pass: medians (ms) of ours and the hand-written loop, and their ratio."""
    torch.set_num_threads(1)
    rows = []
    for name, (ours, hand) in _runners(steps, device).items():
        times: dict[str, list[float]] = {"ours": [], "hand": []}
        pair = {"ours": ours, "hand": hand}
        for fn in pair.values():
            fn()  # warm-up
        shuffle = random.Random(0)
        for _ in range(runs):
            for who in shuffle.sample(list(pair), 2):
                start = time.perf_counter()
                pair[who]()
                times[who].append(time.perf_counter() - start)
        ours_ms = statistics.median(times["ours"]) * 1e3
        hand_ms = statistics.median(times["hand"]) * 1e3
        rows.append({"workload": f"Elman RNN, T={steps}", "pass": name, "device": device,
                     "to_pytorch_ms": ours_ms,
                     "hand_written_ms": hand_ms, "ratio": ours_ms / hand_ms, "runs": runs})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--device", default="cpu", help="cpu (the default) or cuda")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    rows = measure(args.steps, args.runs, args.device)
    print(f"{'workload':<20} {'pass':<18} {'to_pytorch ms':>14} {'hand-written ms':>16} {'ratio':>6}")
    for r in rows:
        print(f"{r['workload']:<20} {r['pass']:<18} {r['to_pytorch_ms']:>14.2f} "
              f"{r['hand_written_ms']:>16.2f} {r['ratio']:>6.2f}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

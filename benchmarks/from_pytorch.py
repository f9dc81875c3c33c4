"""Benchmark: the time of ``mdf_loops.from_pytorch`` on a scripted Elman RNN, against its
peer, torch's own ONNX export of the same module (the step from_pytorch builds on).

Run ``python benchmarks/from_pytorch.py [--runs N]``. Both run in this process, in
alternating order, one warm-up each; it prints the medians, the spread (fastest and
slowest) and the ratio of the medians. What from_pytorch adds to the export: the
module run twice on the example, the check at other lengths (onnxruntime) and the
ONNX -> MDF import.
"""

from __future__ import annotations

import argparse
import io
import statistics
import time
import warnings

import torch

import mdf_loops


class ElmanRNN(torch.nn.Module):
    def __init__(self, n_in: int = 3, n_hidden: int = 8):
        super().__init__()
        self.wx = torch.nn.Parameter(0.5 * torch.randn(n_in, n_hidden))
        self.wh = torch.nn.Parameter(0.5 * torch.randn(n_hidden, n_hidden))
        self.b = torch.nn.Parameter(torch.zeros(n_hidden))

    def forward(self, x, h0):
        h = h0
        states = []
        for t in range(x.shape[0]):
            h = torch.tanh(x[t] @ self.wx + h @ self.wh + self.b)
            states.append(h)
        return h, torch.stack(states)


def _torch_export(module, args) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, io.BytesIO(), dynamo=False, input_names=["x", "h0"],
                          dynamic_axes={"x": {0: "steps"}})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args(argv).runs
    torch.set_num_threads(1)
    module = torch.jit.script(ElmanRNN())
    args = (torch.randn(20, 3), torch.zeros(8))
    runners = {"from_pytorch": lambda: mdf_loops.from_pytorch(module, args),
               "torch.onnx.export": lambda: _torch_export(module, args)}
    first = time.perf_counter()
    runners["from_pytorch"]()  # the first call in a process also loads torch's exporter
    print(f"from_pytorch, first call in the process: {time.perf_counter() - first:.2f} s")
    runners["torch.onnx.export"]()
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(runs):
        for name, run in runners.items():
            start = time.perf_counter()
            run()
            times[name].append(1000 * (time.perf_counter() - start))
    for name, values in times.items():
        print(f"{name:>18}: median {statistics.median(values):6.1f} ms "
              f"(fastest {min(values):.1f}, slowest {max(values):.1f}, {runs} runs)")
    ratio = statistics.median(times["from_pytorch"]) / statistics.median(times["torch.onnx.export"])
    print(f"from_pytorch / torch.onnx.export: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What sizing an untrusted model costs on the torch backend: ``run(backend="torch")`` of the
Elman RNN (T=1000, benchmarks/torch_rnn.py's model) trusted and not trusted.

A model that is not trusted has each operator with a size plan (here the two ``MatMul``
and the two ``Add`` of each step) sized before its torch kernel runs, and each step's
state and stacked output held to ``max_elements`` (mdf_loops/backends/torch/limits.py).
Both run in this process on one CPU thread, interleaved; CPU time per run (ms), median
and spread over the repeats, and the ratio of not trusted to trusted.
"""

from __future__ import annotations

import statistics
import time

import mdf_loops
from mdf_loops.workloads import elman_rnn

STEPS = 1000
REPEATS = 15


def _seconds(run) -> float:
    started = time.process_time()
    run()
    return time.process_time() - started


def main() -> None:
    import torch

    torch.set_num_threads(1)
    work = elman_rnn(STEPS)
    model = mdf_loops.onnx_to_mdf(work.model)

    def trusted():
        return mdf_loops.run(model, work.inputs, backend="torch", trusted=True)

    def untrusted():
        return mdf_loops.run(model, work.inputs, backend="torch")

    for run in (trusted, untrusted):  # compiled, and the same values
        run()
    plain, sized, ratios = [], [], []
    for _ in range(REPEATS):
        plain.append(_seconds(trusted) * 1e3)
        sized.append(_seconds(untrusted) * 1e3)
        ratios.append(sized[-1] / plain[-1])
    print(f"trusted     {statistics.median(plain):.2f} ms a run ({STEPS} steps)")
    print(f"not trusted {statistics.median(sized):.2f} ms a run")
    print(
        f"ratio (decides): median {statistics.median(ratios):.2f}, "
        f"{min(ratios):.2f} to {max(ratios):.2f} over {REPEATS} interleaved runs"
    )


if __name__ == "__main__":
    main()

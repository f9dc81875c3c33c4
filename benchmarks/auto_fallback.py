"""Benchmark: what ``backend="auto"`` costs beside the backend it chooses.

Run ``python benchmarks/auto_fallback.py`` (``--help`` for options). Two rows, each a
ratio of ``auto`` to the backend ``auto`` ends up on, both run in this process on the same
model and inputs (checked equal before timing), in rounds whose order is shuffled; medians
after a warm-up, of wall time and of CPU time (``time.process_time``, steadier on a
shared machine), with the fastest and slowest round:

* **passed over**: an ONNX LSTM on float64, which onnxruntime refuses while running: the
  first call tries onnxruntime and runs the scheduler; every later call goes straight to
  the scheduler (the ratio is about 1: no onnxruntime attempt, no WARNING, per call);
* **full path**: an Elman RNN that onnxruntime runs, given as Python lists (converted,
  so no plan is replayed): the cost of ``auto``'s choice on each call, against
  ``backend="onnxruntime"`` (about 1).
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import mdf_loops

__all__ = ["measure", "main"]

ROOT = Path(__file__).resolve().parent.parent


def _double_lstm(steps: int, hidden: int, rng: np.random.Generator) -> onnx.ModelProto:
    weights = [
        numpy_helper.from_array(rng.normal(size=(1, 4 * hidden, 3)), "W"),
        numpy_helper.from_array(rng.normal(size=(1, 4 * hidden, hidden)), "R"),
    ]
    graph = helper.make_graph(
        [helper.make_node("LSTM", ["X", "W", "R"], ["Y"], hidden_size=hidden)],
        "lstm64",
        [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [steps, 1, 3])],
        [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, None)],
        weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def _timed(call, repeat: int) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(repeat):
        call()
    return (time.perf_counter() - wall) / repeat, (time.process_time() - cpu) / repeat


def _row(name: str, ours, peer, peer_name: str, rounds: int, repeat: int) -> dict:
    """Median seconds a call of ``ours`` (auto) and ``peer``, in shuffled rounds."""
    for call in (ours, peer):
        call()
    samples: dict[str, list[tuple[float, float]]] = {"auto": [], peer_name: []}
    for _ in range(rounds):
        order = [("auto", ours), (peer_name, peer)]
        random.shuffle(order)
        for label, call in order:
            samples[label].append(_timed(call, repeat))
    row: dict = {"row": name}
    for label, values in samples.items():
        walls = [w for w, _ in values]
        row[label] = {
            "wall_us": statistics.median(walls) * 1e6,
            "cpu_us": statistics.median(c for _, c in values) * 1e6,
            "spread_us": (min(walls) * 1e6, max(walls) * 1e6),
        }
    row["ratio_wall"] = row["auto"]["wall_us"] / row[peer_name]["wall_us"]
    row["ratio_cpu"] = row["auto"]["cpu_us"] / row[peer_name]["cpu_us"]
    return row


def measure(rounds: int = 11, repeat: int = 20, steps: int = 20) -> list[dict]:
    """The two rows of the module's docstring."""
    rng = np.random.default_rng(0)
    lstm = mdf_loops.onnx_to_mdf(_double_lstm(steps, 8, rng))
    x = {"X": rng.normal(size=(steps, 1, 3))}
    auto, scheduler = (mdf_loops.run(lstm, x, backend=b)["Y"] for b in ("auto", "scheduler"))
    np.testing.assert_array_equal(auto, scheduler)
    rows = [
        _row(
            "passed over (float64 LSTM): auto / scheduler",
            lambda: mdf_loops.run(lstm, x),
            lambda: mdf_loops.run(lstm, x, backend="scheduler"),
            "scheduler",
            rounds,
            max(1, repeat // 10),
        )
    ]
    rnn = mdf_loops.load_model(ROOT / "examples" / "elman_rnn.json")
    lists = {"x": rng.normal(size=(6, 3)).tolist(), "h0": [0.0] * 5}
    auto, ort = (mdf_loops.run(rnn, lists, backend=b) for b in ("auto", "onnxruntime"))
    np.testing.assert_array_equal(auto["rnn.h_final"], ort["rnn.h_final"])
    rows.append(
        _row(
            "full path (Elman RNN, list inputs): auto / onnxruntime",
            lambda: mdf_loops.run(rnn, lists),
            lambda: mdf_loops.run(rnn, lists, backend="onnxruntime"),
            "onnxruntime",
            rounds,
            repeat,
        )
    )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--repeat", type=int, default=20, help="calls per timing")
    parser.add_argument("--steps", type=int, default=20, help="the LSTM's length")
    args = parser.parse_args(argv)
    logging.getLogger("mdf_loops").addHandler(logging.NullHandler())
    logging.getLogger("mdf_loops").propagate = False  # the one WARNING, not on the terminal
    for row in measure(args.rounds, args.repeat, args.steps):
        peer = next(k for k in row if k not in ("row", "auto", "ratio_wall", "ratio_cpu"))
        print(
            f"{row['row']}: ratio {row['ratio_wall']:.3f} wall, {row['ratio_cpu']:.3f} CPU "
            f"(auto {row['auto']['wall_us']:.0f} us [{row['auto']['spread_us'][0]:.0f}.."
            f"{row['auto']['spread_us'][1]:.0f}], {peer} {row[peer]['wall_us']:.0f} us "
            f"[{row[peer]['spread_us'][0]:.0f}..{row[peer]['spread_us'][1]:.0f}])"
        )


if __name__ == "__main__":
    main()

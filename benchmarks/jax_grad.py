"""Benchmark: the JAX backend's gradients and runs against the same loops written by hand in JAX.

Run ``python benchmarks/jax_grad.py`` (``--help`` for options). On the Elman RNN
(T=1000 by default) and the running sum (20,000 steps), in this process:

* ``mdf_loops.value_and_grad`` / ``grad`` of ``sum(H * w)`` (``sum(S * w)``) with
  respect to the initial state, beside ``jax.jit(jax.value_and_grad(...))`` of a
  hand-written ``lax.scan``;
* the same with respect to the imported weights (``Wx``, ``Wh``, ``b``) on the RNN;
* ``mdf_loops.run(model, inputs, backend="jax")`` beside the hand-written ``lax.scan``.

Each row also checks that the two give the same values ("same").

Each row's runners run once per round in a shuffled order (so load on the machine
hits all alike); times are medians in milliseconds, ratios are to the hand-written
peer of the row; "cpu" is the CPU time of the calling thread (JAX runs the compiled
loop on a thread of its own, so this is what the call costs beside the loop).
``--repeat N`` runs the whole measurement N times and prints the spread of the ratios.
The last lines print the rows that decide the targets: ``run`` within 1.1x of the
hand-written ``lax.scan``, the RNN gradients within 1.2x.

JAX dispatches asynchronously, as it does for users: a replayed ``run`` compares the
model with its snapshot while the compiled loop runs (mdf_loops/run_plans.py), which
needs the loop on JAX's thread. ``--jax-sync`` runs JAX's CPU work on the calling
thread instead, for both rows alike, as loops.py does (there the comparison cannot
overlap the loop: the row then shows its whole cost).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers import _initializers  # noqa: E402

import mdf_loops  # noqa: E402
from mdf_loops.workloads import Workload, elman_rnn, running_sum  # noqa: E402

Pair = tuple[Callable[[], object], Callable[[], object]]  # (ours, hand-written)


def _rnn_rows(work: Workload) -> dict[str, Pair]:
    import jax
    import jax.numpy as jnp

    model = mdf_loops.onnx_to_mdf(work.model)
    inputs = work.inputs
    weights = _initializers(work)
    w = np.random.default_rng(0).standard_normal(inputs["X"].shape[:1] + (64,)).astype(np.float32)

    def loss(h0, Wx, Wh, b, xs):
        def step(h, x):
            h = jnp.tanh(x @ Wx + h @ Wh + b)
            return h, h

        return (jax.lax.scan(step, h0, xs)[1] * w).sum()

    hand_h0 = jax.jit(jax.value_and_grad(loss, argnums=0))
    hand_w = jax.jit(jax.value_and_grad(loss, argnums=(1, 2, 3)))
    params = (weights["Wx"], weights["Wh"], weights["b"])

    @jax.jit
    def hand_run(h0, xs):
        def step(h, x):
            h = jnp.tanh(x @ params[0] + h @ params[1] + params[2])
            return h, h

        return jax.lax.scan(step, h0, xs)

    def objective(out):
        return (out["H"] * w).sum()

    def value_and_gradient():
        value, gradients = mdf_loops.value_and_grad(model, objective, ["h0"], inputs)
        return [value, gradients["h0"]]

    def weights_gradient():
        gradients = mdf_loops.grad(model, objective, ["Wx", "Wh", "b"], inputs)
        return [gradients["Wx"], gradients["Wh"], gradients["b"]]

    def run():
        outputs = mdf_loops.run(model, inputs, backend="jax")
        return [outputs["h_last"], outputs["H"]]

    return {
        "value_and_grad wrt h0": (
            value_and_gradient,
            lambda: _arrays(hand_h0(inputs["h0"], *params, inputs["X"])),
        ),
        "grad wrt h0": (
            lambda: [mdf_loops.grad(model, objective, ["h0"], inputs)["h0"]],
            lambda: _arrays(hand_h0(inputs["h0"], *params, inputs["X"])[1]),
        ),
        "grad wrt Wx, Wh, b": (
            weights_gradient,
            lambda: _arrays(hand_w(inputs["h0"], *params, inputs["X"])[1]),
        ),
        "run": (run, lambda: _arrays(hand_run(inputs["h0"], inputs["X"]))),
    }


def _arrays(result) -> list[np.ndarray]:
    """A hand-written peer's result as numpy arrays (copied back, as ours are)."""
    import jax

    return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(result)]


def _sum_rows(work: Workload) -> dict[str, Pair]:
    import jax

    model = mdf_loops.onnx_to_mdf(work.model)
    inputs = work.inputs
    w = np.random.default_rng(0).standard_normal(inputs["x"].shape).astype(inputs["x"].dtype)

    def loss(s0, xs):
        return (jax.lax.scan(lambda s, x: (s + x, s + x), s0, xs)[1] * w).sum()

    hand = jax.jit(jax.value_and_grad(loss))
    names = [o.name for o in work.model.graph.output]
    scanned = names[-1]

    def objective(out):
        return (out[scanned] * w).sum()

    def value_and_gradient():
        value, gradients = mdf_loops.value_and_grad(model, objective, ["s0"], inputs)
        return [value, gradients["s0"]]

    return {
        "value_and_grad wrt s0": (
            value_and_gradient,
            lambda: _arrays(hand(inputs["s0"], inputs["x"])),
        ),
    }


def _agree(ours: list, hand: list) -> bool:
    return len(ours) == len(hand) and all(
        np.shape(a) == np.shape(b) and np.allclose(a, b, rtol=1e-4, atol=1e-5)
        for a, b in zip(ours, hand))


Times = dict[tuple[str, str], list[tuple[float, float]]]


def _time(pairs: dict[str, Pair], runs: int) -> tuple[Times, dict]:
    """(wall, calling thread's CPU) times per (row, "ours" or "hand"), and per row whether
    the two results agree."""
    runners = {(row, who): fn for row, pair in pairs.items() for who, fn in zip(("ours", "hand"), pair)}
    agree = {row: _agree(ours(), hand()) for row, (ours, hand) in pairs.items()}  # compiles too
    times: Times = {key: [] for key in runners}
    order = random.Random(0)
    for _ in range(runs):
        for key in order.sample(list(runners), len(runners)):
            start, cpu = time.perf_counter(), time.thread_time()
            runners[key]()
            times[key].append((time.perf_counter() - start, time.thread_time() - cpu))
    return times, agree


Row = tuple[str, str, float, float, float, float, float, bool]


def measure(steps: int, runs: int) -> list[Row]:
    """``(workload, row, ours ms, hand-written ms, ratio, ours CPU ms, hand-written CPU ms,
    results agree)`` per row (medians; CPU: the calling thread's)."""
    results = []
    for name, work, rows in (
        (f"Elman RNN, T={steps}", elman_rnn(steps), _rnn_rows),
        (f"running sum, {20 * steps} steps", running_sum(20 * steps), _sum_rows),
    ):
        times, agree = _time(rows(work), runs)
        for row in agree:
            ours, hand = (_median_ms(times[(row, who)], 0) for who in ("ours", "hand"))
            cpu = [_median_ms(times[(row, who)], 1) for who in ("ours", "hand")]
            results.append((name, row, ours, hand, ours / hand, *cpu, agree[row]))
    return results


def _median_ms(times: list[tuple[float, float]], which: int) -> float:
    return statistics.median(t[which] for t in times) * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/jax_grad.py",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000, help="RNN length (the sum: 20x)")
    parser.add_argument("--runs", type=int, default=21, help="timed runs per runner (median)")
    parser.add_argument("--repeat", type=int, default=1, help="whole measurements, for the spread")
    parser.add_argument("--jax-sync", action="store_true",
                        help="run JAX's CPU work on the calling thread (both rows alike)")
    args = parser.parse_args(argv)
    if args.jax_sync:
        import jax

        jax.config.update("jax_cpu_enable_async_dispatch", False)
    print(f"JAX CPU dispatch: {'synchronous' if args.jax_sync else 'asynchronous'}")
    ratios: dict[tuple[str, str], list[float]] = {}
    for k in range(args.repeat):
        print(f"measurement {k + 1} of {args.repeat}")
        print(f"{'workload':<26}{'row':<24}{'ours ms':>9}{'hand ms':>9}{'ratio':>7}  same"
              f"{'ours cpu':>10}{'hand cpu':>10}")
        for workload, row, ours, hand, ratio, ours_cpu, hand_cpu, same in measure(
                args.steps, args.runs):
            print(f"{workload:<26}{row:<24}{ours:>9.2f}{hand:>9.2f}{ratio:>7.2f}  "
                  f"{'yes' if same else 'NO ':<4}{ours_cpu:>10.3f}{hand_cpu:>10.3f}")
            ratios.setdefault((workload, row), []).append(ratio)
    if args.repeat > 1:
        print("\nratio to the hand-written peer: median (min to max) over the measurements")
        for (workload, row), values in ratios.items():
            print(f"{workload:<26}{row:<24}{statistics.median(values):>6.2f} "
                  f"({min(values):.2f} to {max(values):.2f})")
    print("\ntargets (issue 28, item 4), median ratio of the RNN rows:")
    for (workload, row), values in ratios.items():
        if workload.startswith("Elman") and row in TARGETS:
            ratio = statistics.median(values)
            print(f"  {row:<24}{ratio:>6.2f}  target {TARGETS[row]:.1f}  "
                  f"{'met' if ratio <= TARGETS[row] else 'NOT MET'}")
    return 0


#: the ratio to the hand-written peer each RNN row is to stay within
TARGETS = {"run": 1.1, "value_and_grad wrt h0": 1.2, "grad wrt h0": 1.2, "grad wrt Wx, Wh, b": 1.2}


if __name__ == "__main__":
    raise SystemExit(main())

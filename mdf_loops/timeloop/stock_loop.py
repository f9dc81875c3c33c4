"""modeci-mdf's own time loop, run as a script so that nothing of mdf-loops is imported.

``python stock_loop.py MODEL.json --dt 0.01 --steps 1000 --record node.port ... -o out.npz``
runs the loop modeci-mdf's example scripts use::

    engine = EvaluableGraph(graph)
    for k in range(steps):
        engine.evaluate() if k == 0 else engine.evaluate(time_increment=dt)
        record(...)

and saves the recorded values (``"node.port"`` or ``"node.parameter"``, time on axis 0)
and the wall-clock seconds of the loop (``__seconds__``). Input time series
(``--inputs series.npz``, keyed by input-port id) are set on each step with
``initializer``. It is the reference the tests and benchmarks compare against.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import time
from typing import Any

import numpy as np


def _value(engine, ref: str):
    node_id, name = ref.split(".")
    enode = engine.enodes[node_id]
    if name in enode.evaluable_outputs:
        return enode.evaluable_outputs[name].curr_value
    return enode.evaluable_parameters[name].curr_value


def stock_loop(path: str, dt: float, steps: int, record: list[str], inputs: dict | None = None):
    from modeci_mdf.execution_engine import EvaluableGraph
    from modeci_mdf.utils import load_mdf

    graph = load_mdf(path).graphs[0]
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet):
        engine = EvaluableGraph(graph)
    traces: dict[str, list[Any]] = {ref: [] for ref in record}
    inputs = inputs or {}
    start = time.perf_counter()
    with contextlib.redirect_stdout(quiet):
        for k in range(steps):
            initializer = {name: series[k] for name, series in inputs.items()} or None
            if k == 0:
                engine.evaluate(initializer=initializer)
            else:
                engine.evaluate(time_increment=dt, initializer=initializer)
            for ref in record:
                traces[ref].append(np.array(_value(engine, ref), dtype=float))
            quiet.seek(0)
            quiet.truncate()
    seconds = time.perf_counter() - start
    return {ref: np.array(values) for ref, values in traces.items()}, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--dt", type=float, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--record", nargs="+", required=True)
    parser.add_argument("--inputs", default=None)
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    inputs = dict(np.load(args.inputs)) if args.inputs else None
    traces, seconds = stock_loop(args.model, args.dt, args.steps, args.record, inputs)
    np.savez(args.output, __seconds__=np.array(seconds), **traces)


if __name__ == "__main__":
    main()

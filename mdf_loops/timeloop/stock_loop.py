"""modeci-mdf's own time loop, run as a script so that nothing of mdf-loops is imported.

``python stock_loop.py MODEL.json --dt 0.01 --steps 1000 --record node.port ... -o out.npz``
runs the loop modeci-mdf's example scripts use::

    engine = EvaluableGraph(graph)
    for k in range(steps):
        engine.evaluate() if k == 0 else engine.evaluate(time_increment=dt)
        record(...)

and saves the recorded values (``"node.port"`` or ``"node.parameter"``, time on axis 0)
and the wall-clock seconds of the loop (``__seconds__``). Values keep modeci-mdf's
types (an integer state stays integer; a value not computed yet is NaN). Input time
series (``--inputs series.npz``, keyed by input-port id) are set on each step with
``initializer``. ``--batch jobs.json`` runs several loops in one process: a list of
``{"model", "dt", "steps", "record", "output"}``; a loop that fails writes
``{"__error__": "Type: message"}`` to its output instead. It is the reference the tests
and benchmarks compare against.
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
                value = _value(engine, ref)
                traces[ref].append(np.array(np.nan) if value is None else np.asarray(value))
            quiet.seek(0)
            quiet.truncate()
    seconds = time.perf_counter() - start
    return {ref: np.array(values) for ref, values in traces.items()}, seconds


def _batch(path: str) -> None:
    """Each job of the JSON list in ``path``; a failure is written as that job's output."""
    import json

    for job in json.loads(open(path).read()):
        try:
            traces, seconds = stock_loop(job["model"], job["dt"], job["steps"], job["record"])
            np.savez(job["output"], __seconds__=np.array(seconds), **traces)
        except Exception as exc:  # the comparison is the point: record it
            np.savez(job["output"], __error__=np.array(f"{type(exc).__name__}: {exc}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?")
    parser.add_argument("--batch", help="a JSON list of jobs (see above)")
    parser.add_argument("--dt", type=float)
    parser.add_argument("--steps", type=int)
    parser.add_argument("--record", nargs="+")
    parser.add_argument("--inputs", default=None)
    parser.add_argument("-o", "--output")
    args = parser.parse_args()
    if args.batch:
        _batch(args.batch)
        return
    if None in (args.model, args.dt, args.steps, args.record, args.output):
        parser.error("give MODEL, --dt, --steps, --record and -o (or --batch)")
    inputs = dict(np.load(args.inputs)) if args.inputs else None
    traces, seconds = stock_loop(args.model, args.dt, args.steps, args.record, inputs)
    np.savez(args.output, __seconds__=np.array(seconds), **traces)


if __name__ == "__main__":
    main()

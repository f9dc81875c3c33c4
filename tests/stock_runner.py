"""Run the cases of stock_models.py through modeci-mdf's stock EvaluableGraph; write what happened.

    python stock_runner.py stock|with RESULT.json [CASE ...]

A CASE is a name of stock_models.CASES, or ``file:PATH`` for an MDF file (its
first graph evaluated once, every output port read).

``with`` imports mdf_loops first and runs every case under
``mdf_loops.safety.limits(max_iterations=SMALL_LIMIT)``; ``stock`` never imports it.
For each case the result file holds, after each ``evaluate``, a bit-exact
description of the output values, the order the nodes ran in, the exception
(type and message) if one was raised, everything printed, and the seconds each
step took.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stock_models import CASES, SMALL_LIMIT, Case  # noqa: E402


def describe(value: Any) -> str:
    """The value's type, dtype, shape and bytes, and its repr."""
    if isinstance(value, np.ndarray):
        exact = "" if value.dtype == object else value.tobytes().hex()
        return f"ndarray {value.dtype} {value.shape} {exact} {value!r}"
    if isinstance(value, np.generic):
        return f"{type(value).__name__} {np.asarray(value).tobytes().hex()} {value!r}"
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}[{', '.join(describe(v) for v in value)}]"
    return f"{type(value).__name__} {value!r}"


def _error(exc: BaseException) -> str:
    kind = type(exc)
    return f"{kind.__module__}.{kind.__qualname__}: {exc}"


def _file_case(path: str) -> Case:
    from modeci_mdf.utils import load_mdf

    def build():
        return load_mdf(path)

    try:
        graph = build().graphs[0]
    except Exception:  # not loadable: building it again reports the error
        return Case(build)
    return Case(build, [{}], [(node.id, port.id) for node in graph.nodes
                              for port in node.output_ports])


def run_case(name: str) -> dict[str, Any]:
    from modeci_mdf.execution_engine import EvaluableGraph

    case = _file_case(name[len("file:"):]) if name.startswith("file:") else CASES[name]
    record: dict[str, Any] = {"steps": [], "error": None, "seconds": []}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        try:
            start = time.perf_counter()
            engine = EvaluableGraph(case.build().graphs[0], verbose=case.verbose)
            record["seconds"].append(time.perf_counter() - start)
            for kwargs in case.evaluations:
                start = time.perf_counter()
                engine.evaluate(**kwargs)
                record["seconds"].append(time.perf_counter() - start)
                record["steps"].append({
                    "outputs": {f"{node}.{port}": describe(
                        engine.enodes[node].evaluable_outputs[port].curr_value)
                        for node, port in case.outputs},
                    "order": list(engine.order_of_execution),
                })
        except Exception as exc:  # the comparison is the point: record it
            record["error"] = _error(exc)
    record["stdout"] = printed.getvalue()
    return record


def main(mode: str, result_path: str, names: list[str]) -> None:
    names = names or list(CASES)
    limits = contextlib.nullcontext()
    results: dict[str, Any] = {}
    if mode == "with":
        import mdf_loops
        from mdf_loops.backends.scheduler import hooks

        results["_installed"] = hooks.installed()
        limits = mdf_loops.safety.limits(max_iterations=SMALL_LIMIT)
    elif "mdf_loops" in sys.modules:
        raise SystemExit("the stock run imported mdf_loops")
    with limits:
        for name in names:
            results[name] = run_case(name)
    if mode != "with" and "mdf_loops" in sys.modules:
        raise SystemExit("the stock run imported mdf_loops")
    Path(result_path).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])

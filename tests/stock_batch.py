"""Stock modeci-mdf's time loop (``mdf_loops/timeloop/stock_loop.py``) in an interpreter
that does not import mdf_loops: the oracle of the time-loop tests.

:func:`stock_batch` writes the models and the job list, runs them all in one subprocess
(``--batch``) and returns each job's recorded traces (``{"node.port": array}``, time on
axis 0). A model stock fails on comes back as ``{"__error__": "Type: message"}``;
:func:`stock_traces` asserts that none did. :func:`stock_run` runs one loop with input
series, set on each step (what ``--batch`` does not take).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

STOCK_LOOP = Path(__file__).resolve().parents[1] / "mdf_loops" / "timeloop" / "stock_loop.py"


@dataclass(frozen=True)
class StockJob:
    """One loop: ``model`` (a ``modeci_mdf`` Model, an MDF document as a dict, or the path
    of an MDF file) stepped ``steps`` times by ``dt``, recording ``record``."""

    model: Any
    dt: float
    steps: int
    record: list[str]


def _model_file(model: Any, path: Path) -> Path:
    if isinstance(model, (str, Path)):
        return Path(model).resolve()  # stock runs in the jobs' folder
    if isinstance(model, dict):
        path.write_text(json.dumps(model))
    else:
        model.to_json_file(str(path))
    return path


def stock_batch(
    jobs: Mapping[str, StockJob], folder: Path, timeout: float | None = None
) -> dict[str, dict[str, np.ndarray]]:
    """Every job through stock's loop, one subprocess for all, its files in ``folder``:
    the traces by job name, or ``{"__error__": ...}`` for a job stock fails on.

    ``subprocess.TimeoutExpired`` when the batch runs past ``timeout`` seconds.
    """
    folder.mkdir(parents=True, exist_ok=True)
    listed = [
        {
            "model": str(_model_file(job.model, folder / f"model{k}.json")),
            "dt": job.dt,
            "steps": job.steps,
            "record": list(job.record),
            "output": str(folder / f"traces{k}.npz"),
        }
        for k, job in enumerate(jobs.values())
    ]
    (folder / "jobs.json").write_text(json.dumps(listed))
    done = subprocess.run(
        [sys.executable, str(STOCK_LOOP), "--batch", str(folder / "jobs.json")],
        capture_output=True,
        text=True,
        cwd=folder,
        timeout=timeout,
    )
    assert done.returncode == 0, f"stock_loop.py --batch failed:\n{done.stderr}"
    results = {}
    for name, job in zip(jobs, listed, strict=True):
        with np.load(job["output"]) as saved:
            results[name] = dict(saved)
    return results


def stock_traces(jobs: Mapping[str, StockJob], folder: Path) -> dict[str, dict[str, np.ndarray]]:
    """:func:`stock_batch` of jobs that stock must run: a job it fails on fails the test."""
    results = stock_batch(jobs, folder)
    for name, result in results.items():
        assert "__error__" not in result, (name, result.get("__error__"))
    return results


def output_refs(model: Any) -> list[str]:
    """Every output port of a ``modeci_mdf`` model's first graph, as ``"node.port"``."""
    return [f"{n.id}.{p.id}" for n in model.graphs[0].nodes for p in n.output_ports]


def every_output_on_stock(
    makers: Mapping[str, Callable[[], Any]], dt: float, steps: int, folder: Path
) -> dict[str, dict[str, np.ndarray]]:
    """:func:`stock_traces` of each model ``makers[name]()`` makes, every output port
    recorded (:func:`output_refs`)."""
    models = {name: make() for name, make in makers.items()}
    jobs = {name: StockJob(m, dt, steps, output_refs(m)) for name, m in models.items()}
    return stock_traces(jobs, folder)


def stock_run(
    job: StockJob, folder: Path, inputs: Mapping[str, np.ndarray] | None = None
) -> dict[str, np.ndarray]:
    """One loop through stock's command line, ``inputs`` (by input-port id, time on axis 0)
    set on each step; its files in ``folder``: the recorded traces."""
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, str(STOCK_LOOP), str(_model_file(job.model, folder / "model.json"))]
    command += ["--dt", repr(job.dt), "--steps", str(job.steps), "--record", *job.record]
    command += ["-o", str(folder / "stock.npz")]
    if inputs:
        np.savez(folder / "inputs.npz", **inputs)
        command += ["--inputs", str(folder / "inputs.npz")]
    done = subprocess.run(command, capture_output=True, text=True, cwd=folder)
    assert done.returncode == 0, f"stock_loop.py failed:\n{done.stderr}"
    with np.load(folder / "stock.npz") as saved:
        return dict(saved)


def with_stock_unset(ours: np.ndarray, stock: np.ndarray) -> np.ndarray:
    """``ours`` with NaN where stock's recording holds NaN in its first steps: before a
    node with a scheduling condition first runs, stock holds None (recorded as NaN)
    and the time loop its initial carried value (docs/timeloops.md). Only that leading
    stretch, element by element: a NaN stock computes later is compared as it is."""
    ours = np.asarray(ours, dtype=float)
    stock = np.asarray(stock, dtype=float).reshape((len(stock),) + ours.shape[1:])
    leading = np.logical_and.accumulate(np.isnan(stock[: len(ours)]), axis=0)
    return np.where(leading, np.nan, ours)

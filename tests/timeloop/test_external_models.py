"""Opt-in: every stateful model file of a folder simulated equal to stock modeci-mdf.

    MDF_LOOPS_STOCK_MODELS=/path/to/MDF/examples pytest -q -s tests/timeloop/test_external_models.py

runs each ``.json`` and ``.yaml`` file below the folder whose first graph holds state (a parameter
with a time derivative, an initial value, conditions or a value that reads itself, or
scheduling conditions) through stock modeci-mdf's loop (one subprocess without
mdf_loops for all of them) and through ``simulate`` on the scheduler, python and
onnxruntime backends. Each must be equal (scheduler and python exactly, onnxruntime to
1e-9 relative), or refused with an ``MdfLoopsError`` (a documented unsupported
construct). ``MDF_LOOPS_STOCK_DT`` (default 0.01) and ``MDF_LOOPS_STOCK_STEPS``
(default 50) set the loop; with ``-s`` a table of the outcomes is printed at the end.
Stock runs each file in its own subprocess, given ``MDF_LOOPS_STOCK_TIMEOUT`` seconds
(default 300; a file it hangs on counts as "stock fails"). The folder may hold
PsyNeuLink's exports (``psyneulink.get_mdf_serialized(composition)`` written to
``.json`` files): their models are stateful the same way.
Skipped without the variable: CI has no such folder.
"""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from stock_batch import StockJob, stock_batch, with_stock_unset

import mdf_loops
from mdf_loops.errors import MdfLoopsError

FOLDER = os.environ.get("MDF_LOOPS_STOCK_MODELS")
DT = float(os.environ.get("MDF_LOOPS_STOCK_DT", "0.01"))
STEPS = int(os.environ.get("MDF_LOOPS_STOCK_STEPS", "50"))
STOCK_TIMEOUT = int(os.environ.get("MDF_LOOPS_STOCK_TIMEOUT", "300"))
#: each backend as a trusted model runs; "python untrusted": as a file from disk runs by
#: default (its expressions under the allow-list, every operation the proof does not cover
#: through its guard)
BACKENDS = ("scheduler", "python", "onnxruntime", "python untrusted")

pytestmark = pytest.mark.skipif(not FOLDER, reason="set MDF_LOOPS_STOCK_MODELS to a folder")


def _stateful_files() -> dict[str, list[str]]:
    """Relative path -> the refs to record, for each stateful model file of the folder."""
    from modeci_mdf.utils import load_mdf

    found = {}
    suffixes = ("json", "yaml", "yml") if FOLDER else ()
    for path in sorted(p for suffix in suffixes for p in Path(FOLDER).rglob(f"*.{suffix}")):
        try:
            graph = load_mdf(str(path)).graphs[0]
        except Exception:  # not an MDF model (or not one modeci-mdf loads)
            continue
        params = [p for n in graph.nodes for p in n.parameters]
        if graph.conditions or any(p.is_stateful() or p.conditions for p in params):
            refs = [f"{n.id}.{p.id}" for n in graph.nodes for p in n.output_ports]
            if refs:
                found[str(path.relative_to(FOLDER))] = refs
    return found


FILES = _stateful_files()
OUTCOMES: dict[tuple[str, str], str] = {}


@pytest.fixture(scope="module")
def stock(tmp_path_factory) -> dict[str, dict]:
    """Stock's loop on each file, one subprocess each: a file stock hangs on (PsyNeuLink's
    exports of a recurrent pathway loop forever in its scheduler) counts as failing."""
    folder = tmp_path_factory.mktemp("external_stock")
    results = {}
    for k, (name, refs) in enumerate(FILES.items()):
        job = {name: StockJob(Path(FOLDER) / name, DT, STEPS, refs)}
        try:
            results.update(stock_batch(job, folder / f"file{k}", timeout=STOCK_TIMEOUT))
        except subprocess.TimeoutExpired:
            results[name] = {"__error__": f"stock did not finish in {STOCK_TIMEOUT} s"}
    return results


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(FILES))
def test_external_model_equals_stock_or_is_refused(name, backend, stock, caplog):
    theirs = stock[name]
    if "__error__" in theirs:
        OUTCOMES[name, backend] = "stock fails"
        pytest.skip(f"stock modeci-mdf fails: {theirs['__error__']}")
    try:
        traces = mdf_loops.simulate(Path(FOLDER) / name, dt=DT, steps=STEPS,
                                    record=FILES[name], backend=backend.split()[0],
                                    trusted=not backend.endswith("untrusted"))
    except MdfLoopsError as exc:
        OUTCOMES[name, backend] = f"refused: {type(exc).__name__}: {exc}"[:160]
        return
    OUTCOMES[name, backend] = "mismatch"
    try:
        for ref in FILES[name]:
            ours, expected = traces[ref], theirs[ref]
            assert ours.shape == expected.shape, (ref, ours.shape, expected.shape)
            if expected.dtype.kind == "f" and np.isnan(expected[:1]).any():
                ours = with_stock_unset(ours, expected)  # the one documented difference
            if backend == "onnxruntime":
                np.testing.assert_allclose(ours, expected, rtol=1e-9, atol=1e-300, err_msg=ref)
            else:
                np.testing.assert_array_equal(ours, expected, err_msg=f"{name} {ref}")
    except AssertionError:
        # a port fed by several overwriting edges: stock's value depends on a set's order
        if any("overwrite one another" in r.getMessage() for r in caplog.records):
            OUTCOMES[name, backend] = "stock not deterministic (warned)"
            pytest.xfail("stock modeci-mdf is not deterministic for this model (warned)")
        raise
    OUTCOMES[name, backend] = "equal"


def test_zz_outcomes_table():
    """The outcomes, one row per file (printed with -s)."""
    if not OUTCOMES:
        pytest.skip("no outcomes")
    for name in sorted(FILES):
        row = " | ".join(OUTCOMES.get((name, b), "-") for b in BACKENDS)
        print(f"{name} | {row}")
    counts = Counter(v.split(":")[0] for v in OUTCOMES.values())
    print(f"{len(FILES)} stateful files; per file and backend: {dict(counts)}")

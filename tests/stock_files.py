"""Stock modeci-mdf as the oracle of small model files: stock_runner.py in a subprocess.

:func:`stock_outputs` writes each model to a JSON file, runs all of them through
stock's ``EvaluableGraph`` in one child process without ``import mdf_loops``
(``tests/stock_runner.py stock``), and gives, per model, its output ports' arrays
(bit-exact, with stock's dtype) or the text of the error stock raised.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from modeci_mdf.mdf import Model

RUNNER = Path(__file__).resolve().parent / "stock_runner.py"


def stock_outputs(models: dict[str, Model], folder: Path) -> dict[str, dict[str, np.ndarray] | str]:
    """``{name: {"node.port": array} or "the error"}`` of stock's run of each model."""
    paths = {name: folder / f"{name}.json" for name in models}
    for name, model in models.items():
        model.to_json_file(str(paths[name]))
    result = folder / "stock.json"
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, str(RUNNER), "stock", str(result), *(f"file:{p}" for p in paths.values())],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    records = json.loads(result.read_text())
    outputs: dict[str, dict[str, np.ndarray] | str] = {}
    for name, path in paths.items():
        record = records[f"file:{path}"]
        if record["error"] is not None:
            outputs[name] = record["error"]
        else:
            described = record["steps"][0]["outputs"]
            outputs[name] = {port: described_array(text) for port, text in described.items()}
    return outputs


#: Python scalars as stock_runner's ``describe`` writes them: the type, then the repr
_PYTHON_SCALARS = {"int": int, "float": float, "bool": lambda text: text == "True"}


def described_array(described: str) -> np.ndarray:
    """The array of stock_runner's ``describe`` of an array, a numpy scalar or a Python
    number, bit-exact (a Python number as numpy holds it)."""
    fields = described.split(" ")
    if fields[0] in _PYTHON_SCALARS:
        return np.asarray(_PYTHON_SCALARS[fields[0]](fields[1]))
    if fields[0] == "ndarray":
        end = next(k for k, f in enumerate(fields) if f.endswith(")"))
        shape = tuple(int(n) for n in " ".join(fields[2:end + 1]).strip("()").split(",") if n.strip())
        return np.frombuffer(bytes.fromhex(fields[end + 1]), dtype=fields[1]).reshape(shape)
    return np.frombuffer(bytes.fromhex(fields[1]), dtype=np.dtype(fields[0])).reshape(())

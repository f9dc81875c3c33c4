"""mdf_loops/timeloop/step.py and names.py: the text of a step's expressions, as written
for the body graph, gives stock modeci-mdf's loop's values (one subprocess without
mdf_loops for all): an Euler step of a derivative with a subscript, and expressions
with comments (dropped where an expression is written inside another).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from modeci_mdf.mdf import Graph, Model, Node, OutputPort, Parameter, ParameterCondition

import mdf_loops
from conftest import needs_input_port_fields

pytestmark = needs_input_port_fields

ROOT = Path(__file__).resolve().parents[2]
STOCK_LOOP = ROOT / "mdf_loops" / "timeloop" / "stock_loop.py"
DT, STEPS = 0.05, 20


def _model(name: str, node: Node) -> Model:
    return Model(id=name, graphs=[Graph(id=f"{name}_graph", nodes=[node])])


def subscripted_derivative() -> Model:
    node = Node(
        id="cells",
        parameters=[
            Parameter(id="k", value=[0.5, 2.0]),
            Parameter(id="x", default_initial_value=[1.0, -1.0], time_derivative="x[0] * k"),
            Parameter(id="y", default_initial_value=0.25, time_derivative="-y * k[1]"),
        ],
        output_ports=[OutputPort(id="x_out", value="x"), OutputPort(id="y_out", value="y")],
    )
    return _model("subscripted_derivative", node)


def commented_expressions() -> Model:
    node = Node(
        id="decay",
        parameters=[
            Parameter(id="rate", value="0.5  # per time unit"),
            Parameter(
                id="v",
                default_initial_value="2.0  # volts",
                time_derivative="-rate * v  # exponential decay",
                conditions=[ParameterCondition(id="floor", test="v < 1.5  # at the floor", value="1.5")],
            ),
        ],
        output_ports=[OutputPort(id="out", value="v * 2  # doubled")],
    )
    return _model("commented_expressions", node)


MODELS = {"subscripted_derivative": subscripted_derivative, "commented_expressions": commented_expressions}
RECORDS = {
    "subscripted_derivative": ["cells.x_out", "cells.y_out"],
    "commented_expressions": ["decay.out"],
}


@pytest.fixture(scope="module")
def stock(tmp_path_factory) -> dict[str, dict]:
    folder = tmp_path_factory.mktemp("step_text")
    jobs = []
    for name, build in MODELS.items():
        path = folder / f"{name}.json"
        build().to_json_file(str(path))
        jobs.append({"model": str(path), "dt": DT, "steps": STEPS, "record": RECORDS[name],
                     "output": str(folder / f"{name}.npz")})
    (folder / "jobs.json").write_text(json.dumps(jobs))
    subprocess.run([sys.executable, str(STOCK_LOOP), "--batch", str(folder / "jobs.json")],
                   check=True, capture_output=True, cwd=folder)
    results = {name: dict(np.load(folder / f"{name}.npz")) for name in MODELS}
    for name, result in results.items():
        assert "__error__" not in result, (name, result.get("__error__"))
    return results


@pytest.mark.parametrize(
    ("name", "backend"),
    [
        ("subscripted_derivative", "python"),  # modeci-mdf's engine cannot read the step:
        ("commented_expressions", "python"),  # it splits "numpy.where(f, a, b + c[0]" at "["
        ("commented_expressions", "scheduler"),
    ],
)
def test_step_text_runs_as_stock(name, backend, stock):
    traces = mdf_loops.simulate(MODELS[name](), dt=DT, steps=STEPS, record=RECORDS[name],
                                backend=backend)
    for ref in RECORDS[name]:
        np.testing.assert_array_equal(traces[ref], stock[name][ref], err_msg=f"{name} {ref}")

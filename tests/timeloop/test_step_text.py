"""mdf_loops/timeloop/step.py and names.py: the text of a step's expressions, as written
for the body graph, gives stock modeci-mdf's loop's values (one subprocess without
mdf_loops for all): an Euler step of a derivative with a subscript, and expressions
with comments (dropped where an expression is written inside another).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_input_port_fields
from modeci_mdf.mdf import Graph, Model, Node, OutputPort, Parameter, ParameterCondition
from stock_batch import StockJob, stock_traces

import mdf_loops

pytestmark = needs_input_port_fields

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
    jobs = {name: StockJob(build(), DT, STEPS, RECORDS[name]) for name, build in MODELS.items()}
    return stock_traces(jobs, tmp_path_factory.mktemp("step_text"))


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

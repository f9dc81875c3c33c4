"""What a time-loop model records (mdf_loops/timeloop/spec.py), read back from the model."""

from __future__ import annotations

import numpy as np
import pytest
from modeci_mdf.mdf import Graph, InputPort, Model, Node, OutputPort, Parameter

import mdf_loops
from mdf_loops.errors import ModelError
from mdf_loops.model.interface import load_model
from mdf_loops.timeloop.spec import LOOP_NODE, TimeLoopSpec, time_loop_spec
from conftest import needs_input_port_fields

pytestmark = needs_input_port_fields  # time loops build ports with default_value/reduce


def _leak() -> Model:
    node = Node(id="leak")
    node.input_ports.append(InputPort(id="drive"))
    node.parameters.append(Parameter(id="x", default_initial_value=0.0,
                                     time_derivative="-x + drive"))
    node.output_ports.append(OutputPort(id="out", value="x"))
    return Model(id="leaky", graphs=[Graph(id="g", nodes=[node])])


def test_the_spec_states_the_arguments_of_to_time_loop(tmp_path):
    model = mdf_loops.to_time_loop(_leak(), dt=0.5, steps=7, record=["leak.out", "leak.x"],
                                   inputs={"drive": np.ones(9)})
    expected = TimeLoopSpec(dt=0.5, steps=7, time_port="time",
                            records={"leak.out": "leak__out", "leak.x": "leak__x"},
                            inputs={"drive": "drive__series"})
    assert time_loop_spec(model) == expected
    loop = model.graphs[0].nodes[0]
    assert loop.id == LOOP_NODE
    assert {"time", "leak__out", "leak__x"} <= {p.id for p in loop.output_ports}
    path = tmp_path / "loop.json"
    model.to_json_file(str(path))
    assert time_loop_spec(load_model(path)) == expected  # it survives the file


def test_a_model_without_a_time_loop_has_no_spec():
    with pytest.raises(ModelError, match="model 'leaky' is not a time-loop model \\(no "
                                         "'time_loop' metadata\\); make one with "
                                         "mdf_loops.to_time_loop"):
        time_loop_spec(_leak())

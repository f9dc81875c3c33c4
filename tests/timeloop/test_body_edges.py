"""mdf_loops/timeloop/body.py: the source graph's edges in the body graph are new edges
equal to them, sharing none of their dicts."""

from modeci_mdf.mdf import Edge, Graph, Model, Node, OutputPort, Parameter, InputPort

import mdf_loops
from mdf_loops.model.convention import body_graph
from conftest import needs_input_port_fields

pytestmark = needs_input_port_fields  # time loops build ports with default_value/reduce


def _model() -> Model:
    a = Node(id="a", parameters=[Parameter(id="x", default_initial_value=1.0, time_derivative="-x")],
             output_ports=[OutputPort(id="out", value="x")])
    b = Node(id="b", input_ports=[InputPort(id="inp")],
             output_ports=[OutputPort(id="out", value="inp * 2")])
    edge = Edge(id="ab", sender="a", sender_port="out", receiver="b", receiver_port="inp",
                parameters={"weight": 0.5}, metadata={"note": ["kept"]})
    return Model(id="m", graphs=[Graph(id="g", nodes=[a, b], edges=[edge])])


def test_the_body_edges_equal_the_source_edges_and_share_nothing():
    source = _model()
    loop = mdf_loops.to_time_loop(source, dt=0.1, steps=3, record=["b.out"])
    body = body_graph(next(p.value for p in loop.graphs[0].nodes[0].parameters if p.id == "body"))
    (original,) = source.graphs[0].edges
    (copied,) = [e for e in body.edges if e.id == "ab"]
    assert copied is not original and copied.to_dict() == original.to_dict()
    copied.parameters["weight"] = 3.0
    copied.metadata["note"].append("changed")
    assert original.parameters == {"weight": 0.5} and original.metadata == {"note": ["kept"]}

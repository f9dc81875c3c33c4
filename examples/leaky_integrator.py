"""A leaky integrator x <- x + dt * (-x + I_t) / tau, Euler-stepped over an input sequence.

The loop is an ``onnx::Scan`` node whose body is an MDF graph written with an
ordinary MDF value expression. The script writes the model as JSON and YAML next
to itself, runs it with modeci-mdf's own ``EvaluableGraph`` and with
``mdf_loops.run``, and prints the result.
"""

from pathlib import Path

import numpy as np
from modeci_mdf.execution_engine import EvaluableGraph
from modeci_mdf.mdf import Graph, InputPort, Model, Node, OutputPort, Parameter
from modeci_mdf.utils import load_mdf

import mdf_loops

HERE = Path(__file__).parent


def example_inputs() -> dict[str, np.ndarray]:
    """Start at rest; a step input, switched off half-way through 50 steps."""
    return {"x0": np.array(0.0), "I": np.where(np.arange(50) < 25, 1.0, 0.0)}


def build_model(dt: float = 0.1, tau: float = 2.0) -> Model:
    body = Graph(id="integrator_step")
    step = Node(id="step")
    step.input_ports += [InputPort(id="x_prev"), InputPort(id="I_t")]
    step.parameters += [Parameter(id="dt", value=dt), Parameter(id="tau", value=tau)]
    step.output_ports.append(OutputPort(id="x_next", value="x_prev + dt * (-x_prev + I_t) / tau"))
    body.nodes.append(step)
    # formal inputs: state, then scan element; formal outputs: new state, then scan output
    mdf_loops.model.set_body_signature(body, ["x_prev", "I_t"], ["step.x_next", "step.x_next"])

    integrate = Node(id="integrate")
    # typed inputs: a scalar state and a sequence of any length (mdf-loops export reads them)
    integrate.input_ports += [InputPort(id="x0", metadata=mdf_loops.model.port_type()),
                              InputPort(id="I", metadata=mdf_loops.model.port_type("steps"))]
    integrate.parameters += [
        Parameter(id="body", value=mdf_loops.model.wrap_body(body)),
        Parameter(id="num_scan_inputs", value=1),
        Parameter(
            id="integrate",
            function="onnx::Scan",
            args={"initial_state_and_scan_inputs": "[x0, I]"},
        ),
    ]
    integrate.output_ports += [
        OutputPort(id="x_final", value="integrate[0]"),
        OutputPort(id="trace", value="integrate[1]"),
    ]
    model = Model(id="leaky_integrator", graphs=[Graph(id="main", nodes=[integrate])])
    # default inputs: `mdf-loops run leaky_integrator.json` needs no -i
    mdf_loops.model.set_input_defaults(model.graphs[0], example_inputs())
    return model


def main() -> None:
    model = build_model()
    model.to_json_file(str(HERE / "leaky_integrator.json"))
    model.to_yaml_file(str(HERE / "leaky_integrator.yaml"))

    current = example_inputs()["I"]  # a step input, switched off half-way

    # modeci-mdf's own engine, on the model read back from YAML
    graph = load_mdf(str(HERE / "leaky_integrator.yaml")).graphs[0]
    engine = EvaluableGraph(graph)
    engine.evaluate(initializer={"x0": np.array(0.0), "I": current})
    trace = engine.enodes["integrate"].evaluable_outputs["trace"].curr_value

    # the same through mdf_loops.run, on the JSON file
    outputs = mdf_loops.run(HERE / "leaky_integrator.json", {"x0": 0.0, "I": current})

    np.set_printoptions(precision=4, suppress=True, linewidth=100)
    print("leaky integrator, 50 Euler steps (dt=0.1, tau=2), input on for 25 steps")
    print("trace:", trace)
    print("x_final:", outputs["integrate.x_final"])
    assert np.allclose(trace, outputs["integrate.trace"])


if __name__ == "__main__":
    main()

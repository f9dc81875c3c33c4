"""An Elman recurrent network run over a sequence: h_t = tanh(W x_t + U h_{t-1} + b).

The loop is an ``onnx::Scan`` node: its one state is the hidden vector, its one
scan input the sequence ``x`` (time along axis 0). The body is one MDF node whose
output port is the Elman update written as an MDF value expression; the weights
are parameters of that node. The body returns the new hidden state twice: once
as the carried state, once as a scan output, so the loop node yields the last
hidden state and the whole ``(T, hidden)`` trajectory.

Run ``python examples/elman_rnn.py`` to write ``elman_rnn.json`` and
``elman_rnn.yaml`` next to this file and evaluate the model.
"""

from pathlib import Path

import numpy as np
from modeci_mdf.execution_engine import EvaluableGraph
from modeci_mdf.mdf import Graph, InputPort, Model, Node, OutputPort, Parameter
from modeci_mdf.utils import load_mdf

import mdf_loops

HERE = Path(__file__).parent
N_INPUT, N_HIDDEN, N_STEPS = 3, 5, 30


def weights(seed: int = 0) -> dict[str, np.ndarray]:
    """Input weights ``W``, recurrent weights ``U`` and bias ``b`` of the network."""
    rng = np.random.default_rng(seed)
    return {
        "W": rng.normal(0.0, 0.8, (N_HIDDEN, N_INPUT)),
        "U": rng.normal(0.0, 0.4, (N_HIDDEN, N_HIDDEN)),
        "b": rng.normal(0.0, 0.1, N_HIDDEN),
    }


def example_inputs(seed: int = 1) -> dict[str, np.ndarray]:
    """A zero initial state and a sine-plus-noise input sequence of ``N_STEPS`` steps."""
    rng = np.random.default_rng(seed)
    t = np.arange(N_STEPS)[:, None]
    x = np.sin(0.3 * t + np.arange(N_INPUT)) + 0.1 * rng.normal(size=(N_STEPS, N_INPUT))
    return {"h0": np.zeros(N_HIDDEN), "x": x}



def build_model() -> Model:
    w = weights()
    body = Graph(id="elman_step")
    cell = Node(id="cell")
    cell.input_ports += [InputPort(id="h_prev"), InputPort(id="x_t")]
    cell.parameters += [Parameter(id=name, value=value.tolist()) for name, value in w.items()]
    cell.output_ports.append(OutputPort(id="h", value="numpy.tanh(W @ x_t + U @ h_prev + b)"))
    body.nodes.append(cell)
    # formal inputs: the state, then the scan element; outputs: new state, then scan output
    mdf_loops.model.set_body_signature(body, ["h_prev", "x_t"], ["cell.h", "cell.h"])

    rnn = Node(id="rnn")
    rnn.input_ports += [InputPort(id="h0", metadata=mdf_loops.model.port_type(N_HIDDEN)),
                          InputPort(id="x", metadata=mdf_loops.model.port_type("steps", N_INPUT))]
    rnn.parameters += [
        Parameter(id="body", value=mdf_loops.model.wrap_body(body)),
        Parameter(id="num_scan_inputs", value=1),
        Parameter(id="rnn", function="onnx::Scan",
                  args={"initial_state_and_scan_inputs": "[h0, x]"}),
    ]
    rnn.output_ports += [
        OutputPort(id="h_final", value="rnn[0]"),
        OutputPort(id="hidden", value="rnn[1]"),
    ]
    model = Model(id="elman_rnn", graphs=[Graph(id="main", nodes=[rnn])])
    # default inputs: `mdf-loops run elman_rnn.json` needs no -i
    mdf_loops.model.set_input_defaults(model.graphs[0], example_inputs())
    return model


def main() -> None:
    model = build_model()
    model.to_json_file(str(HERE / "elman_rnn.json"))
    model.to_yaml_file(str(HERE / "elman_rnn.yaml"))
    inputs = example_inputs()

    outputs = mdf_loops.run(HERE / "elman_rnn.json", inputs)

    # the same model through modeci-mdf's own engine
    engine = EvaluableGraph(load_mdf(str(HERE / "elman_rnn.yaml")).graphs[0])
    engine.evaluate(initializer=inputs)
    hidden = engine.enodes["rnn"].evaluable_outputs["hidden"].curr_value
    assert np.allclose(hidden, outputs["rnn.hidden"])

    np.set_printoptions(precision=4, suppress=True, linewidth=100)
    print(f"Elman RNN: {N_INPUT} inputs, {N_HIDDEN} hidden units, {N_STEPS} steps")
    print("hidden states, first 3 steps:\n", outputs["rnn.hidden"][:3])
    print("final hidden state:", outputs["rnn.h_final"])


if __name__ == "__main__":
    main()

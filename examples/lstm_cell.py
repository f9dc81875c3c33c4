"""A long short-term memory (LSTM) cell run over a sequence under ``onnx::Scan``.

The Scan carries two states, the hidden vector ``h`` and the cell (memory)
vector ``c``, and reads one scan input, the sequence ``x``. Its body is an MDF
graph of three nodes joined by edges::

    gates:  i = sigmoid(W_i x_t + U_i h_prev + b_i)    input gate
            f = sigmoid(W_f x_t + U_f h_prev + b_f)    forget gate
            o = sigmoid(W_o x_t + U_o h_prev + b_o)    output gate
            g = tanh(W_g x_t + U_g h_prev + b_g)       candidate
    cell:   c = f * c_prev + i * g
    hidden: h = o * tanh(c)

The body returns ``h`` and ``c`` (the new states), then ``h`` again as the scan
output, so the loop node yields the final ``h``, the final ``c`` and every
hidden state. The forget-gate bias starts at 1, as is customary.

Run ``python examples/lstm_cell.py`` to write ``lstm_cell.json`` and
``lstm_cell.yaml`` next to this file and evaluate the model.
"""

from pathlib import Path

import numpy as np
from modeci_mdf.execution_engine import EvaluableGraph
from modeci_mdf.mdf import Edge, Graph, InputPort, Model, Node, OutputPort, Parameter
from modeci_mdf.utils import load_mdf

import mdf_loops

HERE = Path(__file__).parent
N_INPUT, N_HIDDEN, N_STEPS = 2, 4, 25
GATES = ("i", "f", "o", "g")


def weights(seed: int = 0) -> dict[str, np.ndarray]:
    """``W_<gate>`` (hidden x input), ``U_<gate>`` (hidden x hidden) and ``b_<gate>``."""
    rng = np.random.default_rng(seed)
    w = {}
    for gate in GATES:
        w[f"W_{gate}"] = rng.normal(0.0, 0.6, (N_HIDDEN, N_INPUT))
        w[f"U_{gate}"] = rng.normal(0.0, 0.4, (N_HIDDEN, N_HIDDEN))
        w[f"b_{gate}"] = np.full(N_HIDDEN, 1.0 if gate == "f" else 0.0)
    return w


def example_inputs(seed: int = 1) -> dict[str, np.ndarray]:
    """Zero initial states and a noisy two-channel input of ``N_STEPS`` steps."""
    rng = np.random.default_rng(seed)
    x = np.stack([np.sign(np.sin(0.4 * np.arange(N_STEPS))),
                  rng.normal(0.0, 0.5, N_STEPS)], axis=1)
    return {"h0": np.zeros(N_HIDDEN), "c0": np.zeros(N_HIDDEN), "x": x}


def _gate_expression(gate: str) -> str:
    z = f"W_{gate} @ x_t + U_{gate} @ h_prev + b_{gate}"
    return f"numpy.tanh({z})" if gate == "g" else f"1 / (1 + numpy.exp(-({z})))"



def build_model() -> Model:
    body = Graph(id="lstm_step")

    gates = Node(id="gates")
    gates.input_ports += [InputPort(id="x_t"), InputPort(id="h_prev")]
    gates.parameters += [Parameter(id=name, value=value.tolist())
                         for name, value in weights().items()]
    gates.output_ports += [OutputPort(id=gate, value=_gate_expression(gate)) for gate in GATES]

    cell = Node(id="cell")
    cell.input_ports += [InputPort(id=p) for p in ("c_prev", "i", "f", "g")]
    cell.output_ports.append(OutputPort(id="c", value="f * c_prev + i * g"))

    hidden = Node(id="hidden")
    hidden.input_ports += [InputPort(id="o"), InputPort(id="c")]
    hidden.output_ports.append(OutputPort(id="h", value="o * numpy.tanh(c)"))

    body.nodes += [gates, cell, hidden]
    for sender, port, receiver in [("gates", "i", "cell"), ("gates", "f", "cell"),
                                   ("gates", "g", "cell"), ("gates", "o", "hidden"),
                                   ("cell", "c", "hidden")]:
        body.edges.append(Edge(id=f"{sender}_{port}_to_{receiver}", sender=sender,
                               sender_port=port, receiver=receiver, receiver_port=port))
    # formal inputs: states h, c, then the scan element; outputs: new h, new c, then h per step
    mdf_loops.model.set_body_signature(body, ["h_prev", "c_prev", "x_t"],
                                 ["hidden.h", "cell.c", "hidden.h"])

    lstm = Node(id="lstm")
    lstm.input_ports += [InputPort(id="h0", metadata=mdf_loops.model.port_type(N_HIDDEN)),
                           InputPort(id="c0", metadata=mdf_loops.model.port_type(N_HIDDEN)),
                           InputPort(id="x", metadata=mdf_loops.model.port_type("steps", N_INPUT))]
    lstm.parameters += [
        Parameter(id="body", value=mdf_loops.model.wrap_body(body)),
        Parameter(id="num_scan_inputs", value=1),
        Parameter(id="lstm", function="onnx::Scan",
                  args={"initial_state_and_scan_inputs": "[h0, c0, x]"}),
    ]
    lstm.output_ports += [
        OutputPort(id="h_final", value="lstm[0]"),
        OutputPort(id="c_final", value="lstm[1]"),
        OutputPort(id="hidden", value="lstm[2]"),
    ]
    model = Model(id="lstm_cell", graphs=[Graph(id="main", nodes=[lstm])])
    # default inputs: `mdf-loops run lstm_cell.json` needs no -i
    mdf_loops.model.set_input_defaults(model.graphs[0], example_inputs())
    return model


def main() -> None:
    model = build_model()
    model.to_json_file(str(HERE / "lstm_cell.json"))
    model.to_yaml_file(str(HERE / "lstm_cell.yaml"))
    inputs = example_inputs()

    outputs = mdf_loops.run(HERE / "lstm_cell.json", inputs)

    engine = EvaluableGraph(load_mdf(str(HERE / "lstm_cell.yaml")).graphs[0])
    engine.evaluate(initializer=inputs)
    c_final = engine.enodes["lstm"].evaluable_outputs["c_final"].curr_value
    assert np.allclose(c_final, outputs["lstm.c_final"])

    np.set_printoptions(precision=4, suppress=True, linewidth=100)
    print(f"LSTM cell: {N_INPUT} inputs, {N_HIDDEN} units, {N_STEPS} steps")
    print("hidden states, last 3 steps:\n", outputs["lstm.hidden"][-3:])
    print("final cell state:", outputs["lstm.c_final"])


if __name__ == "__main__":
    main()

"""A bidirectional RNN: one ``onnx::Scan`` reads the same sequence forwards and backwards.

The Scan node gets the sequence ``x`` twice, as two scan inputs, with
``scan_input_directions = [0, 1]``: at step ``t`` the body sees ``x[t]`` and
``x[T-1-t]``. It carries two states, one Elman RNN per direction::

    forward:  hf_t = tanh(W_fwd x[t]     + U_fwd hf_{t-1} + b_fwd)
    backward: hb_t = tanh(W_bwd x[T-1-t] + U_bwd hb_{t-1} + b_bwd)

and stacks the two hidden states with ``scan_output_directions = [0, 1]``, so the
backward outputs come out in reverse order and row ``t`` of both outputs belongs
to time ``t``: the forward one has read ``x[0..t]``, the backward one
``x[t..T-1]``. A second node, ``onnx::Concat`` on the last axis, joins them
into the usual ``(T, 2 * hidden)`` output of a bidirectional layer.

Run ``python examples/bidirectional_scan.py`` to write ``bidirectional_scan.json``
and ``bidirectional_scan.yaml`` next to this file and evaluate the model.
"""

from pathlib import Path

import numpy as np
from modeci_mdf.execution_engine import EvaluableGraph
from modeci_mdf.mdf import Edge, Graph, InputPort, Model, Node, OutputPort, Parameter
from modeci_mdf.utils import load_mdf

import mdf_loops

HERE = Path(__file__).parent
N_INPUT, N_HIDDEN, N_STEPS = 2, 3, 20
DIRECTIONS = ("fwd", "bwd")


def weights(seed: int = 0) -> dict[str, np.ndarray]:
    """``W_<direction>``, ``U_<direction>``, ``b_<direction>`` for ``fwd`` and ``bwd``."""
    rng = np.random.default_rng(seed)
    w = {}
    for d in DIRECTIONS:
        w[f"W_{d}"] = rng.normal(0.0, 0.8, (N_HIDDEN, N_INPUT))
        w[f"U_{d}"] = rng.normal(0.0, 0.4, (N_HIDDEN, N_HIDDEN))
        w[f"b_{d}"] = rng.normal(0.0, 0.1, N_HIDDEN)
    return w


def example_inputs(seed: int = 1) -> dict[str, np.ndarray]:
    """Zero initial states and a random sequence of ``N_STEPS`` steps."""
    rng = np.random.default_rng(seed)
    return {"h0_fwd": np.zeros(N_HIDDEN), "h0_bwd": np.zeros(N_HIDDEN),
            "x": rng.normal(size=(N_STEPS, N_INPUT))}


def _direction_node(d: str, w: dict[str, np.ndarray]) -> Node:
    node = Node(id=f"rnn_{d}")
    node.input_ports += [InputPort(id=f"h_{d}_prev"), InputPort(id=f"x_{d}")]
    node.parameters += [Parameter(id=f"{name}_{d}", value=w[f"{name}_{d}"].tolist())
                        for name in ("W", "U", "b")]
    node.output_ports.append(
        OutputPort(id="h", value=f"numpy.tanh(W_{d} @ x_{d} + U_{d} @ h_{d}_prev + b_{d})"))
    return node



def build_model() -> Model:
    w = weights()
    body = Graph(id="bidirectional_step")
    body.nodes += [_direction_node(d, w) for d in DIRECTIONS]
    # formal inputs: the two states, then the two scan elements (x[t], x[T-1-t]);
    # outputs: the two new states, then the same two as scan outputs
    mdf_loops.model.set_body_signature(
        body,
        ["h_fwd_prev", "h_bwd_prev", "x_fwd", "x_bwd"],
        ["rnn_fwd.h", "rnn_bwd.h", "rnn_fwd.h", "rnn_bwd.h"],
    )

    birnn = Node(id="birnn")
    birnn.input_ports += [InputPort(id="h0_fwd", metadata=mdf_loops.model.port_type(N_HIDDEN)),
                            InputPort(id="h0_bwd", metadata=mdf_loops.model.port_type(N_HIDDEN)),
                            InputPort(id="x", metadata=mdf_loops.model.port_type("steps", N_INPUT))]
    birnn.parameters += [
        Parameter(id="body", value=mdf_loops.model.wrap_body(body)),
        Parameter(id="num_scan_inputs", value=2),
        Parameter(id="scan_input_directions", value=[0, 1]),
        Parameter(id="scan_output_directions", value=[0, 1]),
        Parameter(id="birnn", function="onnx::Scan",
                  args={"initial_state_and_scan_inputs": "[h0_fwd, h0_bwd, x, x]"}),
    ]
    birnn.output_ports += [
        OutputPort(id="h_final_fwd", value="birnn[0]"),
        OutputPort(id="h_final_bwd", value="birnn[1]"),
        OutputPort(id="hidden_fwd", value="birnn[2]"),
        OutputPort(id="hidden_bwd", value="birnn[3]"),
    ]

    concat = Node(id="concat")
    concat.input_ports += [InputPort(id="hidden_fwd"), InputPort(id="hidden_bwd")]
    concat.parameters += [
        Parameter(id="axis", value=-1),
        Parameter(id="join", function="onnx::Concat",
                  args={"inputs": "[hidden_fwd, hidden_bwd]"}),
    ]
    concat.output_ports.append(OutputPort(id="hidden", value="join"))

    edges = [Edge(id=f"birnn_{p}_to_concat", sender="birnn", sender_port=p,
                  receiver="concat", receiver_port=p) for p in ("hidden_fwd", "hidden_bwd")]
    main = Graph(id="main", nodes=[birnn, concat], edges=edges)
    model = Model(id="bidirectional_scan", graphs=[main])
    # default inputs: `mdf-loops run bidirectional_scan.json` needs no -i
    mdf_loops.model.set_input_defaults(model.graphs[0], example_inputs())
    # onnx::Concat outside the loop means ONNX's Concat, on the stock engine too
    return mdf_loops.model.mark_onnx_semantics(model)


def main() -> None:
    model = build_model()
    model.to_json_file(str(HERE / "bidirectional_scan.json"))
    model.to_yaml_file(str(HERE / "bidirectional_scan.yaml"))
    inputs = example_inputs()

    outputs = mdf_loops.run(HERE / "bidirectional_scan.json", inputs)

    engine = EvaluableGraph(load_mdf(str(HERE / "bidirectional_scan.yaml")).graphs[0])
    engine.evaluate(initializer=inputs)
    hidden = engine.enodes["concat"].evaluable_outputs["hidden"].curr_value
    assert np.allclose(hidden, outputs["concat.hidden"])

    np.set_printoptions(precision=4, suppress=True, linewidth=100)
    print(f"bidirectional RNN: {N_INPUT} inputs, 2 x {N_HIDDEN} hidden units, {N_STEPS} steps")
    print("output rows t = 0, 1 (forward | backward):\n", outputs["concat.hidden"][:2])
    print("backward state at t = 0 equals its final state:",
          np.allclose(outputs["concat.hidden"][0, N_HIDDEN:], outputs["birnn.h_final_bwd"]))


if __name__ == "__main__":
    main()

"""The Rescorla-Wagner learning rule over a sequence of conditioning trials.

On each trial a set of cues is present (``x_t``, one 0/1 entry per cue) and an
outcome of magnitude ``lambda_t`` follows. The associative strengths ``V`` of the
present cues move towards the outcome by the shared prediction error::

    delta_t = lambda_t - V . x_t
    V <- V + alpha * delta_t * x_t

The loop is an ``onnx::Scan`` over trials: one state (``V``) and two scan inputs
(the cue matrix, one row per trial, and the outcome vector). The body returns the
new ``V`` as state and as a scan output, and the prediction error as a second
scan output.

The example inputs are Kamin's blocking design with four cues A, B, C, D:
20 trials of A+ (A followed by the outcome), then 20 trials alternating AB+ and
CD+. A already predicts the outcome when B appears, so B learns little
("blocked"), while D, paired with the novel C, learns as much as C.

Run ``python examples/rescorla_wagner.py`` to write ``rescorla_wagner.json`` and
``rescorla_wagner.yaml`` next to this file and evaluate the model.
"""

from pathlib import Path

import numpy as np
from modeci_mdf.execution_engine import EvaluableGraph
from modeci_mdf.mdf import Graph, InputPort, Model, Node, OutputPort, Parameter
from modeci_mdf.utils import load_mdf

import mdf_loops

HERE = Path(__file__).parent
CUES = ("A", "B", "C", "D")


def example_inputs() -> dict[str, np.ndarray]:
    """Blocking: 20 trials A+, then 20 trials alternating AB+ and CD+; V starts at 0."""
    a, ab, cd = [1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1]
    cues = np.array([a] * 20 + [ab, cd] * 10, dtype=float)
    return {"V0": np.zeros(len(CUES)), "cues": cues, "outcomes": np.ones(len(cues))}



def build_model(alpha: float = 0.2) -> Model:
    body = Graph(id="trial")
    learn = Node(id="learn")
    learn.input_ports += [InputPort(id="V_prev"), InputPort(id="x_t"), InputPort(id="lambda_t")]
    learn.parameters += [
        Parameter(id="alpha", value=alpha),
        Parameter(id="delta", value="lambda_t - V_prev @ x_t"),
    ]
    learn.output_ports += [
        OutputPort(id="V", value="V_prev + alpha * delta * x_t"),
        OutputPort(id="prediction_error", value="delta"),
    ]
    body.nodes.append(learn)
    # formal inputs: state V, then the two scan elements (cues, outcome of trial t);
    # outputs: new V, then V and the prediction error as scan outputs
    mdf_loops.model.set_body_signature(body, ["V_prev", "x_t", "lambda_t"],
                                 ["learn.V", "learn.V", "learn.prediction_error"])

    trials = Node(id="trials")
    trials.input_ports += [InputPort(id="V0", metadata=mdf_loops.model.port_type(len(CUES))),
                           InputPort(id="cues", metadata=mdf_loops.model.port_type("trials", len(CUES))),
                           InputPort(id="outcomes", metadata=mdf_loops.model.port_type("trials"))]
    trials.parameters += [
        Parameter(id="body", value=mdf_loops.model.wrap_body(body)),
        Parameter(id="num_scan_inputs", value=2),
        Parameter(id="trials", function="onnx::Scan",
                  args={"initial_state_and_scan_inputs": "[V0, cues, outcomes]"}),
    ]
    trials.output_ports += [
        OutputPort(id="V_final", value="trials[0]"),
        OutputPort(id="V_history", value="trials[1]"),
        OutputPort(id="prediction_errors", value="trials[2]"),
    ]
    model = Model(id="rescorla_wagner", graphs=[Graph(id="main", nodes=[trials])])
    # default inputs: `mdf-loops run rescorla_wagner.json` needs no -i
    mdf_loops.model.set_input_defaults(model.graphs[0], example_inputs())
    return model


def main() -> None:
    model = build_model()
    model.to_json_file(str(HERE / "rescorla_wagner.json"))
    model.to_yaml_file(str(HERE / "rescorla_wagner.yaml"))
    inputs = example_inputs()

    outputs = mdf_loops.run(HERE / "rescorla_wagner.json", inputs)

    engine = EvaluableGraph(load_mdf(str(HERE / "rescorla_wagner.yaml")).graphs[0])
    engine.evaluate(initializer=inputs)
    v_final = engine.enodes["trials"].evaluable_outputs["V_final"].curr_value
    assert np.allclose(v_final, outputs["trials.V_final"])

    print("Rescorla-Wagner, blocking design (20 x A+, then 10 x (AB+, CD+)), alpha 0.2")
    for cue, v in zip(CUES, outputs["trials.V_final"]):
        print(f"  V_{cue} = {v:.3f}")
    print("B is blocked by A:", outputs["trials.V_final"][1] < 0.5 * outputs["trials.V_final"][3])


if __name__ == "__main__":
    main()

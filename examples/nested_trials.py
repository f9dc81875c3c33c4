"""A loop over trials whose body loops over time steps: a leaky integrator with carry-over.

An experiment is a block of trials; on each trial a stimulus ``s`` is shown for
a number of time steps and a leaky integrator unit (time constant ``tau``)
follows it::

    x <- x + dt * (-x + s_t) / tau                 every time step
    x_start(next trial) = carryover * x_end        between trials

so each trial starts where the last one ended, shrunk by ``carryover`` (a
simple model of sequential effects between trials).

Two nested ``onnx::Scan`` nodes: the outer one (``trials``) scans over the rows
of the stimulus matrix (one row per trial) and carries ``x`` from trial to trial;
its body holds the inner one (``time_steps``), which scans over the time steps
of one trial. The time constant ``tau`` lives in the top-level graph (node
``constants``); the innermost body reads it through ``outer_scope_inputs``,
passed down level by level: ``constants.tau`` -> edge -> port ``tau`` of
``trials`` -> outer-scope input of the trial body -> port ``tau`` of
``time_steps`` -> outer-scope input of the time-step body.

Run ``python examples/nested_trials.py`` to write ``nested_trials.json`` and
``nested_trials.yaml`` next to this file and evaluate the model.
"""

from pathlib import Path

import numpy as np
from modeci_mdf.execution_engine import EvaluableGraph
from modeci_mdf.mdf import Edge, Graph, InputPort, Model, Node, OutputPort, Parameter
from modeci_mdf.utils import load_mdf

import mdf_loops

HERE = Path(__file__).parent
N_TRIALS, N_STEPS, STIMULUS_STEPS = 6, 20, 15


def example_inputs(seed: int = 4) -> dict[str, np.ndarray]:
    """Each trial: a stimulus of random strength for ``STIMULUS_STEPS`` steps, then nothing."""
    strength = np.random.default_rng(seed).uniform(0.0, 1.0, N_TRIALS)
    on = (np.arange(N_STEPS) < STIMULUS_STEPS).astype(float)
    return {"x_init": np.array(0.0), "stimuli": strength[:, None] * on[None, :]}


def _time_step_body(dt: float) -> Graph:
    body = Graph(id="time_step")
    integrate = Node(id="integrate")
    integrate.input_ports += [InputPort(id="x_prev"), InputPort(id="s_t"), InputPort(id="tau")]
    integrate.parameters.append(Parameter(id="dt", value=dt))
    integrate.output_ports.append(OutputPort(id="x", value="x_prev + dt * (-x_prev + s_t) / tau"))
    body.nodes.append(integrate)
    # state x, scan element s_t -> new state, scan output x; tau from the enclosing graph
    return mdf_loops.model.set_body_signature(body, ["x_prev", "s_t"], ["integrate.x", "integrate.x"],
                                        outer_scope_inputs=["tau"])


def _trial_body(dt: float, carryover: float) -> Graph:
    body = Graph(id="trial")
    reset = Node(id="reset")
    reset.input_ports.append(InputPort(id="x_carry"))
    reset.parameters.append(Parameter(id="carryover", value=carryover))
    reset.output_ports.append(OutputPort(id="x_start", value="carryover * x_carry"))

    time_steps = Node(id="time_steps")
    time_steps.input_ports += [InputPort(id="x_start"), InputPort(id="stimulus"),
                               InputPort(id="tau")]
    time_steps.parameters += [
        Parameter(id="body", value=mdf_loops.model.wrap_body(_time_step_body(dt))),
        Parameter(id="num_scan_inputs", value=1),
        Parameter(id="time_steps", function="onnx::Scan",
                  args={"initial_state_and_scan_inputs": "[x_start, stimulus]"}),
    ]
    time_steps.output_ports += [
        OutputPort(id="x_end", value="time_steps[0]"),
        OutputPort(id="trace", value="time_steps[1]"),
    ]
    body.nodes += [reset, time_steps]
    body.edges.append(Edge(id="reset_to_time_steps", sender="reset", sender_port="x_start",
                           receiver="time_steps", receiver_port="x_start"))
    # state x (carried across trials), scan element: this trial's stimulus row ->
    # new state, scan outputs: x at the end of the trial and the trial's trace
    return mdf_loops.model.set_body_signature(
        body, ["x_carry", "stimulus"],
        ["time_steps.x_end", "time_steps.x_end", "time_steps.trace"],
        outer_scope_inputs=["tau"],
    )



def build_model(tau: float = 1.0, dt: float = 0.1, carryover: float = 0.5) -> Model:
    constants = Node(id="constants")
    constants.parameters.append(Parameter(id="tau", value=tau))
    constants.output_ports.append(OutputPort(id="tau", value="tau"))

    trials = Node(id="trials")
    trials.input_ports += [InputPort(id="x_init", metadata=mdf_loops.model.port_type()),
                           InputPort(id="stimuli", metadata=mdf_loops.model.port_type("trials", "steps")),
                           InputPort(id="tau")]
    trials.parameters += [
        Parameter(id="body", value=mdf_loops.model.wrap_body(_trial_body(dt, carryover))),
        Parameter(id="num_scan_inputs", value=1),
        Parameter(id="trials", function="onnx::Scan",
                  args={"initial_state_and_scan_inputs": "[x_init, stimuli]"}),
    ]
    trials.output_ports += [
        OutputPort(id="x_final", value="trials[0]"),
        OutputPort(id="x_end_of_trial", value="trials[1]"),
        OutputPort(id="traces", value="trials[2]"),
    ]
    main = Graph(id="main", nodes=[constants, trials], edges=[
        Edge(id="tau_to_trials", sender="constants", sender_port="tau",
             receiver="trials", receiver_port="tau"),
    ])
    model = Model(id="nested_trials", graphs=[main])
    # default inputs: `mdf-loops run nested_trials.json` needs no -i
    mdf_loops.model.set_input_defaults(model.graphs[0], example_inputs())
    return model


def main() -> None:
    model = build_model()
    model.to_json_file(str(HERE / "nested_trials.json"))
    model.to_yaml_file(str(HERE / "nested_trials.yaml"))
    inputs = example_inputs()

    outputs = mdf_loops.run(HERE / "nested_trials.json", inputs)

    engine = EvaluableGraph(load_mdf(str(HERE / "nested_trials.yaml")).graphs[0])
    engine.evaluate(initializer=inputs)
    traces = engine.enodes["trials"].evaluable_outputs["traces"].curr_value
    assert np.allclose(traces, outputs["trials.traces"])

    np.set_printoptions(precision=4, suppress=True, linewidth=100)
    print(f"{N_TRIALS} trials x {N_STEPS} time steps, tau 1.0, dt 0.1, carry-over 0.5")
    print("stimulus strength per trial:", inputs["stimuli"][:, 0])
    print("x at the first step of each trial:", outputs["trials.traces"][:, 0])
    print("x at the end of each trial:       ", outputs["trials.x_end_of_trial"])
    print("traces shape:", outputs["trials.traces"].shape)


if __name__ == "__main__":
    main()

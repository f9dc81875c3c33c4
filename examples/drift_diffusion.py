"""A drift-diffusion decision process, integrated until the evidence crosses +a or -a.

Evidence ``x`` starts at 0 and is Euler-Maruyama stepped with a seeded standard
normal noise sequence ``noise``::

    x <- x + v * dt + s * sqrt(dt) * noise[i]

The loop is an ``onnx::Loop`` node. Its condition ends it: the body returns
``|x| < a`` (still undecided) as the loop's next condition, so the loop stops at
the first step that crosses a threshold. Its maximum trip count is the length of
the noise sequence (computed in the graph by ``onnx::Size``), so a trial that
never decides stops when the noise runs out. The body reads the noise from the
enclosing graph (an outer-scope input) and picks element ``i``, the loop's
iteration number, with ``onnx::Gather``.

Loop-carried values: the evidence ``x`` and the elapsed time ``t``; scan output:
the evidence after every step. A last node turns the final evidence into a
choice: +1 (upper threshold), -1 (lower) or 0 (no decision).

Run ``python examples/drift_diffusion.py`` to write ``drift_diffusion.json`` and
``drift_diffusion.yaml`` next to this file and evaluate the model.
"""

from pathlib import Path

import numpy as np
from modeci_mdf.execution_engine import EvaluableGraph
from modeci_mdf.mdf import Edge, Graph, InputPort, Model, Node, OutputPort, Parameter
from modeci_mdf.utils import load_mdf

import mdf_loops

HERE = Path(__file__).parent
MAX_STEPS = 200


def example_inputs(seed: int = 3) -> dict[str, np.ndarray]:
    """A seeded standard normal noise sequence of ``MAX_STEPS`` samples."""
    return {"noise": np.random.default_rng(seed).standard_normal(MAX_STEPS)}



def build_model(drift: float = 1.0, threshold: float = 1.0, noise_sd: float = 1.0,
                dt: float = 0.01) -> Model:
    body = Graph(id="ddm_step")
    sample = Node(id="sample")
    sample.input_ports += [InputPort(id="i"), InputPort(id="noise")]
    sample.parameters += [
        Parameter(id="axis", value=0),
        Parameter(id="noise_i", function="onnx::Gather", args={"data": "noise", "indices": "i"}),
    ]
    sample.output_ports.append(OutputPort(id="noise_i", value="noise_i"))

    accumulate = Node(id="accumulate")
    accumulate.input_ports += [InputPort(id="x_prev"), InputPort(id="t_prev"),
                               InputPort(id="noise_i")]
    accumulate.parameters += [
        Parameter(id="drift", value=drift),
        Parameter(id="noise_sd", value=noise_sd),
        Parameter(id="dt", value=dt),
        Parameter(id="threshold", value=threshold),
        Parameter(id="x", value="x_prev + drift * dt + noise_sd * numpy.sqrt(dt) * noise_i"),
    ]
    accumulate.output_ports += [
        OutputPort(id="undecided", value="numpy.abs(x) < threshold"),
        OutputPort(id="x", value="x"),
        OutputPort(id="t", value="t_prev + dt"),
    ]
    body.nodes += [sample, accumulate]
    body.edges.append(Edge(id="sample_to_accumulate", sender="sample", sender_port="noise_i",
                           receiver="accumulate", receiver_port="noise_i"))
    # Loop body: (iteration number, condition, carried x, carried t) ->
    #            (next condition, new x, new t, scan output x)
    mdf_loops.model.set_body_signature(
        body,
        ["i", "cond_in", "x_prev", "t_prev"],
        ["accumulate.undecided", "accumulate.x", "accumulate.t", "accumulate.x"],
        outer_scope_inputs=["noise"],
    )

    count = Node(id="count")
    count.input_ports.append(InputPort(id="noise", metadata=mdf_loops.model.port_type("max_steps")))
    count.parameters.append(Parameter(id="size", function="onnx::Size", args={"data": "noise"}))
    count.output_ports.append(OutputPort(id="n", value="size"))

    ddm = Node(id="ddm")
    ddm.input_ports += [InputPort(id="noise", metadata=mdf_loops.model.port_type("max_steps")),
                        InputPort(id="max_steps")]
    ddm.parameters += [
        Parameter(id="body", value=mdf_loops.model.wrap_body(body)),
        Parameter(id="start", value=True),
        Parameter(id="x0", value=0.0),
        Parameter(id="t0", value=0.0),
        Parameter(id="ddm", function="onnx::Loop",
                  args={"M": "max_steps", "cond": "start", "v_initial": "[x0, t0]"}),
    ]
    ddm.output_ports += [
        OutputPort(id="evidence", value="ddm[0]"),
        OutputPort(id="decision_time", value="ddm[1]"),
        OutputPort(id="trace", value="ddm[2]"),
    ]

    decide = Node(id="decide")
    decide.input_ports.append(InputPort(id="evidence"))
    decide.parameters.append(Parameter(id="threshold", value=threshold))
    decide.output_ports.append(OutputPort(
        id="choice",
        value="numpy.where(evidence >= threshold, 1, numpy.where(evidence <= -threshold, -1, 0))",
    ))

    main = Graph(id="main", nodes=[count, ddm, decide], edges=[
        Edge(id="count_to_ddm", sender="count", sender_port="n",
             receiver="ddm", receiver_port="max_steps"),
        Edge(id="ddm_to_decide", sender="ddm", sender_port="evidence",
             receiver="decide", receiver_port="evidence"),
    ])
    model = Model(id="drift_diffusion", graphs=[main])
    # default inputs: `mdf-loops run drift_diffusion.json` needs no -i
    mdf_loops.model.set_input_defaults(model.graphs[0], example_inputs())
    return model


def main() -> None:
    model = build_model()
    model.to_json_file(str(HERE / "drift_diffusion.json"))
    model.to_yaml_file(str(HERE / "drift_diffusion.yaml"))
    inputs = example_inputs()

    outputs = mdf_loops.run(HERE / "drift_diffusion.json", inputs)

    engine = EvaluableGraph(load_mdf(str(HERE / "drift_diffusion.yaml")).graphs[0])
    engine.evaluate(initializer=inputs)
    trace = engine.enodes["ddm"].evaluable_outputs["trace"].curr_value
    assert np.allclose(trace, outputs["ddm.trace"])

    print("drift-diffusion: drift 1.0, thresholds +-1.0, dt 0.01, "
          f"at most {MAX_STEPS} steps")
    print(f"choice {int(outputs['decide.choice']):+d} after {len(outputs['ddm.trace'])} steps, "
          f"decision time {float(outputs['ddm.decision_time']):.2f} s, "
          f"final evidence {outputs['ddm.trace'][-1]:.4f}")


if __name__ == "__main__":
    main()

"""Newton's method for a root of a cubic, iterated until the step is below a tolerance.

For ``f(x) = c3 x^3 + c2 x^2 + c1 x + c0`` each iteration takes the step
``f(x) / f'(x)`` (both by Horner's rule) and moves ``x`` by it::

    step = f(x) / f'(x)
    x <- x - step          while |step| > tol

The default cubic is ``x^3 - 2x - 5``, the equation Newton's method was first
shown on (by Wallis, 1685); its real root is 2.0945514815423265.

The loop is an ``onnx::Loop`` node with no maximum trip count: only its
condition ends it. The body returns ``|step| > tol`` as the next condition, the
new ``x`` as the loop-carried value, and ``x`` again as a scan output, so the
loop node yields the root and every iterate. ``mdf_loops.run(...,
max_iterations=n)`` bounds a loop that would not converge.

Run ``python examples/newton.py`` to write ``newton.json`` and ``newton.yaml``
next to this file and evaluate the model.
"""

from pathlib import Path

import numpy as np
from modeci_mdf.execution_engine import EvaluableGraph
from modeci_mdf.mdf import Graph, InputPort, Model, Node, OutputPort, Parameter
from modeci_mdf.utils import load_mdf

import mdf_loops

HERE = Path(__file__).parent
WALLIS = (1.0, 0.0, -2.0, -5.0)  # x^3 - 2x - 5


def example_inputs() -> dict[str, np.ndarray]:
    """Start at x = 1."""
    return {"x0": np.array(1.0)}



def build_model(coefficients: tuple[float, float, float, float] = WALLIS,
                tol: float = 1e-10) -> Model:
    c3, c2, c1, c0 = coefficients
    body = Graph(id="newton_step")
    step = Node(id="step")
    step.input_ports.append(InputPort(id="x_prev"))
    step.parameters += [
        Parameter(id="c3", value=c3),
        Parameter(id="c2", value=c2),
        Parameter(id="c1", value=c1),
        Parameter(id="c0", value=c0),
        Parameter(id="tol", value=tol),
        Parameter(id="f", value="((c3 * x_prev + c2) * x_prev + c1) * x_prev + c0"),
        Parameter(id="df", value="(3 * c3 * x_prev + 2 * c2) * x_prev + c1"),
        Parameter(id="delta", value="f / df"),
    ]
    step.output_ports += [
        OutputPort(id="not_converged", value="numpy.abs(delta) > tol"),
        OutputPort(id="x", value="x_prev - delta"),
    ]
    body.nodes.append(step)
    # Loop body: (iteration number, condition, carried x) ->
    #            (next condition, new x, scan output x)
    mdf_loops.model.set_body_signature(body, ["iteration", "cond_in", "x_prev"],
                                 ["step.not_converged", "step.x", "step.x"])

    newton = Node(id="newton")
    newton.input_ports.append(InputPort(id="x0", metadata=mdf_loops.model.port_type()))
    newton.parameters += [
        Parameter(id="body", value=mdf_loops.model.wrap_body(body)),
        Parameter(id="start", value=True),
        Parameter(id="newton", function="onnx::Loop",
                  args={"cond": "start", "v_initial": "[x0]"}),
    ]
    newton.output_ports += [
        OutputPort(id="root", value="newton[0]"),
        OutputPort(id="iterates", value="newton[1]"),
    ]
    model = Model(id="newton", graphs=[Graph(id="main", nodes=[newton])])
    # default inputs: `mdf-loops run newton.json` needs no -i
    mdf_loops.model.set_input_defaults(model.graphs[0], example_inputs())
    return model


def main() -> None:
    model = build_model()
    model.to_json_file(str(HERE / "newton.json"))
    model.to_yaml_file(str(HERE / "newton.yaml"))
    inputs = example_inputs()

    outputs = mdf_loops.run(HERE / "newton.json", inputs)

    engine = EvaluableGraph(load_mdf(str(HERE / "newton.yaml")).graphs[0])
    engine.evaluate(initializer=inputs)
    root = engine.enodes["newton"].evaluable_outputs["root"].curr_value
    assert np.allclose(root, outputs["newton.root"])

    np.set_printoptions(precision=12, linewidth=100)
    print("Newton's method on x^3 - 2x - 5 from x = 1, tolerance 1e-10")
    print("iterates:", outputs["newton.iterates"])
    print(f"root: {float(outputs['newton.root']):.16f} "
          f"after {len(outputs['newton.iterates'])} iterations")


if __name__ == "__main__":
    main()

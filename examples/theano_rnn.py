"""A recurrent network with taps on its input and on its state, from Theano's scan guide::

    x(n) = tanh(W x(n-1) + W_in_1 u(n) + W_in_2 u(n-4) + W_feedback y(n-1))
    y(n) = W_out x(n-3)

The sequence ``u`` has taps [-4, 0]: each tap becomes its own shifted slice of
``u`` fed to the scan, and the scan starts at ``u[4]``. The output ``x`` has taps
[-3, -1], so its initial state ``x0`` holds three rows (x[-3], x[-2], x[-1]) and
the loop carries a window of the last three values; ``y`` uses the default tap
-1. ``strict=True``: ``fn`` uses nothing but its arguments.
"""

from pathlib import Path

import numpy as np
from modeci_mdf.mdf import Model
from modeci_mdf.utils import load_mdf

import mdf_loops
from mdf_loops import authoring as T

HERE = Path(__file__).parent
NAME = "theano_rnn"


N_IN, N_HIDDEN, N_OUT = 2, 3, 2


def one_step(u_tm4, u_t, x_tm3, x_tm1, y_tm1, W, W_in_1, W_in_2, W_feedback, W_out):
    x_t = T.tanh(T.dot(x_tm1, W)
                 + T.dot(u_t, W_in_1)
                 + T.dot(u_tm4, W_in_2)
                 + T.dot(y_tm1, W_feedback))
    y_t = T.dot(x_tm3, W_out)
    return [x_t, y_t]


def build_model() -> Model:
    W = T.input("W", (N_HIDDEN, N_HIDDEN))
    W_in_1 = T.input("W_in_1", (N_IN, N_HIDDEN))
    W_in_2 = T.input("W_in_2", (N_IN, N_HIDDEN))
    W_feedback = T.input("W_feedback", (N_OUT, N_HIDDEN))
    W_out = T.input("W_out", (N_HIDDEN, N_OUT))
    u = T.input("u", (None, N_IN))  # a sequence of vectors
    x0 = T.input("x0", (3, N_HIDDEN))  # a matrix: it has to cover x[-3]
    y0 = T.input("y0", (N_OUT,))  # a vector: scan only provides y[-1]
    ([x_vals, y_vals], updates) = T.scan(
        fn=one_step,
        sequences=dict(input=u, taps=[-4, -0]),
        outputs_info=[dict(initial=x0, taps=[-3, -1]), y0],
        non_sequences=[W, W_in_1, W_in_2, W_feedback, W_out],
        strict=True,
        name="rnn")
    model = T.build_model({"x_vals": x_vals, "y_vals": y_vals}, name=NAME)
    # default inputs: `mdf-loops run theano_rnn.json` needs no -i
    mdf_loops.model.set_input_defaults(model.graphs[0], example_inputs())
    return model


def example_inputs(steps: int = 12, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "W": rng.normal(0, 0.5, (N_HIDDEN, N_HIDDEN)),
        "W_in_1": rng.normal(0, 0.5, (N_IN, N_HIDDEN)),
        "W_in_2": rng.normal(0, 0.5, (N_IN, N_HIDDEN)),
        "W_feedback": rng.normal(0, 0.5, (N_OUT, N_HIDDEN)),
        "W_out": rng.normal(0, 0.5, (N_HIDDEN, N_OUT)),
        "u": rng.normal(0, 1.0, (steps, N_IN)),
        "x0": rng.normal(0, 0.1, (3, N_HIDDEN)),
        "y0": np.zeros(N_OUT),
    }


def run_with_stock_engine(path: Path, inputs: dict) -> dict:
    """Evaluate the saved model with modeci-mdf's ``EvaluableGraph``; outputs by name."""
    return mdf_loops.model.stock_evaluate(load_mdf(str(path)).graphs[0], inputs)


def main() -> None:
    model = build_model()
    model.to_json_file(str(HERE / f"{NAME}.json"))
    model.to_yaml_file(str(HERE / f"{NAME}.yaml"))
    outputs = mdf_loops.run(HERE / f"{NAME}.json", example_inputs())
    stock = run_with_stock_engine(HERE / f"{NAME}.yaml", example_inputs())
    for name in ("x_vals", "y_vals"):
        assert np.allclose(outputs[name], stock[name], rtol=1e-12, atol=1e-12)
    np.set_printoptions(precision=4, suppress=True)
    print("x:", outputs["x_vals"], "y:", outputs["y_vals"], sep="\n")


if __name__ == "__main__":
    main()

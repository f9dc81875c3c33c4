"""A Gibbs chain of 10 steps in a binary RBM, with reproducible random numbers.

Theano's scan guide samples with a shared random stream updated by the scan's
``updates``. ONNX's random operators are not reproducible across runtimes, so
here the random numbers come from a linear congruential generator (one per
unit) whose states are ``shared`` values: ``fn`` returns ``{rng: next state}``,
which the loop carries as state, and ``updates[rng]`` is the state after the
last step. Only ``values[-1]`` is used, so the sample is carried, not stacked.
"""

from pathlib import Path

import numpy as np
from modeci_mdf.mdf import Model
from modeci_mdf.utils import load_mdf

import mdf_loops
from mdf_loops import authoring as T

HERE = Path(__file__).parent
NAME = "theano_gibbs"


N_VISIBLE, N_HIDDEN = 6, 4
LCG_MULTIPLIER, LCG_INCREMENT, LCG_MODULUS = 1103515245, 12345, 2**31
HIDDEN_SEEDS = np.arange(1, N_HIDDEN + 1, dtype=np.int64) * 7919
VISIBLE_SEEDS = np.arange(1, N_VISIBLE + 1, dtype=np.int64) * 104729


def uniform(state):
    """The generator's next state, and uniform numbers in [0, 1) drawn from it."""
    following = (state * LCG_MULTIPLIER + LCG_INCREMENT) % LCG_MODULUS
    return following, T.cast(following, "float64") / LCG_MODULUS


def build_model(steps: int = 10) -> Model:
    W = T.input("W", (N_VISIBLE, N_HIDDEN))
    bvis = T.input("bvis", (N_VISIBLE,))
    bhid = T.input("bhid", (N_HIDDEN,))
    sample = T.input("sample", (N_VISIBLE,))
    hidden_rng = T.shared(HIDDEN_SEEDS, "hidden_rng")
    visible_rng = T.shared(VISIBLE_SEEDS, "visible_rng")

    def one_step(vsample, W, bvis, bhid):
        hmean = T.sigmoid(T.dot(vsample, W) + bhid)
        hidden_state, hidden_noise = uniform(hidden_rng)
        hsample = T.cast(hidden_noise < hmean, "float64")
        vmean = T.sigmoid(T.dot(hsample, W.T) + bvis)
        visible_state, visible_noise = uniform(visible_rng)
        vsample_next = T.cast(visible_noise < vmean, "float64")
        return vsample_next, {hidden_rng: hidden_state, visible_rng: visible_state}

    values, updates = T.scan(one_step, outputs_info=sample, non_sequences=[W, bvis, bhid],
                             n_steps=steps, strict=True, name="gibbs")
    model = T.build_model({"sample_after_chain": values[-1],
                           "hidden_rng_after": updates[hidden_rng],
                           "visible_rng_after": updates[visible_rng]}, name=NAME)
    # default inputs: `mdf-loops run theano_gibbs.json` needs no -i
    mdf_loops.model.set_input_defaults(model.graphs[0], example_inputs())
    return model


def example_inputs(seed: int = 1234) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "W": rng.normal(0, 1.0, (N_VISIBLE, N_HIDDEN)),
        "bvis": rng.normal(0, 0.5, N_VISIBLE),
        "bhid": rng.normal(0, 0.5, N_HIDDEN),
        "sample": (rng.random(N_VISIBLE) < 0.5).astype(np.float64),
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
    for name, value in outputs.items():
        assert np.array_equal(value, stock[name])
    print("sample after 10 Gibbs steps:", outputs["sample_after_chain"])


if __name__ == "__main__":
    main()

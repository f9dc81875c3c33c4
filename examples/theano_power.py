"""A**k elementwise by repeated multiplication: the first example of Theano's scan guide.

``result`` holds A**1 ... A**k; only ``result[-1]`` is used, so the loop is
lowered to an ``onnx::Loop`` that carries the running product as a state and
stacks nothing (Theano's memory optimisation). The script writes the model as
JSON and YAML next to itself and runs it with modeci-mdf's own
``EvaluableGraph`` and with ``mdf_loops.run``.
"""

from pathlib import Path

import numpy as np
from modeci_mdf.mdf import Model
from modeci_mdf.utils import load_mdf

import mdf_loops
from mdf_loops import authoring as T

HERE = Path(__file__).parent
NAME = "theano_power"


def build_model() -> Model:
    k = T.input("k", (), "int32")
    A = T.input("A", (None,), "float32")
    result, updates = T.scan(fn=lambda prior_result, A: prior_result * A,
                             outputs_info=T.ones_like(A),
                             non_sequences=A,
                             n_steps=k)
    final_result = result[-1]  # A**k; the steps before are not kept
    model = T.build_model({"A_to_the_k": final_result}, name=NAME)
    # default inputs: `mdf-loops run theano_power.json` needs no -i
    mdf_loops.model.set_input_defaults(model.graphs[0], example_inputs())
    return model


def example_inputs(k: int = 2) -> dict:
    return {"A": np.arange(10, dtype=np.float32), "k": np.int32(k)}


def run_with_stock_engine(path: Path, inputs: dict) -> dict:
    """Evaluate the saved model with modeci-mdf's ``EvaluableGraph``; outputs by name."""
    return mdf_loops.model.stock_evaluate(load_mdf(str(path)).graphs[0], inputs)


def main() -> None:
    model = build_model()
    model.to_json_file(str(HERE / f"{NAME}.json"))
    model.to_yaml_file(str(HERE / f"{NAME}.yaml"))
    for k in (2, 4):
        outputs = mdf_loops.run(HERE / f"{NAME}.json", example_inputs(k))
        stock = run_with_stock_engine(HERE / f"{NAME}.yaml", example_inputs(k))
        assert np.array_equal(outputs["A_to_the_k"], stock["A_to_the_k"])
        print(f"A**{k}:", outputs["A_to_the_k"])


if __name__ == "__main__":
    main()

"""Powers of two until they pass a maximum: scan as a repeat-until loop.

From Theano's scan guide ("conditional ending of scan"): ``fn`` returns its
output and ``until(condition)``; the scan stops after the step where the
condition holds, or after ``n_steps = 1024`` steps. It lowers to an
``onnx::Loop`` with 1024 as its maximum trip count. For ``max_value = 45`` the
result is [2, 4, 8, 16, 32, 64].
"""

from pathlib import Path

import numpy as np
from modeci_mdf.mdf import Model
from modeci_mdf.utils import load_mdf

import mdf_loops
from mdf_loops import authoring as T

HERE = Path(__file__).parent
NAME = "theano_powers_of_two"


def power_of_2(previous_power, max_value):
    return previous_power * 2, T.until(previous_power * 2 > max_value)


def build_model() -> Model:
    max_value = T.input("max_value", (), "float64")
    values, _ = T.scan(power_of_2,
                       outputs_info=T.constant(1.0),
                       non_sequences=max_value,
                       n_steps=1024)
    model = T.build_model({"values": values}, name=NAME)
    # default inputs: `mdf-loops run theano_powers_of_two.json` needs no -i
    mdf_loops.model.set_input_defaults(model.graphs[0], example_inputs())
    return model


def example_inputs(max_value: float = 45.0) -> dict:
    return {"max_value": np.float64(max_value)}


def run_with_stock_engine(path: Path, inputs: dict) -> dict:
    """Evaluate the saved model with modeci-mdf's ``EvaluableGraph``; outputs by name."""
    return mdf_loops.model.stock_evaluate(load_mdf(str(path)).graphs[0], inputs)


def main() -> None:
    model = build_model()
    model.to_json_file(str(HERE / f"{NAME}.json"))
    model.to_yaml_file(str(HERE / f"{NAME}.yaml"))
    outputs = mdf_loops.run(HERE / f"{NAME}.json", example_inputs())
    stock = run_with_stock_engine(HERE / f"{NAME}.yaml", example_inputs())
    assert np.array_equal(outputs["values"], stock["values"])
    print(outputs["values"])


if __name__ == "__main__":
    main()

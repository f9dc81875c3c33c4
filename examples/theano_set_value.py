"""Zeros everywhere except one value per step: ``set_subtensor`` inside a scan.

From Theano's scan guide ("another simple example"): each step takes a
location and a value and returns a matrix shaped like ``output_model`` that is
zero except at that location. ``set_subtensor(zeros[i, j], v)`` becomes one ONNX
``ScatterND`` node in the loop body.
"""

from pathlib import Path

import numpy as np
from modeci_mdf.mdf import Model
from modeci_mdf.utils import load_mdf

import mdf_loops
from mdf_loops import authoring as T

HERE = Path(__file__).parent
NAME = "theano_set_value"


def set_value_at_position(a_location, a_value, output_model):
    zeros = T.zeros_like(output_model)
    zeros_subtensor = zeros[a_location[0], a_location[1]]
    return T.set_subtensor(zeros_subtensor, a_value)


def build_model() -> Model:
    location = T.input("location", (None, 2), "int32")
    values = T.input("values", (None,), "float32")
    output_model = T.input("output_model", (None, None), "float32")
    result, updates = T.scan(fn=set_value_at_position,
                             outputs_info=None,
                             sequences=[location, values],
                             non_sequences=output_model)
    model = T.build_model({"result": result}, name=NAME)
    # default inputs: `mdf-loops run theano_set_value.json` needs no -i
    mdf_loops.model.set_input_defaults(model.graphs[0], example_inputs())
    return model


def example_inputs() -> dict:
    return {
        "location": np.asarray([[1, 1], [2, 3]], dtype=np.int32),
        "values": np.asarray([42, 50], dtype=np.float32),
        "output_model": np.zeros((5, 5), dtype=np.float32),
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
    assert np.array_equal(outputs["result"], stock["result"])
    print(outputs["result"])


if __name__ == "__main__":
    main()

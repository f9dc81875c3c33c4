"""A polynomial from its coefficients, with ``arange`` as Python's ``enumerate``.

From Theano's scan guide: the scan runs over two sequences of different
lengths (the coefficients, and ``arange(10000)`` for the powers), so it stops
at the shorter one. No output is fed back (``outputs_info=None``): the
components are stacked, then summed. With coefficients [1, 0, 2] and x = 3 the
value is 1 + 0*3 + 2*9 = 19.
"""

from pathlib import Path

import numpy as np
from modeci_mdf.mdf import Model
from modeci_mdf.utils import load_mdf

import mdf_loops
from mdf_loops import authoring as T

HERE = Path(__file__).parent
NAME = "theano_polynomial"


def build_model(max_coefficients_supported: int = 10000) -> Model:
    coefficients = T.input("coefficients", (None,), "float32")
    x = T.input("x", (), "float32")
    components, updates = T.scan(
        fn=lambda coefficient, power, free_variable: coefficient * (free_variable ** power),
        outputs_info=None,
        sequences=[coefficients, T.arange(max_coefficients_supported)],
        non_sequences=x)
    polynomial = components.sum()
    model = T.build_model({"polynomial": polynomial}, name=NAME)
    # default inputs: `mdf-loops run theano_polynomial.json` needs no -i
    mdf_loops.model.set_input_defaults(model.graphs[0], example_inputs())
    return model


def example_inputs() -> dict:
    return {"coefficients": np.asarray([1, 0, 2], dtype=np.float32), "x": np.float32(3)}


def run_with_stock_engine(path: Path, inputs: dict) -> dict:
    """Evaluate the saved model with modeci-mdf's ``EvaluableGraph``; outputs by name."""
    return mdf_loops.model.stock_evaluate(load_mdf(str(path)).graphs[0], inputs)


def main() -> None:
    model = build_model()
    model.to_json_file(str(HERE / f"{NAME}.json"))
    model.to_yaml_file(str(HERE / f"{NAME}.yaml"))
    outputs = mdf_loops.run(HERE / f"{NAME}.json", example_inputs())
    stock = run_with_stock_engine(HERE / f"{NAME}.yaml", example_inputs())
    assert np.array_equal(outputs["polynomial"], stock["polynomial"])
    print(outputs["polynomial"])
    print(1.0 * (3 ** 0) + 0.0 * (3 ** 1) + 2.0 * (3 ** 2))


if __name__ == "__main__":
    main()

"""Triangular numbers by accumulation: 0, 1, 3, 6, ..., 105 for ``up_to = 15``.

From Theano's scan guide ("simple accumulation into a scalar"): the sequence is
``arange(up_to)`` and the running sum is fed back. The initial state has the
sequence's element type (int32), as scan requires: it never casts it.
"""

from pathlib import Path

import numpy as np
from modeci_mdf.mdf import Model
from modeci_mdf.utils import load_mdf

import mdf_loops
from mdf_loops import authoring as T

HERE = Path(__file__).parent
NAME = "theano_triangular"


def accumulate_by_adding(arange_val, sum_to_date):
    return sum_to_date + arange_val


def build_model() -> Model:
    up_to = T.input("up_to", (), "int32")
    seq = T.arange(up_to)
    outputs_info = T.constant(np.asarray(0, seq.dtype))
    scan_result, scan_updates = T.scan(fn=accumulate_by_adding,
                                       outputs_info=outputs_info,
                                       sequences=seq)
    model = T.build_model({"triangular_sequence": scan_result}, name=NAME)
    # default inputs: `mdf-loops run theano_triangular.json` needs no -i
    mdf_loops.model.set_input_defaults(model.graphs[0], example_inputs())
    return model


def example_inputs(some_num: int = 15) -> dict:
    return {"up_to": np.int32(some_num)}


def run_with_stock_engine(path: Path, inputs: dict) -> dict:
    """Evaluate the saved model with modeci-mdf's ``EvaluableGraph``; outputs by name."""
    return mdf_loops.model.stock_evaluate(load_mdf(str(path)).graphs[0], inputs)


def main() -> None:
    model = build_model()
    model.to_json_file(str(HERE / f"{NAME}.json"))
    model.to_yaml_file(str(HERE / f"{NAME}.yaml"))
    outputs = mdf_loops.run(HERE / f"{NAME}.json", example_inputs())
    stock = run_with_stock_engine(HERE / f"{NAME}.yaml", example_inputs())
    assert np.array_equal(outputs["triangular_sequence"], stock["triangular_sequence"])
    print(outputs["triangular_sequence"])
    print([n * (n + 1) // 2 for n in range(15)])


if __name__ == "__main__":
    main()

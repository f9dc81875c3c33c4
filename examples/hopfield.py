"""A Hopfield network recalling a stored pattern: iterate s <- sign(W s) to a fixed point.

Three random +-1 patterns of 36 units are stored with the Hebbian rule
``W = P^T P / n`` (zero diagonal). Starting from a corrupted copy of the first
pattern, all units update together::

    s <- where(W s >= 0, +1, -1)

until the state stops changing. The loop is an ``onnx::Loop`` node whose
condition is "the state changed in this sweep": the body returns it as the
loop's next condition, so the loop stops after the first sweep that leaves the
state as it was. Synchronous updates can fall into a two-state cycle instead of
a fixed point, so the loop also has a generous maximum trip count
(``max_sweeps``, a parameter of the loop node).

Loop-carried value: the state ``s``; scan outputs: the state and the energy
``E = -1/2 s.W.s`` after every sweep (the energy never increases).

Run ``python examples/hopfield.py`` to write ``hopfield.json`` and
``hopfield.yaml`` next to this file and evaluate the model.
"""

from pathlib import Path

import numpy as np
from modeci_mdf.execution_engine import EvaluableGraph
from modeci_mdf.mdf import Graph, InputPort, Model, Node, OutputPort, Parameter
from modeci_mdf.utils import load_mdf

import mdf_loops

HERE = Path(__file__).parent
N_UNITS, N_PATTERNS, N_FLIPPED = 36, 3, 10


def stored_patterns(seed: int = 2) -> np.ndarray:
    """``N_PATTERNS`` random +-1 patterns, one per row."""
    return np.random.default_rng(seed).choice([-1.0, 1.0], size=(N_PATTERNS, N_UNITS))


def example_inputs(seed: int = 5) -> dict[str, np.ndarray]:
    """The first stored pattern with ``N_FLIPPED`` randomly chosen units flipped."""
    probe = stored_patterns()[0].copy()
    probe[np.random.default_rng(seed).choice(N_UNITS, N_FLIPPED, replace=False)] *= -1
    return {"s0": probe}


def hebbian_weights(patterns: np.ndarray) -> np.ndarray:
    """``P^T P / n`` with a zero diagonal."""
    w = patterns.T @ patterns / patterns.shape[1]
    np.fill_diagonal(w, 0.0)
    return w



def build_model(patterns: np.ndarray | None = None, max_sweeps: int = 100) -> Model:
    w = hebbian_weights(stored_patterns() if patterns is None else patterns)
    body = Graph(id="sweep")
    update = Node(id="update")
    update.input_ports.append(InputPort(id="s_prev"))
    update.parameters += [
        Parameter(id="W", value=w.tolist()),
        Parameter(id="s", value="numpy.where(W @ s_prev >= 0, 1.0, -1.0)"),
    ]
    update.output_ports += [
        OutputPort(id="changed", value="numpy.sum(numpy.abs(s - s_prev)) > 0"),
        OutputPort(id="s", value="s"),
        OutputPort(id="energy", value="-0.5 * (s @ W @ s)"),
    ]
    body.nodes.append(update)
    # Loop body: (iteration number, condition, carried s) ->
    #            (next condition, new s, scan outputs s and energy)
    mdf_loops.model.set_body_signature(body, ["sweep_number", "cond_in", "s_prev"],
                                 ["update.changed", "update.s", "update.s", "update.energy"])

    recall = Node(id="recall")
    recall.input_ports.append(InputPort(id="s0", metadata=mdf_loops.model.port_type(N_UNITS)))
    recall.parameters += [
        Parameter(id="body", value=mdf_loops.model.wrap_body(body)),
        Parameter(id="max_sweeps", value=max_sweeps),
        Parameter(id="start", value=True),
        Parameter(id="recall", function="onnx::Loop",
                  args={"M": "max_sweeps", "cond": "start", "v_initial": "[s0]"}),
    ]
    recall.output_ports += [
        OutputPort(id="s_final", value="recall[0]"),
        OutputPort(id="states", value="recall[1]"),
        OutputPort(id="energies", value="recall[2]"),
    ]
    model = Model(id="hopfield", graphs=[Graph(id="main", nodes=[recall])])
    # default inputs: `mdf-loops run hopfield.json` needs no -i
    mdf_loops.model.set_input_defaults(model.graphs[0], example_inputs())
    return model


def _picture(state: np.ndarray) -> list[str]:
    return ["".join("#" if v > 0 else "." for v in row) for row in state.reshape(6, 6)]


def main() -> None:
    model = build_model()
    model.to_json_file(str(HERE / "hopfield.json"))
    model.to_yaml_file(str(HERE / "hopfield.yaml"))
    inputs = example_inputs()

    outputs = mdf_loops.run(HERE / "hopfield.json", inputs)

    engine = EvaluableGraph(load_mdf(str(HERE / "hopfield.yaml")).graphs[0])
    engine.evaluate(initializer=inputs)
    s_final = engine.enodes["recall"].evaluable_outputs["s_final"].curr_value
    assert np.array_equal(s_final, outputs["recall.s_final"])

    target = stored_patterns()[0]
    print(f"Hopfield network: {N_UNITS} units, {N_PATTERNS} stored patterns, "
          f"probe with {N_FLIPPED} units flipped")
    print(f"{len(outputs['recall.energies'])} sweeps, energies {outputs['recall.energies']}")
    print("probe    recalled  stored")
    for row in zip(_picture(inputs["s0"]), _picture(outputs["recall.s_final"]), _picture(target)):
        print("   ".join(row))
    print("recalled the stored pattern:", np.array_equal(outputs["recall.s_final"], target))


if __name__ == "__main__":
    main()

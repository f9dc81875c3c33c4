"""A stored time-loop model whose v_initial lists fewer or more initial values than its
body carries: the python backend refuses it as the other backends do (one ModelError
naming the node), instead of compiling a loop over the wrong number of values."""

from __future__ import annotations

from pathlib import Path

import pytest

import mdf_loops
from mdf_loops.timeloop.spec import LOOP_FUNCTION, LOOP_NODE
from conftest import needs_input_port_fields

pytestmark = needs_input_port_fields  # time loops build ports with default_value/reduce

COUNTERS = Path(__file__).parents[3] / "examples" / "timeloops" / "counters.json"


def _loop_call(model):
    node = next(n for n in model.graphs[0].nodes if n.id == LOOP_NODE)
    return next(p for p in node.parameters if p.id == LOOP_FUNCTION)


@pytest.mark.parametrize("change", ["drop the last", "repeat the first"])
@pytest.mark.parametrize("backend", ["python", "auto"])
def test_a_v_initial_of_the_wrong_length_is_a_model_error(change, backend):
    model = mdf_loops.to_time_loop(COUNTERS, dt=1.0, steps=5, record=["A.count"])
    call = _loop_call(model)
    names = [n.strip() for n in call.args["v_initial"].strip("[]").split(",")]
    names = names[:-1] if change == "drop the last" else names[:1] + names
    call.args["v_initial"] = "[" + ", ".join(names) + "]"
    with pytest.raises(mdf_loops.errors.ModelError) as info:
        mdf_loops.simulate(model, backend=backend)
    message = str(info.value)
    assert f"node '{LOOP_NODE}'" in message and "v_initial" in message, message


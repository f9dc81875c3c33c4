"""mdf_loops/timeloop/conditions.py: the time-loop model made from a model with conditions
is the same in every Python process, whatever its hash seed (the carried counters follow
the consideration sets, not the order of a set).

Oracle: the same conversion in Python processes started with other hash seeds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import needs_input_port_fields

pytestmark = needs_input_port_fields  # time loops build ports with default_value/reduce

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "timeloops" / "counters.json"

SCRIPT = """
import sys, mdf_loops
model = mdf_loops.to_time_loop(sys.argv[1], dt=0.1, steps=5, record=["A.count", "E.early"])
sys.stdout.write(model.to_json())
"""


def _converted(seed: int) -> str:
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(EXAMPLE)], env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


def test_a_conditioned_model_converts_to_the_same_loop_under_any_hash_seed():
    made = {seed: _converted(seed) for seed in (1, 2, 5)}
    assert "calls__" in made[1]  # the conditions are counted: the case this is about
    assert made[1] == made[2] == made[5]

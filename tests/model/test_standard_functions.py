"""The numeric standard functions mdf-loops knows without modeci-mdf's registry
(mdf_loops/model/standard_functions.py) against the registry itself."""

from __future__ import annotations

import subprocess
import sys

import pytest
from modeci_mdf.functions.standard import create_python_expression, mdf_functions

from mdf_loops.model.standard_functions import (
    EXPRESSIONS,
    is_standard_function,
    standard_expression,
)


@pytest.mark.parametrize("name", sorted(EXPRESSIONS))
def test_each_expression_is_the_one_modeci_mdf_evaluates(name):
    assert create_python_expression(mdf_functions[name]["expression_string"]) == EXPRESSIONS[name]


def test_every_numeric_standard_function_of_the_registry_is_known():
    numeric = {
        name
        for name, entry in mdf_functions.items()
        if "::" not in name
        and isinstance(entry.get("expression_string"), str)
        and not any(m in entry["expression_string"] for m in ("actr.", "ddm.", "onnx_ops."))
    }
    assert numeric == set(EXPRESSIONS)


def test_other_names_are_looked_up_in_the_registry():
    assert standard_expression("change_goal") == "actr.change_goal(pattern,curr_goal)"
    assert is_standard_function("change_goal") and not is_standard_function("linaer")
    assert standard_expression("linaer") is None


def test_the_known_functions_need_no_registry():
    code = (
        "import sys\n"
        "from mdf_loops.model.standard_functions import standard_expression\n"
        "from mdf_loops.safety.evaluation import function_refusal\n"
        "assert standard_expression('MatMul') == 'A @ B' and function_refusal('linear') is None\n"
        "print('modeci_mdf.functions.standard' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"

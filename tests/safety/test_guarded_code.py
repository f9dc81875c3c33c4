"""Time loops that are not trusted, on simulate's python backend (mdf_loops/safety/guarded_code.py,
mdf_loops/backends/python/untrusted.py): the interpreter's rules, compiled in.

Each hostile loop is a stored time-loop file (what a download would be): built from a
harmless model, then its body's expressions replaced. The python backend, not trusted,
refuses each before it allocates (in a child whose address space is capped, so a
guard that failed would end in MemoryError, not a refusal), naming the node and the
step; trusted, the payload is live (a control at a size the machine holds).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from modeci_mdf.mdf import Graph, Model, Node, OutputPort, Parameter

import mdf_loops
from conftest import needs_input_port_fields
from mdf_loops.errors import EvaluationError, SizeLimitError
from mdf_loops.safety.guarded_code import guarded_function
from mdf_loops.safety.guarded_numpy import untrusted_expressions
from mdf_loops.safety.interpreter import evaluate_untrusted

pytestmark = needs_input_port_fields  # time loops need InputPort.default_value

_EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _stored_loop(tmp_path: Path, expressions: dict[str, str]) -> Path:
    """A time-loop file whose body computes ``expressions`` (parameters of node 'n', in
    order) each step; the state ``s`` integrates ``z``, recorded as ``n.out``."""
    params = [Parameter(id=k, value=f"{float(i)}") for i, k in enumerate(expressions)]
    params.append(Parameter(id="s", default_initial_value=0.0, time_derivative="z"))
    node = Node(id="n", parameters=params, output_ports=[OutputPort(id="out", value="s")])
    model = Model(id="m", graphs=[Graph(id="g", nodes=[node])])
    loop = mdf_loops.to_time_loop(model, dt=1.0, steps=3, trusted=True, record=["n.out"])
    text = loop.to_json()
    for i, value in enumerate(expressions.values()):
        placeholder = json.dumps(f"{float(i)}")
        assert text.count(placeholder) == 1
        text = text.replace(placeholder, json.dumps(value))
    path = tmp_path / "loop.json"
    path.write_text(text)
    return path


def _simulate_in_child(paths: list[Path], memory: int = 2 * 2**30) -> list[str]:
    """One line per file: the error ``simulate`` on the python backend ends in, in a child
    whose address space is capped (a guard that failed would end in MemoryError)."""
    code = textwrap.dedent(f"""
        import resource, sys, mdf_loops
        resource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory}))
        for path in sys.argv[1:]:
            try:
                mdf_loops.simulate(path, backend="python")
                print("ran")
            except mdf_loops.MdfLoopsError as exc:
                print(type(exc).__name__, exc)
        """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", code, *map(str, paths)], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


def test_fitzhugh_nagumo_not_trusted_gives_the_numpy_euler_steps():
    path = _EXAMPLES / "timeloops" / "fitzhugh_nagumo.json"
    traces = mdf_loops.simulate(str(path), dt=0.05, steps=400, backend="python")
    assert traces.backend == "python"
    v, w, vs, ws = -1.0, 1.0, [], []
    for _ in range(400):  # the model's equations, Euler-stepped here in MDF's order: the
        vs.append(v)  # parameters in turn, W's step reading the V just computed
        ws.append(w)
        v = v + (v - v**3 / 3 - w + 0.5) * 0.05
        w = w + (v + 0.7 - 0.8 * w) / 12.5 * 0.05
    np.testing.assert_allclose(traces.values["fn.V_out"], vs, rtol=1e-12)
    np.testing.assert_allclose(traces.values["fn.W_out"], ws, rtol=1e-12)


HOSTILE = [
    # 40000 x 40000 float64: 12.8 GB by broadcasting, each piece allowed
    ({"a": "numpy.ones(40000)", "b": "numpy.reshape(a, (40000, 1))", "z": "numpy.sum(a * b)"},
     "SizeLimitError", "node 'n' 'z' (python backend), iteration"),
    # an integer of 1.2 * 10**8 bits, from two allowed powers
    ({"a": "7 ** 4000", "z": "a ** 9999 * 0.0"},
     "SizeLimitError", "node 'n' 'z' (python backend), iteration"),
    # Python's % would format 2.5 GB of text
    ({"a": "'%02500000000d'", "z": "(a % 1) == 'x'"},
     "EvaluationError", "`%` on text is not allowed"),
]


def test_hostile_time_loops_are_refused_before_they_allocate(tmp_path):
    paths = []
    for k, (expressions, _, _) in enumerate(HOSTILE):
        (tmp_path / str(k)).mkdir()
        paths.append(_stored_loop(tmp_path / str(k), expressions))
    lines = _simulate_in_child(paths)
    assert len(lines) == len(HOSTILE), lines
    for line, (_, error, message) in zip(lines, HOSTILE, strict=True):
        assert line.startswith(error) and message in line, line


def test_trusted_the_same_loop_computes_what_python_would(tmp_path):
    # the control: at a size this machine holds, trusted runs the broadcast the guard refuses
    path = _stored_loop(tmp_path, {"a": "numpy.ones(300)", "b": "numpy.reshape(a, (300, 1))",
                                   "z": "numpy.sum(a * b)"})
    traces = mdf_loops.simulate(str(path), backend="python", trusted=True)
    np.testing.assert_array_equal(traces.values["n.out"], [0.0, 90000.0, 180000.0])
    with mdf_loops.safety.limits(max_elements=10**4):
        with pytest.raises(SizeLimitError, match="the result of `\\*` has 90000 elements"):
            mdf_loops.simulate(str(path), backend="python")
        assert mdf_loops.simulate(str(path), backend="python", trusted=True).backend == "python"


def _assignments(statement: ast.stmt) -> tuple[list[ast.expr], str]:
    return ([statement.value], "y") if isinstance(statement, ast.Assign) else ([], "")


@pytest.mark.parametrize("expression, message", [
    ("(lambda: x)()", "cannot be called"),
    ("[v for v in x]", "is not part of MDF expressions"),
    ("f'{x}'", "is not part of MDF expressions"),
    ("x.tofile('out')", "is not an allowed function"),
    ("(y := x)", "is not part of MDF expressions"),
    ("__import__('os')", "cannot be called"),
])
def test_a_piece_the_interpreter_does_not_know_is_refused_before_running(expression, message):
    # the allow-list refuses each first; the guard refuses it too, on its own
    source = f"def f(x):\n    y = {expression}\n    return y\n"
    with pytest.raises(EvaluationError, match=message):
        guarded_function(source, "f", {}, _assignments)


def test_guarded_code_computes_what_the_interpreter_does():
    source = "def f(x, iteration):\n    y = numpy.sum(x[1:] * 2.0) + max(1, 2) ** 3 - (x[0] < 1)\n    return y\n"
    run = guarded_function(source, "f", {}, _assignments)
    x = np.arange(4.0)
    with untrusted_expressions():  # the interpreter, as the scheduler runs it
        expected = evaluate_untrusted("numpy.sum(x[1:] * 2.0) + max(1, 2) ** 3 - (x[0] < 1)",
                                      {"x": x})
    assert run(x, 0) == expected == 12.0 + 8 - 1
    with mdf_loops.safety.limits(max_elements=2):
        with pytest.raises(SizeLimitError, match="^y, iteration 7: "):
            run(x, 7)


def _loop_source(step: str, first: str = "c0") -> str:
    """A time-loop function as the python backend writes it, carrying ``c0`` (``first``:
    the value the first step gives it)."""
    return textwrap.dedent(f"""\
        def time_loop(start, stop, cond, c0, s0, _where=_where, _scalar=_scalar):
            iteration = 0
            _append0 = s0.append
            if start == 0 and stop > 0 and cond:
                cond, c0 = (cond, {first})
                start = 1
            for iteration in range(max(start, 1), stop if cond else 0):
                v_n__x = {step}
                c0 = v_n__x
                _append0(iteration * 0.5)
            return cond, [c0], stop if cond else start
        """)


@pytest.mark.parametrize("step, first, proven", [
    ("c0 * c0 + 0.5 * iteration", "c0", {0: "float"}),  # floats, the step number: floats
    ("c0 ** 2 - c0 / 3", "c0", {0: "float"}),  # a float to an integer power
    ("c0 + numpy.ones(3)", "c0", {}),  # a call: not proven, every operator guarded
    ("c0 ** 0.5", "c0", {}),  # a negative float to a fractional power is complex
    ("c0 // 2 if c0 > 0 else 1.0", "c0", {}),  # // is not proven to give a float
    ("-c0 if c0 > 1 else c0 * 2", "c0", {0: "float"}),
    # modeci-mdf's models: an integer first (``"default_initial_value": 90``), floats after
    ("c0 + -0.1 * (c0 - 20) * 0.01", "90", {0: "number"}),
    ("c0 + (-1 * 0.5 * c0 + (1 - 1)) * 0.01", "-1 * 3 - 2", {0: "number"}),  # ints negated
    # a number with no float beside it may be an integer: its operator stays guarded
    # (the guard sizes the integer), and its result is a number again
    ("c0 * c0", "3", {0: "number"}),
    ("c0 + 1", "0", {0: "number"}),  # a counter
    ("(c0 + 1) / 2 + c0 // 2", "0", {}),  # // of numbers is not proven: neither is the sum
])
def test_which_carried_values_the_float_proof_covers(step, first, proven):
    from mdf_loops.backends.python.untrusted import float_kinds

    assert float_kinds(ast.parse(_loop_source(step, first)), 1)[1] == proven


def test_a_carried_value_that_is_not_a_float_runs_with_every_operator_guarded():
    # the proof covers c0 * c0 for a float c0; given an integer, the step would square it
    # each time (2**22 powers of 3: millions of digits) unless the guard sees it
    from mdf_loops.backends.python.compiled import LoopSource
    from mdf_loops.backends.python.untrusted import guarded_time_loop

    source = _loop_source("c0 * c0")
    loop = guarded_time_loop(LoopSource(source, 1, (None,)))
    cond, carried, _ = loop.run(0, 6, True, 1.5, [])
    assert carried == [1.5 ** 32]  # five steps (the first is the loop's own), in floats
    with pytest.raises(SizeLimitError, match="node .n. .x. \\(python backend\\), iteration 14: "):
        loop.run(0, 24, True, 3, [])


def _constants(code) -> list:
    """Every constant of ``code`` and of the code objects inside it."""
    found = []
    for value in code.co_consts:
        found.extend(_constants(value) if hasattr(value, "co_consts") else [value])
    return found


@pytest.mark.parametrize("start", [-1.0, 0.3, 2.5, np.float64(-0.7), float("nan"), -0.0])
def test_an_integer_literal_beside_a_proven_float_runs_as_that_float(start):
    # c0 ** 3 / 3 - 2 * c0 ... with integer literals: Python and numpy convert the integer
    # to a double first, so the guard writes the double (float-with-float arithmetic is
    # faster in CPython); an integer beyond 2**53 is not one double, so it stays
    from mdf_loops.backends.python.compiled import LoopSource, _scalar
    from mdf_loops.backends.python.untrusted import (
        _HELPERS,
        _model_parts,
        float_kinds,
        guarded_time_loop,
    )

    step = "c0 - (c0 ** 3 / 3 - 2 * c0 + 7 - c0 * 9007199254740993 * 1e-16) * 0.01"
    source = _loop_source(step)
    kinds = lambda tree: float_kinds(tree, 1)[0]  # noqa: E731
    guarded = guarded_function(source, "time_loop", {"_scalar": _scalar}, _model_parts,
                               _HELPERS, kinds)
    literals = {c for c in _constants(guarded.args[0].__code__) if type(c) in (int, float)}
    assert {3.0, 2.0, 7.0} <= {c for c in literals if type(c) is float}
    assert not {3, 2, 7} & {c for c in literals if type(c) is int}
    assert 9007199254740993 in {c for c in literals if type(c) is int}  # not one double
    plain: dict = {}
    exec(source, {"_where": np.where, "_scalar": _scalar}, plain)  # the oracle: Python's operators
    expected = plain["time_loop"](0, 12, True, start, [])[1][0]
    loop = guarded_time_loop(LoopSource(source, 1, (None,)))
    got = loop.run(0, 12, True, start, [])[1][0]
    assert type(got) is type(expected)
    assert np.array_equal(got, expected, equal_nan=True) and np.signbit(got) == np.signbit(expected)

"""What importing and using mdf-loops imports: a model that compiles runs, validates,
exports, imports and draws without modeci-mdf's engine, graph-scheduler, pint or torch;
the engine, when imported, still has mdf-loops' functions registered.

Each case runs in a fresh Python process (``sys.modules`` of this one holds everything).
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_input_port_fields

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ["modeci_mdf.execution_engine", "graph_scheduler", "pint", "torch"]

#: the real root of x^3 - 2x - 5, newton.json's cubic, by numpy (an eigenvalue solver)
NEWTON_ROOT = float(next(r.real for r in np.roots([1, 0, -2, -5]) if abs(r.imag) < 1e-12))


def _run_python(code: str) -> dict:
    """Run ``code`` in a fresh process; it sets ``result``; returns it with the heavy modules
    that process imported."""
    script = f"""
import json, sys
{code}
print(json.dumps({{"result": result, "imported": [m for m in {HEAVY!r} if m in sys.modules]}}))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_command_line_runs_a_compiling_model_without_the_engine(tmp_path):
    report = _run_python(f"""
import contextlib, io
from mdf_loops.cli.commands import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    status = main(["run", "examples/newton.json"])
others = [main(["validate", "examples/newton.json"]),
          main(["export", "examples/elman_rnn.json", "-o", {str(tmp_path / "rnn.onnx")!r}]),
          main(["import", {str(tmp_path / "rnn.onnx")!r}, "-o", {str(tmp_path / "rnn.json")!r}])]
result = [status, out.getvalue(), others]
""")
    status, printed, others = report["result"]
    assert status == 0 and others == [0, 0, 0]
    assert (tmp_path / "rnn.json").stat().st_size > 0
    root = float(printed.split("newton.root")[1].splitlines()[1])
    assert root == pytest.approx(NEWTON_ROOT, rel=1e-12)
    assert report["imported"] == []


def test_run_validate_export_import_and_render_leave_the_engine_out():
    report = _run_python("""
import mdf_loops
from mdf_loops.workloads import elman_rnn
model = mdf_loops.load_model("examples/newton.json")
problems = mdf_loops.validate("examples/newton.json")
root = float(mdf_loops.run(model)["newton.root"])
exported = mdf_loops.mdf_to_onnx(model)
imported = mdf_loops.onnx_to_mdf(elman_rnn(3).model)
dot = mdf_loops.to_graphviz(model)
result = [len(problems), root, len(exported.graph.node), len(imported.graphs)]
""")
    problems, root, exported_nodes, imported_graphs = report["result"]
    assert problems == 0 and exported_nodes > 0 and imported_graphs == 1
    assert root == pytest.approx(NEWTON_ROOT, rel=1e-12)
    assert report["imported"] == []


def _fitzhugh_nagumo(steps: int, dt: float) -> tuple[list[float], list[float]]:
    """The oracle: examples/timeloops/fitzhugh_nagumo.json stepped as modeci-mdf steps it
    (V's Euler step first; W's reads the new V), recording from the initial values on."""
    v, w = -1.0, 1.0
    vs, ws = [v], [w]
    for _ in range(steps - 1):
        v = v + (v - v**3 / 3 - w + 0.5) * dt
        w = w + (v + 0.7 - 0.8 * w) / 12.5 * dt
        vs.append(v)
        ws.append(w)
    return vs, ws


@needs_input_port_fields
def test_simulating_a_stateful_model_on_python_leaves_the_engine_out(tmp_path):
    """``simulate`` and ``mdf-loops simulate`` of a stateful model the python backend runs:
    planned, typed, written and run without modeci-mdf's engine (which imports torch,
    where installed), graph-scheduler or pint."""
    out = tmp_path / "fn.npz"
    report = _run_python(f"""
import contextlib, io
import numpy as np
import mdf_loops
from mdf_loops.cli.commands import main
traces = mdf_loops.simulate("examples/timeloops/fitzhugh_nagumo.json", dt=0.05, steps=200)
with contextlib.redirect_stdout(io.StringIO()):
    status = main(["simulate", "examples/timeloops/fitzhugh_nagumo.json", "--dt", "0.05",
                   "--steps", "200", "-q", "-o", {str(out)!r}])
saved = np.load({str(out)!r})
result = [traces.backend, traces["fn.V_out"].tolist(), traces["fn.W_out"].tolist(), status,
          saved["fn.V_out"].tolist()]
""")
    backend, v, w, status, saved = report["result"]
    expected_v, expected_w = _fitzhugh_nagumo(200, 0.05)
    assert backend == "python" and status == 0
    assert v == expected_v and w == expected_w and saved == expected_v
    assert report["imported"] == []


def test_the_scheduler_backend_imports_the_engine_it_runs_on():
    report = _run_python("""
import mdf_loops
result = float(mdf_loops.run("examples/newton.json", backend="scheduler")["newton.root"])
""")
    assert report["result"] == pytest.approx(NEWTON_ROOT, rel=1e-12)
    assert "modeci_mdf.execution_engine" in report["imported"]


@pytest.mark.parametrize("order", ["mdf_loops first", "engine first"])
def test_the_engine_imported_by_the_user_has_the_loop_functions(order):
    """The stock engine, imported before or after mdf-loops, runs an RNN Scan (numpy oracle)."""
    imports = ("import mdf_loops\nfrom modeci_mdf import execution_engine"
               if order == "mdf_loops first"
               else "from modeci_mdf import execution_engine\nimport mdf_loops")
    report = _run_python(imports + """
import numpy as np
from modeci_mdf.functions.standard import mdf_functions
from mdf_loops.workloads import elman_rnn
rnn = elman_rnn(steps=4, inputs=3, hidden=5)
model = mdf_loops.onnx_to_mdf(rnn.model)
engine = execution_engine.EvaluableGraph(model.graphs[0])
engine.evaluate(initializer=rnn.inputs)
H = [enode.evaluable_outputs[port].curr_value
     for enode in engine.enodes.values() for port in enode.evaluable_outputs if port == "H"]
_, expected = rnn.numpy_loop(rnn.inputs)
result = ["onnx::Scan" in mdf_functions, "onnx::Loop" in mdf_functions,
          len(H) == 1 and bool(np.allclose(H[0], expected, atol=1e-5))]
""")
    assert report["result"] == [True, True, True]


@needs_input_port_fields
def test_neuroml_lists_and_a_parameter_set_only_by_conditions_leave_the_engine_out(tmp_path):
    """NeuroML's exports write every constant as a list (``[0.7]``) and give ports that sum
    (nothing sent to them here) and call ``numpy.exp``, the RNN models call standard
    functions (``linear``), IzhikevichTest tests with ``and``,
    SwitchedRLC_Circuit sets a parameter only by conditions: their types are inferred,
    so ``simulate`` of such a model runs without modeci-mdf's engine, and gives stock's
    values."""
    from modeci_mdf.mdf import (
        Graph,
        InputPort,
        Model,
        Node,
        OutputPort,
        Parameter,
        ParameterCondition,
    )
    from stock_batch import StockJob, stock_traces

    node = Node(id="cell", input_ports=[InputPort(id="syn", shape=(1,), reduce="add")],
                parameters=[
        Parameter(id="time", default_initial_value=0, time_derivative="1"),
        Parameter(id="drive", conditions=[
            ParameterCondition(id="off", test="time < 0.5", value="0"),
            ParameterCondition(id="on", test="time >= 0.5 and time < 0.9", value=0.1)]),
        Parameter(id="base", value=[0.35]),
        Parameter(id="rate", function="linear",  # a standard function (ModECI's RNN models)
                  args={"variable0": "base", "slope": 2, "intercept": 0}),
        Parameter(id="v", default_initial_value=[-1.0],
                  time_derivative="rate * (drive - v) * numpy.exp(-0.1 * time) + syn")],
        output_ports=[OutputPort(id="v_out", value="v"), OutputPort(id="drive_out", value="drive")])
    path = tmp_path / "lists.json"
    Model(id="lists", graphs=[Graph(id="g", nodes=[node])]).to_json_file(str(path))
    record = ["cell.v_out", "cell.drive_out"]
    report = _run_python(f"""
import mdf_loops
traces = mdf_loops.simulate({str(path)!r}, dt=0.1, steps=12, record={record!r})
result = [traces.backend] + [traces[ref].tolist() for ref in {record!r}]
""")
    stock = stock_traces({"lists": StockJob(str(path), 0.1, 12, record)}, tmp_path / "stock")
    assert report["result"][0] == "python"
    for ref, ours in zip(record, report["result"][1:], strict=True):
        assert np.array_equal(np.asarray(ours), stock["lists"][ref]), ref
    assert report["imported"] == []

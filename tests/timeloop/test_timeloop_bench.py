"""The time-loop benchmark runs, checks simulate against its numpy loops, and reports ratios."""

import importlib.util
from pathlib import Path
from conftest import needs_input_port_fields

pytestmark = needs_input_port_fields  # time loops build ports with default_value/reduce

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "timeloops.py"


def test_the_benchmark_reports_every_runner(tmp_path):
    spec = importlib.util.spec_from_file_location("timeloops_bench", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    table = bench.run([10, 20], stock_max=10, scheduler_max=10, memory_steps=50, runs=1)
    runners = {(r["model"], r["steps"], r["runner"]) for r in table["timings"]}
    for model in ("fitzhugh_nagumo", "iaf_network"):
        for runner in ("stock modeci-mdf", "numpy loop", "simulate auto", "simulate python",
                       "simulate onnxruntime", "simulate scheduler"):
            assert (model, 20, runner) in runners
    extrapolated = [r for r in table["timings"] if not r["measured"]]
    assert {r["runner"] for r in extrapolated} == {"stock modeci-mdf", "simulate scheduler"}
    assert all(r["peak_python_mb"] >= 0 for r in table["memory"])

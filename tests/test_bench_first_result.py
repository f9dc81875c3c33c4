"""benchmarks/first_result.py: its torch blocker hides torch as an uninstalled torch is
hidden, and its rows are ratios to the import floor measured in the same run (no time is
asserted)."""

import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import first_result as bench  # noqa: E402  (benchmarks/ is outside the package)


def test_without_torch_modeci_mdf_sees_no_torch():
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "sitecustomize.py").write_text(bench._HIDE_TORCH)
        env = bench._environment(True, folder)
        code = ("import sys, modeci_mdf.functions.onnx\n"
                "try:\n    import torch\nexcept ModuleNotFoundError:\n    print('hidden')\n"
                "print('torch' in sys.modules)")
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, check=True)
        assert done.stdout.split() == ["hidden", "False"]


def test_the_rows_are_ratios_to_the_floor_of_the_same_run():
    rows = bench.measure(runs=1, torch=(False,))
    floor = next(r for r in rows if r.command == "import floor")
    ours = next(r for r in rows if r.command != "import floor")
    assert floor.ratio_to_floor == 1.0
    assert ours.ratio_to_floor == ours.median_s / floor.median_s
    assert ours.runs == floor.runs == 1 and not ours.torch
    assert ours.cpu_median_s > 0 and floor.cpu_ratio_to_floor == 1.0
    assert ours.cpu_ratio_to_floor == ours.cpu_median_s / floor.cpu_median_s


def test_the_last_lines_say_whether_the_target_is_met(capsys):
    rows = [bench.Row("import floor", True, 1.0, (1.0, 1.0), 1, 0.5, 1.0, 1.0),
            bench.Row("mdf-loops run newton.json", True, 1.6, (1.6, 1.6), 1, 0.6, 1.6, 1.2)]
    bench._print(rows)
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.split() == ["mdf-loops", "run", "newton.json:", "torch", "installed", "1.60",
                            "NOT", "MET", "(CPU", "time:", "1.20)"]

"""Benchmark: how long ``mdf-loops run examples/newton.json`` takes to print its answer, and
``mdf-loops simulate`` the FitzHugh-Nagumo example (a stateful model, 2,000 steps on the
python backend), against the import floor (the time Python needs to import ``modeci_mdf.mdf``, ``onnx`` and
``onnxruntime``, all a model that compiles needs), with and without torch importable.

Run ``python benchmarks/first_result.py`` (``--help`` for options). Every timing is a fresh
Python process (wall clock from start to exit, and the CPU time the process used, which
other jobs on the machine disturb less); the six commands run once per round, in a
shuffled order, so load on the machine hits all alike. Without torch, a ``sitecustomize``
put first on the path makes ``import torch`` fail as if it were not installed (modeci-mdf's
engine imports torch when it can). The processes may write bytecode caches (as a pip install
does), and one warm-up round runs first.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["Row", "measure", "main"]

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "examples" / "newton.json"
#: a stateful model, simulated for 2,000 steps (``--dt 0.05``)
STATEFUL = ROOT / "examples" / "timeloops" / "fitzhugh_nagumo.json"

FLOOR = "import modeci_mdf.mdf, onnx, onnxruntime"

_HIDE_TORCH = '''
import sys


class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoTorch())
'''


@dataclass
class Row:
    command: str
    torch: bool
    median_s: float
    spread_s: tuple[float, float]  # the fastest and the slowest run
    runs: int
    cpu_median_s: float  # user + system time of the process
    ratio_to_floor: float | None = None
    cpu_ratio_to_floor: float | None = None


def _commands(model: Path) -> dict[str, list[str]]:
    from mdf_loops.model.compat import INPUT_DEFAULTS  # time loops: modeci-mdf 0.4.14 on

    commands = {
        "import floor": [sys.executable, "-c", FLOOR],
        f"mdf-loops run {model.name}": [sys.executable, "-m", "mdf_loops", "run", str(model)],
    }
    if INPUT_DEFAULTS:
        commands[f"mdf-loops simulate {STATEFUL.name}"] = [
            sys.executable, "-m", "mdf_loops", "simulate", str(STATEFUL), "--dt", "0.05",
            "--steps", "2000", "-q"]
    return commands


def _environment(hide_torch: bool, folder: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: bytecode cached
    paths = [str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    if hide_torch:
        paths.insert(0, folder)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall-clock and CPU seconds (user + system) of one run of ``command``."""
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, cwd=ROOT)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise subprocess.CalledProcessError(process.returncode, command)
    return wall, usage.ru_utime + usage.ru_stime


def measure(runs: int = 7, model: Path = MODEL, torch: tuple[bool, ...] = (True, False)) -> list[Row]:
    """Median wall time of each command with and without torch, and its ratio to the floor."""
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "sitecustomize.py").write_text(_HIDE_TORCH)
        cases = [(name, command, with_torch, _environment(not with_torch, folder))
                 for with_torch in torch for name, command in _commands(model).items()]
        times: dict[tuple[str, bool], list[tuple[float, float]]] = {
            (n, t): [] for n, _, t, _ in cases}
        shuffle = random.Random(0)
        for round_ in range(runs + 1):
            for name, command, with_torch, env in shuffle.sample(cases, len(cases)):
                elapsed = _timed(command, env)
                if round_:  # round 0 warms the caches (bytecode, the file system)
                    times[name, with_torch].append(elapsed)
    rows = []
    for (name, with_torch), values in times.items():
        walls = [wall for wall, _ in values]
        rows.append(Row(name, with_torch, statistics.median(walls), (min(walls), max(walls)),
                        len(values), statistics.median(cpu for _, cpu in values)))
    for row in rows:
        floor = next(r for r in rows if r.torch == row.torch and r.command == "import floor")
        row.ratio_to_floor = row.median_s / floor.median_s
        row.cpu_ratio_to_floor = row.cpu_median_s / floor.cpu_median_s
    return rows


def _print(rows: list[Row]) -> None:
    print(f"{'command':<40} {'torch':<6} {'median s':>9} {'fastest':>8} {'slowest':>8} "
          f"{'x floor':>8} {'cpu s':>7} {'x floor':>8}")
    for r in rows:
        print(f"{r.command:<40} {'yes' if r.torch else 'no':<6} {r.median_s:9.3f} "
              f"{r.spread_s[0]:8.3f} {r.spread_s[1]:8.3f} {r.ratio_to_floor:8.2f} "
              f"{r.cpu_median_s:7.3f} {r.cpu_ratio_to_floor:8.2f}")
    print(f"\ntarget (issue 28, item 1): the first result within {TARGET} times the import floor "
          "(wall clock, median)")
    for r in rows:
        if r.command != "import floor":
            verdict = "met" if r.ratio_to_floor <= TARGET else "NOT MET"
            print(f"  {r.command + ':':<40} torch {'installed' if r.torch else 'hidden':<10}"
                  f"{r.ratio_to_floor:6.2f}  {verdict} (CPU time: {r.cpu_ratio_to_floor:.2f})")


#: the ratio to the import floor the first result is to stay within
TARGET = 1.5


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/first_result.py",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="timed rounds (median)")
    parser.add_argument("--json", metavar="FILE", help="also write the table as JSON")
    args = parser.parse_args(argv)
    rows = measure(args.runs)
    _print(rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"first_result": [asdict(r) for r in rows]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Per-step cost of simulate's python backend on a time loop that is not trusted.

FitzHugh-Nagumo's body compiled as trusted (plain Python) and as not trusted (the
interpreter's rules compiled in: mdf_loops.safety.guarded_code), run interleaved in
this process; CPU time per step and the ratio, median and spread over the repeats.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import mdf_loops
from mdf_loops.backends.python.compiled import compile_time_loop
from mdf_loops.backends.python.untrusted import guarded_time_loop

STEPS = 20_000
REPEATS = 7
MODEL = Path(__file__).resolve().parents[1] / "examples" / "timeloops" / "fitzhugh_nagumo.json"


def _seconds(compiled) -> float:
    scans = compiled.new_scans(STEPS)
    started = time.process_time()
    compiled.run(0, STEPS, True, -1.0, 1.0, *scans)
    return time.process_time() - started


def main() -> None:
    loop = mdf_loops.to_time_loop(mdf_loops.load_model(str(MODEL)), dt=0.05, duration=1.0)
    trusted = compile_time_loop(loop)
    untrusted = guarded_time_loop(trusted.code)
    plain, guarded, ratios = [], [], []
    for _ in range(REPEATS):
        plain.append(_seconds(trusted) / STEPS * 1e6)
        guarded.append(_seconds(untrusted) / STEPS * 1e6)
        ratios.append(guarded[-1] / plain[-1])
    print(f"trusted     {statistics.median(plain):.3f} us/step")
    print(f"not trusted {statistics.median(guarded):.3f} us/step")
    print(
        f"ratio (decides): median {statistics.median(ratios):.1f}, "
        f"{min(ratios):.1f} to {max(ratios):.1f} over {REPEATS} interleaved runs"
    )


if __name__ == "__main__":
    main()

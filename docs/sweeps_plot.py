"""Draw docs/images/sweep_drift_diffusion.png: accuracy and mean decision time of the
drift-diffusion example against its drift rate, from one ``mdf_loops.sweep``.

Run ``python docs/sweeps_plot.py`` (needs matplotlib, and the ``sweep`` extra).
The lines are the closed-form first-passage results of a diffusion between
thresholds +-a started at 0: P(upper) = 1 / (1 + exp(-2va/s^2)) and mean time
(a/v) tanh(va/s^2), dashed; solid with a shifted by 0.5826 s sqrt(dt), the usual
correction for a process observed in steps of dt (it overshoots the threshold).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import mdf_loops

ROOT = Path(__file__).resolve().parent.parent
THRESHOLD, NOISE_SD, DT = 1.0, 1.0, 0.01


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(0)
    trials = [rng.standard_normal(2000) for _ in range(300)]  # up to 20 s per trial
    drifts = np.linspace(0.0, 2.0, 11)
    results = mdf_loops.sweep(
        ROOT / "examples" / "drift_diffusion.json",
        grid={"accumulate.drift": drifts, "noise": trials},
        outputs=["decide.choice", "ddm.decision_time"],
    )
    decided = results["decide.choice"] != 0
    accuracy = (results["decide.choice"] == 1).where(decided).mean("noise")
    mean_time = results["ddm.decision_time"].where(decided).mean("noise")

    fine = np.linspace(1e-6, 2.0, 200)
    figure, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    for a, style, label in ((THRESHOLD, "--", "closed form, continuous time"),
                            (THRESHOLD + 0.5826 * NOISE_SD * np.sqrt(DT), "-",
                             "closed form, steps of dt")):
        k = fine * a / NOISE_SD**2
        left.plot(fine, 1 / (1 + np.exp(-2 * k)), style, color="0.55", label=label)
        right.plot(fine, a / fine * np.tanh(k), style, color="0.55", label=label)
    left.plot(drifts, accuracy, "o", color="C0", label="sweep (300 trials each)")
    left.set(xlabel="drift rate v", ylabel="accuracy P(upper threshold)", ylim=(0.4, 1.02))
    right.plot(drifts, mean_time, "o", color="C1", label="sweep (300 trials each)")
    right.set(xlabel="drift rate v", ylabel="mean decision time (s)")
    for axes in (left, right):
        axes.legend(frameon=False, fontsize=8)
        axes.grid(alpha=0.3)
    figure.suptitle("drift-diffusion example, thresholds ±1, dt = 0.01: "
                    "mdf_loops.sweep over the drift rate")
    figure.tight_layout()
    target = ROOT / "docs" / "images" / "sweep_drift_diffusion.png"
    figure.savefig(target, dpi=110)
    print(f"wrote {target}; {int(decided.sum())} of {decided.size} trials decided")
    print(results[["decide.choice"]].sizes)


if __name__ == "__main__":
    main()

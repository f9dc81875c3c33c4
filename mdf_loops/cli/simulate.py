"""``mdf-loops simulate``: a stateful model's time loop, recorded to .npz/.csv, plotted to .png."""

from __future__ import annotations

import argparse
import functools
import sys
from contextlib import ExitStack
from pathlib import Path

from mdf_loops.cli.common import add_limit_options, limited, note, positive_int
from mdf_loops.errors import MdfLoopsError

__all__ = ["add_simulate"]

_TRACE_FILES = (".npz", ".csv")
_PLOT_FILES = (".png", ".svg", ".pdf")


def add_simulate(subparsers, common) -> None:
    """Declare ``mdf-loops simulate`` and its options."""
    p = subparsers.add_parser(
        "simulate",
        parents=[common],
        help="simulate a stateful model over time (its time loop as an onnx::Loop)",
        description="Run the time loop modeci-mdf's scripts write by hand (evaluate(), then "
        "evaluate(time_increment=dt) each step) and record values each step.",
    )
    p.add_argument("model", help="MDF JSON/YAML: a stateful model, or one made by to_time_loop")
    p.add_argument("--dt", type=float, help="time increment (needed unless the model has a loop)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--steps", type=int, help="number of steps")
    group.add_argument("--duration", type=float, help="simulated time: round(duration/dt)+1 steps")
    p.add_argument(
        "--record",
        nargs="+",
        metavar="NODE.NAME",
        help="output ports or parameters to record (default: every output port)",
    )
    p.add_argument("--until", help="stop after the step where this expression of NODE.NAME holds")
    p.add_argument(
        "--backend", default="auto", choices=["auto", "python", "onnxruntime", "scheduler"]
    )
    p.add_argument(
        "--trusted",
        action="store_true",
        help="skip the expression allow-list (only for models you trust)",
    )
    p.add_argument("-o", "--output", help="write the trajectories to .npz or .csv")
    p.add_argument(
        "--plot",
        help="draw one panel per recorded value (.png/.svg/.pdf; needs "
        "matplotlib: pip install 'mdf-loops[plot]')",
    )
    p.add_argument("--save-model", help="also write the time-loop model (.json/.yaml)")
    for name, default in (("max-iterations", "1,000,000"), ("max-elements", "100,000,000")):
        p.add_argument(
            f"--{name}",
            type=positive_int,
            metavar="N",
            help=f"work limit (default {default}; the steps count as iterations); "
            "see docs/safety.md",
        )
    add_limit_options(p)
    p.set_defaults(command=_simulate)


def _simulate(args: argparse.Namespace) -> int:
    from mdf_loops.files import refuse_overwriting, write_atomically
    from mdf_loops.timeloop import Trajectories

    for path, kinds in (
        (args.output, _TRACE_FILES),
        (args.plot, _PLOT_FILES),
        (args.save_model, (".json", ".yaml", ".yml")),
    ):
        if path is not None:
            if not path.lower().endswith(kinds):
                raise MdfLoopsError(f"{path}: the output must end in {' or '.join(kinds)}")
            refuse_overwriting(path, args.model)
    if not Path(args.model).exists():
        raise MdfLoopsError(f"{args.model}: no such file")
    result = limited(args, functools.partial(_simulated, args), f"simulating {args.model}")
    if args.save_model:
        write_atomically(args.save_model, str(result.pop(_MODEL)))
    time, backend = result.pop(_TIME), str(result.pop(_BACKEND))
    traces = Trajectories(time, result, backend)
    if args.output:
        traces.save(args.output)
    if args.plot:
        plot(traces, args.plot)
    note(args, f"{traces.steps} steps to t={traces.time[-1]:.6g} on {traces.backend}")
    if not args.output and not args.plot:
        for ref, values in traces.values.items():
            print(f"{ref}: {values[-1].tolist()} at t={traces.time[-1]:.6g}")
    return 0


def _every_output(path: str) -> list[str]:
    from mdf_loops.model.interface import load_model, select_graph

    graph = select_graph(load_model(path))
    return [f"{n.id}.{p.id}" for n in graph.nodes for p in n.output_ports]


#: keys of the simulation's result beside the recorded values (a value ref has a dot)
_TIME, _BACKEND, _MODEL = "time", "backend", "model"


def _simulated(args: argparse.Namespace) -> dict:
    """The simulation as data (arrays and text), so that it can come back from a limited
    child: the recorded values, the time, the backend, the time-loop model's text."""
    import numpy as np

    from mdf_loops.cli.progress import progress, shows_progress
    from mdf_loops.ops import limits

    given = {
        name: getattr(args, name)
        for name in ("max_iterations", "max_elements")
        if getattr(args, name, None) is not None
    }
    with ExitStack() as stack:
        stack.enter_context(limits(**given))
        if shows_progress(args):
            stack.enter_context(progress(sys.stderr))
        return _simulation(args, np)


def _simulation(args: argparse.Namespace, np) -> dict:
    from mdf_loops.simulation import simulate
    from mdf_loops.timeloop import to_time_loop

    options = dict(
        dt=args.dt, steps=args.steps, duration=args.duration, until=args.until, record=args.record
    )
    model, text = args.model, None
    if args.save_model:
        model = to_time_loop(
            args.model,
            trusted=args.trusted,
            record=args.record or _every_output(args.model),
            **{k: options[k] for k in ("dt", "steps", "duration", "until")},
        )
        text = model.to_json() if args.save_model.endswith(".json") else model.to_yaml()
        options = {"steps": None}
    traces = simulate(
        model,
        backend=args.backend,
        trusted=args.trusted,
        **{k: v for k, v in options.items() if v is not None or k == "steps"},
    )
    result = {_TIME: traces.time, _BACKEND: np.array(traces.backend), **traces.values}
    if text is not None:
        result[_MODEL] = np.array(text)
    return result


def plot(traces, path: str) -> None:
    """One panel per recorded value against time."""
    try:
        import matplotlib
    except ImportError:
        raise MdfLoopsError("--plot needs matplotlib: pip install 'mdf-loops[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    refs = list(traces.values)
    figure, axes = plt.subplots(
        len(refs), 1, sharex=True, squeeze=False, figsize=(7, 1.6 + 1.4 * len(refs))
    )
    for ax, ref in zip(axes[:, 0], refs, strict=True):
        values = traces.values[ref]
        ax.plot(traces.time, values.reshape(len(values), -1), linewidth=1)
        ax.set_ylabel(ref, fontsize=8)
    axes[-1, 0].set_xlabel("time")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)

"""Stateful MDF models of the field's classics, simulated as explicit time loops.

Each model describes one time step the way modeci-mdf's own examples do (a
``time_derivative`` with a ``default_initial_value``, or a parameter whose value
reads itself); ``mdf_loops.simulate`` runs the time loop that modeci-mdf's
scripts write by hand. The script writes each model as JSON and YAML next to
itself, simulates it, and prints the last recorded values.

=================  ====================================================  ==========
model              what it shows                                         dt, steps
=================  ====================================================  ==========
fitzhugh_nagumo    two coupled time derivatives                          0.05, 2000
izhikevich         time derivatives with reset conditions (spikes)       0.25, 2000
iaf_network        input, two leaky integrate-and-fire cells, a synapse  0.05, 4000
hodgkin_huxley     four time derivatives with exponential rates          0.01, 5000
newton_cooling     one time derivative                                   0.1, 1000
counters           node conditions: EveryNPasses, AfterNCalls, BeforeN.  1.0, 40
ddm_threshold      drift diffusion ended by a Threshold termination      0.01, 3000
=================  ====================================================  ==========
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from modeci_mdf.mdf import (Condition, ConditionSet, Edge, Graph, InputPort, Model, Node,
                            OutputPort, Parameter, ParameterCondition)

HERE = Path(__file__).parent
ES = "TimeScale.ENVIRONMENT_SEQUENCE"

#: name -> (dt, steps, recorded values); ``ddm_threshold`` also reads a noise series
SIMULATIONS = {
    "fitzhugh_nagumo": (0.05, 2000, ["fn.V", "fn.W"]),
    "izhikevich": (0.25, 2000, ["izh.v", "izh.u"]),
    "iaf_network": (0.05, 4000, ["cell1.v", "synapse.g", "cell2.v", "cell2.spike"]),
    "hodgkin_huxley": (0.01, 5000, ["hh.V", "hh.m", "hh.h", "hh.n"]),
    "newton_cooling": (0.1, 1000, ["body.T"]),
    "counters": (1.0, 40, ["A.count", "B.total", "C.x", "D.late", "E.early"]),
    "ddm_threshold": (0.01, 3000, ["ddm.x"]),
}


def _model(name: str, nodes: list[Node], edges: list[Edge] = (), conditions=None) -> Model:
    graph = Graph(id=name, nodes=list(nodes), edges=list(edges), conditions=conditions)
    return Model(id=name, graphs=[graph])


def _out(node: Node, *names: str) -> None:
    node.output_ports += [OutputPort(id=f"{n}_out", value=n) for n in names]


def fitzhugh_nagumo() -> Model:
    fn = Node(id="fn")
    fn.input_ports.append(InputPort(id="I_ext", default_value=0.5))
    fn.parameters += [
        Parameter(id="a", value=0.7), Parameter(id="b", value=0.8), Parameter(id="tau", value=12.5),
        Parameter(id="V", default_initial_value=-1.0, time_derivative="V - V**3 / 3 - W + I_ext"),
        Parameter(id="W", default_initial_value=1.0, time_derivative="(V + a - b * W) / tau"),
    ]
    _out(fn, "V", "W")
    return _model("fitzhugh_nagumo", [fn])


def izhikevich() -> Model:
    izh = Node(id="izh")
    izh.input_ports.append(InputPort(id="I", default_value=10.0))
    izh.parameters += [
        Parameter(id="a", value=0.02), Parameter(id="b", value=0.2),
        Parameter(id="c", value=-65.0), Parameter(id="d", value=8.0),
        Parameter(id="v", default_initial_value=-65.0,
                  time_derivative="0.04 * v**2 + 5 * v + 140 - u + I",
                  conditions=[ParameterCondition(id="reset", test="v >= 30", value="c")]),
        Parameter(id="u", default_initial_value=-13.0, time_derivative="a * (b * v - u)",
                  conditions=[ParameterCondition(id="reset", test="v >= 30", value="u + d")]),
    ]
    _out(izh, "v", "u")
    return _model("izhikevich", [izh])


def _lif(node_id: str) -> Node:
    cell = Node(id=node_id)
    cell.input_ports.append(InputPort(id="I"))
    cell.parameters += [
        Parameter(id="tau", value=10.0), Parameter(id="R", value=1.0),
        Parameter(id="v_rest", value=-70.0), Parameter(id="v_th", value=-55.0),
        Parameter(id="v_reset", value=-75.0),
        Parameter(id="v", default_initial_value=-70.0,
                  time_derivative="(-(v - v_rest) + R * I) / tau",
                  conditions=[ParameterCondition(id="reset", test="v >= v_th", value="v_reset")]),
        Parameter(id="spike", value="numpy.where(v >= v_th, 1.0, 0.0)"),
    ]
    _out(cell, "v", "spike")
    return cell


def iaf_network() -> Model:
    source = Node(id="input")
    source.parameters.append(Parameter(id="level", value=20.0))
    source.output_ports.append(OutputPort(id="current", value="level"))
    synapse = Node(id="synapse")
    synapse.input_ports.append(InputPort(id="spike_in"))
    synapse.parameters += [
        Parameter(id="tau_syn", value=5.0), Parameter(id="w", value=60.0),
        Parameter(id="g", default_initial_value=0.0, time_derivative="-g / tau_syn",
                  conditions=[ParameterCondition(id="on_spike", test="spike_in > 0",
                                                 value="g + w")]),
    ]
    synapse.output_ports.append(OutputPort(id="I_syn", value="g"))
    edges = [
        Edge(id="drive", sender="input", sender_port="current", receiver="cell1", receiver_port="I"),
        Edge(id="pre", sender="cell1", sender_port="spike_out", receiver="synapse",
             receiver_port="spike_in"),
        Edge(id="post", sender="synapse", sender_port="I_syn", receiver="cell2", receiver_port="I"),
    ]
    return _model("iaf_network", [source, _lif("cell1"), synapse, _lif("cell2")], edges)


def hodgkin_huxley() -> Model:
    hh = Node(id="hh")
    hh.input_ports.append(InputPort(id="I_ext", default_value=10.0))
    rates = {
        "alpha_m": "0.1 * (V + 40) / (1 - math.exp(-(V + 40) / 10))",
        "beta_m": "4 * math.exp(-(V + 65) / 18)",
        "alpha_h": "0.07 * math.exp(-(V + 65) / 20)",
        "beta_h": "1 / (1 + math.exp(-(V + 35) / 10))",
        "alpha_n": "0.01 * (V + 55) / (1 - math.exp(-(V + 55) / 10))",
        "beta_n": "0.125 * math.exp(-(V + 65) / 80)",
    }
    hh.parameters += [Parameter(id=k, value=v) for k, v in (
        ("C", 1.0), ("g_Na", 120.0), ("g_K", 36.0), ("g_L", 0.3),
        ("E_Na", 50.0), ("E_K", -77.0), ("E_L", -54.387))]
    hh.parameters += [
        Parameter(id="V", default_initial_value=-65.0, time_derivative=(
            "(I_ext - g_Na * m**3 * h * (V - E_Na) - g_K * n**4 * (V - E_K) - g_L * (V - E_L)) / C")),
        Parameter(id="m", default_initial_value=0.05, time_derivative="alpha_m * (1 - m) - beta_m * m"),
        Parameter(id="h", default_initial_value=0.6, time_derivative="alpha_h * (1 - h) - beta_h * h"),
        Parameter(id="n", default_initial_value=0.32, time_derivative="alpha_n * (1 - n) - beta_n * n"),
    ]
    # declared after the states: modeci-mdf gives the states the rates of the previous step
    hh.parameters += [Parameter(id=k, value=v) for k, v in rates.items()]
    _out(hh, "V")
    return _model("hodgkin_huxley", [hh])


def newton_cooling() -> Model:
    body = Node(id="body")
    body.parameters += [Parameter(id="k", value=0.07), Parameter(id="T_env", value=20.0),
                        Parameter(id="T", default_initial_value=90.0,
                                  time_derivative="-k * (T - T_env)")]
    _out(body, "T")
    return _model("newton_cooling", [body])


def counters() -> Model:
    def counter(node_id: str, name: str, step: str = "1") -> Node:
        node = Node(id=node_id)
        node.parameters.append(Parameter(id=name, value=f"{name} + {step}", default_initial_value=0))
        _out(node, name)
        return node

    a = counter("A", "count")
    b = counter("B", "total", "inc")
    b.input_ports.append(InputPort(id="inc"))
    c = Node(id="C")  # a harmonic oscillator stepped on every third pass
    c.parameters += [Parameter(id="omega", value=0.5),
                     Parameter(id="x", default_initial_value=1.0, time_derivative="omega * y"),
                     Parameter(id="y", default_initial_value=0.0, time_derivative="-omega * x")]
    _out(c, "x")
    d, e = counter("D", "late"), counter("E", "early")
    edges = [Edge(id="a_b", sender="A", sender_port="count_out", receiver="B", receiver_port="inc")]
    conditions = ConditionSet(
        node_specific={
            "B": Condition("EveryNPasses", n=2, time_scale=ES),
            "C": Condition("EveryNPasses", n=3, time_scale=ES),
            "D": Condition("AfterNCalls", dependencies="A", n=10, time_scale=ES),
            "E": Condition("BeforeNCalls", dependencies="B", n=5, time_scale=ES),
        },
        termination={
            "environment_state_update": Condition("AfterNPasses", n=1),
            "environment_sequence": Condition("AfterNCalls", dependencies="B", n=15,
                                              time_scale=ES),
        })
    return _model("counters", [a, b, c, d, e], edges, conditions)


def ddm_threshold() -> Model:
    ddm = Node(id="ddm")
    ddm.input_ports.append(InputPort(id="noise", default_value=0.0))
    ddm.parameters += [Parameter(id="drift", value=0.5), Parameter(id="sigma", value=0.3),
                       Parameter(id="x", default_initial_value=0.0,
                                 time_derivative="drift + sigma * noise / 0.1")]  # sqrt(dt) = 0.1
    _out(ddm, "x")
    bound = {"dependency": "ddm", "parameter": "x"}
    conditions = ConditionSet(termination={"environment_sequence": Condition(
        "Any", dependencies=[Condition("Threshold", threshold=1.0, comparator=">=", **bound),
                             Condition("Threshold", threshold=-1.0, comparator="<=", **bound)])})
    return _model("ddm_threshold", [ddm], conditions=conditions)


def ddm_noise(steps: int = 3000, seed: int = 7) -> np.ndarray:
    """The standard-normal samples the drift-diffusion trial reads, one per step."""
    return np.random.default_rng(seed).standard_normal(steps)


BUILDERS = {name: globals()[name] for name in SIMULATIONS}


def draw(folder: Path) -> None:
    """The pictures of docs/timeloops.md: each time-loop model, and its trajectories."""
    import mdf_loops
    from mdf_loops.cli.simulate import plot

    for name in BUILDERS:
        dt, steps, record = SIMULATIONS[name]
        inputs = {"noise": ddm_noise(steps)} if name == "ddm_threshold" else None
        loop = mdf_loops.to_time_loop(HERE / f"{name}.json", dt=dt, steps=steps, record=record,
                                      inputs=inputs)
        mdf_loops.render(loop, folder / f"timeloop_{name}.svg")
        plot(mdf_loops.simulate(loop), str(folder / f"timeloop_{name}_traces.png"))


def main() -> None:
    import sys

    import mdf_loops

    if "--docs" in sys.argv:
        draw(HERE.parent.parent / "docs" / "images")
    for name, build in BUILDERS.items():
        model = build()
        model.to_json_file(str(HERE / f"{name}.json"))
        model.to_yaml_file(str(HERE / f"{name}.yaml"))
        dt, steps, record = SIMULATIONS[name]
        inputs = {"noise": ddm_noise(steps)} if name == "ddm_threshold" else None
        traces = mdf_loops.simulate(HERE / f"{name}.json", dt=dt, steps=steps, record=record,
                                    inputs=inputs)
        last = ", ".join(f"{ref}={traces[ref][-1]:.4g}" for ref in record)
        print(f"{name:16s} {traces.steps:5d} steps to t={traces.time[-1]:.4g}: {last}")


if __name__ == "__main__":
    main()

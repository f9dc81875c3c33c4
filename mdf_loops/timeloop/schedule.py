"""The body nodes that carry the scheduler's counts and the Loop's condition."""

from __future__ import annotations

from modeci_mdf.mdf import InputPort, Node, OutputPort, Parameter

from mdf_loops.timeloop.plan import Counts, SchedulePlan

__all__ = ["schedule_node", "control_node", "counter_ports", "termination_expression"]


def counter_ports(plan: SchedulePlan) -> list[str]:
    """Ids of the counters the loop carries, in order."""
    return [f"calls__{n}" for n in plan.counted]


def schedule_node(plan: SchedulePlan, node_id: str) -> Node:
    """A node computing, pass by pass, which nodes run, and the counts after the step."""
    from mdf_loops.timeloop.conditions import expression  # graph-scheduler's conditions

    node = Node(id=node_id)
    node.input_ports.append(InputPort(id="iteration"))
    node.input_ports.extend([InputPort(id=p) for p in counter_ports(plan)])
    calls = {n: f"calls__{n}" for n in plan.counted}
    useable = {pair: "0" for pair in plan.useable}  # graph-scheduler resets them every trial
    ran: dict[str, str] = {}  # node -> expression: ran in this pass
    masked = plan.masked
    for k, members in enumerate(plan.sets):
        alive = None
        if plan.termination is not None and k > 0:
            counts = _counts(calls, ran, useable)
            alive = f"numpy.logical_not({expression(plan.termination, counts, None, plan)})"
        runs = {}
        # graph-scheduler re-checks a set's nodes until none more runs: a node counting the
        # runs of another node of its set (AfterNCalls only) sees them; so it goes after it
        for n in sorted(members, key=lambda m: (bool(plan.same_set.get(m)), m)):
            if n not in masked:
                runs[n] = "True"
            else:
                parts = []
                if n in plan.node_conditions:
                    counts = _counts(calls, ran, useable)
                    parts.append(f"({expression(plan.node_conditions[n], counts, n, plan)})")
                if alive is not None:
                    parts.append(f"({alive})")
                node.parameters.append(
                    Parameter(id=f"runs__{n}", value=" & ".join(parts) or "True")
                )
                node.output_ports.append(OutputPort(id=f"runs__{n}", value=f"runs__{n}"))
                node.output_ports.append(OutputPort(id=f"fresh__{n}", value=f"calls__{n} == 0"))
                runs[n] = f"runs__{n}"
            ran[n] = runs[n]
            if n in calls:
                name = f"calls__{n}__{k}"
                value = (
                    f"{calls[n]} + 1"
                    if runs[n] == "True"
                    else f"numpy.where({runs[n]}, {calls[n]} + 1, {calls[n]})"
                )
                node.parameters.append(Parameter(id=name, value=value))
                calls[n] = name
        for (d, o), current in list(useable.items()):
            if d not in members and o not in members:
                continue
            value = current
            if o in members:
                value = f"numpy.where({runs[o]}, 0, {value})"
            if d in members:
                value = f"numpy.where({runs[d]}, ({value}) + 1, {value})"
            name = f"useable__{d}__{o}__{k}"
            node.parameters.append(Parameter(id=name, value=value))
            useable[(d, o)] = name
    for n in plan.counted:
        node.output_ports.append(OutputPort(id=f"calls__{n}__next", value=calls[n]))
    return node


def _counts(calls: dict, ran: dict, useable: dict) -> Counts:
    """The counts as they stand now (a snapshot of the dictionaries)."""
    calls, ran, useable = dict(calls), dict(ran), dict(useable)
    return Counts(
        calls=calls.__getitem__,
        calls_trial=lambda n: f"numpy.where({ran[n]}, 1, 0)" if n in ran else "0",
        passes="iteration",
        useable=lambda d, o: useable[(d, o)],
        threshold=lambda read: "False",
    )


def termination_expression(plan: SchedulePlan, calls, useable, passes: str, threshold) -> str:
    """The termination condition at the start of a step, after ``passes`` steps."""
    from mdf_loops.timeloop.conditions import expression  # graph-scheduler's conditions

    counts = Counts(
        calls=calls, calls_trial=lambda n: "0", passes=passes, useable=useable, threshold=threshold
    )
    return expression(plan.termination, counts, None, plan)


def control_node(
    plan: SchedulePlan, node_id: str, until: str | None, until_ports: list[str]
) -> Node:
    """The node computing the Loop's next condition: not terminated, and not ``until``."""
    node = Node(id=node_id)
    node.input_ports.extend([InputPort(id="cond_in"), InputPort(id="iteration")])
    parts = []
    if plan.termination is not None:
        node.input_ports.extend([InputPort(id=f"end__{p}") for p in counter_ports(plan)])
        node.input_ports.extend([InputPort(id=t.port) for t in plan.thresholds])
        term = termination_expression(
            plan,
            calls=lambda n: f"end__calls__{n}",
            useable=lambda d, o: "0",
            passes="(iteration + 1)",
            threshold=lambda read: read.port,
        )
        node.parameters.append(Parameter(id="terminated", value=term))
        parts.append("numpy.logical_not(terminated)")
    if until is not None:
        node.input_ports.extend([InputPort(id=p) for p in until_ports])
        node.parameters.append(Parameter(id="until", value=until))
        parts.append("numpy.logical_not(until)")
    node.output_ports.append(OutputPort(id="cond_out", value=" & ".join(parts) or "cond_in"))
    return node

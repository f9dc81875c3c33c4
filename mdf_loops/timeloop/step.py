"""One node of a stateful MDF graph, rewritten as a stateless node of a time-loop body.

modeci-mdf's ``EvaluableNode.evaluate`` (0.4.x) runs a node in two sweeps over its
parameters, in the order they are declared:

1. every parameter's *current* value: its value from the previous evaluation, or, on
   the first, its initial value (``default_initial_value``, else 0.0, for a stateful
   parameter; its ``value`` evaluated with itself as 0.0 otherwise);
2. every parameter's *new* value, each seeing the new values of the parameters
   declared before it and the current values of itself and those after it. A
   ``time_derivative`` parameter becomes ``default_initial_value`` on an evaluation
   without a time increment, else ``current + time_derivative * dt``; its
   ``conditions`` then replace the value where their test holds.

The output ports read the new values. Here the current values become loop-carried
inputs (``<node>__<parameter>``) and every new value a stateless parameter, in the
same order, so that the same expressions run on the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from modeci_mdf.mdf import InputPort, Node, OutputPort, Parameter

from mdf_loops.errors import ModelError
from mdf_loops.model.references import is_python_name
from mdf_loops.timeloop.functions import (
    function_parameters,
    in_stock_order,
    inline_args,
    names_read_by_functions,
    refuse_random,
)
from mdf_loops.timeloop.lean_engine import is_stateful
from mdf_loops.timeloop.names import names_read, rename

__all__ = ["StepNode", "step_node", "FIRST", "RUNS", "FRESH", "carried_port", "value_port"]

#: input ports a body node reads its flags from
FIRST = "first__step"  # the first evaluation of the graph (no time increment)
RUNS = "runs__now"  # the node runs in this step (its scheduling condition holds)
FRESH = "fresh__node"  # the node has not run before this step


def carried_port(node_id: str, name: str) -> str:
    """Id of the body input port that carries ``name``'s value from the previous step."""
    return f"{node_id}__{name}"


def value_port(name: str) -> str:
    """Id of the body output port that shows a parameter's new value."""
    return f"{name}__value"


@dataclass
class StepNode:
    """A body node and what it needs from the loop: the values it carries."""

    node: Node
    #: parameter ids whose previous value the node reads (carried from step to step)
    carried_parameters: list[str] = field(default_factory=list)
    #: output-port ids whose previous value the node keeps when it does not run
    carried_outputs: list[str] = field(default_factory=list)


def step_node(
    source: Node,
    dt: float,
    *,
    conditioned: bool,
    exposed: set[str],
    integers: frozenset[str] = frozenset(),
) -> StepNode:
    """The stateless body node for ``source`` (``conditioned``: it may skip steps;
    ``integers``: parameters whose values modeci-mdf holds as integers)."""
    where = f"node '{source.id}'"
    params = list(source.parameters)
    functions = in_stock_order(source.id, list(source.functions or []))
    index = {p.id: i for i, p in enumerate(params)}
    reads = [_reads(p) for p in params]
    old = _old_values_read(params, index, functions, reads) if not conditioned else set(index)
    carried = [p.id for p in params if p.id in old]
    _refuse_unnamed(source.id, carried, "parameter")
    if conditioned:
        _refuse_unnamed(source.id, [p.id for p in source.output_ports], "output port")
    node = Node(id=source.id, metadata=dict(source.metadata or {}))
    _input_ports(source, node, conditioned, carried)
    old_name = {name: f"{name}__old" for name in carried}
    initial = _InitialValues(source.id, functions, integers, reads)
    _current_values(source, node, params, old_name, FRESH if conditioned else FIRST, initial)
    node.parameters.extend(function_parameters(source.id, functions, old_name, set(index)))
    for i, p in enumerate(params):  # new values (second sweep)
        mapping = {q.id: old_name[q.id] for q in params[i:] if q.id in old_name}
        node.parameters.extend(_new_value(source.id, p, mapping, dt, conditioned, where))
    _output_ports(
        source,
        node,
        conditioned,
        sorted(set(carried) | (exposed & set(index)), key=index.__getitem__),
    )
    _check_clashes(source, node)
    return StepNode(node, carried, [p.id for p in source.output_ports] if conditioned else [])


def _refuse_unnamed(node_id: str, carried: list[str], kind: str) -> None:
    """A ModelError where a value the loop carries has no Python name: its port and
    variables are named ``<node>__<name>`` from the ids, which an expression then reads."""
    for name in carried:
        if not (is_python_name(node_id) and is_python_name(name)):
            raise ModelError(
                f"node '{node_id}' {kind} '{name}': a time loop carries its value from step "
                f"to step as '{carried_port(node_id, name)}', a name its expressions read, "
                "and an id that is no Python name (as modeci-mdf's ONNX importer writes "
                "'/A/Add') cannot make one; rename the node and the "
                f"{kind} to letters, digits and '_'"
            )


def _input_ports(source: Node, node: Node, conditioned: bool, carried: list[str]) -> None:
    """The source's input ports, the step flags, and one port per carried parameter."""
    node.input_ports.extend(
        [
            InputPort(
                id=p.id, shape=p.shape, type=p.type, default_value=p.default_value, reduce=p.reduce
            )
            for p in source.input_ports
        ]
    )
    node.input_ports.append(InputPort(id=FIRST))
    if conditioned:
        node.input_ports.extend([InputPort(id=RUNS), InputPort(id=FRESH)])
    for name in carried:
        node.input_ports.append(InputPort(id=carried_port(source.id, name)))


def _current_values(
    source: Node,
    node: Node,
    params: list[Parameter],
    old_name: dict[str, str],
    fresh: str,
    initial: _InitialValues,
) -> None:
    """The first sweep: each carried parameter's current value (its initial value when fresh)."""
    index = {p.id: i for i, p in enumerate(params)}
    for p in params:  # an array initial value: a parameter of its own (a constant to export)
        if isinstance(p.default_initial_value, (list, tuple)):
            node.parameters.append(Parameter(id=_init_name(p), value=list(p.default_initial_value)))
        elif p.id in old_name and not is_stateful(p) and isinstance(p.value, (list, tuple)):
            node.parameters.append(Parameter(id=_init_name(p), value=list(p.value)))
    for p in params:  # current values, in declared order (first sweep)
        if p.id in old_name:
            init = initial.value(
                p,
                {
                    r: old_name[r]
                    for r in _initial_names(p)
                    if r in old_name and index[r] < index[p.id]
                },
            )
            if "[" in init and init != _init_name(p):
                # modeci-mdf's variable search splits text at "[": "numpy.where(f, [a, b]"
                # would leave "numpy.where(f, " unparsable, so the value is its own parameter
                node.parameters.append(Parameter(id=_init_name(p), value=init))
                init = _init_name(p)
            node.parameters.append(
                Parameter(
                    id=old_name[p.id],
                    value=f"numpy.where({fresh}, {init}, {carried_port(source.id, p.id)})[()]",
                )
            )


def _output_ports(source: Node, node: Node, conditioned: bool, shown: list[str]) -> None:
    """The source's output ports (kept when the node does not run), and one port per
    parameter in ``shown`` with its new value."""
    for port in source.output_ports:
        value = port.value
        if conditioned:
            value = f"numpy.where({RUNS}, {value}, {carried_port(source.id, port.id)})"
            node.input_ports.append(InputPort(id=carried_port(source.id, port.id)))
        node.output_ports.append(
            OutputPort(id=port.id, value=value, shape=port.shape, type=port.type)
        )
    taken = {p.id for p in source.output_ports}
    for name in shown:
        if value_port(name) in taken:
            raise ModelError(
                f"node '{source.id}': output port '{value_port(name)}' clashes with a name "
                "the time loop needs; rename the port"
            )
        node.output_ports.append(OutputPort(id=value_port(name), value=name))


def _reads(p: Parameter) -> tuple[set[str], set[str]]:
    """Names read by parameter ``p``'s expressions other than its time derivative (its
    value, initial value, args and conditions), and by its time derivative."""
    fields = [p.value, p.default_initial_value, *(p.args or {}).values()]
    for c in p.conditions or []:
        fields += [_field(c, "test"), _field(c, "value")]
    found: set[str] = set()
    for expression in fields:
        if expression is not None:
            found |= names_read(expression)
    return found, names_read(p.time_derivative)


def _old_values_read(
    params: list[Parameter],
    index: dict[str, int],
    functions: list,
    reads: list[tuple[set[str], set[str]]],
) -> set[str]:
    """Parameters whose current (previous-step) value is read: by the node's functions,
    and in the second sweep (``reads``: :func:`_reads` of each parameter)."""
    ids = index.keys()
    old: set[str] = names_read_by_functions(functions) & ids
    for i, (p, (outside, derivative)) in enumerate(zip(params, reads, strict=True)):
        for name in (outside | derivative) & ids:
            if index[name] >= i:
                old.add(name)
        if p.time_derivative is not None or (p.value is None and not p.function):
            old.add(p.id)
    pending = list(old)
    while pending:  # initial values read the current values of earlier parameters
        p = params[index[pending.pop()]]
        for name in _initial_names(p) & ids:
            if index[name] < index[p.id] and name not in old:
                old.add(name)
                pending.append(name)
    return old


def _initial_names(p: Parameter) -> set[str]:
    """Names read by the expression of a parameter's value before its first evaluation."""
    return names_read(p.default_initial_value if is_stateful(p) else p.value)


class _InitialValues:
    """The values modeci-mdf gives a node's parameters before their first evaluation."""

    def __init__(
        self,
        node_id: str,
        functions: list,
        integers: frozenset[str],
        reads: list[tuple[set[str], set[str]]],
    ) -> None:
        self.node_id, self.integers = node_id, integers
        #: parameters whose current value the first step may read outside a time derivative
        #: (any reader counts: stock's first sweep also evaluates the initial value of every
        #: value parameter, which reads the current values declared before it)
        self.read_at_first: set[str] = names_read_by_functions(functions)
        for outside, _ in reads:
            self.read_at_first |= outside

    def value(self, p: Parameter, mapping: dict[str, str]) -> str:
        """The expression of ``p``'s value before its first evaluation."""
        here = f"node '{self.node_id}' parameter '{p.id}'"
        if is_stateful(p):
            if p.default_initial_value is not None:
                return _default(p, mapping, here)
            # modeci-mdf's 0.0; its expressions turn integral floats into ints
            return "0" if p.id in self.integers else "0.0"
        if isinstance(p.value, (list, tuple)):
            return _init_name(p)
        if p.value is not None:
            return rename(p.value, {**mapping, p.id: "0.0"}, f"{here} value")
        if not p.function:  # only conditions: None, then 0.0 before the first test
            return "0.0"
        if p.id not in self.read_at_first:  # read by time derivatives, not evaluated at first
            return carried_port(self.node_id, p.id)
        raise ModelError(
            f"{here}: its value before the first evaluation is read, and modeci-mdf has "
            "none for a function parameter (it reads None); give it a default_initial_value "
            "or declare it before the parameters that read it"
        )


def _new_value(
    node_id: str, p: Parameter, mapping: dict[str, str], dt: float, conditioned: bool, where: str
) -> list[Parameter]:
    """The second sweep for ``p``: its new value, its conditions, and (when the node may
    skip the step) the choice between the new and the current value."""
    here = f"{where} parameter '{p.id}'"
    target = f"{p.id}__new" if conditioned else p.id
    base = f"{p.id}__base" if p.conditions else target
    out = [_base_value(node_id, p, base, mapping, dt, conditioned, here)]
    current = base
    for k, c in enumerate(p.conditions or []):
        test = rename(_field(c, "test"), mapping, f"{here} condition test")
        given = _field(c, "value")
        if isinstance(given, (list, tuple)):  # its own parameter, as an array initial value:
            value = f"{p.id}__c{k}__value"  # stock's engine cuts a text at '[' for names
            out.append(Parameter(id=value, value=list(given)))
        else:
            value = rename(given, mapping, f"{here} condition value")
        name = target if k == len(p.conditions) - 1 else f"{p.id}__c{k}"
        out.append(Parameter(id=name, value=f"numpy.where({test}, {value}, {current})"))
        current = name
    if conditioned:
        out.append(Parameter(id=p.id, value=f"numpy.where({RUNS}, {target}, {p.id}__old)"))
    return out


def _base_value(
    node_id: str,
    p: Parameter,
    base: str,
    mapping: dict[str, str],
    dt: float,
    conditioned: bool,
    here: str,
) -> Parameter:
    """``p``'s new value before its conditions: its value, function, or Euler step."""
    if p.value is not None:
        return Parameter(
            id=base,
            value=rename(p.value, mapping, f"{here} value")
            if isinstance(p.value, str)
            else p.value,
        )
    if p.function:
        refuse_random(p.function, here)
        args = inline_args(p.args or {}, mapping, here)
        return Parameter(id=base, function=p.function, args=args)
    if p.time_derivative is not None:
        if p.default_initial_value is None:
            raise ModelError(f"{here}: a time_derivative needs a default_initial_value")
        init = _default(p, mapping, here)
        derivative = rename(p.time_derivative, mapping, f"{here} time_derivative")
        step = _euler_step(mapping[p.id], derivative, dt)
        return Parameter(id=base, value=f"numpy.where({FIRST}, {init}, {step})")
    if p.conditions:
        fresh = FRESH if conditioned else FIRST
        return Parameter(id=base, value=f"numpy.where({fresh}, 0.0, {carried_port(node_id, p.id)})")
    raise ModelError(
        f"{here}: it has no value, function or time_derivative; modeci-mdf "
        "leaves it None at every step"
    )


def _euler_step(current: str, derivative: str, dt: float) -> str:
    """``current + (derivative) * dt`` as text (``current`` a name, ``derivative`` an
    expression)."""
    return f"{current} + ({derivative}) * {dt!r}"


def _init_name(p: Parameter) -> str:
    return f"{p.id}__init"


def _default(p: Parameter, mapping: dict[str, str], here: str) -> str:
    """The expression of ``default_initial_value`` (an array one is its own parameter)."""
    if isinstance(p.default_initial_value, (list, tuple)):
        return _init_name(p)
    return rename(p.default_initial_value, mapping, f"{here} default_initial_value")


def _field(condition, name: str):
    return getattr(condition, name) if hasattr(condition, name) else condition[name]


def _check_clashes(source: Node, node: Node) -> None:
    seen: dict[str, str] = {}
    for kind, items in (("input port", node.input_ports), ("parameter", node.parameters)):
        for item in items:
            if item.id in seen:
                raise ModelError(
                    f"node '{source.id}': {kind} '{item.id}' clashes with a name the "
                    f"time loop adds ({seen[item.id]}); rename it in the model"
                )
            seen[item.id] = kind

"""Gradients of a model's output with respect to its inputs and constant parameters.

``value_and_grad(model, of, wrt, inputs)`` lowers the model to JAX (constant
parameters named in ``wrt`` become inputs, :mod:`.parameters`), traces it in the
differentiable form of its loops (evaluator mode ``"grad"``) and returns the
value of ``of`` and ``{name: gradient}``. The gradient function is jit-compiled
once per model, ``of``, ``wrt`` and input shapes, so a fitting loop pays the
compilation once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
from modeci_mdf.mdf import Model

from mdf_loops import ops, run_plans
from mdf_loops.backends.cache import CompileCache
from mdf_loops.backends.jax.compiled import cached_compile, jax_errors
from mdf_loops.backends.jax.jitted import objective_key
from mdf_loops.backends.jax.parameters import parameters_as_inputs, resolve
from mdf_loops.backends.jax.values import BUFFER_FULL, LIMIT_PASSED, Ragged, is_concrete
from mdf_loops.errors import IterationLimitError, ModelError
from mdf_loops.model.constants import plain_constants
from mdf_loops.model.inputs import check_inputs
from mdf_loops.model.interface import graph_interface
from mdf_loops.ops.common import Limits

__all__ = ["value_and_grad", "grad", "prepare", "lift"]

Objective: TypeAlias = "str | Callable[[Mapping[str, Any]], Any]"

#: models with their parameters lifted into inputs, by model and (graph, parameter names)
_LIFTED: CompileCache[tuple] = CompileCache()


class _Outputs(dict):
    """Outputs handed to an objective; names a Loop scan output of run-time length clearly."""

    def __init__(self, values: Mapping[str, Any], ragged: Mapping[str, str]):
        super().__init__(values)
        self.ragged = ragged  # output name -> why its length is only known at run time

    def __missing__(self, name: str) -> Any:
        if name in self.ragged:
            raise ModelError(
                f"output '{name}' is a Loop scan output whose length is decided at run "
                f"time, so it cannot be differentiated: {self.ragged[name]} "
                "(or use the Loop's loop-carried values)"
            )
        raise ModelError(
            f"the objective reads '{name}', which is not an output; outputs: "
            f"{sorted(set(self) | set(self.ragged))}"
        )


def lift(
    model: Model | Any,
    inputs: Mapping[str, Any] | None,
    names: Sequence[str],
    *,
    graph: str | None = None,
    trusted: bool = False,
):
    """``(model, feed, input name by name, graph id)`` with ``names`` as graph inputs.

    Names that are graph inputs stay inputs; the others must be constant parameters
    (``"node.parameter"`` or a parameter id found once) or imported ONNX constants
    (:mod:`mdf_loops.model.constants`), and become inputs holding their model values
    unless ``inputs`` gives them. The rewritten model is cached. ``feed`` has passed
    the input checks of every entry point (:func:`mdf_loops.model.inputs.check_inputs`).
    """
    from mdf_loops.model.interface import select_graph
    from mdf_loops.run import _verify, load_model

    model = load_model(model)
    _verify(model, trusted)
    target = select_graph(model, graph)
    interface = graph_interface(target)
    if not isinstance(inputs, Mapping):  # refused as run refuses it
        check_inputs(target, interface.inputs, inputs)
    parameter_names = [n for n in names if n not in interface.inputs]
    if not parameter_names:
        feed = check_inputs(target, interface.inputs, inputs)
        return model, feed, {n: n for n in names}, target.id
    rewritten, renamed, sites = _LIFTED.get(
        model, (target.id, tuple(parameter_names)), lambda: _lifted(model, target, parameter_names)
    )
    feed = dict(inputs or {})
    for name in parameter_names:
        feed.setdefault(renamed[name], feed.pop(name, sites[name].value))
    lifted_target = select_graph(rewritten, target.id)
    feed = check_inputs(lifted_target, graph_interface(lifted_target).inputs, feed)
    return rewritten, feed, {n: renamed.get(n, n) for n in names}, target.id


def _lifted(model: Model, target: Any, names: list[str]) -> tuple:
    """``(model copy, input name by name, site by name)``: ``names`` made graph inputs."""
    plain, addresses = plain_constants(model, target.id, names)
    plain_target = next(g for g in plain.graphs if g.id == target.id)
    found = resolve(plain_target, [addresses.get(n, n) for n in names])
    sites = {n: found[addresses.get(n, n)] for n in names}
    return (*parameters_as_inputs(plain, target.id, sites), sites)


def prepare(
    model: Model | Any,
    inputs: Mapping[str, Any] | None,
    names: Sequence[str],
    *,
    graph: str | None = None,
    trusted: bool = False,
    limits: Limits | None = None,
):
    """``(lowered, feed, input name by name)``: :func:`lift`, then lowered to JAX (cached)."""
    rewritten, feed, renamed, graph_id = lift(model, inputs, names, graph=graph, trusted=trusted)
    return cached_compile(rewritten, feed, graph=graph_id, limits=limits), feed, renamed


def value_and_grad(
    model: Model | Any,
    of: Objective,
    wrt: str | Sequence[str],
    inputs: Mapping[str, Any] | None = None,
    *,
    graph: str | None = None,
    trusted: bool = False,
    max_iterations: int | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The value of ``of`` and its gradients with respect to ``wrt``.

    Args:
        model: an MDF ``Model`` or a path (as for :func:`mdf_loops.run`).
        of: an output name whose value is a scalar, or ``loss(outputs) -> scalar``
            written with ``jax.numpy`` over the outputs by name.
        wrt: a name or a list of names: graph inputs and constant parameters
            (``"node.parameter"``, or a parameter id that occurs once), at any depth of
            loop bodies.
        inputs: the graph inputs; a parameter given here replaces its model value.
        max_iterations: bound of a Loop stopped by its condition (its differentiable
            form costs one body evaluation per possible iteration, in blocks).

    Returns:
        ``(value, {name: gradient})``, numpy arrays.
    """
    names = [wrt] if isinstance(wrt, str) else list(wrt)  # one name, not its characters
    limits_now = ops.current_limits()
    key = ("grad", objective_key(of), tuple(names), graph, trusted, max_iterations, limits_now)
    plan = run_plans.find(model, inputs, key) if isinstance(model, Model) else None
    if plan is not None:  # a call repeated: run as the last one ran (mdf_loops.run_plans)
        result = plan.run({} if inputs is None else inputs)
        return result["value"], result["gradients"]
    changed = {} if max_iterations is None else {"max_iterations": max_iterations}
    with ops.limits(**changed):
        limits = None if trusted else ops.current_limits()
        lowered, feed, renamed = prepare(
            model, inputs, names, graph=graph, trusted=trusted, limits=limits
        )
    static, dynamic = lowered.split(lowered.feed(feed))
    _check_differentiable(names, renamed, static, dynamic)
    call = _Gradients(lowered, static, of, names, renamed, limits)
    result = call(dynamic)
    if isinstance(model, Model):
        _keep_plan(model, key, call, inputs or {}, dynamic)
    return result["value"], result["gradients"]


@dataclass(frozen=True)
class _Gradients:
    """One objective's value and gradients on a lowered model, for its dynamic inputs."""

    lowered: Any  # JaxModel
    static: dict[str, Any]
    of: Any
    names: list[str]
    renamed: Mapping[str, str]  # input name of the lowered model by name in wrt
    limits: Limits | None

    def __call__(self, dynamic: Mapping[str, Any]) -> dict[str, Any]:
        from mdf_loops.backends.jax.precision import x64

        wrt = [self.renamed[n] for n in self.names]
        with x64():
            value, flag, grads = _evaluate(self.lowered, self.static, dynamic, self.of, wrt)
        self.lowered.check_limits(flag)
        if flag & LIMIT_PASSED:
            raise IterationLimitError(
                f"a Loop passed max_iterations={self.limits and self.limits.max_iterations}"
                " (jax backend, gradient); raise it with max_iterations=N"
            )
        gradients = {n: np.asarray(grads[self.renamed[n]]) for n in self.names}
        return {"value": np.asarray(value), "gradients": gradients}

    def replay(self, fixed: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
        """:meth:`__call__` on the caller's inputs (checked by the plan) and ``fixed``."""
        renamed = self.renamed
        return self({**fixed, **{renamed.get(n, n): v for n, v in inputs.items()}})


def _keep_plan(model: Model, key: tuple, call: _Gradients, given: Mapping, dynamic: dict) -> None:
    """Keep the call as a plan (:mod:`mdf_loops.run_plans`) where a replay computes the same:
    every input traced, each given one used as given, the others parameter values."""
    as_given = {call.renamed.get(n, n): n for n in given}
    fixed = {k: v for k, v in dynamic.items() if k not in as_given}
    lifted = {call.renamed[n] for n in call.names}
    if call.static or not set(fixed) <= lifted or len(as_given) + len(fixed) != len(dynamic):
        return  # constants compiled in, or an input's default (read again on each call)
    typed = {n: dynamic[k] for k, n in as_given.items()}
    run_plans.keep(model, key, functools.partial(call.replay, fixed), given, typed)


def _check_differentiable(
    names: list[str], renamed: Mapping[str, str], static: Mapping, dynamic: Mapping
) -> None:
    """Each of ``names`` must reach the model as a floating-point run-time value."""
    for name in names:
        if renamed[name] in static:
            raise ModelError(
                f"'{name}' sets a shape, an index or a trip count in the model; "
                "it cannot be differentiated"
            )
        if np.asarray(dynamic[renamed[name]]).dtype.kind != "f":
            raise ModelError(
                f"'{name}' is {np.asarray(dynamic[renamed[name]]).dtype}; only "
                "floating-point values have gradients"
            )


def _evaluate(lowered, static, dynamic, of, wrt: list[str]) -> tuple[Any, int, dict]:
    """``(value, flag, gradients by input)``; a Loop whose scan buffer filled up is run
    again with eight times the rows (up to the model's maximum)."""
    while True:
        fn = _gradient_function(lowered, static, dynamic, of, tuple(wrt))
        points = {name: dynamic[name] for name in wrt}
        rest = {k: v for k, v in dynamic.items() if k not in points}
        with jax_errors(f"graph '{lowered.onnx_model.graph.name}' (jax backend, gradient)"):
            (value, flag), grads = fn(points, rest)
        flag = 0 if flag is None else int(flag)  # None: no loop stops at run time
        if flag & BUFFER_FULL and lowered.buffer_rows < lowered._max_rows():
            lowered.buffer_rows = min(lowered.buffer_rows * 8, lowered._max_rows())
            lowered._jitted.clear()
            continue
        return value, flag, grads


def grad(
    model: Model | Any,
    of: Objective,
    wrt: str | Sequence[str],
    inputs: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, np.ndarray]:
    """``{name: gradient of of}`` (see :func:`value_and_grad` for the arguments)."""
    return value_and_grad(model, of, wrt, inputs, **kwargs)[1]


def _gradient_function(lowered, static, dynamic, of, wrt: tuple) -> Callable:
    import jax

    from mdf_loops.backends.jax.flat import static_key

    key = (
        "grad",
        static_key(static),
        objective_key(of),
        wrt,
        lowered.buffer_rows,
        tuple(sorted((k, np.shape(v)) for k, v in dynamic.items() if not isinstance(v, list))),
    )
    fn = lowered._jitted.get(key)
    if fn is None:
        traced = lowered.function(static, mode="grad")

        def objective(points, rest):
            outputs, flag = traced({**rest, **points})
            value = _objective_value(of, outputs)
            return value, None if is_concrete(flag) else flag

        fn = lowered._jitted[key] = jax.jit(jax.value_and_grad(objective, has_aux=True))
    return fn


def _objective_value(of, outputs: Mapping[str, Any]) -> Any:
    import jax.numpy as jnp

    ragged = {k: v.why for k, v in outputs.items() if isinstance(v, Ragged)}
    visible = _Outputs({k: v for k, v in outputs.items() if k not in ragged}, ragged)
    if isinstance(of, str):
        if of not in outputs:
            raise ModelError(f"'{of}' is not an output; outputs: {sorted(outputs)}")
        value = visible[of]
    else:
        value = of(visible)
    value = jnp.asarray(value)
    if value.size != 1:
        raise ModelError(
            f"the objective must be a scalar, got shape {tuple(value.shape)}; "
            "pass of=lambda outputs: ... returning one number"
        )
    return jnp.reshape(value, ()).astype(value.dtype if value.dtype.kind == "f" else jnp.float64)

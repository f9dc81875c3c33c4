"""A few steps of the stock engine on a copy of the graph: the shapes and types of its values."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from modeci_mdf.mdf import Graph

from mdf_loops.errors import ModelError
from mdf_loops.model.semantics import prints_logged

if TYPE_CHECKING:
    from modeci_mdf.execution_engine import EvaluableGraph

    from mdf_loops.timeloop.lean_engine import LeanEngine

__all__ = ["Probe", "probe", "build_engine", "common_value"]

#: steps tried before a node that has never run is declared unreachable
_MAX_PROBE_STEPS = 64


@dataclass
class Probe:
    """A value of every parameter and output port, as modeci-mdf computes them."""

    values: dict[tuple[str, str], np.ndarray]  # (node, parameter or port) -> zeros like it


def build_engine(graph: Graph, *, copy_graph: bool = True) -> EvaluableGraph:
    """modeci-mdf's engine on a copy of ``graph`` (its scheduler parses the conditions);
    ``copy_graph=False``: on ``graph`` itself, for a graph no one else holds (one just
    read from a file for this conversion)."""
    from modeci_mdf.execution_engine import EvaluableGraph  # the engine: only where it runs

    try:
        with prints_logged():
            return EvaluableGraph(copy.deepcopy(graph) if copy_graph else graph)
    except Exception as exc:  # modeci-mdf raises ValueError/Exception on malformed nodes
        raise ModelError(f"graph '{graph.id}': modeci-mdf cannot build it: {exc}") from exc


def probe(
    graph: Graph,
    dt: float,
    inputs: Mapping[str, np.ndarray | None],
    engine: EvaluableGraph | LeanEngine | None = None,
) -> Probe:
    """Run two steps of modeci-mdf's engine on the graph (more until every node has run);
    ``engine``: one :func:`build_engine` (or :func:`~mdf_loops.timeloop.lean_engine.lean_engine`)
    made for it and not yet evaluated."""
    engine = build_engine(graph) if engine is None else engine
    values: dict[tuple[str, str], list] = {}
    for k in range(_MAX_PROBE_STEPS):
        initializer = {
            name: np.asarray(series)[min(k, len(series) - 1)]
            for name, series in inputs.items()
            if series is not None
        } or None
        try:
            with prints_logged():  # the stock engine prints; a library does not
                if k == 0:
                    engine.evaluate(initializer=initializer)
                else:
                    engine.evaluate(time_increment=dt, initializer=initializer)
        except Exception as exc:
            raise ModelError(
                f"graph '{graph.id}': step {k} fails on modeci-mdf's engine: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        for node_id, enode in engine.enodes.items():
            for name, item in list(enode.evaluable_parameters.items()) + list(
                enode.evaluable_outputs.items()
            ):
                if item.curr_value is not None:
                    values.setdefault((node_id, name), []).append(np.asarray(item.curr_value))
        if k >= 1 and all(enode_values_known(values, e) for e in engine.enodes.values()):
            break
    return Probe({key: common_value(seen, key) for key, seen in values.items()})


def enode_values_known(values: dict, enode: Any) -> bool:
    names = list(enode.evaluable_parameters) + list(enode.evaluable_outputs)
    return all((enode.node.id, n) in values for n in names)


def common_value(seen: list[np.ndarray], key: tuple[str, str]) -> np.ndarray:
    """Zeros of the shape and dtype a value keeps over the steps ``seen``."""
    first = seen[0]
    if first.shape == () and all(v.shape == () and v.dtype == first.dtype for v in seen):
        return np.zeros((), dtype=first.dtype)  # a scalar of one type: what follows gives
    shapes = {v.shape for v in seen}
    first_later = next((k for k, v in enumerate(seen) if v.shape != ()), 0)
    if shapes - {()} and all(v.shape == seen[-1].shape for v in seen[first_later:]):
        if first_later and seen[-1].size != 1:
            raise ModelError(
                f"node '{key[0]}' '{key[1]}': a number on step 0 and an array of shape "
                f"{seen[-1].shape} from step {first_later} on; a loop-carried value keeps "
                "one shape, and carried as the array the number would be read broadcast "
                "(its numpy.sum or shape unlike stock's). Give its default_initial_value "
                f"as an array of shape {seen[-1].shape}"
            )
        # a scalar initial value, then arrays of one element (PsyNeuLink's
        # default_initial_value -1 for a value of shape (1, 1)): the same number, whose
        # sum, mean or any element is the number's, so carry the array shape
        shapes = {seen[-1].shape}
        seen = seen[first_later:]
    if len(shapes) > 1:
        raise ModelError(
            f"node '{key[0]}' '{key[1]}': its shape changes from step to step "
            f"({sorted(shapes)}); a loop-carried value keeps one shape"
        )
    dtype = np.result_type(*seen)
    return np.zeros(seen[0].shape, dtype=dtype)

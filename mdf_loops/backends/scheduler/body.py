"""A loop body run through modeci-mdf's scheduler: bind formal inputs, evaluate, read outputs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from modeci_mdf.execution_engine import EvaluableGraph
from modeci_mdf.mdf import Graph

from mdf_loops.backends.scheduler.lean_schedule import forget_finished_updates, schedule_simply
from mdf_loops.backends.scheduler.planned_pass import PlannedPass
from mdf_loops.errors import LoopError, MdfLoopsError, ModelError
from mdf_loops.model.convention import BodySignature, body_signature
from mdf_loops.model.semantics import onnx_semantics, onnx_semantics_of
from mdf_loops.model.values import to_engine, to_kernel

__all__ = ["BodyRunner"]


class BodyRunner:
    """One body graph, ready to run many times.

    The :class:`~modeci_mdf.execution_engine.EvaluableGraph` is built once; every
    call binds the formal inputs (and outer-scope values) to the input ports with
    those ids, runs one scheduler pass and returns the formal outputs in order.
    """

    def __init__(self, graph: Graph, owner: str):
        self.graph = graph
        self.owner = owner
        try:
            self.signature: BodySignature = body_signature(graph)
        except ModelError as exc:
            raise ModelError(f"{owner}: {exc}") from exc
        try:
            with onnx_semantics():
                self._engine = EvaluableGraph(graph)
        except MdfLoopsError:
            raise
        except Exception as exc:  # modeci-mdf raises bare Exception/ValueError here
            raise ModelError(f"{owner}: body graph '{graph.id}' cannot be built: {exc}") from exc
        ports: dict[str, list] = {}
        for enode in self._engine.enodes.values():
            for port_id, evaluable_input in enode.evaluable_inputs.items():
                ports.setdefault(port_id, []).append(evaluable_input)
        self._formal_slots = [ports.get(name, []) for name in self.signature.formal_inputs]
        self._outer_slots = [
            (name, ports.get(name, [])) for name in self.signature.outer_scope_inputs
        ]
        self._outputs = [
            self._engine.enodes[node].evaluable_outputs[port]
            for node, port in self.signature.formal_outputs
        ]
        self._keeps_time_tree = graph.conditions is not None
        self._planned: PlannedPass | None = None
        if not self._keeps_time_tree:
            # no scheduling conditions: each node once per pass, with less bookkeeping
            schedule_simply(self._engine.scheduler, graph.nodes)
            if not self._engine.verbose and onnx_semantics_of(graph) is None:
                with onnx_semantics():  # the same order every pass: planned once
                    self._planned = PlannedPass(self._engine)

    @property
    def num_inputs(self) -> int:
        return len(self.signature.formal_inputs)

    @property
    def num_outputs(self) -> int:
        return len(self._outputs)

    def __call__(self, values: Sequence[Any], outer_scope: Mapping[str, Any]) -> list:
        if len(values) != len(self._formal_slots):
            raise LoopError(
                f"{self.owner}: body '{self.graph.id}' has {len(self._formal_slots)} formal "
                f"inputs {list(self.signature.formal_inputs)} but the operator passes "
                f"{len(values)} values"
            )
        for slots, value in zip(self._formal_slots, values, strict=True):
            value = to_engine(value)
            for slot in slots:
                slot.curr_value = value
        for name, slots in self._outer_slots:
            value = outer_scope[name]
            for slot in slots:
                slot.curr_value = value
        engine = self._engine
        engine.order_of_execution.clear()
        with onnx_semantics():  # a body always runs with ONNX semantics
            if self._planned is not None:
                self._planned()
                return [to_kernel(output.curr_value) for output in self._outputs]
            engine.evaluate()
        # graph-scheduler keeps a list of every pass it ran: drop it, or a long loop
        # keeps objects for each of its steps
        for history in engine.scheduler.execution_list.values():
            history.clear()
        if self._keeps_time_tree:
            forget_finished_updates(engine.scheduler)
        return [to_kernel(output.curr_value) for output in self._outputs]

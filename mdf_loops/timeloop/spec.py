"""What a time-loop model looks like: its Loop node's ids and the metadata it records."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from modeci_mdf.mdf import Model

from mdf_loops.errors import ModelError

__all__ = ["TimeLoopSpec", "time_loop_spec", "LOOP_NODE", "METADATA_KEY", "LOOP_FUNCTION"]

#: id of the top-level Loop node; metadata key describing the time loop; id of the
#: Loop node's ``onnx::Loop`` parameter
LOOP_NODE = "simulation"
METADATA_KEY = "time_loop"
LOOP_FUNCTION = "loop"


@dataclass(frozen=True)
class TimeLoopSpec:
    """What a time-loop model records: ``"node.name"`` -> output port of the Loop node."""

    dt: float
    steps: int
    time_port: str
    records: dict[str, str]
    inputs: dict[str, str]  # input-port id fed a time series -> Loop-node input port

    def to_metadata(self) -> dict:
        """The graph metadata (under :data:`METADATA_KEY`) that :func:`time_loop_spec` reads."""
        return {
            "dt": self.dt,
            "steps": self.steps,
            "time": self.time_port,
            "records": dict(self.records),
            "inputs": dict(self.inputs),
        }


def time_loop_spec(model: Model) -> TimeLoopSpec:
    """The time-loop description stored in a model made by :func:`to_time_loop`."""
    meta = (model.graphs[0].metadata or {}).get(METADATA_KEY) if model.graphs else None
    if not isinstance(meta, Mapping):
        raise ModelError(
            f"model '{model.id}' is not a time-loop model (no '{METADATA_KEY}' "
            "metadata); make one with mdf_loops.to_time_loop"
        )
    try:
        return TimeLoopSpec(
            float(meta["dt"]),
            int(meta["steps"]),
            str(meta["time"]),
            dict(meta["records"]),
            dict(meta.get("inputs") or {}),
        )
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise ModelError(
            f"model '{model.id}' graph '{model.graphs[0].id}' metadata '{METADATA_KEY}': "
            f"{type(exc).__name__}: {exc} (it needs dt, steps, time, records and inputs as "
            "to_time_loop writes them); make the model again with mdf_loops.to_time_loop"
        ) from None

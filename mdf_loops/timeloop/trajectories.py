"""``Trajectories``: the recorded values of a simulation, and how they are saved."""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass, field

import numpy as np

from mdf_loops.errors import MdfLoopsError
from mdf_loops.files import write_atomically

__all__ = ["Trajectories"]


@dataclass(frozen=True)
class Trajectories:
    """Recorded values of a simulation: ``time`` (steps,) and ``values[ref]`` (steps, ...)."""

    time: np.ndarray
    values: dict[str, np.ndarray] = field(default_factory=dict)
    backend: str = ""

    def __getitem__(self, ref: str) -> np.ndarray:
        if ref not in self.values:
            raise KeyError(f"{ref!r} was not recorded; recorded: {sorted(self.values)}")
        return self.values[ref]

    @property
    def steps(self) -> int:
        return len(self.time)

    def save(self, path: str | os.PathLike) -> None:
        """Write ``.npz`` or ``.csv`` (through a temporary file: a complete file or none).

        ``.npz`` holds ``time`` and one array per value, ``.csv`` one column per element.
        """
        path = os.fspath(path)
        if path.endswith(".npz"):
            buffer = io.BytesIO()
            np.savez(buffer, time=self.time, **self.values)  # type: ignore[arg-type]  # numpy stub: **arrays could fill allow_pickle
            write_atomically(path, buffer.getvalue())
        elif path.endswith(".csv"):
            uneven = {ref: len(v) for ref, v in self.values.items() if len(v) != len(self.time)}
            if uneven:
                raise MdfLoopsError(
                    f"{path}: a CSV row is one step; time has {len(self.time)} steps but "
                    f"these values have other numbers of rows: {uneven}; give every value "
                    "one row per step (or write .npz)"
                )
            columns = {"time": self.time}
            for ref, values in self.values.items():
                flat = values.reshape(len(values), -1)
                if flat.shape[1] == 1 and values.ndim == 1:
                    columns[ref] = flat[:, 0]
                else:
                    columns.update({f"{ref}[{i}]": flat[:, i] for i in range(flat.shape[1])})
            text = io.StringIO(newline="")
            writer = csv.writer(text)
            writer.writerow(columns)
            writer.writerows(zip(*(c.tolist() for c in columns.values()), strict=True))
            write_atomically(path, text.getvalue())
        else:
            raise ValueError(f"{path}: write .npz or .csv")

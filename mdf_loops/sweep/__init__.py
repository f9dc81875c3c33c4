"""Parameter sweeps: many runs of one model, on a local or remote Dask cluster.

``mdf_loops.sweep(model, grid={...})`` returns an ``xarray.Dataset``; see
:func:`mdf_loops.sweep.api.sweep` and docs/sweeps.md. Dask and xarray are the
optional extra ``mdf-loops[sweep]``; they are imported when a sweep runs.
"""

from mdf_loops.sweep.api import sweep
from mdf_loops.sweep.errors import SweepError

__all__ = ["sweep", "SweepError"]

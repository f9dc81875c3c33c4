"""Which limit a guarded onnxruntime model passed, where, and at which iteration.

The guard (:mod:`~mdf_loops.backends.onnxruntime.guard`) makes each limit it checks a
*site*: a loop node and the limit (its own ``max_iterations``, a Scan too long, a
carried value or its stacked scan outputs past ``max_elements``). A site that is
passed gives a code, ``1 + site + SITES * iteration`` (a double, exact to 2^53), and
the codes travel out of bodies as the largest code so far (0: none). After the run,
:func:`limit_error` turns a top-level output's code back into the site and iteration,
and the error names them, as the scheduler's does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import onnx

from mdf_loops.errors import IterationLimitError, LimitError, SizeLimitError
from mdf_loops.onnx.builder import all_nodes, subgraphs
from mdf_loops.ops.common import Limits, how_to_raise

__all__ = ["LIMIT_OUTPUT", "LimitFlag", "LimitSite", "SITES", "label_of", "limit_error"]

#: the names of the guarded model's limit outputs start so
LIMIT_OUTPUT = "mdf_loops_limit_exceeded"

#: sites a code can tell apart (the iteration is the code's multiple of this)
SITES = 1 << 20


@dataclass(frozen=True)
class LimitFlag:
    """What a limit output of the guarded model says when it is true."""

    label: str  # the loop node: its MDF node id, else its ONNX name
    within: bool  # False: the node ran max_iterations and wanted more; True: its body
    limit: str = ""  # the limit passed, where the flag says which ("": its code says)
    sites: tuple[LimitSite, ...] = ()  # what its code means (limit_codes.py), if coded


@dataclass(frozen=True)
class LimitSite:
    """A limit the guard checks at one loop node."""

    label: str  # the loop node: its MDF node id, else its ONNX name
    limit: str  # "max_iterations" or "max_elements"
    what: str  # "Loop", "Scan", "a carried value", "the stacked scan outputs"


def label_of(node: onnx.NodeProto, labels: Mapping[str, str]) -> str:
    """The node's label; for an If that wraps a labelled loop (zero_steps), the loop's."""
    if node.name in labels:
        return labels[node.name]
    if node.op_type == "If":
        for inner in (n for g in subgraphs(node) for n in all_nodes(g)):
            if inner.name in labels:
                return labels[inner.name]
    return node.name or node.op_type


def limit_error(code: float, top: str, sites: list[LimitSite], limits: Limits) -> LimitError:
    """The error for a nonzero ``code`` of the top-level loop node ``top``."""
    iteration, site_index = divmod(int(code) - 1, SITES)
    site = sites[site_index]
    where = f"node '{top}'" if site.label == top else f"node '{top}' > node '{site.label}'"
    if site.limit == "max_elements":
        return SizeLimitError(
            f"{where}, iteration {iteration}: {site.what} grew past max_elements="
            f"{limits.max_elements} (onnxruntime backend); if the model needs values this "
            f"large, {how_to_raise('max_elements')}"
        )
    asked = (
        f": Scan asked for {iteration} iterations, more than {limits.max_iterations}"
        if site.what == "Scan"
        else f" asked for more than {limits.max_iterations} iterations"
    )
    return IterationLimitError(
        f"{where}{asked}, the limit (max_iterations) (onnxruntime backend); if the loop is "
        f"meant to run that long, {how_to_raise('max_iterations')}"
    )

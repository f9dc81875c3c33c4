"""The checks every evaluation of a model passes first: :func:`mdf_loops.run`, gradients
(``backends/jax/grad.py``) and torch modules (``backends/torch/module.py``) accept
exactly the same models, because each calls :func:`verify_model` before anything runs.

The checks: the calls ``validate`` reports (:mod:`mdf_loops.validation.calls`), the
model's structure, and, for a model not trusted, its expressions against the allow-list
(:mod:`mdf_loops.safety.checks`). Each model content passes them once (under the
limits in force): an edit, or other limits, checks again.
"""

from __future__ import annotations

from collections import OrderedDict

from modeci_mdf.mdf import Model

from mdf_loops.model.content import content_key
from mdf_loops.safety.checks import check_model, check_structure, current_limits_key
from mdf_loops.validation.calls import check_calls

__all__ = ["verify_model"]

#: (content key, limits key) -> the checks passed; the 256 newest kept
_VERIFIED: OrderedDict[tuple, set[str]] = OrderedDict()


def verify_model(model: Model, trusted: bool) -> None:
    """The structure and expression checks, once per model content (an edit checks again)."""
    key = (content_key(model), current_limits_key())
    done = _VERIFIED.setdefault(key, set())
    _VERIFIED.move_to_end(key)
    while len(_VERIFIED) > 256:
        _VERIFIED.popitem(last=False)
    if "structure" not in done:
        check_calls(model)
        check_structure(model)
        done.add("structure")
    if not trusted and "expressions" not in done:
        check_model(model)
        done.add("expressions")

"""Kernels of ``ai.onnx.ml`` operators that ``onnx.reference`` does not have.

``ZipMap``: every scikit-learn classifier skl2onnx converts with default options
ends in one. It turns a ``[N, C]`` tensor of class scores into a sequence of N
maps ``{class label: score}``, the labels from ``classlabels_int64s`` or
``classlabels_strings`` (exactly one given, one per column)::

    ZipMap(X) = [{labels[j]: X[i, j] for j in range(C)} for i in range(N)]

A 1-D ``X`` is one row. The scores keep their element type (float32).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx.reference.ops.aionnxml._op_run_aionnxml import OpRunAiOnnxMl

from mdf_loops.errors import EvaluationError

__all__ = ["MISSING_ML_KERNELS"]


class ZipMap(OpRunAiOnnxMl):
    """``ai.onnx.ml`` ZipMap (opset 1, its only version)."""

    def _run(self, x, classlabels_int64s=None, classlabels_strings=None):  # type: ignore[override]
        labels = _labels(classlabels_int64s, classlabels_strings)
        rows = np.asarray(x)
        rows = rows.reshape(1, -1) if rows.ndim == 1 else rows
        if rows.ndim != 2 or rows.shape[1] != len(labels):
            raise EvaluationError(
                f"ZipMap takes a [N, {len(labels)}] tensor (one column per class label), "
                f"not one of shape {list(np.shape(x))}"
            )
        return ([{label: row[j] for j, label in enumerate(labels)} for row in rows],)


def _labels(int64s: Any, strings: Any) -> list:
    given = [v for v in (int64s, strings) if v is not None and len(v)]
    if len(given) != 1:
        raise EvaluationError(
            "ZipMap needs exactly one of the attributes classlabels_int64s and "
            f"classlabels_strings; {'both are' if given else 'neither is'} given"
        )
    if int64s is not None and len(int64s):
        return [int(v) for v in int64s]
    return [v.decode() if isinstance(v, bytes) else str(v) for v in strings]


#: op_type -> kernel class, for the ``ai.onnx.ml`` operators onnx.reference lacks
MISSING_ML_KERNELS: dict[str, type] = {"ZipMap": ZipMap}

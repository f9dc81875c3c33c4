"""Many settings of one ONNX model in one onnxruntime call: a batching transform.

:func:`batch_model` gives chosen graph inputs a leading batch axis and rewrites each
node by the rule of its operator (:mod:`.rules`; ``Loop`` in :mod:`.loop`), so that one
session call runs every setting of a batch and onnxruntime's cost per operator and per
loop iteration is paid once for the batch. A node without a rule refuses
(:class:`NotBatchable`, naming it); the caller then runs the settings one by one.
"""

from mdf_loops.backends.onnxruntime.batching.graph import BatchedModel, OutputForm, batch_model
from mdf_loops.backends.onnxruntime.batching.scope import NotBatchable

__all__ = ["BatchedModel", "NotBatchable", "OutputForm", "batch_model"]

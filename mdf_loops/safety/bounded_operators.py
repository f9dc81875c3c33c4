"""Operators of the default ONNX domain that need no size plan, each with the reason.

:mod:`mdf_loops.safety.operator_sizes` plans the size of every operator whose output
can be larger than its inputs (by attributes, input values or products of shapes).
The operators here cannot: each output has no more elements than its inputs hold
together, times a small constant the reason states, or the operator's size is bounded
elsewhere. ``tests/safety/test_operator_coverage.py`` walks every operator schema of
the installed onnx and fails on one that is in neither place.
"""

from __future__ import annotations

__all__ = ["BOUNDED_BY_INPUTS"]

_REASONS = {
    "element-wise: its input's shape": """
        Abs Acos Acosh Asin Asinh Atan Atanh BitwiseNot Ceil Celu Clip Cos Cosh Elu Erf Exp
        Floor Gelu HardSigmoid HardSwish IsInf IsNaN LeakyRelu Log Mish Neg Not Reciprocal
        Relu Round Selu Shrink Sigmoid Sign Sin Sinh Softplus Softsign Sqrt Swish Tan Tanh
        ThresholdedRelu Softmax LogSoftmax Hardmax CumSum CumProd Trilu Dropout Bernoulli
        EyeLike Identity RegexFullMatch StringNormalizer QuantizeLinear DequantizeLinear
        DynamicQuantizeLinear RotaryEmbedding SwiGLU Optional OptionalGetElement
        OptionalHasElement
    """,
    "a normalisation: its input's shape and per-channel statistics": """
        BatchNormalization InstanceNormalization LayerNormalization GroupNormalization
        RMSNormalization MeanVarianceNormalization LpNormalization LRN
    """,
    "a reduction, selection or loss: no more than its input (TopK, Unique, NonZero and"
    " NonMaxSuppression: a few index values per input element)": """
        ArgMax ArgMin ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceMax ReduceMean
        ReduceMin ReduceProd ReduceSum ReduceSumSquare GlobalAveragePool GlobalLpPool
        GlobalMaxPool Det Compress TopK Unique NonZero NonMaxSuppression Slice
        NegativeLogLikelihoodLoss SoftmaxCrossEntropyLoss Shape Size GatherElements
    """,
    "a rearrangement or update: the elements of one input": """
        Reshape Transpose Squeeze Unsqueeze Flatten DepthToSpace SpaceToDepth Split
        ReverseSequence Scatter ScatterElements ScatterND TensorScatter BitCast
    """,
    "a change of element type: as many elements (text: at most 32 bytes each)": """
        Cast CastLike
    """,
    "a sequence op: its members are values made elsewhere, each sized there and counted"
    " together by the loop guards": """
        SequenceAt SequenceConstruct SequenceEmpty SequenceErase SequenceInsert
        SequenceLength ConcatFromSequence SplitToSequence
    """,
    "control flow: iterations bounded by max_iterations and max_total_iterations, the"
    " values carried by max_elements": """
        Loop Scan If SequenceMap
    """,
    "a tensor of the model file, whose declared size was checked when it was read": """
        Constant
    """,
}

#: operator -> why it needs no size plan
BOUNDED_BY_INPUTS: dict[str, str] = {
    name: reason for reason, names in _REASONS.items() for name in names.split()
}

"""How many elements an ONNX operator will produce, computed before its kernel allocates.

Some operators make outputs whose size comes from input *values* or attributes
(``ConstantOfShape``, ``Expand``, ``Tile``, ``Range``, ``Pad``, ``OneHot``,
``RandomUniform``/``RandomNormal``), others from a
product of input shapes (broadcasting element-wise operators, ``MatMul``,
``Gemm``, ``Einsum``) or a sum of many inputs (``Concat``); signal operators
(``HannWindow``, ``HammingWindow``, ``BlackmanWindow``, ``MelWeightMatrix``,
``DFT``) take their size from an input value, convolutions, pools, recurrent
layers, ``STFT``, gathers, attention and ``Resize`` from attributes and shapes
(:mod:`~mdf_loops.safety.window_sizes`), ``StringConcat`` makes texts as
long as the two it joins (counted by bytes, in float64-sized elements), and
operators of ``ai.onnx.ml`` make, per input row, as many values as an attribute
says (``n_targets``, ``targets``, ``inputdimensions``, class labels,
categories). A 10,000-element
input can ask any of them for gigabytes. :func:`check_planned_size` raises
:class:`~mdf_loops.errors.SizeLimitError` before the kernel runs when the output
would exceed ``max_elements``. The scheduler backend calls it for every ONNX
function; malformed inputs are left to the kernel, which reports them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from mdf_loops.ops.common import check_elements, current_limits
from mdf_loops.safety.input_shapes import given as _given
from mdf_loops.safety.input_shapes import ints as _ints
from mdf_loops.safety.input_shapes import shape as _shape
from mdf_loops.safety.input_shapes import size as _size
from mdf_loops.safety.window_sizes import WINDOW_PLANS

__all__ = [
    "planned_elements",
    "check_planned_size",
    "node_size_check",
    "has_size_plan",
    "BROADCASTING",
]

#: element-wise operators whose output has the broadcast shape of all inputs
BROADCASTING = frozenset(
    """
    Add Sub Mul Div Pow Mod And Or Xor Equal Greater Less GreaterOrEqual LessOrEqual BitShift
    BitwiseAnd BitwiseOr BitwiseXor Where Max Min Sum Mean PRelu
""".split()
)


def check_planned_size(
    op_type: str,
    inputs: Sequence[Any],
    attributes: Mapping[str, Any] | None = None,
    domain: str = "",
) -> None:
    """Raise :class:`SizeLimitError` when ``op_type`` (of ``domain``: ``""`` for ai.onnx,
    ``"ai.onnx.ml"``) on ``inputs`` would produce more than ``max_elements`` elements
    (nothing is allocated)."""
    if not domain and op_type in _SHAPE_PRODUCTS and _product_of_sizes_within_limit(inputs):
        return  # the output cannot be larger (called for every operator of every iteration)
    count = planned_elements(op_type, inputs, attributes or {}, domain)
    if count is not None:
        prefix = "onnxml" if domain else "onnx"
        check_elements(count, f"the output of {prefix}::{op_type}")


def node_size_check(
    op_type: str, attributes: Mapping[str, Any] | None = None, domain: str = ""
) -> Callable[[Sequence[Any]], None] | None:
    """:func:`check_planned_size` bound to one node's operator and attributes (text as
    ``str``), for a backend that plans a graph once and runs it many times: ``check(inputs)``,
    or None when the operator has no size plan (it cannot be larger than its inputs,
    :mod:`~mdf_loops.safety.bounded_operators`), so the backend calls nothing for it.

    ``inputs`` may be numpy arrays, torch tensors or JAX values: a plan that reads only
    shapes reads ``.shape``; one that reads a value (a shape to expand to, a pad width)
    converts it with numpy, and a value numpy cannot read (a JAX tracer) leaves the
    estimate to the backend (:func:`planned_elements` gives None).
    """
    domain = "" if domain == "ai.onnx" else domain
    if not has_size_plan(op_type, domain):
        return None
    fixed = dict(attributes or {})

    def check(inputs: Sequence[Any]) -> None:
        check_planned_size(op_type, inputs, fixed, domain)

    if domain or op_type not in _SHAPE_PRODUCTS:
        return check
    prod = math.prod

    def check_products(inputs: Sequence[Any]) -> None:  # called on every step of a loop
        product = 1
        try:
            for value in inputs:
                if value is not None:
                    product *= prod(value.shape)
        except AttributeError:  # not an array: the full plan
            product = 0
        if not 0 < product <= current_limits().max_elements:  # empty inputs: the full plan
            check(inputs)

    return check_products


#: operators whose output has no more elements than the product of their inputs' sizes,
#: when no input is empty: each output dimension is one input's dimension (or a
#: broadcast maximum), and every dimension counted is a factor of some input's size
_SHAPE_PRODUCTS = BROADCASTING | {"MatMul", "Gemm"}


def _product_of_sizes_within_limit(inputs: Sequence[Any]) -> bool:
    limit = current_limits().max_elements
    product = 1
    for value in inputs:
        if value is None:
            continue
        if type(value) is np.ndarray:
            size = value.size
        else:  # a torch tensor or a JAX value: its shape
            shape = getattr(value, "shape", None)
            if shape is None:
                return False
            size = math.prod(shape)
        if size == 0:
            return False  # an empty input's other dimensions still count: the full estimate
        product *= size
        if product > limit:
            return False
    return True


def has_size_plan(op_type: str, domain: str = "") -> bool:
    """Whether ``op_type`` of ``domain`` has a size plan here."""
    if domain:
        return domain == "ai.onnx.ml" and op_type in _ML_PLANNED
    return op_type in BROADCASTING or op_type in _PLANNED


def planned_elements(
    op_type: str, inputs: Sequence[Any], attributes: Mapping[str, Any], domain: str = ""
) -> int | None:
    """Elements of the largest output of ``op_type``, or None when not known beforehand."""
    if domain:
        estimate = _ML_PLANNED.get(op_type) if domain == "ai.onnx.ml" else None
    else:
        estimate = _broadcast_size if op_type in BROADCASTING else _PLANNED.get(op_type)
    if estimate is None:
        return None
    try:
        return estimate(list(inputs), attributes)
    except (TypeError, ValueError, IndexError, KeyError, OverflowError, AttributeError,
            ZeroDivisionError, OSError, ImportError):  # fmt: skip
        return None  # malformed inputs: the kernel reports them


# ---------------------------------------------------------------- shapes


def _broadcast(*shapes: Sequence[int]) -> list[int]:
    rank = max((len(s) for s in shapes), default=0)
    padded = [[1] * (rank - len(s)) + list(s) for s in shapes]
    return [max((abs(int(s[k])) for s in padded), default=1) for k in range(rank)]


# ---------------------------------------------------------------- operators


def _broadcast_size(inputs: list, attributes: Mapping) -> int:
    return math.prod(_broadcast(*(_shape(v) for v in inputs if v is not None)))


def _expand(inputs: list, attributes: Mapping) -> int:
    return math.prod(_broadcast(_shape(inputs[0]), [abs(d) for d in _ints(inputs[1])]))


def _tile(inputs: list, attributes: Mapping) -> int:
    return _size(inputs[0]) * math.prod(abs(d) for d in _ints(inputs[1]))


def _range(inputs: list, attributes: Mapping) -> int:
    start, limit, delta = (float(np.asarray(v).reshape(())) for v in inputs[:3])
    return max(math.ceil((limit - start) / delta), 0) if delta else 0


def _pad(inputs: list, attributes: Mapping) -> int:
    shape = _shape(inputs[0])
    pads = _ints(_given(inputs, 1) if _given(inputs, 1) is not None else attributes["pads"])
    axes = _ints(_given(inputs, 3)) if _given(inputs, 3) is not None else list(range(len(shape)))
    half = len(pads) // 2
    for k, axis in enumerate(axes[:half]):
        shape[axis] = max(shape[axis] + pads[k] + pads[k + half], 0)
    return math.prod(shape)


def _random(inputs: list, attributes: Mapping) -> int:
    return math.prod(abs(d) for d in _ints(attributes["shape"]))


def _like(inputs: list, attributes: Mapping) -> int:
    return _size(inputs[0])


def _one_hot(inputs: list, attributes: Mapping) -> int:
    return _size(inputs[0]) * abs(int(np.asarray(inputs[1]).reshape(-1)[0]))


def _matmul(inputs: list, attributes: Mapping) -> int:
    a, b = _shape(inputs[0]), _shape(inputs[1])
    a = [1] + a if len(a) == 1 else a
    b = b + [1] if len(b) == 1 else b
    return math.prod(_broadcast(a[:-2], b[:-2])) * a[-2] * b[-1]


def _matmul_of(a: int, b: int) -> Callable[[list, Mapping], int]:
    """MatMulInteger (A, B at 0, 1) and QLinearMatMul (at 0, 3): MatMul's output."""
    return lambda inputs, attributes: _matmul([inputs[a], inputs[b]], attributes)


def _gemm(inputs: list, attributes: Mapping) -> int:
    a, b = _shape(inputs[0]), _shape(inputs[1])
    rows = a[1] if attributes.get("transA") else a[0]
    columns = b[0] if attributes.get("transB") else b[1]
    return rows * columns


def _einsum(inputs: list, attributes: Mapping) -> int:
    equation = str(attributes["equation"]).replace(" ", "")
    terms, _, output = equation.partition("->")
    sizes: dict[str, int] = {}
    ellipsis: list[list[int]] = []
    # strict=False: a malformed equation is the kernel's to report
    for term, value in zip(terms.split(","), inputs, strict=False):
        shape = _shape(value)
        if "..." in term:
            head, tail = term.split("...")
            ellipsis.append(shape[len(head) : len(shape) - len(tail)])
            term, shape = head + tail, shape[: len(head)] + shape[len(shape) - len(tail) :]
        for letter, size in zip(term, shape, strict=False):
            sizes[letter] = max(sizes.get(letter, 1), size)
    if not _:
        letters = terms.replace(",", "").replace("...", "")
        output = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    count = math.prod(sizes[c] for c in output.replace("...", ""))
    return count * (math.prod(_broadcast(*ellipsis)) if ellipsis else 1)


def _concat(inputs: list, attributes: Mapping) -> int:
    return sum(_size(v) for v in inputs if v is not None)


def _window(inputs: list, attributes: Mapping) -> int:
    """HannWindow, HammingWindow, BlackmanWindow: as many elements as the size input says."""
    return abs(_ints(inputs[0])[0])


def _mel_weight_matrix(inputs: list, attributes: Mapping) -> int:
    bins, dft_length = abs(_ints(inputs[0])[0]), abs(_ints(inputs[1])[0])
    return (dft_length // 2 + 1) * bins


def _dft(inputs: list, attributes: Mapping) -> int:
    """DFT: the signal's shape with the transformed axis ``dft_length`` long, complex (x 2)."""
    shape = _shape(inputs[0])
    length = _given(inputs, 1)
    if length is None or len(shape) < 2:
        return math.prod(shape) * 2
    axis = _ints(_given(inputs, 2))[0] if _given(inputs, 2) is not None else 1
    axis = int(attributes.get("axis", axis)) % len(shape)
    return math.prod(shape) // max(shape[axis], 1) * abs(_ints(length)[0]) * 2


def _text_elements(value: Any) -> int:
    """The largest text of a string tensor, in float64-sized elements of its bytes (4 a
    character, as numpy stores text)."""
    array = np.asarray(value)
    longest = max((len(str(item)) for item in array.reshape(-1)), default=0)
    return max(1, math.ceil(4 * longest / 8))


def _string_concat(inputs: list, attributes: Mapping) -> int:
    """StringConcat: the broadcast shape, each text as long as the two it joins."""
    text = _text_elements(inputs[0]) + _text_elements(inputs[1])
    return _broadcast_size(inputs, attributes) * text


def _rows(inputs: list) -> int:
    shape = _shape(inputs[0])
    return shape[0] if len(shape) > 1 else 1


def _per_row(attribute_names: tuple[str, ...], count: bool = True) -> Callable:
    """ai.onnx.ml operators whose output has, for each input row, as many values as an
    attribute gives (an integer such as ``n_targets``, or the length of a list)."""

    def plan(inputs: list, attributes: Mapping) -> int:
        width = 1
        for name in attribute_names:
            value = attributes.get(name)
            if value is not None:
                width = max(width, len(value) if count else abs(int(value)))
        return _rows(inputs) * width

    return plan


def _feature_vectorizer(inputs: list, attributes: Mapping) -> int:
    return _rows(inputs) * sum(abs(int(d)) for d in attributes.get("inputdimensions", []))


def _array_feature_extractor(inputs: list, attributes: Mapping) -> int:
    shape = _shape(inputs[0])
    return math.prod(shape[:-1]) * _size(inputs[1])


def _one_hot_encoder(inputs: list, attributes: Mapping) -> int:
    categories = attributes.get("cats_int64s") or attributes.get("cats_strings") or []
    return _size(inputs[0]) * max(len(categories), 1)


#: operators of the ai.onnx.ml domain whose output size comes from attributes or inputs
_ML_PLANNED: dict[str, Callable[[list, Mapping], int]] = {
    "TreeEnsembleRegressor": _per_row(("n_targets",), count=False),
    "TreeEnsemble": _per_row(("n_targets",), count=False),
    "LinearRegressor": _per_row(("targets",), count=False),
    "LinearClassifier": _per_row(("classlabels_ints", "classlabels_strings")),
    "TreeEnsembleClassifier": _per_row(("classlabels_int64s", "classlabels_strings")),
    "SVMClassifier": _per_row(("classlabels_ints", "classlabels_strings")),
    "FeatureVectorizer": _feature_vectorizer,
    "ArrayFeatureExtractor": _array_feature_extractor,
    "OneHotEncoder": _one_hot_encoder,
}

_PLANNED: dict[str, Callable[[list, Mapping], int]] = {
    "HannWindow": _window,
    "HammingWindow": _window,
    "BlackmanWindow": _window,
    "MelWeightMatrix": _mel_weight_matrix,
    "DFT": _dft,
    "StringConcat": _string_concat,
    "ConstantOfShape": lambda inputs, attributes: math.prod(abs(d) for d in _ints(inputs[0])),
    "Expand": _expand,
    "Tile": _tile,
    "Range": _range,
    "Pad": _pad,
    "RandomUniform": _random,
    "RandomNormal": _random,
    "RandomUniformLike": _like,
    "RandomNormalLike": _like,
    "OneHot": _one_hot,
    "MatMul": _matmul,
    "Gemm": _gemm,
    "Einsum": _einsum,
    "Concat": _concat,
    "MatMulInteger": _matmul_of(0, 1),
    "QLinearMatMul": _matmul_of(0, 3),
    **WINDOW_PLANS,
}

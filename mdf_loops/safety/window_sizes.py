"""Size plans of ONNX operators whose output grows with attributes, windows or index shapes.

Convolutions and pools (their output grows with ``pads``, ``strides``,
``output_shape``), recurrent layers (``hidden_size``), ``STFT`` (frames times the
frame length), the gathers (the indices' shape times the data's slices), region
pools (regions times ``pooled_shape``), attention (queries times keys), and the
operators that take an output shape from an input value (``AffineGrid``,
``CenterCropPad``, ``Col2Im``, ``MaxUnpool``) or an attribute (``Multinomial``,
``TfIdfVectorizer``), text split into parts (``StringSplit``), and resampling
(``Resize``, ``Upsample``: by scales, or to sizes, kept in aspect or not). Each plan gives
an upper bound of the elements of the operator's largest output (all outputs
together where they are of one size) from input shapes, input values and
attributes, before the kernel runs; :mod:`mdf_loops.safety.operator_sizes`
checks it against ``max_elements``.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from mdf_loops.safety.input_shapes import given as _given
from mdf_loops.safety.input_shapes import ints
from mdf_loops.safety.input_shapes import shape as _shape
from mdf_loops.safety.input_shapes import size as _size

__all__ = ["WINDOW_PLANS"]


def _ints(value: Any) -> list[int]:
    """The magnitudes of the integers an input holds (a size read as at least its own)."""
    return [abs(d) for d in ints(value)]


def _stft(inputs: list, attributes: Mapping) -> int:
    """STFT: [batch, frames, bins, 2], frames = (length - frame_length) // step + 1, bins
    frame_length // 2 + 1 (onesided) or frame_length."""
    batch, length = _shape(inputs[0])[:2]
    step = max(_ints(inputs[1])[0], 1)
    window, frame_length = _given(inputs, 2), _given(inputs, 3)
    if frame_length is not None:
        frame = _ints(frame_length)[0]
    else:
        frame = _size(window) if window is not None else length
    frames = max((length - frame) // step + 1, 0)
    bins = frame // 2 + 1 if int(attributes.get("onesided", 1)) else frame
    return batch * frames * bins * 2


def _gather(inputs: list, attributes: Mapping) -> int:
    data = _shape(inputs[0])
    axis = int(attributes.get("axis", 0)) % max(len(data), 1)
    return math.prod(data[:axis]) * _size(inputs[1]) * math.prod(data[axis + 1 :])


def _gather_nd(inputs: list, attributes: Mapping) -> int:
    data, indices = _shape(inputs[0]), _shape(inputs[1])
    batch = int(attributes.get("batch_dims", 0))
    return math.prod(indices[:-1]) * math.prod(data[batch + indices[-1] :])


def _spatial(inputs: list, attributes: Mapping) -> list[int]:
    """Per spatial axis, an upper bound of a window operator's output length: the input
    with its pads, one more (strides and dilations only shorten it)."""
    spatial = _shape(inputs[0])[2:]
    pads = _ints(attributes.get("pads") or [0] * (2 * len(spatial)))
    rank = len(spatial)
    return [spatial[i] + pads[i] + pads[i + rank] + 1 for i in range(rank)]


def _convolution(weight_index: int) -> Callable[[list, Mapping], int]:
    def plan(inputs: list, attributes: Mapping) -> int:
        channels = _shape(inputs[weight_index])[0]
        return _shape(inputs[0])[0] * channels * math.prod(_spatial(inputs, attributes))

    return plan


def _pool(inputs: list, attributes: Mapping) -> int:
    batch, channels = _shape(inputs[0])[:2]
    return 2 * batch * channels * math.prod(_spatial(inputs, attributes))  # and indices


def _conv_transpose(inputs: list, attributes: Mapping) -> int:
    x, w = _shape(inputs[0]), _shape(inputs[1])
    channels = w[1] * max(int(attributes.get("group", 1)), 1)
    if attributes.get("output_shape") is not None:
        return x[0] * channels * math.prod(_ints(attributes["output_shape"]))
    rank = len(x) - 2
    kernel = _ints(attributes.get("kernel_shape") or w[2:])
    strides = _ints(attributes.get("strides") or [1] * rank)
    dilations = _ints(attributes.get("dilations") or [1] * rank)
    extra = _ints(attributes.get("output_padding") or [0] * rank)
    lengths = [
        strides[i] * max(x[2 + i] - 1, 0) + extra[i] + (kernel[i] - 1) * dilations[i] + 1
        for i in range(rank)
    ]
    return x[0] * channels * math.prod(lengths)


def _max_unpool(inputs: list, attributes: Mapping) -> int:
    x = _shape(inputs[0])
    if _given(inputs, 2) is not None:
        return math.prod(_ints(inputs[2]))
    rank = len(x) - 2
    kernel = _ints(attributes["kernel_shape"])
    strides = _ints(attributes.get("strides") or [1] * rank)
    lengths = [(x[2 + i] - 1) * strides[i] + kernel[i] for i in range(rank)]
    return x[0] * x[1] * math.prod(lengths)


def _recurrent(inputs: list, attributes: Mapping) -> int:
    """RNN, GRU, LSTM: Y is [sequence, directions, batch, hidden_size]."""
    x = _shape(inputs[0])
    directions = 2 if attributes.get("direction") in ("bidirectional", b"bidirectional") else 1
    return x[0] * x[1] * directions * abs(int(attributes["hidden_size"]))


def _region_pool(inputs: list, attributes: Mapping) -> int:
    """MaxRoiPool (pooled_shape), RoiAlign (output_height x output_width) per region."""
    regions, channels = _shape(inputs[1])[0], _shape(inputs[0])[1]
    if "pooled_shape" in attributes:
        cells = math.prod(_ints(attributes["pooled_shape"]))
    else:
        cells = abs(int(attributes.get("output_height", 1))) * abs(
            int(attributes.get("output_width", 1))
        )
    return regions * channels * cells


def _grid_sample(inputs: list, attributes: Mapping) -> int:
    x, grid = _shape(inputs[0]), _shape(inputs[1])
    return x[0] * x[1] * math.prod(grid[1:-1])


def _affine_grid(inputs: list, attributes: Mapping) -> int:
    size = _ints(inputs[1])
    return size[0] * math.prod(size[2:]) * len(size[2:])


def _center_crop_pad(inputs: list, attributes: Mapping) -> int:
    shape, wanted = _shape(inputs[0]), _ints(inputs[1])
    axes = [int(a) for a in attributes.get("axes") or range(len(shape))]
    for axis, length in zip(axes, wanted, strict=False):
        shape[axis] = length
    return math.prod(shape)


def _col2im(inputs: list, attributes: Mapping) -> int:
    x = _shape(inputs[0])
    return x[0] * x[1] * math.prod(_ints(inputs[1]))


def _multinomial(inputs: list, attributes: Mapping) -> int:
    return _shape(inputs[0])[0] * abs(int(attributes.get("sample_size", 1)))


def _tf_idf(inputs: list, attributes: Mapping) -> int:
    x = _shape(inputs[0])
    rows = x[0] if len(x) == 2 else 1
    return rows * (max(_ints(attributes["ngram_indexes"]), default=0) + 1)


def _string_split(inputs: list, attributes: Mapping) -> int:
    """[*input shape, most parts of one text] (texts counted by bytes as elsewhere)."""
    texts = [str(t) for t in np.asarray(inputs[0]).reshape(-1)]
    delimiter = attributes.get("delimiter")
    delimiter = delimiter.decode() if isinstance(delimiter, bytes) else delimiter
    parts = max((t.count(delimiter) + 1 if delimiter else len(t.split()) for t in texts), default=0)
    if attributes.get("maxsplit") is not None:
        parts = min(parts, abs(int(attributes["maxsplit"])) + 1)
    longest = max((len(t) for t in texts), default=0)
    return len(texts) * max(parts, 1) * max(1, math.ceil(4 * longest / 8))


def _attention(inputs: list, attributes: Mapping) -> int:
    """Attention: its scores, [batch, heads, queries, keys (past ones included)], and Y."""
    q, k = _shape(inputs[0]), _shape(inputs[1])
    if len(q) == 4:
        batch, heads, queries = q[:3]
        keys = k[2]
    else:
        batch, queries = q[:2]
        heads, keys = abs(int(attributes.get("q_num_heads", 1))), k[1]
    past = _shape(_given(inputs, 4))
    keys += past[2] if len(past) == 4 else 0
    return batch * heads * queries * keys + math.prod(q) + _size(inputs[2])


def _linear_attention(inputs: list, attributes: Mapping) -> int:
    """LinearAttention: its state, [batch, heads, d_k, d_v], and the output."""
    q, k, v = _shape(inputs[0]), _shape(inputs[1]), _shape(inputs[2])
    kv_heads = max(abs(int(attributes["kv_num_heads"])), 1)
    heads = max(abs(int(attributes["q_num_heads"])), kv_heads)
    return q[0] * heads * (k[2] // kv_heads) * (v[2] // kv_heads) + math.prod(q)


def _causal_conv(inputs: list, attributes: Mapping) -> int:
    return _size(inputs[0]) + _shape(inputs[0])[0] * _size(inputs[1])


def _image_decoder(inputs: list, attributes: Mapping) -> int:
    """The pixels the encoded image's header declares (read without decoding), 4 a pixel."""
    from PIL import Image  # the reference kernel decodes with Pillow

    with Image.open(io.BytesIO(np.asarray(inputs[0], dtype=np.uint8).tobytes())) as image:
        width, height = image.size
    return width * height * 4


#: operators of the default domain planned here
def _resize(inputs: list, attributes: Mapping) -> int:
    shape = _shape(inputs[0])
    axes = (
        _ints(attributes["axes"]) if attributes.get("axes") is not None else list(range(len(shape)))
    )
    sizes, scales = _given(inputs, 3), _given(inputs, 2)
    if scales is None and len(inputs) == 2:  # Upsample / Resize-10: (X, scales)
        scales = inputs[1]
    if scales is None and attributes.get("scales") is not None:  # Upsample-7
        scales = attributes["scales"]
    # strict=False: a malformed node still gets an estimate from what it gives, the
    # kernel reports the mismatch (an error here would skip the check: see planned_elements)
    if sizes is not None and _size(sizes):
        _sized(shape, axes, _ints(sizes), attributes.get("keep_aspect_ratio_policy"))
    elif scales is not None and _size(scales):
        for axis, scale in zip(axes, np.asarray(scales, dtype=float).reshape(-1), strict=False):
            shape[axis] = math.floor(shape[axis] * abs(float(scale)))
    return math.prod(shape)


def _sized(shape: list[int], axes: list[int], sizes: list[int], policy: Any) -> None:
    """``shape`` resized to ``sizes`` on ``axes``; kept in aspect (``not_smaller``,
    ``not_larger``), every axis takes the one scale the policy picks of sizes / shape
    (``not_smaller`` of sizes (1, 1, 30, 30) on (1, 1, 1, 30) scales every axis by 30)."""
    policy = policy.decode() if isinstance(policy, bytes) else policy
    pairs = list(zip(axes, (abs(size) for size in sizes), strict=False))
    if policy not in ("not_smaller", "not_larger"):
        for axis, size in pairs:
            shape[axis] = size
        return
    ratios = [size / shape[axis] for axis, size in pairs if shape[axis]]
    scale = (max if policy == "not_smaller" else min)(ratios, default=1.0)
    for axis, _ in pairs:
        shape[axis] = math.ceil(shape[axis] * scale)


WINDOW_PLANS: dict[str, Callable[[list, Mapping], int]] = {
    "Resize": _resize,
    "Upsample": _resize,
    "STFT": _stft,
    "Gather": _gather,
    "GatherND": _gather_nd,
    "Conv": _convolution(1),
    "ConvInteger": _convolution(1),
    "DeformConv": _convolution(1),
    "QLinearConv": _convolution(3),
    "AveragePool": _pool,
    "MaxPool": _pool,
    "LpPool": _pool,
    "ConvTranspose": _conv_transpose,
    "MaxUnpool": _max_unpool,
    "RNN": _recurrent,
    "GRU": _recurrent,
    "LSTM": _recurrent,
    "MaxRoiPool": _region_pool,
    "RoiAlign": _region_pool,
    "GridSample": _grid_sample,
    "AffineGrid": _affine_grid,
    "CenterCropPad": _center_crop_pad,
    "Col2Im": _col2im,
    "Multinomial": _multinomial,
    "TfIdfVectorizer": _tf_idf,
    "StringSplit": _string_split,
    "Attention": _attention,
    "LinearAttention": _linear_attention,
    "CausalConvWithState": _causal_conv,
    "ImageDecoder": _image_decoder,
}

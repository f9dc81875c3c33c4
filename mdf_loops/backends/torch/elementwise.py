"""Element-wise operators, comparisons, logic, casts and matrix products in torch."""

from __future__ import annotations

import math

import torch

from mdf_loops.backends.torch.registry import op
from mdf_loops.backends.torch.values import torch_dtype

_UNARY = {
    "Abs": torch.abs,
    "Acos": torch.acos,
    "Acosh": torch.acosh,
    "Asin": torch.asin,
    "Asinh": torch.asinh,
    "Atan": torch.atan,
    "Atanh": torch.atanh,
    "Ceil": torch.ceil,
    "Cos": torch.cos,
    "Cosh": torch.cosh,
    "Erf": torch.erf,
    "Exp": torch.exp,
    "Floor": torch.floor,
    "IsNaN": torch.isnan,
    "Log": torch.log,
    "Neg": torch.neg,
    "Not": torch.logical_not,
    "Reciprocal": torch.reciprocal,
    "Relu": torch.relu,
    "Round": torch.round,  # half to even, as ONNX
    "Sigmoid": torch.sigmoid,
    "Sign": torch.sign,
    "Sin": torch.sin,
    "Sinh": torch.sinh,
    "Sqrt": torch.sqrt,
    "Tan": torch.tan,
    "Tanh": torch.tanh,
    "Softsign": torch.nn.functional.softsign,
    "BitwiseNot": torch.bitwise_not,
}

_BINARY = {
    "Add": torch.add,
    "Sub": torch.sub,
    "Mul": torch.mul,
    "Equal": torch.eq,
    "Greater": torch.gt,
    "GreaterOrEqual": torch.ge,
    "Less": torch.lt,
    "LessOrEqual": torch.le,
    "And": torch.logical_and,
    "Or": torch.logical_or,
    "Xor": torch.logical_xor,
    "BitwiseAnd": torch.bitwise_and,
    "BitwiseOr": torch.bitwise_or,
    "BitwiseXor": torch.bitwise_xor,
}


for _name, _fn in {**_UNARY, **_BINARY}.items():
    op(_name, plain=True)(_fn)


@op("Identity", plain=True)
def _identity(x):
    return x


@op("Div")
def _div(call, a, b):
    if a.dtype.is_floating_point:
        return torch.div(a, b)
    return torch.div(a, b, rounding_mode="trunc")  # integer division truncates, as onnxruntime


@op("Mod")
def _mod(call, a, b):
    if call.attr("fmod", 0) or a.dtype.is_floating_point:
        return torch.fmod(a, b)
    return torch.remainder(a, b)  # the sign of the divisor, as numpy


@op("Pow")
def _pow(call, x, y):
    return torch.pow(x, y).to(x.dtype)


@op("IsInf")
def _isinf(call, x):
    positive, negative = call.attr("detect_positive", 1), call.attr("detect_negative", 1)
    infinite = torch.isinf(x)
    result = torch.zeros_like(infinite)
    if positive:
        result = result | (infinite & (x > 0))
    if negative:
        result = result | (infinite & (x < 0))
    return result


@op("Min", "Max", "Sum", "Mean")
def _variadic(call, *xs):
    combine = {"Min": torch.minimum, "Max": torch.maximum}.get(call.proto.op_type, torch.add)
    result = xs[0]
    for x in xs[1:]:
        result = combine(result, x)
    return result / len(xs) if call.proto.op_type == "Mean" else result


@op("Clip")
def _clip(call, x, low=None, high=None):
    if call.opset < 11:
        low, high = call.attr("min"), call.attr("max")
    if low is not None:
        x = torch.maximum(x, torch.as_tensor(low, dtype=x.dtype, device=x.device))
    if high is not None:
        x = torch.minimum(x, torch.as_tensor(high, dtype=x.dtype, device=x.device))
    return x


@op("Where")
def _where(call, cond, a, b):
    return torch.where(cond, a, b)


@op("Cast")
def _cast(call, x):
    return x.to(torch_dtype(call.attr("to"), call.where))


@op("CastLike")
def _cast_like(call, x, like):
    return x.to(like.dtype)


op("MatMul", plain=True)(torch.matmul)


@op("Gemm")
def _gemm(call, a, b, c=None):
    a = a.T if call.attr("transA", 0) else a
    b = b.T if call.attr("transB", 0) else b
    result = call.attr("alpha", 1.0) * torch.matmul(a, b)
    return result if c is None else result + call.attr("beta", 1.0) * c


@op("Einsum")
def _einsum(call, *xs):
    return torch.einsum(call.attr("equation"), *xs)


@op("LeakyRelu")
def _leaky_relu(call, x):
    return torch.nn.functional.leaky_relu(x, call.attr("alpha", 0.01))


@op("Elu")
def _elu(call, x):
    return torch.nn.functional.elu(x, call.attr("alpha", 1.0))


@op("Selu")
def _selu(call, x):
    alpha = call.attr("alpha", 1.67326319217681884765625)
    gamma = call.attr("gamma", 1.05070102214813232421875)
    return gamma * torch.where(x > 0, x, alpha * (torch.exp(x) - 1))


@op("HardSigmoid")
def _hard_sigmoid(call, x):
    return torch.clamp(call.attr("alpha", 0.2) * x + call.attr("beta", 0.5), 0, 1)


@op("Softplus")
def _softplus(call, x):
    return torch.log1p(torch.exp(-torch.abs(x))) + torch.relu(x)


@op("Softmax", "LogSoftmax")
def _softmax(call, x):
    fn = torch.softmax if call.proto.op_type == "Softmax" else torch.log_softmax
    axis = call.attr("axis", -1 if call.opset >= 13 else 1)
    if call.opset >= 13:
        return fn(x, dim=axis)
    axis = axis % max(x.dim(), 1)
    flat = x.reshape(math.prod(x.shape[:axis]), -1)  # opset < 13: as 2-D
    return fn(flat, dim=1).reshape(x.shape)

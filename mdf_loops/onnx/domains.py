"""The ONNX operator domains mdf-loops imports, runs and exports, and their MDF function names.

An ONNX node of operator ``Op`` in a supported domain becomes an MDF function
parameter ``<prefix>::Op``: ``onnx::Add`` for the default domain, ``onnxml::Scaler``
for ``ai.onnx.ml``. This table is the one place that knows the domains; the
importer, the exporter and the scheduler's function registry look things up in it.
A model's opsets of other domains than the default one are kept in its graph's
``metadata["onnx_other_opsets"]`` (``{"ai.onnx.ml": 3}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import onnx

from mdf_loops.errors import ModelError

__all__ = [
    "RANDOM_OPERATORS",
    "OperatorDomain",
    "DOMAINS",
    "DEFAULT",
    "ML",
    "domain_of_node",
    "domain_of_function",
    "other_opsets",
    "OTHER_OPSETS_KEY",
    "DEFAULT_OPSET",
]

#: operators of the default domain that draw new random numbers at each evaluation
RANDOM_OPERATORS = frozenset(
    {
        "RandomNormal",
        "RandomUniform",
        "RandomNormalLike",
        "RandomUniformLike",
        "Multinomial",
        "Bernoulli",
    }
)

#: default-domain opset of the ONNX models mdf-loops writes when none is asked for
#: (export of an MDF model that names none, authored models, benchmark workloads)
DEFAULT_OPSET = 21

#: graph metadata key holding the opsets of the model's non-default domains
OTHER_OPSETS_KEY = "onnx_other_opsets"


@dataclass(frozen=True)
class OperatorDomain:
    """One ONNX operator domain and the prefix of its MDF function names."""

    name: str  # the domain as ONNX models declare it in opset_import and NodeProto.domain
    prefix: str  # MDF functions are "<prefix>::<Op>"
    aliases: tuple[str, ...] = ()  # other spellings of the domain in ONNX models

    def function(self, op_type: str) -> str:
        """The MDF function name of ``op_type`` in this domain."""
        return f"{self.prefix}::{op_type}"

    def latest_version(self) -> int:
        """The newest opset of this domain the installed onnx package knows."""
        return onnx.defs.C.schema_version_map()[self.name][1]

    def schema(self, op_type: str, version: int) -> onnx.defs.OpSchema:
        """The schema of ``op_type`` at opset ``version``; a ModelError when there is none."""
        try:
            return onnx.defs.get_schema(op_type, version, self.name)
        except onnx.defs.SchemaError:
            raise ModelError(
                f"{self.function(op_type)} does not exist in opset {version} of "
                f"domain '{self.label}'"
            ) from None

    @property
    def label(self) -> str:
        return self.name or "ai.onnx"


DEFAULT = OperatorDomain("", "onnx", ("ai.onnx",))
ML = OperatorDomain("ai.onnx.ml", "onnxml")
#: every domain mdf-loops supports (onnx.reference has kernels for them, onnxruntime runs them)
DOMAINS: tuple[OperatorDomain, ...] = (DEFAULT, ML)

_BY_NAME = {alias: d for d in DOMAINS for alias in (d.name,) + d.aliases}
_BY_PREFIX = {d.prefix: d for d in DOMAINS}


def supported() -> str:
    """The supported domains, for error messages."""
    return ", ".join(f"'{d.label}' (MDF functions {d.prefix}::<Op>)" for d in DOMAINS)


def domain_of_node(node: onnx.NodeProto, where: str) -> OperatorDomain:
    """The domain of an ONNX node; a ModelError naming the node when it is not supported."""
    domain = _BY_NAME.get(node.domain)
    if domain is None:
        raise ModelError(
            f"{where}: operator '{node.op_type}' of domain '{node.domain}' is not supported; "
            f"mdf-loops imports operators of the domains {supported()}"
        )
    return domain


def domain_of_function(function: Any) -> tuple[OperatorDomain, str] | None:
    """(domain, op type) of an MDF function name ``<prefix>::<Op>``, else None."""
    if not isinstance(function, str):
        return None
    prefix, separator, op_type = function.partition("::")
    domain = _BY_PREFIX.get(prefix) if separator and op_type else None
    return None if domain is None else (domain, op_type)


def other_opsets(metadata: Mapping[str, Any] | None) -> dict[str, int]:
    """The non-default domain opsets recorded in a graph's metadata (``{}`` when none)."""
    recorded = (metadata or {}).get(OTHER_OPSETS_KEY) or {}
    try:
        return {str(domain): int(version) for domain, version in dict(recorded).items()}
    except (TypeError, ValueError):
        raise ModelError(
            f"metadata '{OTHER_OPSETS_KEY}' must map domains to opset numbers, not {recorded!r}"
        ) from None

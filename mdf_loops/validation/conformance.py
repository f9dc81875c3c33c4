"""Whether a document conforms to the loop-node JSON Schema, without the ``jsonschema`` package.

:func:`conforms` answers yes or no, as ``jsonschema`` would on the same schema
(``schemas/loop-node.schema.json``), by interpreting the keywords that schema uses the way
JSON Schema 2020-12 defines them and ``jsonschema`` implements them (Python's ``re.search``
for ``pattern``, ``1`` and ``True`` distinct in ``enum`` and ``uniqueItems``, an integer
being any number without a fraction). It says no more than yes or no: when a document
does not conform, :mod:`mdf_loops.validation.report` asks ``jsonschema`` what is wrong
and where. So the packages ``jsonschema`` imports (some 40 ms) are imported only for a
document with a problem, never on the way to running a valid model.

A keyword it does not know, a reference it cannot follow or a document too deep for it
is a no (:class:`_CannotTell`): ``jsonschema`` then decides, as before. The tests compare
its verdicts with ``jsonschema``'s on the example models and thousands of edits of them.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

__all__ = ["conforms", "KEYWORDS"]

#: JSON Schema type name -> whether a Python value from a JSON or YAML document is one
_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, numbers.Number) and not isinstance(v, bool),
    "integer": lambda v: (
        not isinstance(v, bool)
        and (isinstance(v, int) or (isinstance(v, float) and v.is_integer()))
    ),
}

#: words that only describe (no effect on validity)
_ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "title", "description", "$comment"})


class _CannotTell(Exception):
    """The schema uses what this module does not interpret."""


def conforms(document: Any, schema: dict) -> bool:
    """Whether ``document`` is valid against ``schema`` (a no where this module cannot tell)."""
    try:
        return _Checker(schema).valid(document, schema)
    except (_CannotTell, RecursionError):
        return False


class _Checker:
    def __init__(self, root: dict) -> None:
        self.root = root

    def valid(self, value: Any, schema: Any) -> bool:
        if schema is True or schema is False:
            return schema
        if not isinstance(schema, dict):
            raise _CannotTell(f"a schema that is a {type(schema).__name__}")
        for keyword, expected in schema.items():
            if keyword in _ANNOTATIONS or keyword in ("then", "else"):
                continue
            check = KEYWORDS.get(keyword)
            if check is None:
                raise _CannotTell(f"keyword {keyword!r}")
            if not check(self, value, expected, schema):
                return False
        return True

    def resolve(self, reference: str) -> Any:
        if not reference.startswith("#/"):
            raise _CannotTell(f"reference {reference!r}")
        target: Any = self.root
        for part in reference[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise _CannotTell(f"reference {reference!r}")
            target = target[part]
        return target


def _type(checker: _Checker, value: Any, expected: Any, schema: dict) -> bool:
    names = expected if isinstance(expected, list) else [expected]
    try:
        return any(_TYPES[name](value) for name in names)
    except KeyError:
        raise _CannotTell(f"type {expected!r}") from None


def _properties(checker: _Checker, value: Any, expected: dict, schema: dict) -> bool:
    if not isinstance(value, dict):
        return True
    return all(checker.valid(value[k], sub) for k, sub in expected.items() if k in value)


def _additional(checker: _Checker, value: Any, expected: Any, schema: dict) -> bool:
    if not isinstance(value, dict):
        return True
    if "patternProperties" in schema:
        raise _CannotTell("patternProperties")
    named = schema.get("properties", {})
    return all(checker.valid(item, expected) for k, item in value.items() if k not in named)


def _property_names(checker: _Checker, value: Any, expected: Any, schema: dict) -> bool:
    return not isinstance(value, dict) or all(checker.valid(k, expected) for k in value)


def _required(checker: _Checker, value: Any, expected: list, schema: dict) -> bool:
    return not isinstance(value, dict) or all(k in value for k in expected)


def _min_properties(checker: _Checker, value: Any, expected: int, schema: dict) -> bool:
    return not isinstance(value, dict) or len(value) >= expected


def _max_properties(checker: _Checker, value: Any, expected: int, schema: dict) -> bool:
    return not isinstance(value, dict) or len(value) <= expected


def _items(checker: _Checker, value: Any, expected: Any, schema: dict) -> bool:
    if "prefixItems" in schema:
        raise _CannotTell("prefixItems")
    return not isinstance(value, list) or all(checker.valid(item, expected) for item in value)


def _unique_items(checker: _Checker, value: Any, expected: bool, schema: dict) -> bool:
    if not expected or not isinstance(value, list):
        return True
    return not any(_json_equal(a, b) for i, a in enumerate(value) for b in value[i + 1 :])


def _pattern(checker: _Checker, value: Any, expected: str, schema: dict) -> bool:
    return not isinstance(value, str) or _compiled(expected).search(value) is not None


def _enum(checker: _Checker, value: Any, expected: list, schema: dict) -> bool:
    return any(_json_equal(value, option) for option in expected)


def _minimum(checker: _Checker, value: Any, expected: Any, schema: dict) -> bool:
    return not _TYPES["number"](value) or value >= expected


def _any_of(checker: _Checker, value: Any, expected: list, schema: dict) -> bool:
    return any(checker.valid(value, sub) for sub in expected)


def _all_of(checker: _Checker, value: Any, expected: list, schema: dict) -> bool:
    return all(checker.valid(value, sub) for sub in expected)


def _not(checker: _Checker, value: Any, expected: Any, schema: dict) -> bool:
    return not checker.valid(value, expected)


def _if(checker: _Checker, value: Any, expected: Any, schema: dict) -> bool:
    branch = "then" if checker.valid(value, expected) else "else"
    return branch not in schema or checker.valid(value, schema[branch])


def _ref(checker: _Checker, value: Any, expected: str, schema: dict) -> bool:
    return checker.valid(value, checker.resolve(expected))


#: the keywords interpreted, each ``check(checker, value, keyword's value, schema) -> bool``
KEYWORDS: dict[str, Callable[[_Checker, Any, Any, dict], bool]] = {
    "type": _type,
    "properties": _properties,
    "additionalProperties": _additional,
    "propertyNames": _property_names,
    "required": _required,
    "minProperties": _min_properties,
    "maxProperties": _max_properties,
    "items": _items,
    "uniqueItems": _unique_items,
    "pattern": _pattern,
    "enum": _enum,
    "minimum": _minimum,
    "anyOf": _any_of,
    "allOf": _all_of,
    "not": _not,
    "if": _if,
    "$ref": _ref,
}


@lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern:
    return re.compile(pattern)


def _json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: a boolean equals only a boolean (``1`` is not ``true``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_json_equal, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return False
    return bool(a == b)

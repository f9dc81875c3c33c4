"""mdf_loops/timeloop/names.py: the names an expression reads, and renaming them."""

import math
import re

import pytest

from mdf_loops.errors import ModelError
from mdf_loops.timeloop.names import names_read, rename


def test_names_read_are_the_bare_names():
    assert names_read("V - V**3 / 3 - W + numpy.exp(I_ext)") == {"V", "W", "numpy", "I_ext"}
    assert names_read(["a + b", "c"]) == {"a", "b", "c"}
    assert names_read(0.5) == set()
    read = names_read("a + b")
    read.add("mine")  # the caller's set: the next answer is not changed by it
    assert names_read("a + b") == {"a", "b"}


@pytest.mark.parametrize(
    "mapping",
    [{"V": "c0", "W": "(c1 * 2)"}, {"V": "(c1 - 1)"}, {}],
)
def test_rename_computes_the_same_values(mapping):
    """The renamed text, evaluated, equals the original evaluated with the mapped values
    (each mapping of the same text gets its own answer, however often it is asked)."""
    text = "V - V**3 / 3 - W + 0.5"
    values = {"c0": -1.25, "c1": 0.75}
    scope = {name: eval(expr, {}, values) for name, expr in mapping.items()}  # noqa: S307
    scope = {"V": scope.get("V", 0.3), "W": scope.get("W", 0.2)}
    for _ in range(2):
        renamed = rename(text, mapping, "node 'fn' parameter 'V'")
        expected = eval(text, {}, scope)  # noqa: S307
        got = eval(renamed, {}, {**values, "V": 0.3, "W": 0.2})  # noqa: S307
        assert math.isclose(got, expected, rel_tol=0, abs_tol=0)


def test_a_number_becomes_a_literal():
    assert rename(2.5, {"x": "y"}, "here") == "2.5"
    assert rename([1, 2], {}, "here") == "numpy.array([1, 2])"


def test_text_that_is_not_an_expression_names_where_every_time():
    for where in ("node 'a' parameter 'p' value", "node 'b' parameter 'q' value"):
        with pytest.raises(
            ModelError, match=re.escape(f"{where}: 'x +' is not a Python expression")
        ):
            rename("x +", {"x": "c0"}, where)
    with pytest.raises(ModelError, match="is not a Python expression"):
        names_read("(a")


def test_a_bare_name_is_renamed_as_its_parse_would_be():
    # the text that is one name takes a path without the parser: it must give what the
    # parser gives (a keyword is no name; a replacement that is an expression is parsed)
    assert rename("V", {"V": "fn_V"}, "w") == "fn_V"
    assert rename(" V ", {}, "w") == "V"
    assert rename("V", {"V": "a+b"}, "w") == "a + b"
    assert rename("V * 2", {"V": "a+b"}, "w") == "(a + b) * 2"
    assert rename("True", {"True": "x"}, "w") == "True"
    assert names_read("True") == set() and names_read("match") == {"match"}


class _Replace(__import__("ast").NodeTransformer):
    """The test's own renaming of a parsed expression (the oracle of the text's meaning)."""

    def __init__(self, mapping):
        self.mapping = mapping

    def visit_Name(self, node):
        import ast

        if node.id in self.mapping:
            return ast.parse(self.mapping[node.id], mode="eval").body
        return node


@pytest.mark.parametrize(
    "text",
    [
        "V - V**3 / 3 - W + I_ext",
        "(V + a - b * W) / tau",
        "numpy.sum(axis, axis=axis) + numpy.exp(-V)",  # a keyword's name is no name read
        "V.real + V[0] * W[V > 0]",
        "'V' if V > W else \"W\"",  # text in quotes is not a name
        "[x * V for x in W]",
        "-V ** 2 + W",
        "  V*W  ",
        "V + W  # a comment, which renaming drops",
        "V + Wé",  # not ASCII: the parser's columns are bytes
        "(V +\n W)",
    ],
)
@pytest.mark.parametrize(
    "mapping",
    [{"V": "V__old", "W": "W__old"}, {"V": "0.0"}, {"W": "(c - 1)"}, {"axis": "ax"}, {}],
)
def test_rename_reads_as_the_expression_with_the_names_replaced(text, mapping):
    """The renamed text parses to the tree of the original with each name replaced,
    whether it is written into the text or unparsed."""
    import ast

    ours = rename(text, mapping, "here")
    expected = _Replace(mapping).visit(ast.parse(text.strip(), mode="eval"))
    assert ast.unparse(ast.parse(ours, mode="eval")) == ast.unparse(expected)
    assert "#" not in ours  # safe to write inside a larger expression
    assert names_read(text) == {
        n.id for n in ast.walk(ast.parse(text.strip(), mode="eval")) if isinstance(n, ast.Name)
    }


def test_names_written_in_place_keep_the_rest_of_the_text():
    assert rename("V-V**3/3", {"V": "V__old"}, "w") == "V__old-V__old**3/3"
    assert rename("p + 1", {"p": "0.0"}, "w") == "0.0 + 1"
    assert rename("p.real", {"p": "0.0"}, "w") == "0.0.real"  # a float with its point
    assert rename("p.real", {"p": "0"}, "w") == "0 .real"  # an int is unparsed

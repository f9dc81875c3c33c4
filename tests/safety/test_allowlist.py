"""mdf_loops/safety/allowlist.py: a bare name is answered without the parser, as the
parser's reading of it would be answered."""

import pytest

from mdf_loops.safety.allowlist import expression_refusal

NAMES = frozenset({"V", "f"})


@pytest.mark.parametrize("name", ["V", "W", "len", "numpy", "match", "inf", "f"])
def test_a_bare_name_that_is_no_builtin_or_dunder_is_allowed(name):
    assert expression_refusal(name, NAMES) is None


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("open", "`open` is refused: the Python builtin 'open' is not allowed (in `open`)"),
        ("__class__", "`__class__` is refused: a dunder name (in `__class__`)"),
        # the parser reads a non-ASCII name in its NFKC form: fullwidth letters are 'open'
        ("\uff4f\uff50\uff45\uff4e", "the Python builtin 'open' is not allowed"),
    ],
)
def test_a_bare_name_that_is_a_builtin_or_dunder_is_refused(text, reason):
    refusal = expression_refusal(text, NAMES)
    assert refusal is not None and reason in refusal


def test_a_keyword_is_no_name():
    assert expression_refusal("True", NAMES) is None  # a constant
    assert "not a valid expression" in expression_refusal("import", NAMES)


@pytest.mark.parametrize(
    "text",
    ["V - V**3 / 3 - W", "numpy.where(a > b, [1, 2], {'k': c}[d])", "not a or -b < c <= d",
     "f(*x, k=1)[1:2, ::3]", "(lambda q: q)(1)", "[i for i in x if i]"],
)
def test_the_pieces_checked_are_those_of_ast_walk_but_contexts_and_operators(text):
    import ast

    from mdf_loops.safety.allowlist import expression_pieces

    tree = ast.parse(text, mode="eval")
    leaves = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)
    assert expression_pieces(tree) == [n for n in ast.walk(tree) if not isinstance(n, leaves)]


def test_parsed_expression_is_the_parse_and_is_emptied_by_clear_compiled():
    import ast

    from mdf_loops import clear_compiled
    from mdf_loops.safety.allowlist import parsed_expression

    text = "V - V**3 / 3 - W + I_ext"
    tree = parsed_expression(text)
    assert ast.dump(tree) == ast.dump(ast.parse(text, mode="eval"))
    assert parsed_expression(text) is tree  # one parse per text, shared by its readers
    clear_compiled()
    assert parsed_expression(text) is not tree
    with pytest.raises(SyntaxError):
        parsed_expression("a +")

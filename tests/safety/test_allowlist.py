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


def test_parsed_pieces_are_those_of_the_shared_parse_and_are_emptied_by_clear_compiled():
    import ast

    from mdf_loops import clear_compiled
    from mdf_loops.safety.allowlist import parsed_expression, parsed_pieces

    text = "(V + a - b * W) / tau"
    pieces = parsed_pieces(text)
    leaves = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)
    tree = parsed_expression(text)
    assert list(pieces) == [n for n in ast.walk(tree) if not isinstance(n, leaves)]
    assert parsed_pieces(text) is pieces
    clear_compiled()
    assert parsed_pieces(text) is not pieces


def _number(text):
    try:
        return int(text)
    except ValueError:
        return float(text)


def _parses_as_number(text):
    for parse in (int, float):
        try:
            parse(text)
            return True
        except ValueError:
            pass
    return False


@pytest.mark.parametrize(
    "text",
    ["1", " -2.5e3 ", "1_000", "+inf", "NaN", "Infinity", "\u0661\u0662", "0x10", "1e", "..1",
     "a", "1 2"]
    + [f"1{c}2" for c in "()*/%[]{}<>=!&|^~,:;@'\"#?\\$`+-._e "]
    + [f"{c}1" for c in "()*/%[]{}<>=!&|^~,:;@'\"#?\\$`+-._e "],
)
def test_text_number_answers_as_int_and_float_do(text):
    """The characters ruled out before trying ``int`` and ``float`` are ones neither
    accepts: the answer is theirs."""
    from mdf_loops.safety.allowlist import text_number

    assert (text_number(text) is not None) is _parses_as_number(text)
    if _parses_as_number(text):
        expected = _number(text)
        assert text_number(text) == expected or expected != expected
        assert type(text_number(text)) is type(expected)

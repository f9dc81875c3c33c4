"""The allow-list of MDF value expressions a model that is not trusted may use.

An expression is parsed with :mod:`ast` (exactly what ``eval`` would compile) and
every piece must be one of: a literal; a name the node binds (input ports,
parameters, functions, the arguments of the call being evaluated); an
arithmetic, comparison, boolean or conditional operator; a subscript or slice; a
list, tuple, dict or set literal; a call to one of :data:`SAFE_BUILTINS` or to a
``numpy.`` / ``math.`` function of :data:`NUMPY_FUNCTIONS` / :data:`MATH_FUNCTIONS`.
Anything else (other attributes, dunder names, other builtins such as ``open``
or ``__import__``, lambdas, comprehensions, f-strings, calls of computed values)
is refused, as are literal sizes that would allocate more than ``max_elements``
elements and literal exponents that would make giant Python integers
(:mod:`mdf_loops.safety.literal_sizes`). Sizes computed at run time are checked
then (:mod:`mdf_loops.safety.guarded_numpy`): inside ``untrusted_expressions()``,
``numpy.`` in an expression is ``expression_numpy()``, a namespace of the allowed
functions whose constructors check ``max_elements`` before allocating.
"""

from __future__ import annotations

import ast
import builtins
import math
import re
from keyword import iskeyword
from typing import Any

import numpy as np

from mdf_loops.caches import by_text
from mdf_loops.errors import did_you_mean
from mdf_loops.model.references import id_refusal, is_python_name, referenced_id
from mdf_loops.safety.literal_sizes import (
    SIZED_CONSTRUCTORS,
    allocation_refusal,
    dtype_refusal,
    literal_operation_refusal,
)

__all__ = [
    "expression_refusal",
    "SAFE_BUILTINS",
    "UNSAFE_BUILTINS",
    "NUMPY_FUNCTIONS",
    "MATH_FUNCTIONS",
    "dtype_refusal",
    "expression_pieces",
    "text_number",
]

#: builtins an expression may call; every other builtin name is refused
SAFE_BUILTINS = frozenset(
    {
        "abs",
        "all",
        "any",
        "bool",
        "complex",
        "divmod",
        "float",
        "int",
        "len",
        "max",
        "min",
        "round",
        "sum",
    }
)
UNSAFE_BUILTINS = frozenset(dir(builtins)) - SAFE_BUILTINS

#: numpy functions whose result is no larger than (a polynomial of) their inputs
_NUMPY_OTHER = frozenset(
    """
    all allclose amax amin any append argmax argmin argsort around array array_equal asarray
    atleast_1d atleast_2d average clip column_stack concatenate count_nonzero cross cumprod
    cumsum diag diagonal diff dot dstack einsum expand_dims flip fliplr flipud full_like hstack
    inner interp isclose max mean median min moveaxis nan_to_num nanmax nanmean nanmin nansum
    ndim ones_like outer prod ptp ravel reshape roll round rot90 shape size sort squeeze stack std
    sum swapaxes take tensordot trace transpose tril triu var vdot vstack where zeros_like
    bool_ float16 float32 float64 int8 int16 int32 int64 uint8 uint16 uint32 uint64
    complex64 complex128 pi e inf nan newaxis euler_gamma
""".split()
)
# vars(np), not dir(np): getattr on dir's names would import numpy's lazy submodules
# (f2py, testing with unittest: a fifth of a second) for no ufunc
_NUMPY_UFUNCS = frozenset(n for n, v in vars(np).items() if isinstance(v, np.ufunc))
NUMPY_FUNCTIONS = frozenset(
    n for n in _NUMPY_OTHER | _NUMPY_UFUNCS | SIZED_CONSTRUCTORS if hasattr(np, n)
)
_NUMPY_LINALG = frozenset({"norm", "det", "inv", "solve"})
#: math functions allowed, named (not every name of this Python's math: one a later Python
#: adds, such as sumprod, would multiply arrays and integers unplanned); factorial, comb
#: and perm can take hours on a large int
MATH_FUNCTIONS = frozenset(
    """
    acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh degrees dist e erf erfc
    exp exp2 expm1 fabs floor fmod frexp fsum gamma gcd hypot inf isclose isfinite isinf isnan
    isqrt lcm ldexp lgamma log log10 log1p log2 modf nan nextafter pi pow prod radians remainder
    sin sinh sqrt tan tanh tau trunc ulp
""".split()
) & frozenset(dir(math))
_ATTRIBUTES = {
    ("numpy",): NUMPY_FUNCTIONS | {"linalg"},
    ("numpy", "linalg"): _NUMPY_LINALG,
    ("math",): MATH_FUNCTIONS,
}

_REFUSED_SYNTAX = {
    ast.Lambda: "a lambda",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a generator expression",
    ast.NamedExpr: "an assignment expression (:=)",
    ast.JoinedStr: "an f-string",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
}
_ALLOWED_SYNTAX = (
    ast.Expression,
    ast.Constant,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.Subscript,
    ast.Slice,
    ast.List,
    ast.Tuple,
    ast.Dict,
    ast.Set,
    ast.Starred,
    ast.keyword,
    ast.Name,
    ast.Attribute,
    ast.Call,
    ast.expr_context,
    ast.operator,
    ast.unaryop,
    ast.cmpop,
    ast.boolop,
)


def expression_refusal(
    text: str, names: frozenset, text_is_data: bool = False, bound_later: frozenset = frozenset()
) -> str | None:
    """Why ``text`` may not be evaluated (naming the offending piece), or None when it may.

    ``names`` are the names the node binds for this expression. With ``text_is_data``
    (an input port's default value, evaluated only when a bare name reads it) text that
    is not an expression is accepted as data. ``bound_later``: names of builtins the node
    binds only after this expression is evaluated (a parameter ``input`` listed after
    this one), for the refusal's advice. Text that is exactly a bound id that is no Python
    name (``/A/Add``) is that value (:func:`~mdf_loops.model.references.referenced_id`);
    a Python name is checked as one (a dunder stays refused though the node binds it).
    """
    if not is_python_name(text) and referenced_id(text, names) is not None:
        return None
    refusal = _ExpressionCheck(names, text_is_data, bound_later).refusal(text)
    return _with_id_advice(refusal, text, names)


def _with_id_advice(refusal: str | None, text: str, names: frozenset) -> str | None:
    """``refusal`` with what to do when ``text`` holds an id that is not a Python name."""
    advice = id_refusal(text, names) if refusal else None
    return f"{refusal}; {advice}" if advice else refusal


class _ExpressionCheck:
    """The first piece of one expression outside the allow-list, as a sentence (or None)."""

    def __init__(
        self, names: frozenset, text_is_data: bool = False, bound_later: frozenset = frozenset()
    ):
        self.names = names
        self.text_is_data = text_is_data
        self.bound_later = bound_later

    def refusal(self, text: str) -> str | None:
        if text.isascii() and text.isidentifier() and not iskeyword(text):
            # a bare name, as the parser reads it (it normalizes only non-ASCII names)
            if text not in UNSAFE_BUILTINS and not _is_dunder(text):
                return None  # as for its parse below: a value, or its own text at worst
        if text_number(text) is not None:  # modelspec reads numbers before it tries eval
            return None
        source = text.lstrip(" \t")  # what eval() strips
        try:
            tree = parsed_expression(source)
        except SyntaxError as exc:
            return None if self.text_is_data else _syntax_problem(source, exc)
        except ValueError:
            return None if self.text_is_data else f"{text!r:.80} is not a valid expression"
        except (RecursionError, MemoryError):
            return f"expression {text[:60]!r}... is nested too deeply to check"
        if (
            isinstance(tree.body, ast.Name)
            and tree.body.id not in UNSAFE_BUILTINS
            and not _is_dunder(tree.body.id)
        ):
            return None  # a bare name: a value, or its own text ('constant') at worst
        nodes = parsed_pieces(source)
        calls = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
        bases = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
        refused = [
            (node, reason)
            for node in nodes
            if (reason := self._node(node, id(node) in calls, id(node) in bases))
        ]
        if not refused:
            return None
        # a refused construct (lambda, comprehension) first, else the first, innermost piece
        node, reason = min(
            refused, key=lambda item: (type(item[0]) not in _REFUSED_SYNTAX, _position(item[0]))
        )
        piece = ast.get_source_segment(source, node) or ast.unparse(node)
        return f"`{piece:.80}` is refused: {reason} (in `{source:.120}`)"

    def _node(self, node: ast.AST, called: bool, is_base: bool) -> str | None:
        cls = node.__class__  # the parser makes these classes, never subclasses of them
        if cls is ast.Name:  # the most common pieces first
            return self._name(node.id, called, is_base)  # type: ignore[attr-defined]
        if cls is ast.Constant:
            return None
        if cls is ast.BinOp:
            return literal_operation_refusal(node)  # type: ignore[arg-type]
        if cls in _REFUSED_SYNTAX:
            return _REFUSED_SYNTAX[cls]
        if cls not in _ALLOWED_CLASSES:
            return f"{cls.__name__} is not part of MDF expressions"
        if cls is ast.Attribute:
            return _attribute(node, called, is_base)  # type: ignore[arg-type]
        if cls is ast.Call:
            return _call(node)  # type: ignore[arg-type]
        return None

    def _name(self, name: str, called: bool, is_base: bool) -> str | None:
        if _is_dunder(name):
            return "a dunder name"
        if is_base and name in ("numpy", "math"):
            return None
        if name in UNSAFE_BUILTINS and not called and name in self.bound_later:
            return (
                f"it is read before the node's parameter '{name}' is evaluated, where "
                f"modeci-mdf would read the Python builtin '{name}'; list parameter "
                f"'{name}' before the one that reads it"
            )
        if name in UNSAFE_BUILTINS and (called or name not in self.names):
            return f"the Python builtin '{name}' is not allowed"
        if called:
            if name in SAFE_BUILTINS and name not in self.names:
                return None
            return (
                "only numpy/math functions and the builtins "
                + ", ".join(sorted(SAFE_BUILTINS))
                + " may be called"
            )
        if name in self.names or name in SAFE_BUILTINS:
            return None
        if name in ("numpy", "math"):
            return f"the module '{name}' may only be used as {name}.<function>"
        return f"'{name}' is not a port, parameter or function of this node" + did_you_mean(
            name, self.names
        )


def _syntax_problem(source: str, exc: SyntaxError) -> str:
    """``'a + (b' is not a valid expression: '(' was never closed (column 5: `a + (`)``."""
    column = exc.offset or 0
    where = f" (column {column}: `{source[:column]:.80}` <- here)" if column else ""
    return f"{source!r:.80} is not a valid expression: {exc.msg}{where}"


def _attribute(node: ast.Attribute, called: bool, is_base: bool) -> str | None:
    if _is_dunder(node.attr):
        return "a dunder attribute"
    owner = _dotted(node.value)
    allowed = _ATTRIBUTES.get(owner) if owner else None
    if owner is None or allowed is None:
        return "attribute access other than numpy.<function> or math.<function>"
    if node.attr not in allowed:
        return f"'{'.'.join(owner)}.{node.attr}' is not an allowed function (docs/safety.md)"
    if node.attr == "linalg" and owner == ("numpy",) and not is_base:
        return "numpy.linalg may only be used as numpy.linalg.<function>"
    return None


def _dotted(node: ast.AST) -> tuple[str, ...] | None:
    if isinstance(node, ast.Name):
        return (node.id,)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return (node.value.id, node.attr)
    return None


def _call(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        if node.keywords:
            return "keyword arguments to builtins (such as key=) are not allowed"
        return None
    if not isinstance(func, ast.Attribute):
        return "only numpy/math functions and safe builtins may be called"
    for keyword in node.keywords:
        if keyword.arg == "dtype" and not isinstance(keyword.value, (ast.Constant, ast.Attribute)):
            return "a dtype that is not a plain element type (float64, 'int32')"
        if (
            keyword.arg == "dtype"
            and isinstance(keyword.value, ast.Constant)
            and dtype_refusal(keyword.value.value)
        ):
            return dtype_refusal(keyword.value.value)
    if _dotted(func.value) == ("numpy",):
        return allocation_refusal(func.attr, node)
    return None


@by_text(maxsize=4096)
def parsed_expression(source: str) -> ast.Expression:
    """``ast.parse(source, mode="eval")``, parsed once for the allow-list and the time
    loop's readers of the same text (its types and the names it reads), each of which
    only reads the tree: never change it (copy it first)."""
    return ast.parse(source, mode="eval")


@by_text(maxsize=4096)
def parsed_pieces(source: str) -> tuple[ast.AST, ...]:
    """:func:`expression_pieces` of :func:`parsed_expression`, walked once per text for the
    allow-list and the time loop's readers of the names (never change them)."""
    return tuple(expression_pieces(parsed_expression(source)))


#: pieces every expression may hold, which need no check (a walk leaves them out)
_UNCHECKED = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)


def _subclasses(kind: type) -> set[type]:
    found = {kind}
    subclasses: list[type] = kind.__subclasses__()
    for sub in subclasses:
        found |= _subclasses(sub)
    return found


#: the classes of those pieces (the parser makes instances of these classes only)
_UNCHECKED_CLASSES = frozenset().union(*(_subclasses(kind) for kind in _UNCHECKED))
#: the classes of the allowed syntax, looked up by a piece's own class
_ALLOWED_CLASSES = frozenset().union(*(_subclasses(kind) for kind in _ALLOWED_SYNTAX))


def expression_pieces(tree: ast.AST) -> list[ast.AST]:
    """The pieces of ``tree`` in the order of ``ast.walk`` (breadth first), without
    contexts and operators (allowed everywhere: half of an expression's nodes)."""
    nodes = [tree]
    skipped = _UNCHECKED_CLASSES
    for node in nodes:  # grows as it goes
        for field in node._fields:
            value = getattr(node, field, None)
            if type(value) is list:
                nodes += [v for v in value if isinstance(v, ast.AST) and type(v) not in skipped]
            elif isinstance(value, ast.AST) and type(value) not in skipped:
                nodes.append(value)
    return nodes


def _position(node: ast.AST) -> tuple:
    """Source order, inner before outer; pieces without a position (arguments) last."""
    if not hasattr(node, "lineno"):
        return (math.inf,)
    located: Any = node  # expressions, statements, arguments, keywords: all have the four
    return (located.lineno, located.col_offset, located.end_lineno, located.end_col_offset)


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__") and len(name) > 4


#: characters that neither ``int`` nor ``float`` accepts in a number's text
_NOT_IN_NUMBERS = re.compile(r"[()*/%\[\]{}<>=!&|^~,:;@'\"#?\\$`]")


def text_number(text: str) -> int | float | None:
    """modelspec's reading of a number's text: ``int(text)``, else ``float(text)``, else
    None (a text with a character neither accepts is none without trying them)."""
    if _NOT_IN_NUMBERS.search(text):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except (ValueError, OverflowError):
            pass
    return None

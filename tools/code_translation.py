"""What a translation may change in a code cell, and whether a translated cell is still the same program.

The Chinese edition runs the English notebooks' code with its comments and its reader-facing text in Chinese. A
translated cell may change:

- comments;
- docstrings;
- the text of strings the reader sees: arguments of ``print``, ``check`` and ``observe`` (the claims, and a
  notebook's own wrapper named ``..._check`` or ``..._observe``), of the
  plotting calls that write text (titles, axis labels, ``text``, ``annotate``, ``legend``), of an exception the
  cell raises, ``label=``, ``title=``, ``titles=``, ``suptitle=``, ``xlabel=``, ``ylabel=``, ``description=`` and
  ``placeholder=`` keywords anywhere (a list of strings there too), and anything inside ``pd.DataFrame(...)`` (its
  column names);
- in an f-string in those places, the text around the ``{...}`` fields and the fields' order (Chinese orders words
  differently); the fields themselves stay, except a field that only pads a literal, ``{'loss':>8}`` (a table's
  header: its text and width may change), and the two strings of a choice, ``{'left' if left else 'right'}``; a
  choice of two strings may also go altogether (English's ``head{'s' if n > 1 else ''}``: Chinese has no plural),
  but a choice that stays keeps its test;
- in text joined there, ``", ".join(f"n = {n}: {r:g}x" for n, r in rows)``, the separator and the items' text.

Everything else stays byte for byte after parsing: names, numbers, operators, and every other string (data such as
a sentence the model reads, dictionary keys, file names, format specifications). :func:`same_program` compares two
sources with those parts blanked; :func:`needs_translation` says whether a cell has anything English a reader would
see in those places.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

# calls whose string arguments (positional and keyword) are text for the reader
DISPLAY_CALLS = frozenset(
    {
        "print",
        "check",
        "observe",
        "set_title",
        "set_xlabel",
        "set_ylabel",
        "suptitle",
        "set_label",
        "title",
        "xlabel",
        "ylabel",
        "text",
        "annotate",
        "legend",
        "Markdown",
        "HTML",
    }
)
# keywords whose string values are text for the reader, in any call
DISPLAY_KEYWORDS = frozenset({"label", "title", "titles", "suptitle", "xlabel", "ylabel", "description", "placeholder"})
# calls inside which every string is shown (a table's column names)
TABLE_CALLS = frozenset({"DataFrame"})
ENGLISH_WORDS = re.compile(r"[A-Za-z]{2,}[ ,:;.'-]+[A-Za-z]{2,}")
PLACEHOLDER = "<text>"


CLAIM_CALL = re.compile(r"(?:^|_)(?:check|observe)$")  # check, observe, and a notebook's own trained_check


def _is_display_call(name: str) -> bool:
    return name in DISPLAY_CALLS or bool(CLAIM_CALL.search(name))


def _call_name(call: ast.Call) -> str:
    function = call.func
    if isinstance(function, ast.Attribute):
        return function.attr
    return function.id if isinstance(function, ast.Name) else ""


def _is_string(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def display_strings(tree: ast.AST) -> list[ast.AST]:
    """The string nodes of ``tree`` that a translation may change (see the module's docstring)."""
    found: list[ast.AST] = []

    def strings_in(node: ast.AST) -> None:
        # a string argument, or strings joined into one ("a" + f"b"), or a conditional choice of two
        if _is_string(node):
            found.append(node)
            if isinstance(node, ast.JoinedStr):  # f"{'left' if left else 'right'} padding": the choice is text too
                for field in node.values:
                    if isinstance(field, ast.FormattedValue) and isinstance(field.value, ast.IfExp):
                        strings_in(field.value)
        elif isinstance(node, ast.BinOp):
            strings_in(node.left)
            strings_in(node.right)
        elif isinstance(node, ast.IfExp):
            strings_in(node.body)
            strings_in(node.orelse)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join":
            strings_in(node.func.value)
            for argument in node.args:  # ", ".join(f"n = {n}: {r:g}x" for n in ns): the items are text too
                strings_in(argument)
        elif isinstance(node, ast.List | ast.Tuple):  # titles=["...", "..."]
            for element in node.elts:
                strings_in(element)
        elif isinstance(node, ast.ListComp | ast.GeneratorExp):  # titles=[f"head {h}" for h in ...]
            strings_in(node.elt)

    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Module):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and _is_string(body[0].value):
                found.append(body[0].value)
        if isinstance(node, ast.Call):
            name = _call_name(node)
            if name in TABLE_CALLS:
                found += [n for n in ast.walk(node) if _is_string(n)]
            if _is_display_call(name):
                for argument in node.args:
                    strings_in(argument)
                for keyword in node.keywords:
                    strings_in(keyword.value)
            for keyword in node.keywords:
                if keyword.arg in DISPLAY_KEYWORDS:
                    strings_in(keyword.value)
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
            for argument in node.exc.args:
                strings_in(argument)
    return found


def _literal(field: ast.FormattedValue) -> bool:
    """True for an f-string field that shows a string literal: ``{'loss':>8}``."""
    return isinstance(field.value, ast.Constant) and isinstance(field.value.value, str)


def _text_of(node: ast.AST) -> str:
    if isinstance(node, ast.Constant):
        return node.value
    parts = []
    for part in node.values:
        if isinstance(part, ast.Constant):
            parts.append(part.value)
        elif isinstance(part, ast.FormattedValue) and _literal(part):
            parts.append(part.value.value)
    return " ".join(parts)


def _text_choice(part: ast.AST) -> bool:
    """True for an f-string field that only chooses between two strings: ``{'s' if n > 1 else ''}``."""
    return (
        isinstance(part, ast.FormattedValue)
        and isinstance(part.value, ast.IfExp)
        and all(_is_string(branch) for branch in (part.value.body, part.value.orelse))
    )


def text_choice_tests(source: str) -> list[str]:
    """The tests of the text choices in ``source``'s translatable strings, dumped and sorted."""
    tests = []
    for node in display_strings(ast.parse(source)):
        if isinstance(node, ast.JoinedStr):
            tests += [ast.dump(part.value.test) for part in node.values if _text_choice(part)]
    return sorted(tests)


class _Blank(ast.NodeTransformer):
    """Replaces each translatable string with the placeholder (an f-string keeps its fields, in sorted order; with
    ``drop_choices``, its text choices go with the text)."""

    def __init__(self, translatable: list[ast.AST], drop_choices: bool = False) -> None:
        self.translatable = {id(node) for node in translatable}
        self.drop_choices = drop_choices

    def visit(self, node: ast.AST) -> ast.AST:
        if id(node) in self.translatable:
            if isinstance(node, ast.JoinedStr):
                node = self.generic_visit(node)  # the text inside a field's choice first
                # a field that only pads a literal, f"{'loss':>8}", is text (a table's header), its width too
                fields = sorted(
                    (
                        part
                        for part in node.values
                        if isinstance(part, ast.FormattedValue)
                        and not _literal(part)
                        and not (self.drop_choices and _text_choice(part))
                    ),
                    key=ast.dump,
                )
                return ast.JoinedStr(values=[ast.Constant(PLACEHOLDER), *fields])
            return ast.Constant(PLACEHOLDER)
        return self.generic_visit(node)


def program_shape(source: str, drop_choices: bool = False) -> str:
    """``source`` parsed, with comments dropped and every translatable string blanked: what a translation keeps
    (with ``drop_choices``, text choices blanked with the text around them)."""
    tree = ast.parse(source)
    return ast.dump(_Blank(display_strings(tree), drop_choices).visit(tree))


def same_program(english: str, translated: str) -> bool:
    """True if ``translated`` differs from ``english`` only where a translation may (see the module's docstring)."""
    if program_shape(english) == program_shape(translated):
        return True
    # text choices dropped: the same program, if every choice the translation kept has one of the English tests
    if program_shape(english, drop_choices=True) != program_shape(translated, drop_choices=True):
        return False
    remaining = text_choice_tests(english)
    for test in text_choice_tests(translated):
        if test not in remaining:
            return False
        remaining.remove(test)
    return True


def program_differences(english: str, translated: str) -> str:
    """A short description of the first place where the two programs differ (for an error message)."""
    try:
        ast.parse(translated)
    except SyntaxError as error:
        return f"the translation is not valid Python: {error}"
    left, right = program_shape(english), program_shape(translated)
    start = next((i for i, (a, b) in enumerate(zip(left, right)) if a != b), min(len(left), len(right)))
    around = slice(max(0, start - 60), start + 60)
    return f"English ...{left[around]}... vs translation ...{right[around]}..."


def english_comments(source: str) -> list[str]:
    """The comments of ``source`` that contain English words."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [t.string for t in tokens if t.type == tokenize.COMMENT and re.search(r"[A-Za-z]{2,}", t.string)]


def english_text(source: str) -> list[str]:
    """What a reader sees in English in ``source``: comments, and translatable strings with two English words or
    more in a row."""
    shown = [_text_of(node) for node in display_strings(ast.parse(source))]
    return english_comments(source) + [text for text in shown if ENGLISH_WORDS.search(text)]


ENGLISH_SENTENCE = re.compile(r"[A-Za-z]{2,}(?:[ ,;:'-]+[A-Za-z]{2,}){2,}")
CHINESE = re.compile(r"[\u4e00-\u9fff]")


def untranslated(source: str) -> list[str]:
    """The comments and translatable strings of a translated cell that still read as English: three English words
    or more in a row and no Chinese character. (Shape notes such as ``(batch, n, d)`` and code in backticks pass.)"""
    shown = english_comments(source) + [_text_of(node) for node in display_strings(ast.parse(source))]
    return [
        text for text in shown if ENGLISH_SENTENCE.search(re.sub(r"`[^`]*`", "", text)) and not CHINESE.search(text)
    ]


def needs_translation(source: str) -> bool:
    """True if the code cell ``source`` shows the reader English that the Chinese edition translates."""
    return bool(english_text(source))

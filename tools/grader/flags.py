"""Flags on a submission, from a static analysis of the code its learner wrote (nothing is run).

The learner's code is every code cell of the submission that is not the teacher's: an answer cell changed from its
stub, a cell the learner added, a locked cell the learner edited (the grader restores it; the edit is still read).
Each cell is parsed (IPython's ``%`` and ``!`` syntax first turned into Python) and its imports, names, attribute
chains and strings are followed, with what every import of the notebook binds (``import ... as m``, ``from ...
import ... as z``, ``from ... import *``). Four kinds of flag:

- ``reference``: a reference solution of the course (``reference_*`` of ``transformer_course.exercises``) is named:
  imported, read, reached as an attribute (``m.reference_attention``) or spelt in a string (``getattr``, ``exec``);
- ``package``: a package function the assignment's exercises ask the learner to write is used
  (:data:`tools.grader.forbidden.FORBIDDEN`), under whatever name or path it is reached;
- ``teacher``: teacher material is imported or read: a module or path with a part named ``teacher``, ``teachers``,
  ``teacher_*`` or ``*_teacher``;
- ``checker``: the learner's code rebinds a checker (``check_*``, ``report``) or sets an attribute of the course
  package or of ``builtins``, which could change what the checker says.

A flag asks the teacher to look; it is not a verdict. A cell that cannot be parsed is searched as text.
"""

from __future__ import annotations

import ast
import importlib
import re
from dataclasses import dataclass
from functools import cache

import nbformat

from tools.grader.catalogue import all_checkers
from tools.grader.forbidden import forbidden_objects, resolve

FLAG_KINDS = ("reference", "package", "teacher", "checker")
PACKAGE = "transformer_course"
TEACHER_PART = re.compile(r"^(?:\w+_)?teachers?(?:_\w+)?$", re.IGNORECASE)
LOADERS = {"import_module", "__import__", "exec", "eval", "open", "run_line_magic", "run_cell_magic", "system"}


@dataclass(frozen=True)
class Flag:
    """One finding: its kind, what was found, and in which cell."""

    kind: str
    what: str
    where: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what}"


@cache
def reference_names() -> frozenset[str]:
    """Every ``reference_*`` function of the exercise modules."""
    names = set()
    for checker in all_checkers().values():
        module = importlib.import_module(checker.module)
        names |= {name for name in dir(module) if name.startswith("reference_")}
    return frozenset(names)


@cache
def checker_names() -> frozenset[str]:
    """The names whose rebinding could change a verdict: every checker of the course, and ``report``."""
    return frozenset({checker.name for checker in all_checkers().values()} | {"report"})


def is_teacher_path(text: str) -> bool:
    """True if a module path or file path has a part named like teacher material ("teacher.keys", "../teacher/a")."""
    return any(TEACHER_PART.match(part) for part in re.split(r"[/\\.\s]+", text) if part)


def _python(source: str) -> str:
    """A cell's source with IPython's syntax (``%run``, ``!ls``) turned into Python calls."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


def _resolve(dotted: str) -> object | None:
    """The object a dotted path names, for paths inside the course package only (nothing else is imported)."""
    if dotted != PACKAGE and not dotted.startswith(PACKAGE + "."):
        return None
    try:
        return resolve(dotted)
    except ValueError:
        return None


class _Bindings:
    """Name -> dotted path, from every import statement of the notebook."""

    def __init__(self) -> None:
        self.paths: dict[str, str] = {}

    def add(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.paths[alias.asname] = alias.name
                    else:
                        root = alias.name.split(".")[0]
                        self.paths[root] = root
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    if alias.name == "*":
                        module = _resolve(node.module)
                        if module is None:
                            continue
                        for name in getattr(module, "__all__", None) or [n for n in dir(module) if n[:1] != "_"]:
                            self.paths[name] = f"{node.module}.{name}"
                    else:
                        self.paths[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def dotted(self, node: ast.AST) -> str | None:
        """``transformer_course.exercises.attention.reference_attention`` for ``m.reference_attention`` when ``m`` is
        bound to the module; None if the chain does not start at a bound name."""
        attributes = []
        while isinstance(node, ast.Attribute):
            attributes.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.paths:
            return None
        return ".".join([self.paths[node.id], *reversed(attributes)])


class _Finder:
    """Collects the flags of one cell."""

    def __init__(self, where: str, bindings: _Bindings, references: frozenset[str], forbidden: dict) -> None:
        self.where, self.bindings, self.references, self.forbidden = where, bindings, references, forbidden
        self.checkers = checker_names()
        self.flags: set[Flag] = set()

    def flag(self, kind: str, what: str) -> None:
        self.flags.add(Flag(kind, what, self.where))

    def check_path(self, dotted: str | None) -> None:
        if dotted is None:
            return
        last = dotted.rsplit(".", 1)[-1]
        if last in self.references and dotted.startswith(PACKAGE):
            self.flag("reference", last)
        found = _resolve(dotted)
        if found is not None and id(found) in self.forbidden:
            name, numbers = self.forbidden[id(found)]
            self.flag("package", f"{name} (asked in {', '.join(numbers)})")

    def check_string(self, text: str, loader: bool) -> None:
        for name in self.references:
            if name in text:
                self.flag("reference", name)
        for token in text.split():  # a path or module name in a string, or the argument of an import or open
            if (loader or re.search(r"[/\\.]", token)) and is_teacher_path(token):
                self.flag("teacher", text.strip()[:60])
                break

    def visit(self, tree: ast.AST) -> None:
        loaded_by: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in LOADERS:
                    loaded_by |= {id(a) for a in node.args}
                if name == "setattr" and node.args:
                    self.check_target(node.args[0], "setattr on")
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if is_teacher_path(alias.name):
                        self.flag("teacher", f"import {alias.name}")
                    self.check_path(alias.name)
            elif isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                for alias in node.names:
                    if is_teacher_path(module) or is_teacher_path(alias.name):
                        self.flag("teacher", f"from {module} import {alias.name}")
                    if alias.name in self.references:
                        self.flag("reference", alias.name)
                    if node.level == 0 and node.module and alias.name != "*":
                        self.check_path(f"{node.module}.{alias.name}")
            elif isinstance(node, ast.Name):
                if isinstance(node.ctx, ast.Load):
                    if node.id in self.references:
                        self.flag("reference", node.id)
                    self.check_path(self.bindings.dotted(node))
                elif node.id in self.checkers:
                    self.flag("checker", f"rebinds {node.id}")
            elif isinstance(node, ast.Attribute):
                if node.attr in self.references:
                    self.flag("reference", node.attr)
                if isinstance(node.ctx, ast.Load):
                    self.check_path(self.bindings.dotted(node))
                else:
                    self.check_target(node.value, "sets an attribute of")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in self.checkers:
                self.flag("checker", f"rebinds {node.name}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                self.check_string(node.value, id(node) in loaded_by)

    def check_target(self, node: ast.AST, how: str) -> None:
        dotted = self.bindings.dotted(node)
        if isinstance(node, ast.Name) and node.id in ("builtins", "__builtins__"):
            dotted = "builtins"
        if dotted is not None and (dotted.split(".")[0] in (PACKAGE, "builtins")):
            self.flag("checker", f"{how} {dotted}")


def _teacher_cells(released: nbformat.NotebookNode) -> tuple[dict[str, str], set[str]]:
    by_id, sources = {}, set()
    for cell in released.cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if cell.cell_type == "code":
            sources.add(cell.source.strip())
            if grade_id:
                by_id[grade_id] = cell.source
    return by_id, sources


def _where(grade_id: str | None, index: int) -> str:
    if grade_id and grade_id.startswith("answer-"):
        return "answer " + grade_id.removeprefix("answer-").replace("_", ".")
    if grade_id:
        return f"edited cell {grade_id}"
    return f"added cell #{index + 1}"


def _text_search(source: str, finder: _Finder) -> None:
    """What can be found in a cell that does not parse: reference names and teacher imports, as text."""
    finder.check_string(source, loader=False)
    for match in re.finditer(r"^\s*(?:from|import)\s+([\w.]+)", source, re.MULTILINE):
        if is_teacher_path(match[1]):
            finder.flag("teacher", f"import {match[1]}")


def submission_flags(
    submitted: nbformat.NotebookNode, released: nbformat.NotebookNode, numbers: list[str]
) -> list[Flag]:
    """The flags of one submitted notebook of an assignment whose student version is ``released`` and whose
    exercises are ``numbers``."""
    references = reference_names()
    forbidden = forbidden_objects(numbers)
    teacher_by_id, teacher_sources = _teacher_cells(released)
    bindings = _Bindings()
    parsed: list[tuple[int, str | None, str, ast.AST | None]] = []
    for index, cell in enumerate(submitted.cells):
        if cell.cell_type != "code":
            continue
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        try:
            tree: ast.AST | None = ast.parse(_python(cell.source))
        except SyntaxError:
            tree = None
        if tree is not None:
            bindings.add(tree)
        parsed.append((index, grade_id, cell.source, tree))
    flags: set[Flag] = set()
    for index, grade_id, source, tree in parsed:
        if source.strip() in teacher_sources and (grade_id is None or source == teacher_by_id.get(grade_id, source)):
            continue  # the teacher's code, as released
        finder = _Finder(_where(grade_id, index), bindings, references, forbidden)
        if tree is None:
            _text_search(source, finder)
        else:
            finder.visit(tree)
        exempt = set()
        if grade_id in teacher_by_id:  # what the released cell itself uses is not the learner's doing
            teacher = _Finder("", bindings, references, forbidden)
            teacher.visit(ast.parse(_python(teacher_by_id[grade_id])))
            exempt = {(f.kind, f.what) for f in teacher.flags}
        flags |= {f for f in finder.flags if (f.kind, f.what) not in exempt}
    order = {kind: i for i, kind in enumerate(FLAG_KINDS)}
    return sorted(flags, key=lambda f: (order[f.kind], f.where, f.what))

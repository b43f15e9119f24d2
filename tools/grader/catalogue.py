"""The exercises of the course notebooks, found in the notebooks and in their checker modules.

An exercise cell of a course notebook defines the learner's function, a stub that raises ``NotImplementedError``,
and ends with its checker's call: ``_ = check_attention(my_attention)`` (or ``if check_...(fn):`` followed by what
to do once it passes). The checker comes from ``transformer_course.exercises.<module>``; its exercise number is the
:class:`~transformer_course.exercises.Exercise` it reports, and its reference solution, where the module has one, the
``reference_*`` function of the same name or whose docstring says "Reference solution of exercise N".
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import nbformat

EXERCISE_PACKAGE = "transformer_course.exercises"
REFERENCE_DOC = re.compile(r"Reference solution of exercise (?:(\d+)\.)?(\d+)")


@dataclass(frozen=True)
class Checker:
    """One checker function of an exercise module."""

    number: str  # "4.1"
    name: str  # "check_attention"
    module: str  # "transformer_course.exercises.attention"
    reference: str | None  # "reference_attention", or None if the module ships no reference solution for it


@dataclass(frozen=True)
class ExerciseCell:
    """One exercise cell of a course notebook."""

    index: int  # position of the cell in the notebook
    checker: Checker
    function: str  # the learner's function the checker is called with: "my_attention"
    check_line: int  # 0-based line of the cell where the checker's call starts
    conditional: bool  # True for ``if check_...(fn):`` (the lines after it run once the answer passes)

    @property
    def number(self) -> str:
        return self.checker.number


def _exercise_constants(tree: ast.Module) -> dict[str, str]:
    """NAME -> number for every ``NAME = Exercise("4.1", ...)`` of a checker module."""
    found = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id == "Exercise"
            and node.value.args
            and isinstance(node.value.args[0], ast.Constant)
        ):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = str(node.value.args[0].value)
    return found


def _reported_number(function: ast.FunctionDef, constants: dict[str, str]) -> str | None:
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "report"
            and node.args
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id in constants
        ):
            return constants[node.args[0].id]
    return None


@cache
def module_checkers(module: str) -> dict[str, Checker]:
    """check_* name -> :class:`Checker` for one exercise module ("transformer_course.exercises.attention")."""
    if not module.startswith(EXERCISE_PACKAGE + "."):
        raise ValueError(f"checkers live in {EXERCISE_PACKAGE}.<module>, got {module!r}")
    imported = importlib.import_module(module)
    tree = ast.parse(inspect.getsource(imported))
    constants = _exercise_constants(tree)
    notebook = {number.split(".")[0] for number in constants.values()}
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    references: dict[str, str] = {}  # number -> reference_* name
    for name, node in functions.items():
        if not name.startswith("reference_"):
            continue
        match = REFERENCE_DOC.match(ast.get_docstring(node) or "")
        if match and len(notebook) == 1:
            references.setdefault(f"{match[1] or next(iter(notebook))}.{match[2]}", name)
    checkers = {}
    for name, node in functions.items():
        if not name.startswith("check_"):
            continue
        number = _reported_number(node, constants)
        if number is None:
            continue
        same_name = "reference_" + name.removeprefix("check_")
        reference = same_name if same_name in functions else references.get(number)
        checkers[name] = Checker(number, name, module, reference)
    return checkers


def all_checkers() -> dict[str, Checker]:
    """number -> :class:`Checker` for every exercise module of the package."""
    package = importlib.import_module(EXERCISE_PACKAGE)
    found = {}
    for path in sorted(Path(package.__file__).parent.glob("*.py")):
        if path.stem.startswith("_"):
            continue
        for checker in module_checkers(f"{EXERCISE_PACKAGE}.{path.stem}").values():
            found[checker.number] = checker
    return found


def _checker_imports(tree: ast.Module) -> dict[str, str]:
    """Bound name -> (module, name) of every ``from transformer_course.exercises.X import check_y [as z]``."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(EXERCISE_PACKAGE + "."):
            for alias in node.names:
                if alias.name.startswith("check_"):
                    found[alias.asname or alias.name] = f"{node.module}:{alias.name}"
    return found


def _checker_call(node: ast.stmt) -> tuple[ast.Call, bool] | None:
    """The checker call of a statement ``_ = check_x(fn)`` or ``if check_x(fn): ...``."""
    if isinstance(node, ast.Assign):
        call, conditional = node.value, False
    elif isinstance(node, ast.If):
        call, conditional = node.test, True
    elif isinstance(node, ast.Expr):
        call, conditional = node.value, False
    else:
        return None
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and len(call.args) == 1
        and isinstance(call.args[0], ast.Name)
        and not call.keywords
    ):
        return call, conditional
    return None


def find_exercises(notebook: nbformat.NotebookNode) -> list[ExerciseCell]:
    """The exercise cells of a course notebook, in order. Raises ValueError if a checker is called in a cell that
    is not laid out as stub first, checker call last."""
    imports: dict[str, str] = {}
    found = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        tree = ast.parse(cell.source)
        imports.update(_checker_imports(tree))
        for position, statement in enumerate(tree.body):
            match = _checker_call(statement)
            if match is None or match[0].func.id not in imports:  # type: ignore[union-attr]
                continue
            call, conditional = match
            module, name = imports[call.func.id].split(":")  # type: ignore[union-attr]
            checker = module_checkers(module).get(name)
            if checker is None:
                raise ValueError(f"cell {index} calls {name} of {module}, which reports no Exercise")
            if position != len(tree.body) - 1:
                raise ValueError(f"cell {index}: the call of {name} must be the cell's last statement")
            found.append(
                ExerciseCell(index, checker, call.args[0].id, statement.lineno - 1, conditional)  # type: ignore[attr-defined]
            )
    return found

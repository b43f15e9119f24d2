"""The teacher's version of an assignment (nbgrader's "source" notebook), built from one course notebook.

It holds, in the notebook's order: a header (what to do, the pinned Colab badge), the setup cell (installing the
course at the release's git ref on Colab), the cells the exercises need (:mod:`tools.grader.slicing`), and for each
exercise its prompt, the learner's function as an nbgrader answer cell, and an autograded test cell that calls the
course's checker and passes only if the checker returns True. In the answer cell, the stub's
``raise NotImplementedError`` is an nbgrader solution region: the call of the exercise module's reference solution,
where it has one (so that ``nbgrader validate`` and the release check can prove the assignment runs), the stub
otherwise. ``nbgrader generate_assignment`` turns it into the student version, with the region back to
``raise NotImplementedError``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from tools.course_notebooks import repository_url
from tools.grader.catalogue import ExerciseCell, find_exercises
from tools.grader.pinning import pin_setup_cell, pinned_badge
from tools.grader.slicing import code_hints, needed_cells

GRADER_KEY = "transformer_course_grader"  # notebook metadata: where the assignment came from, and its exercises
STUB = re.compile(r"^(?P<indent>\s*)raise NotImplementedError\b[^#]*(?:#\s*(?P<comment>.*))?$")
EXERCISE_START = re.compile(
    r"^#+ [^\n]*(?:Exercises?\b|练习)|^\*\*(?:Exercise|练习) \d+\.\d+|^#+ (?:Exercise|练习) \d+\.\d+", re.MULTILINE
)
POINTER = re.compile(
    r"\s*(?:The r|R)eference solutions are in\s+(?:`[^`]*`|the same\s+module)[^.]*\.(?:\s*[Tt]ry first\.)?"
    r"|参考答案在\s*(?:`[^`]*`\s*中|同一个模块中)[；。](?:请先自己尝试。)?"
)
LANGUAGES = ("en", "zh")
TEXT = {
    "en": {
        "title": "Assignment: {title}",
        "kept": "the notebook's setup cell and the {n} cell{s} of the notebook that its exercises use",
        "setup_only": "the notebook's setup cell",
        "intro": "This assignment holds the exercises of course notebook `{name}` at the course version `{ref}`, with "
        "{kept}. Read the whole notebook first: the badge opens it on Colab, at that version.",
        "rules": [
            "Write each answer in place of its `raise NotImplementedError`. The cell after each answer runs the "
            "course's checker: its verdict is your grade for that exercise.",
            "Leave the other cells as they are: they are restored from the teacher's copy when your work is graded.",
            "Before you hand it in, restart the kernel and run all cells. The grader runs your notebook from the "
            "top, offline, with a time limit.",
            "The course's reference solutions (`reference_*`), the package function an exercise asks you to write, "
            "and teacher material are not yours to hand in: the grader reports each use to your teacher.",
        ],
        "test": "# Exercise {number}, graded: the course's checker decides (it prints one line: correct, or what to "
        "look at).",
        "assert": "exercise {number} is not correct yet: the line above says why",
    },
    "zh": {
        "title": "作业：{title}",
        "kept": "以及该笔记本的设置单元格和练习要用到的 {n} 个单元格",
        "setup_only": "以及该笔记本的设置单元格",
        "intro": "本作业包含课程笔记本 `{name}`（课程版本 `{ref}`）的练习，{kept}。请先通读整个笔记本：上面的徽章会在 "
        "Colab 上打开它，版本相同。",
        "rules": [
            "在每个 `raise NotImplementedError` 的位置写你的答案。每个答案后面的单元格会运行课程的检查器：它的判定就是"
            "这道练习的成绩。",
            "其他单元格请保持原样：批改时，它们会按教师的版本恢复。",
            "提交之前，请重启内核并运行全部单元格。批改程序会离线、限时地从头运行你的笔记本。",
            "课程的参考答案（`reference_*`）、练习要你自己编写的那个课程包函数，以及教师材料，都不能当作你的答案提交："
            "批改程序会把每一次使用报告给老师。",
        ],
        "test": "# 练习 {number} 的评分：由课程的检查器判定（它打印一行：正确，或者你该检查什么）。",
        "assert": "练习 {number} 还不对：上面那一行说明了原因",
    },
}


@dataclass(frozen=True)
class Plan:
    """What an assignment holds, for the release report."""

    assignment: str  # "04_scaled_dot_product_attention"
    exercises: tuple[ExerciseCell, ...]
    context: tuple[int, ...]  # indices of the course notebook's cells kept for the exercises (setup excluded)


def exercise_key(number: str) -> str:
    """ "4_1" for "4.1": the form nbgrader's cell ids take."""
    return number.replace(".", "_")


def _nbgrader(grade_id: str, *, grade: bool = False, solution: bool = False, points: float = 0.0) -> dict:
    meta = {
        "grade": grade,
        "solution": solution,
        "locked": not solution,
        "grade_id": grade_id,
        "schema_version": 3,
        "task": False,
    }
    if grade:
        meta["points"] = points
    return {"nbgrader": meta}


def _markdown(source: str, grade_id: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(source, metadata=_nbgrader(grade_id))


def _code(source: str, grade_id: str, **kind: object) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(source, metadata=_nbgrader(grade_id, **kind))  # type: ignore[arg-type]


def _prompt(markdown: str) -> str:
    """The part of the Markdown cell before an exercise that presents it, without the pointer to the solutions."""
    match = EXERCISE_START.search(markdown)
    text = markdown[match.start() :] if match else markdown
    return POINTER.sub("", text).strip()


def _solution(function: ast.FunctionDef, module: str, reference: str | None, indent: str) -> list[str]:
    if reference is None:
        return [indent + "raise NotImplementedError"]
    arguments = [a.arg for a in function.args.posonlyargs + function.args.args]
    arguments += [f"{a.arg}={a.arg}" for a in function.args.kwonlyargs]
    return [
        f"{indent}from {module} import {reference}",
        "",
        f"{indent}return {reference}({', '.join(arguments)})",
    ]


def _split_exercise_cell(source: str, exercise: ExerciseCell) -> tuple[str, str, str]:
    """(prelude, answer, after): the imports the cell starts with, the learner's code up to the checker's call, and
    what an ``if check_...(fn):`` runs once the answer passes (with the test's variable in place of the call)."""
    tree = ast.parse(source)
    lines = source.splitlines()
    body = tree.body[:-1]
    imports = 0
    while imports < len(body) and isinstance(body[imports], (ast.Import, ast.ImportFrom)):
        imports += 1
    if imports == len(body):
        raise ValueError(f"exercise {exercise.number}: its cell defines nothing before the checker's call")
    answer_start = body[imports].lineno - 1
    if hasattr(body[imports], "decorator_list") and body[imports].decorator_list:  # type: ignore[attr-defined]
        answer_start = body[imports].decorator_list[0].lineno - 1  # type: ignore[attr-defined]
    prelude = "\n".join(lines[:answer_start]).strip()
    answer = "\n".join(lines[answer_start : exercise.check_line]).strip()
    after = ""
    if exercise.conditional:
        statement = tree.body[-1]
        assert isinstance(statement, ast.If)
        call = statement.test
        first = lines[exercise.check_line].encode()  # ast's column offsets count UTF-8 bytes
        variable = passed_variable(exercise.number).encode()
        first = (first[: call.col_offset] + variable + first[call.end_col_offset :]).decode()
        after = "\n".join([first, *lines[exercise.check_line + 1 :]]).strip()
    return prelude, answer, after


def passed_variable(number: str) -> str:
    """The variable in which the test cell of an ``if check_...(fn):`` exercise keeps the checker's verdict."""
    return f"passed_{exercise_key(number)}"


def _answer_source(answer: str, exercise: ExerciseCell) -> str:
    """The answer cell of the teacher's version: each ``raise NotImplementedError`` of the stub becomes a solution
    region, its trailing comment kept as a line above it."""
    functions = {
        node.name: node
        for node in ast.parse(answer).body
        if isinstance(node, ast.FunctionDef) and node.name == exercise.function
    }
    if exercise.function not in functions:
        raise ValueError(f"exercise {exercise.number}: no top-level def of {exercise.function} before the checker")
    function = functions[exercise.function]
    out: list[str] = []
    regions = 0
    for number, line in enumerate(answer.splitlines(), start=1):
        match = STUB.match(line)
        if match is None:
            out.append(line)
            continue
        regions += 1
        indent = match["indent"]
        if match["comment"]:
            out.append(f"{indent}# {match['comment']}")
        inside = function.lineno <= number <= (function.end_lineno or number)
        reference = exercise.checker.reference if inside else None
        out.append(f"{indent}### BEGIN SOLUTION")
        out.extend(_solution(function, exercise.checker.module, reference, indent))
        out.append(f"{indent}### END SOLUTION")
    if regions == 0:
        raise ValueError(f"exercise {exercise.number}: the stub has no `raise NotImplementedError` to replace")
    return "\n".join(out)


def _test_source(exercise: ExerciseCell, language: str) -> str:
    checker = exercise.checker
    text = TEXT[language]
    lines = [
        text["test"].format(number=checker.number),
        f"from {checker.module} import {checker.name} as _checker",
        "",
    ]
    if exercise.conditional:
        variable = passed_variable(checker.number)
        lines += [f"{variable} = False", f"{variable} = _checker({exercise.function})", f"assert {variable}, "]
    else:
        lines += [f"assert _checker({exercise.function}), "]
    lines[-1] += '"' + text["assert"].format(number=checker.number) + '"'
    return "\n".join(lines)


def _header(title: str, notebook_name: str, ref: str, context: int, language: str, repo_url: str | None) -> str:
    text = TEXT[language]
    kept = text["kept"].format(n=context, s="" if context == 1 else "s") if context else text["setup_only"]
    badge_name = notebook_name if language == "en" else f"{language}/{notebook_name}"
    intro = text["intro"].format(name=notebook_name, ref=ref, kept=kept)
    badge = pinned_badge(badge_name, ref, repo_url)
    lines = [f"# {text['title'].format(title=title)}", "", badge, "", intro, ""]
    return "\n".join(lines + [f"- {rule}" for rule in text["rules"]])


def assignment_id(notebook_path: Path, language: str = "en") -> str:
    """The assignment's name: the course notebook's ("04_scaled_dot_product_attention"), "_zh" added in Chinese."""
    return notebook_path.stem if language == "en" else f"{notebook_path.stem}_{language}"


def build_source(
    notebook_path: Path, ref: str, points: float = 1.0, language: str = "en", repo_url: str | None = None
) -> tuple[nbformat.NotebookNode, Plan]:
    """The teacher's version of the assignment made from one course notebook (``notebooks/NN_name.ipynb``; in
    Chinese, its translation ``notebooks/zh/NN_name.ipynb``), and what it holds. Its badge and setup cell name
    ``ref`` of ``repo_url`` (pyproject.toml's repository by default)."""
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    source_path = notebook_path if language == "en" else notebook_path.parent / language / notebook_path.name
    course = nbformat.read(source_path, as_version=4)
    exercises = find_exercises(course)
    if not exercises:
        raise ValueError(f"{source_path.name} has no exercise cell (a checker's call) to grade")
    cells = course.cells
    sources = [cell.source if cell.cell_type == "code" else None for cell in cells]
    setup = next(i for i, source in enumerate(sources) if source is not None)
    targets: dict[int, set[str]] = {setup: set()}
    for exercise in exercises:
        parameters = {
            node.arg for node in ast.walk(ast.parse(cells[exercise.index].source)) if isinstance(node, ast.arg)
        }
        targets[exercise.index] = code_hints(cells[exercise.index].source) - parameters
    by_index = {exercise.index: exercise for exercise in exercises}
    context = sorted(needed_cells(sources, targets) - set(by_index) - {setup})
    title = re.sub(r"^#+\s*", "", cells[0].source.splitlines()[0]) if cells[0].cell_type == "markdown" else ""

    header = _header(title or notebook_path.stem, notebook_path.name, ref, len(context), language, repo_url)
    out = [_markdown(header, "header")]
    for index, cell in enumerate(cells):
        if index == setup:
            out.append(_code(pin_setup_cell(cell.source, notebook_path.name, ref, repo_url), "setup"))
        elif index in context:
            out.append(_code(cell.source, f"context-{index}"))
        elif index in by_index:
            exercise = by_index[index]
            key = exercise_key(exercise.number)
            before = cells[index - 1]
            if before.cell_type == "markdown":
                out.append(_markdown(_prompt(before.source), f"prompt-{key}"))
            prelude, answer, after = _split_exercise_cell(cell.source, exercise)
            if prelude:
                out.append(_code(prelude, f"prelude-{key}"))
            out.append(_code(_answer_source(answer, exercise), f"answer-{key}", solution=True))
            out.append(_code(_test_source(exercise, language), f"test-{key}", grade=True, points=points))
            if after:
                out.append(_code(after, f"after-{key}"))
    notebook = nbformat.v4.new_notebook(cells=out, metadata={"kernelspec": course.metadata["kernelspec"]})
    notebook.metadata["language_info"] = course.metadata.get("language_info", {"name": "python"})
    notebook.metadata[GRADER_KEY] = {
        "notebook": str(source_path.relative_to(notebook_path.parent.parent)),
        "language": language,
        "ref": ref,
        "repository": repo_url or repository_url(),
        "context_cells": context,
        "exercises": {
            e.number: {"function": e.function, "checker": e.checker.name, "module": e.checker.module} for e in exercises
        },
    }
    return notebook, Plan(assignment_id(notebook_path, language), tuple(exercises), tuple(context))

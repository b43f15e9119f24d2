"""The checker's verdict on each exercise of an executed assignment notebook.

The test cell of an exercise calls the course's checker, which prints one line (``Exercise 4.1 (...): correct!``,
``...: not yet. <why>``, ``...: not attempted yet ...``, ``...: your code raised <error>``; in Chinese after
``set_language("zh")``) and returns True only for a correct answer, and asserts that it returned True. The verdict:

- ``correct``: the checker's last line says correct and the test cell raised nothing (so it returned True);
- ``wrong``: the checker says "not yet"; ``unanswered``: "not attempted yet" (the stub is still there);
- ``error``: the learner's code raised (the checker says so), or the test cell failed before the checker could
  answer (for instance a NameError: the answer cell did not define the function);
- ``timeout``: the answer or the test cell was stopped at the time limit;
- ``missing``: the notebook has no test cell for the exercise (no submission, or the cell was deleted).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import nbformat

VERDICTS = ("correct", "wrong", "unanswered", "error", "timeout", "missing")
TIMEOUT_ERROR = "CellTimeoutError"  # the error nbgrader's Execute records for a cell stopped at its time limit
_LINE = re.compile(
    r"^(?:Exercise (?P<en_number>\d+\.\d+) \(.*?\): (?P<en>correct!|not yet\.|not attempted yet|your code raised)"
    r"|练习 (?P<zh_number>\d+\.\d+)（.*?）：(?P<zh>正确！|还不对。|尚未作答|你的代码抛出了))"
)
_KIND = {
    "correct!": "correct",
    "正确！": "correct",
    "not yet.": "wrong",
    "还不对。": "wrong",
    "not attempted yet": "unanswered",
    "尚未作答": "unanswered",
    "your code raised": "error",
    "你的代码抛出了": "error",
}
_ROLE = re.compile(r"^(?P<role>answer|test)-(?P<key>\d+_\d+)$")


@dataclass(frozen=True)
class Verdict:
    """One exercise's verdict and the line behind it (the checker's feedback, or the error)."""

    verdict: str
    detail: str = ""


def _text(outputs: list) -> str:
    return "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")


def _errors(outputs: list) -> list[tuple[str, str]]:
    return [(o.get("ename", ""), o.get("evalue", "")) for o in outputs if o.get("output_type") == "error"]


def checker_line(text: str, number: str) -> tuple[str, str] | None:
    """(kind, line) of the last line in ``text`` where exercise ``number``'s checker gives its verdict."""
    found = None
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if match and (match["en_number"] or match["zh_number"]) == number:
            found = (_KIND[match["en"] or match["zh"]], line.strip())
    return found


def verdict_of(test_outputs: list, answer_outputs: list, number: str) -> Verdict:
    """The verdict on exercise ``number`` from the outputs of its test cell and of its answer cell."""
    errors, answer_errors = _errors(test_outputs), _errors(answer_outputs)
    for cell, found in (("answer", answer_errors), ("test", errors)):
        if any(name == TIMEOUT_ERROR for name, _ in found):
            return Verdict("timeout", f"the time limit ran out in the {cell} cell ({TIMEOUT_ERROR})")
    line = checker_line(_text(test_outputs), number)
    if line is not None:
        kind, text = line
        if kind != "correct" or not errors:
            return Verdict(kind, text)
    if errors:
        name, value = errors[0]
        detail = f"{name}: {value}"
        if answer_errors:
            detail += " (the answer cell raised {}: {})".format(*answer_errors[0])
        return Verdict("error", detail)
    return Verdict("error", "the test cell printed no verdict")


def notebook_verdicts(notebook: nbformat.NotebookNode, numbers: list[str]) -> dict[str, Verdict]:
    """number -> :class:`Verdict` for every exercise ``numbers`` of an executed assignment notebook (its cells found
    by their nbgrader ids, ``answer-4_1`` and ``test-4_1``)."""
    outputs: dict[tuple[str, str], list] = {}
    for cell in notebook.cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        match = _ROLE.match(grade_id)
        if match and cell.cell_type == "code":
            outputs[(match["role"], match["key"])] = cell.get("outputs", [])
    found = {}
    for number in numbers:
        key = number.replace(".", "_")
        if ("test", key) not in outputs:
            found[number] = Verdict("missing", "no test cell for this exercise")
        else:
            found[number] = verdict_of(outputs[("test", key)], outputs.get(("answer", key), []), number)
    return found

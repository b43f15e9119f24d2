"""Grade: run every submission with nbgrader's autograde (offline, under a time budget), read each exercise's
verdict from the autograded notebook and the points from nbgrader's gradebook, flag the learner's code, and write
one results table.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from tools.grader import course
from tools.grader.budget import TimeBudget
from tools.grader.flags import submission_flags
from tools.grader.results import Row, number_key, write_csv, write_details
from tools.grader.verdicts import Verdict, notebook_verdicts

RESULTS = "results.csv"
DETAILS = "details.csv"


def exercise_numbers(root: Path, assignment: str) -> list[str]:
    """The exercises of a released assignment, from the teacher's version."""
    source = nbformat.read(root / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    return sorted(source.metadata["transformer_course_grader"]["exercises"], key=number_key)


def autograde(root: Path, assignment: str, timeout: float, teacher_timeout: float, student: str = "*") -> dict:
    """nbgrader's autograde of the submissions of ``assignment`` (every student's by default), the learner cells of
    each notebook limited to ``timeout`` seconds in all. Returns nbgrader's result (success, log, error): a
    submission it could not grade does not stop the others."""
    TimeBudget(timeout, teacher_timeout)  # a ValueError now for a wrong limit, not in the middle of nbgrader
    nbgrader = course.api(root, course.nbgrader_config(root, timeout, teacher_timeout))
    return nbgrader.autograde(assignment, student, force=True, create=True)


def _gradebook(root: Path):  # noqa: ANN202 (nbgrader.api.Gradebook, imported late: it is slow)
    from nbgrader.api import Gradebook

    return Gradebook(f"sqlite:///{(root / 'gradebook.db').resolve()}", course.COURSE_ID)


def points(root: Path, assignment: str, student: str | None = None) -> float:
    """A submission's score in nbgrader's gradebook; the assignment's maximum without ``student``."""
    with _gradebook(root) as gradebook:
        if student is None:
            return float(gradebook.find_assignment(assignment).max_score)
        return float(gradebook.find_submission(assignment, student).score)


def grade(
    root: Path,
    assignments: list[str] | None = None,
    timeout: float = 60.0,
    teacher_timeout: float = 600.0,
    log=print,  # noqa: ANN001 (a callable that takes one line)
) -> tuple[list[Row], list[str]]:
    """Grade every submission of ``assignments`` (all released ones by default) in the course directory ``root``;
    write ``results.csv`` and ``details.csv`` there. Returns the rows and the exercise numbers (the columns)."""
    TimeBudget(timeout, teacher_timeout)  # a ValueError for a wrong limit before anything runs
    released = course.assignments(root)
    if not released:
        raise ValueError(f"nothing is released in {root}: run `python -m tools.grader release` first")
    chosen = assignments or released
    unknown = [a for a in chosen if a not in released]
    if unknown:
        raise ValueError(f"not released in {root}: {', '.join(unknown)}; released: {', '.join(released) or 'none'}")
    rows = {student: Row(student) for student in course.students(root)}
    numbers: list[str] = []
    for assignment in chosen:
        exercises = exercise_numbers(root, assignment)
        numbers += exercises
        student_version = nbformat.read(root / "release" / assignment / f"{assignment}.ipynb", as_version=4)
        most = points(root, assignment)
        if any((root / "submitted" / s / assignment).is_dir() for s in rows):
            log(f"grading {assignment}")
            result = autograde(root, assignment, timeout, teacher_timeout)
            if not result.get("success"):
                log(f"nbgrader reported errors for {assignment}:\n{result.get('log', '')}{result.get('error', '')}")
        for student, row in rows.items():
            row.assignments.update({n: assignment for n in exercises})
            row.max_points += most
            submitted = root / "submitted" / student / assignment / f"{assignment}.ipynb"
            if not submitted.exists():
                row.verdicts.update({n: Verdict("missing", f"no {submitted.name} under submitted/") for n in exercises})
                continue
            autograded = root / "autograded" / student / assignment / f"{assignment}.ipynb"
            if not autograded.exists():
                failed = Verdict("error", "nbgrader could not grade it (its log above)")
                row.verdicts.update({n: failed for n in exercises})
                continue
            graded = nbformat.read(autograded, as_version=4)
            row.verdicts.update(notebook_verdicts(graded, exercises))
            row.points += points(root, assignment, student)
            handed_in = nbformat.read(submitted, as_version=4)
            row.flags += submission_flags(handed_in, student_version, exercises)
    ordered = sorted(rows.values(), key=lambda r: r.student)
    write_csv(ordered, numbers, root / RESULTS)
    write_details(ordered, numbers, root / DETAILS)
    return ordered, numbers

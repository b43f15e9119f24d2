"""Grade: run every submission with nbgrader's autograde (offline, under a time budget), read each exercise's
verdict from the autograded notebook and the points from nbgrader's gradebook, flag the learner's code, and write
one results table.

nbgrader's autograde runs the submissions one after another. With ``jobs`` > 1 the submissions are shared out among
that many worker processes, each running nbgrader's autograde on its share, one submission at a time; they write
to the same gradebook, which waits for a lock (:data:`tools.grader.course.DB_BUSY_SECONDS`) rather than fail.
"""

from __future__ import annotations

import fnmatch
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
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


def check_jobs(jobs: int) -> int:
    """``jobs`` if it is a whole number >= 1; a ValueError naming it otherwise."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"--jobs must be a whole number >= 1, got {jobs!r}")
    return jobs


def submitted(root: Path, assignment: str, student: str = "*") -> list[str]:
    """The students (matching the glob ``student``) with a submission of ``assignment``, sorted."""
    return [
        s
        for s in course.students(root)
        if fnmatch.fnmatchcase(s, student) and (root / "submitted" / s / assignment).is_dir()
    ]


def _merge(results: list[dict]) -> dict:
    """One result (success, log, error) for several of nbgrader's."""
    return {
        "success": all(r.get("success") for r in results),
        "log": "".join(r.get("log") or "" for r in results),
        "error": "".join(r.get("error") or "" for r in results),
    }


def autograde_each(root: Path, assignment: str, timeout: float, teacher_timeout: float, students: list[str]) -> dict:
    """nbgrader's autograde of each of ``students``' submissions, one after another, in this process (what each
    worker of :func:`autograde` runs)."""
    nbgrader = course.api(root, course.nbgrader_config(root, timeout, teacher_timeout))
    return _merge([nbgrader.autograde(assignment, s, force=True, create=True) for s in students])


def autograde(
    root: Path, assignment: str, timeout: float, teacher_timeout: float, student: str = "*", jobs: int = 1
) -> dict:
    """nbgrader's autograde of the submissions of ``assignment`` (of every student matching the glob ``student``),
    the learner cells of each notebook limited to ``timeout`` seconds in all, ``jobs`` submissions at a time.
    Returns nbgrader's result (success, log, error): a submission it could not grade does not stop the others."""
    TimeBudget(timeout, teacher_timeout)  # a ValueError now for a wrong limit, not in the middle of nbgrader
    check_jobs(jobs)
    if jobs == 1:
        nbgrader = course.api(root, course.nbgrader_config(root, timeout, teacher_timeout))
        return nbgrader.autograde(assignment, student, force=True, create=True)
    students = submitted(root, assignment, student)
    shares = [students[k::jobs] for k in range(min(jobs, len(students)))]
    if len(shares) <= 1:
        return autograde_each(root, assignment, timeout, teacher_timeout, students)
    # spawn, not fork: a fresh interpreter per worker, with none of this process's kernels, threads or sockets
    with ProcessPoolExecutor(len(shares), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(autograde_each, root, assignment, timeout, teacher_timeout, s) for s in shares]
        return _merge([future.result() for future in futures])


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
    jobs: int = 1,
) -> tuple[list[Row], list[str]]:
    """Grade every submission of ``assignments`` (all released ones by default) in the course directory ``root``,
    ``jobs`` at a time; write ``results.csv`` and ``details.csv`` there. Returns the rows and the exercise numbers
    (the columns)."""
    TimeBudget(timeout, teacher_timeout)  # a ValueError for a wrong limit before anything runs
    check_jobs(jobs)
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
            log(f"grading {assignment}" + (f", {jobs} submissions at a time" if jobs > 1 else ""))
            result = autograde(root, assignment, timeout, teacher_timeout, jobs=jobs)
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

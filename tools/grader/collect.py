"""Collect: a folder of handed-in notebooks, one per student (``<student>.ipynb``, as an LMS download gives them),
copied into nbgrader's layout, ``submitted/<student>/<assignment>/<assignment>.ipynb``.

Submissions collected by nbgrader itself (``nbgrader collect`` or ``zip_collect``) are in that layout already.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat

STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,99}$")


def student_id(path: Path) -> str:
    """The student of ``<student>.ipynb``. Raises ValueError for a name nbgrader cannot use as a folder."""
    if not STUDENT_ID.match(path.stem):
        raise ValueError(
            f"{path.name}: a submission is named <student>.ipynb, the student id made of letters, digits and "
            f"'_', '.', '@', '-', got {path.stem!r}"
        )
    return path.stem


def collect(folder: Path, root: Path, assignment: str) -> list[str]:
    """Copy every ``<student>.ipynb`` of ``folder`` to the course directory ``root`` as a submission of
    ``assignment`` (replacing an earlier one). Returns the students, sorted."""
    if not (root / "release" / assignment).is_dir():
        raise ValueError(f"assignment {assignment!r} is not released in {root} (run release first)")
    paths = sorted(folder.glob("*.ipynb"))
    if not paths:
        raise ValueError(f"{folder} holds no .ipynb file to collect")
    students = [student_id(path) for path in paths]
    for path in paths:  # every file checked before any is copied
        try:
            nbformat.read(path, as_version=4)
        except Exception as error:  # not JSON, or not a notebook: say which file
            raise ValueError(f"{path} is not a readable notebook: {error}") from error
    for path, student in zip(paths, students):
        target = root / "submitted" / student / assignment
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target / f"{assignment}.ipynb")
    return students

"""The nbgrader course directory the grader works in, and nbgrader's settings for it.

Layout (nbgrader's own): ``source/<assignment>/<assignment>.ipynb`` (the teacher's version, with the solution
regions), ``release/<assignment>/`` (the student version), ``submitted/<student>/<assignment>/``,
``autograded/<student>/<assignment>/``, ``gradebook.db`` (nbgrader's gradebook), ``nbgrader_config.py`` (the same
settings, for the ``nbgrader`` command and its formgrader), and the grader's ``results.csv`` and ``details.csv``.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

from traitlets.config import Config

from tools.grader.budget import budgeted_execute

COURSE_ID = "transformer-course"
CODE_STUB = "raise NotImplementedError"  # what a solution region becomes in the student version, as in the course
CONFIG_FILE = "nbgrader_config.py"
# how long a process waits for the gradebook (SQLite) while another writes to it, as with `grade --jobs`
DB_BUSY_SECONDS = 120


def nbgrader_config(root: Path, learner_timeout: float | None = None, teacher_timeout: float = 600.0) -> Config:
    """nbgrader's settings for the course directory ``root``; with ``learner_timeout``, autograde runs each notebook
    under a :class:`~tools.grader.budget.TimeBudget`."""
    config = Config()
    config.CourseDirectory.root = str(root.resolve())
    config.CourseDirectory.course_id = COURSE_ID
    config.CourseDirectory.db_url = f"sqlite:///{(root / 'gradebook.db').resolve()}?timeout={DB_BUSY_SECONDS}"
    config.ClearSolutions.code_stub = {"python": CODE_STUB}
    config.OverwriteCells.add_missing_cells = True  # a deleted test cell comes back, and is graded
    config.Execute.interrupt_on_timeout = True  # a cell stopped at its limit; the next cells still run
    if learner_timeout is not None:
        from nbgrader.converters import Autograde

        execute = budgeted_execute()
        config.BudgetedExecute.learner_timeout = float(learner_timeout)
        config.BudgetedExecute.teacher_timeout = float(teacher_timeout)
        steps = Autograde.class_traits()["autograde_preprocessors"].default()
        config.Autograde.autograde_preprocessors = [execute if s.__name__ == "Execute" else s for s in steps]
    config.NbGraderAPI.log_level = logging.WARNING
    return config


def write_config_file(root: Path) -> Path:
    """``nbgrader_config.py`` with the same settings, for the ``nbgrader`` command run in ``root``."""
    path = root / CONFIG_FILE
    path.write_text(
        "# nbgrader's settings for this course directory, written by `python -m tools.grader release`.\n"
        "c = get_config()  # noqa: F821\n"
        f'c.CourseDirectory.course_id = "{COURSE_ID}"\n'
        f'c.ClearSolutions.code_stub = {{"python": "{CODE_STUB}"}}\n'
        "c.OverwriteCells.add_missing_cells = True\n"
        "c.Execute.interrupt_on_timeout = True\n"
        "# seconds per cell for `nbgrader autograde`; `python -m tools.grader grade --timeout` limits each notebook\n"
        "c.Execute.timeout = 120\n",
        encoding="utf-8",
    )
    return path


def api(root: Path, config: Config):  # noqa: ANN201 (nbgrader.apps.NbGraderAPI, imported late: it is slow)
    """nbgrader's Python API on the course directory ``root``."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    logging.getLogger("traitlets").setLevel(logging.ERROR)
    # nbgrader's gradebook triggers SQLAlchemy's "not in session" warning on every submission; it changes nothing
    warnings.filterwarnings("ignore", message=r"Object of type <\w+> not in session")
    # nbgrader runs `alembic`, installed beside this Python, for its database
    scripts = str(Path(sys.executable).parent)
    if scripts not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")
    return NbGraderAPI(CourseDirectory(config=config), config=config)


def run(step: Callable[[], dict], what: str) -> str:
    """Run one nbgrader API call; its log on success, a RuntimeError with nbgrader's error otherwise."""
    result = step()
    if not result.get("success"):
        raise RuntimeError(f"nbgrader could not {what}:\n{result.get('error', '')}\n{result.get('log', '')}")
    return result.get("log", "")


def assignments(root: Path) -> list[str]:
    """The assignments released in the course directory (those with a teacher's version under ``source/``)."""
    return sorted(p.name for p in (root / "source").glob("*") if (p / f"{p.name}.ipynb").exists())


def students(root: Path) -> list[str]:
    """The students with a folder under ``submitted/``."""
    return sorted(p.name for p in (root / "submitted").glob("*") if p.is_dir())

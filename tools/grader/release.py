"""Release: the teacher's and the students' versions of chosen course notebooks' exercises, pinned to a git ref.

For each notebook: :func:`tools.grader.assignment.build_source` writes ``source/<assignment>/<assignment>.ipynb``;
the release check runs it (offline, in a scratch folder) and requires every exercise with a reference solution to
come out correct and every other one unanswered, which proves that the cells kept are all the exercises need; then
``nbgrader generate_assignment`` writes the student version to ``release/<assignment>/`` and records its cells in
the gradebook.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from tools.course_notebooks import notebook_paths, repository_url
from tools.grader import course
from tools.grader.assignment import Plan, build_source
from tools.grader.pinning import check_ref, check_repo_url, fork_note, ref_is_local_tag
from tools.grader.verdicts import notebook_verdicts


@dataclass(frozen=True)
class Released:
    """One released assignment: what it holds, what the check found, how long the check ran."""

    plan: Plan
    verdicts: dict[str, str]  # number -> verdict of the teacher's version (empty without the check)
    seconds: float


def expected_verdicts(plan: Plan) -> dict[str, str]:
    """What the teacher's version must give: correct where the source holds a reference solution."""
    return {e.number: "correct" if e.checker.reference else "unanswered" for e in plan.exercises}


def check_source(notebook: nbformat.NotebookNode, plan: Plan, timeout: int) -> dict[str, str]:
    """Run the teacher's version in a scratch folder and return each exercise's verdict. Raises RuntimeError if one
    differs from :func:`expected_verdicts`."""
    with tempfile.TemporaryDirectory(prefix="grader-check-") as scratch:
        client = NotebookClient(
            nbformat.from_dict(notebook),
            timeout=timeout,
            kernel_name="python3",
            allow_errors=True,
            resources={"metadata": {"path": scratch}},
        )
        executed = client.execute()
    numbers = [e.number for e in plan.exercises]
    found = notebook_verdicts(executed, numbers)
    expected = expected_verdicts(plan)
    wrong = {n: v for n, v in found.items() if v.verdict != expected[n]}
    if wrong:
        lines = [f"  {n}: {v.verdict} ({v.detail}), expected {expected[n]}" for n, v in wrong.items()]
        raise RuntimeError(f"the teacher's version of {plan.assignment} does not run as expected:\n" + "\n".join(lines))
    return {n: v.verdict for n, v in found.items()}


def release(
    names: list[str],
    ref: str,
    root: Path,
    points: float = 1.0,
    check: bool = True,
    timeout: int = 900,
    language: str = "en",
    repo_url: str | None = None,
) -> list[Released]:
    """Release the exercises of the course notebooks ``names`` ("04", "06_masks") into the course directory
    ``root``, pinned to the git ref ``ref`` of ``repo_url`` (pyproject.toml's repository by default, or a fork), in
    ``language`` ("en", or "zh" for the Chinese edition)."""
    check_ref(ref)
    if repo_url is not None:
        check_repo_url(repo_url)
    if points <= 0:
        raise ValueError(f"--points must be a number > 0, got {points!r}")
    root.mkdir(parents=True, exist_ok=True)
    course.write_config_file(root)
    nbgrader = course.api(root, course.nbgrader_config(root))
    done = []
    for path in notebook_paths(names):
        notebook, plan = build_source(path, ref, points, language, repo_url)
        start = time.monotonic()
        verdicts = check_source(notebook, plan, timeout) if check else {}
        seconds = time.monotonic() - start
        folder = root / "source" / plan.assignment
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        nbformat.write(notebook, folder / f"{plan.assignment}.ipynb")
        course.run(lambda a=plan.assignment: nbgrader.generate_assignment(a, force=True, create=True), "release")
        done.append(Released(plan, verdicts, seconds))
    return done


def tag_notes(ref: str, repo_url: str) -> list[str]:
    """What to check about the tag and the repository before students open pinned notebooks, for the terminal."""
    lines = [f"pinned to {ref} of {repo_url}"]
    if not ref_is_local_tag(ref):
        lines.append(
            f"note: this clone has no tag {ref!r}; create it and push it to {repo_url} (git tag {ref} && "
            f"git push origin {ref}) before the students open the notebooks, or Colab cannot install the course"
        )
    note = fork_note(repo_url)
    if note:
        lines.append(note)
    return lines


def report(done: list[Released], ref: str, root: Path, repo_url: str | None = None) -> str:
    """What a release wrote, for the terminal."""
    lines = tag_notes(ref, repo_url or repository_url())
    for item in done:
        plan = item.plan
        context = ", ".join(str(i) for i in plan.context) or "none"
        exercises = ", ".join(
            f"{e.number} ({item.verdicts[e.number]})" if item.verdicts else e.number for e in plan.exercises
        )
        checked = f"; checked in {item.seconds:.0f} s" if item.verdicts else "; not checked (--no-check)"
        lines.append(f"{plan.assignment}: exercises {exercises}; course cells kept besides setup: {context}{checked}")
        lines.append(f"  student version: {root / 'release' / plan.assignment}")
    return "\n".join(lines)

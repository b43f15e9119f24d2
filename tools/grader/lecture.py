"""Pin the lecture notebooks: a copy of the course notebooks (English, Chinese or both) whose Colab badges and setup
cells name one git tag, so that the course a class opens cannot change during the term.

The copy mirrors ``notebooks/``: ``<out>/NN_name.ipynb`` and ``<out>/zh/NN_name.ipynb``. Each notebook is the
course's own with two changes: its setup cell installs the course at the tag on Colab
(:func:`~tools.grader.pinning.pin_setup_cell`), and its badge opens the copy itself at the tag, ``<out>`` being a
folder of the repository: so the copy is committed in the clone and the tag is created on that commit. A copy
written outside the clone has no badge (no page on GitHub holds it): students open the file itself. Every other cell,
the outputs and the metadata are kept as they are.
"""

from __future__ import annotations

import copy
import subprocess
from dataclasses import dataclass
from pathlib import Path

import nbformat

from tools.course_notebooks import NOTEBOOKS, ROOT, notebook_paths
from tools.grader.pinning import check_ref, check_repo_url, pin_badge, pin_setup_cell, pinned_badge, ref_is_local_tag

LANGUAGES = ("en", "zh")


@dataclass(frozen=True)
class PinnedCopy:
    """What :func:`pin_course` wrote."""

    written: tuple[Path, ...]
    folder: str | None  # the copy's folder in the repository, which the badges open; None outside the clone


def copy_folder(out: Path) -> str | None:
    """``out`` as a folder of this clone's repository ("class"); None if it is outside the clone. Raises ValueError
    for the clone's root or the course's own notebooks, which a copy must not overwrite."""
    resolved = out.resolve()
    if resolved == NOTEBOOKS.resolve() or NOTEBOOKS.resolve() in resolved.parents:
        raise ValueError(f"--out {out} would overwrite the course's notebooks: name another folder, e.g. class")
    try:
        relative = resolved.relative_to(ROOT.resolve())
    except ValueError:
        return None
    if relative == Path("."):
        raise ValueError(f"--out {out} is the root of the clone: name a folder in it, e.g. class")
    return relative.as_posix()


def pin_notebook(
    notebook: nbformat.NotebookNode,
    notebook_name: str,
    ref: str,
    repo_url: str | None = None,
    folder: str | None = "notebooks",
    language: str = "en",
) -> nbformat.NotebookNode:
    """A copy of a course notebook whose setup cell installs the course at ``ref`` of ``repo_url`` on Colab and
    whose badge opens ``<folder>/<notebook_name>`` (``<folder>/zh/...`` in Chinese) at ``ref``; no badge if
    ``folder`` is None. Raises ValueError if the notebook has no badge in its first cell or no setup block."""
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    pinned = copy.deepcopy(notebook)
    where = notebook_name if language == "en" else f"{language}/{notebook_name}"
    first = pinned.cells[0]
    badge = pinned_badge(where, ref, repo_url, folder) if folder else ""
    first.source = pin_badge(first.source, badge, where)
    setup = next((cell for cell in pinned.cells if cell.cell_type == "code"), None)
    if setup is None:
        raise ValueError(f"{where}: no code cell, so no setup cell to pin")
    setup.source = pin_setup_cell(setup.source, notebook_name, ref, repo_url)
    return pinned


def pin_course(
    ref: str,
    out: Path,
    languages: tuple[str, ...] = LANGUAGES,
    names: list[str] | None = None,
    repo_url: str | None = None,
) -> PinnedCopy:
    """Write the pinned copy of the course notebooks ``names`` (all by default) in ``languages`` to ``out``."""
    check_ref(ref)
    if repo_url is not None:
        check_repo_url(repo_url)
    wrong = [language for language in languages if language not in LANGUAGES]
    if wrong or not languages:
        raise ValueError(f"languages must be some of {LANGUAGES}, got {list(languages)!r}")
    folder = copy_folder(out)
    paths = notebook_paths(names)
    pinned = []  # every notebook pinned before any is written, so a failure writes nothing
    for language in languages:
        for path in paths:
            source = path if language == "en" else path.parent / language / path.name
            notebook = nbformat.read(source, as_version=4)
            target = out / path.name if language == "en" else out / language / path.name
            pinned.append((target, pin_notebook(notebook, path.name, ref, repo_url, folder, language)))
    for target, notebook in pinned:
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, target)
    return PinnedCopy(tuple(target for target, _ in pinned), folder)


def tag_holds(ref: str, relative: str) -> bool:
    """True if this clone's tag ``ref`` holds the file ``relative`` (a path in the repository)."""
    result = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"refs/tags/{ref}:{relative}"], capture_output=True, check=False
    )
    return result.returncode == 0


def report(done: PinnedCopy, ref: str, out: Path) -> str:
    """What :func:`pin_course` wrote and what is left to do, for the terminal."""
    lines = [f"wrote {len(done.written)} notebooks to {out}, pinned to {ref}"]
    if done.folder is None:
        lines.append(
            "no Colab badge: a copy outside the clone is on no GitHub page; students open the files themselves "
            "(in Jupyter, on a hub, or uploaded to Colab), whose setup cells install the course at the tag on Colab"
        )
        return "\n".join(lines)
    first = f"{done.folder}/{done.written[0].relative_to(out).as_posix()}"
    if not ref_is_local_tag(ref):
        lines.append(
            f"the badges open {done.folder}/ at {ref}: commit the copy, then create the tag on that commit and push "
            f"both (git add {done.folder} && git commit -m 'Class copy at {ref}' && git tag {ref} && "
            f"git push origin HEAD {ref})"
        )
    elif not tag_holds(ref, first):
        lines.append(
            f"warning: the tag {ref} exists and does not hold {first}, so the badges open nothing: pin again with a "
            f"new tag name (e.g. --ref {ref}-class), commit the copy, and create that tag on the commit"
        )
    return "\n".join(lines)

"""Pin an assignment to one version of the course: its Colab badge and its setup cell name a git ref (a tag such
as ``v2026.12``) instead of the moving ``main`` branch, so that the course cannot change under a class mid-term.

Both start from what every course notebook has (:func:`tools.course_notebooks.colab_setup_block` and
:func:`~tools.course_notebooks.colab_badge`) and change only the ref.
"""

from __future__ import annotations

import re
import subprocess

from tools.course_notebooks import ROOT, colab_badge, colab_setup_block

# a git ref name that is safe in a URL and inside the setup cell's f-string: letters, digits, ". _ / -", no "..",
# not starting with "-", "/" or ".", not ending with "/", "." or ".lock" (git check-ref-format's rules, narrowed)
_REF = re.compile(r"^(?!.*\.\.)(?!.*//)(?!.*\.lock$)[A-Za-z0-9][A-Za-z0-9._/-]{0,99}(?<![./])$")


def check_ref(ref: str) -> str:
    """``ref`` if it is a usable git ref name (such as "v2026.12"); a ValueError naming it otherwise."""
    if not isinstance(ref, str) or not _REF.match(ref):
        raise ValueError(
            f"--ref must be a git tag or branch name such as 'v2026.12' (letters, digits, '.', '_', '/', '-'), "
            f"got {ref!r}"
        )
    if ref == "main":
        raise ValueError("--ref main is the moving branch the release is meant to avoid: name a tag, e.g. v2026.12")
    return ref


def ref_is_local_tag(ref: str) -> bool:
    """True if this clone of the course has the tag ``ref`` (a release may name a tag pushed later)."""
    result = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"refs/tags/{ref}"],
        capture_output=True,
        check=False,
    )
    return result.returncode == 0


def _replace_once(text: str, old: str, new: str, what: str) -> str:
    count = text.count(old)
    if count != 1:
        raise ValueError(f"{what}: expected {old!r} once, found it {count} times")
    return text.replace(old, new)


def pinned_setup_block(notebook_name: str, ref: str) -> str:
    """The course's setup lines for ``notebook_name``, installing the course at ``ref`` on Colab."""
    check_ref(ref)
    block = colab_setup_block(notebook_name)
    block = _replace_once(block, 'git+{REPO_URL}"', f'git+{{REPO_URL}}@{ref}"', "the setup block's package line")
    return block.replace("installs the course package", f"installs the course package at {ref}", 1)


def pinned_badge(notebook_name: str, ref: str) -> str:
    """The "Open in Colab" badge of ``notebook_name`` at ``ref`` instead of main."""
    check_ref(ref)
    return _replace_once(colab_badge(notebook_name), "/blob/main/", f"/blob/{ref}/", "the Colab badge")


def pin_setup_cell(source: str, notebook_name: str, ref: str) -> str:
    """A course notebook's setup cell with its Colab install pinned to ``ref``. Raises ValueError if the cell does
    not start with the course's setup block."""
    block = colab_setup_block(notebook_name)
    if not source.startswith(block):
        raise ValueError(f"{notebook_name}: the first code cell does not start with the course's setup block")
    return pinned_setup_block(notebook_name, ref) + source[len(block) :]

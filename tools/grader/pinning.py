"""Pin a notebook to one version of the course: its Colab badge and its setup cell name a git ref (a tag such as
``v2026.12``) instead of the moving ``main`` branch, and optionally another repository (the teacher's fork), so that
the course cannot change under a class mid-term.

Both come from what every course notebook has (:func:`tools.course_notebooks.colab_setup_block` and
:func:`~tools.course_notebooks.colab_badge`), given the ref and the repository. A setup cell is recognised whatever
repository and ref it already names, so a clone whose pyproject.toml names a fork, or notebooks pinned once already,
can be pinned again.
"""

from __future__ import annotations

import re
import subprocess

from tools.course_notebooks import ROOT, SETUP_LANGUAGES, colab_badge, colab_setup_block, repository_url

# a git ref name that is safe in a URL and inside the setup cell's f-string: letters, digits, ". _ / -", no "..",
# not starting with "-", "/" or ".", not ending with "/", "." or ".lock" (git check-ref-format's rules, narrowed)
_REF = re.compile(r"^(?!.*\.\.)(?!.*//)(?!.*\.lock$)[A-Za-z0-9][A-Za-z0-9._/-]{0,99}(?<![./])$")
# a GitHub repository (Colab opens notebooks from GitHub only): https://github.com/<owner>/<name>
_GITHUB = re.compile(r"^https://github\.com/[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
# the remote URLs git accepts for a GitHub repository: https (with or without a user), ssh, scp-like
_REMOTE = re.compile(
    r"^(?:https://(?:[^@/]+@)?github\.com/|ssh://git@github\.com/|git@github\.com:)"
    r"(?P<path>[^/\s]+/[^/\s]+?)(?:\.git)?/?$"
)
_SETUP_URL = re.compile(r'^REPO_URL = "([^"\n]*)"$', re.MULTILINE)
_SETUP_REF = re.compile(r'git\+\{REPO_URL\}(?:@([^"\n]*))?"')
BADGE = re.compile(
    r"\[!\[Open In Colab\]\(https://colab\.research\.google\.com/assets/colab-badge\.svg\)\]"
    r"\(https://colab\.research\.google\.com/github/[^)\s]+\)"
)


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


def check_repo_url(url: str) -> str:
    """``url`` if it names a GitHub repository as https://github.com/<owner>/<name>; a ValueError otherwise."""
    if not isinstance(url, str) or not _GITHUB.match(url) or url.endswith(".git"):
        raise ValueError(
            "--repo must be a GitHub repository as https://github.com/<owner>/<name> (Colab opens notebooks from "
            f"GitHub only), or 'origin' for this clone's origin remote, got {url!r}"
        )
    return url


def github_url(remote: str) -> str:
    """The https://github.com/<owner>/<name> of a git remote URL (https, ssh or git@github.com:...). Raises
    ValueError, without the remote's user or token, if it is not a GitHub repository."""
    match = _REMOTE.match(remote.strip())
    if match is None:
        shown = re.sub(r"//[^@/]+@", "//", remote.strip())  # a token in an https remote is not printed
        raise ValueError(
            f"the remote {shown!r} is not a GitHub repository: give --repo https://github.com/<owner>/<name>"
        )
    return check_repo_url(f"https://github.com/{match['path']}")


def origin_url() -> str | None:
    """This clone's ``origin`` remote as https://github.com/<owner>/<name>; None if it has none."""
    result = subprocess.run(
        ["git", "-C", str(ROOT), "remote", "get-url", "origin"], capture_output=True, text=True, check=False
    )
    return github_url(result.stdout) if result.returncode == 0 and result.stdout.strip() else None


def resolve_repo(repo: str | None) -> str:
    """The repository a pinned notebook installs from: pyproject.toml's by default, this clone's ``origin`` for
    "origin", or a GitHub URL."""
    if repo is None:
        return repository_url()
    if repo == "origin":
        url = origin_url()
        if url is None:
            raise ValueError(
                "--repo origin: this clone has no origin remote; give --repo https://github.com/<owner>/<name>"
            )
        return url
    return check_repo_url(repo.removesuffix("/").removesuffix(".git"))


def fork_note(repo: str) -> str | None:
    """A line for the terminal if this clone's origin is a GitHub repository other than ``repo``."""
    try:
        origin = origin_url()
    except ValueError:
        return None
    if origin is None or origin.lower() == repo.lower():
        return None
    return f"note: the notebooks install from {repo}; this clone's origin is {origin} (give --repo origin to use it)"


def ref_is_local_tag(ref: str) -> bool:
    """True if this clone of the course has the tag ``ref`` (a release may name a tag pushed later)."""
    result = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"refs/tags/{ref}"],
        capture_output=True,
        check=False,
    )
    return result.returncode == 0


def pinned_setup_block(notebook_name: str, ref: str, repo_url: str | None = None, language: str = "en") -> str:
    """The course's setup lines for ``notebook_name`` (with comments in ``language``), installing the course at
    ``ref`` on Colab, from ``repo_url`` (pyproject.toml's repository by default)."""
    check_ref(ref)
    url = None if repo_url is None else check_repo_url(repo_url)
    return colab_setup_block(notebook_name, ref=ref, repo_url=url, language=language)


def pinned_badge(notebook_name: str, ref: str, repo_url: str | None = None, folder: str = "notebooks") -> str:
    """The "Open in Colab" badge of ``notebook_name`` (in ``folder`` of the repository) at ``ref`` instead of main."""
    check_ref(ref)
    url = None if repo_url is None else check_repo_url(repo_url)
    return colab_badge(notebook_name, ref=ref, repo_url=url, folder=folder)


def course_setup_block(source: str, notebook_name: str) -> tuple[str, str]:
    """The course's setup block that a setup cell starts with, whatever repository and ref it names, and the
    language of its comments ("en" or "zh"). Raises ValueError if the cell does not start with one."""
    url, ref = _SETUP_URL.search(source), _SETUP_REF.search(source)
    if url and ref:
        for language in SETUP_LANGUAGES:
            try:
                block = colab_setup_block(notebook_name, ref=ref.group(1), repo_url=url.group(1), language=language)
            except ValueError:
                continue
            if source.startswith(block):
                return block, language
    raise ValueError(f"{notebook_name}: the first code cell does not start with the course's setup block")


def pin_setup_cell(source: str, notebook_name: str, ref: str, repo_url: str | None = None) -> str:
    """A course notebook's setup cell with its Colab install pinned to ``ref`` of ``repo_url`` (pyproject.toml's
    repository by default). Raises ValueError if the cell does not start with the course's setup block."""
    block, language = course_setup_block(source, notebook_name)
    return pinned_setup_block(notebook_name, ref, repo_url, language) + source[len(block) :]


def pin_badge(markdown: str, badge: str, where: str) -> str:
    """``markdown`` with its one "Open in Colab" badge replaced by ``badge`` (or removed, with the blank line after
    it, for an empty ``badge``). Raises ValueError naming ``where`` if it has no badge or several."""
    found = BADGE.findall(markdown)
    if len(found) != 1:
        raise ValueError(f"{where}: expected one Open in Colab badge in the first cell, found {len(found)}")
    if badge:
        return BADGE.sub(lambda _: badge, markdown)
    return re.sub(BADGE.pattern + r"[ \t]*\n?(?:[ \t]*\n)?", "", markdown, count=1)

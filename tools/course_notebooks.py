"""Facts every notebook of the course shares: where they live, the repository URL, the Colab setup block.

The repository URL is defined once, in pyproject.toml ([project.urls] Repository); the notebooks' setup cells
and Colab badges are checked against it by tests/test_notebook_conventions.py.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
NOTEBOOK_NAME = re.compile(r"^(\d\d)_[a-z0-9_]+\.ipynb$")


def repository_url() -> str:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    match = re.search(r'^Repository\s*=\s*"([^"]+)"', text, flags=re.MULTILINE)
    if match is None:
        raise RuntimeError("pyproject.toml has no [project.urls] Repository line")
    return match.group(1)


# The notebooks that need an optional extra of the package on Colab (pyproject.toml, [project.optional-dependencies]).
EXTRAS = {"14": "pretrained"}


# What a git ref or a repository URL may hold where the setup cell writes it inside a Python string: no quote, brace,
# backslash or white space (tools/grader/pinning.py checks each fully, with a message naming the wrong value).
_UNSAFE = re.compile(r"[\s\"'{}\\]")


def _safe(value: str, what: str) -> str:
    if not isinstance(value, str) or not value or _UNSAFE.search(value):
        raise ValueError(f"{what} cannot hold quotes, braces, backslashes or spaces, got {value!r}")
    return value


SETUP_LANGUAGES = ("en", "zh")


def colab_setup_block(
    notebook_name: str | None = None, ref: str | None = None, repo_url: str | None = None, language: str = "en"
) -> str:
    """The lines every notebook's first code cell starts with: install the package on Colab, a no-op elsewhere;
    then stop with one sentence if that install replaced a library the session had already imported.

    ``notebook_name`` ("14_pretrained_encoder.ipynb") picks the extra that notebook installs (:data:`EXTRAS`).
    ``ref`` (a git tag such as "v2026.12") makes Colab install the course at that ref instead of the default branch,
    and ``repo_url`` from another repository (a fork) than pyproject.toml's; the notebooks use neither.
    ``language`` "zh" gives the same code with its comments in Chinese (the Chinese edition's)."""
    if language not in SETUP_LANGUAGES:
        raise ValueError(f"language must be one of {SETUP_LANGUAGES}, got {language!r}")
    extra = EXTRAS.get((notebook_name or "")[:2])
    safe_ref = _safe(ref, "ref") if ref is not None else None
    pin = f"@{ref}" if ref is not None else ""
    url = _safe(repo_url, "repo_url") if repo_url is not None else repository_url()
    if language == "zh":
        at = f"的 {safe_ref} 版本" if safe_ref else ""
        with_extra = f"及其 [{extra}] 附加依赖" if extra else ""
        first = f"# 准备工作：在 Colab 上先安装课程包{at}{with_extra}；在其他环境中只做导入。\n"
        # the language is set before the first message the reader could see: the restart check's own sentence
        stop = (
            "from transformer_course.language import set_language\n"
            "\n"
            'set_language("zh")  # 从这里起，练习检查器、结论检查、提示信息和图中的文字都用中文\n'
            "stop_if_restart_needed()  # 如果 pip 替换了本会话已导入的库，就在这里停下，并说明该怎么做\n"
        )
    else:
        at = f" at {safe_ref}" if safe_ref else ""
        if extra:
            first = (
                f"# Setup. On Colab this installs the course package{at} with its [{extra}] extra first; elsewhere it "
                "only imports.\n"
            )
        else:
            first = f"# Setup. On Colab this installs the course package{at} first; elsewhere it only imports.\n"
        stop = (
            "stop_if_restart_needed()  # stops, saying what to do, if pip replaced a library this session had "
            "imported\n"
        )
    if extra:
        package = f'    package = f"transformer-course[{extra}] @ git+{{REPO_URL}}{pin}"\n'
    else:
        package = f'    package = f"git+{{REPO_URL}}{pin}"\n'
    return (
        first + "import sys\n"
        "\n"
        f'REPO_URL = "{url}"\n'
        'if "google.colab" in sys.modules:\n'
        "    import subprocess\n"
        "\n" + package + '    subprocess.run([sys.executable, "-m", "pip", "install", "-q", package], check=True)\n'
        "\n"
        "from transformer_course.environment import stop_if_restart_needed\n"
        + ("" if language == "zh" else "\n")
        + stop
    )


def colab_badge(notebook_name: str, ref: str = "main", repo_url: str | None = None, folder: str = "notebooks") -> str:
    """The Markdown of the "Open in Colab" badge for one notebook (``notebook_name`` may be "zh/04_....ipynb").

    By default it opens ``notebooks/<notebook_name>`` on the main branch of pyproject.toml's repository; ``ref``,
    ``repo_url`` and ``folder`` (a path in the repository) open another version, repository or copy."""
    url = _safe(repo_url, "repo_url") if repo_url is not None else repository_url()
    path = url.removeprefix("https://github.com/")
    where = f"{_safe(ref, 'ref')}/{_safe(folder, 'folder').strip('/')}"
    link = f"https://colab.research.google.com/github/{path}/blob/{where}/{notebook_name}"
    return f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({link})"


def notebook_paths(names: list[str] | None = None) -> list[Path]:
    """The course notebooks in order; ``names`` picks some by number ("03") or file name."""
    paths = sorted(p for p in NOTEBOOKS.glob("*.ipynb") if NOTEBOOK_NAME.match(p.name))
    if not names:
        return paths
    chosen = []
    for name in names:
        matches = [p for p in paths if p.name == name or p.name.startswith(f"{name}_") or p.stem == name]
        if not matches:
            raise SystemExit(f"no notebook matches {name!r}; have: {', '.join(p.name for p in paths)}")
        chosen.extend(matches)
    return chosen

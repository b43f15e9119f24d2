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


def colab_setup_block(notebook_name: str | None = None) -> str:
    """The lines every notebook's first code cell starts with: install the package on Colab, a no-op elsewhere;
    then stop with one sentence if that install replaced a library the session had already imported.

    ``notebook_name`` ("14_pretrained_encoder.ipynb") picks the extra that notebook installs (:data:`EXTRAS`)."""
    extra = EXTRAS.get((notebook_name or "")[:2])
    if extra:
        first = (
            f"# Setup. On Colab this installs the course package with its [{extra}] extra first; elsewhere it only "
            "imports.\n"
        )
        package = f'    package = f"transformer-course[{extra}] @ git+{{REPO_URL}}"\n'
    else:
        first = "# Setup. On Colab this installs the course package first; elsewhere it only imports.\n"
        package = '    package = f"git+{REPO_URL}"\n'
    return (
        first + "import sys\n"
        "\n"
        f'REPO_URL = "{repository_url()}"\n'
        'if "google.colab" in sys.modules:\n'
        "    import subprocess\n"
        "\n" + package + '    subprocess.run([sys.executable, "-m", "pip", "install", "-q", package], check=True)\n'
        "\n"
        "from transformer_course.environment import stop_if_restart_needed\n"
        "\n"
        "stop_if_restart_needed()  # stops, saying what to do, if pip replaced a library this session had imported\n"
    )


def colab_badge(notebook_name: str) -> str:
    """The Markdown of the "Open in Colab" badge for one notebook."""
    path = repository_url().removeprefix("https://github.com/")
    link = f"https://colab.research.google.com/github/{path}/blob/main/notebooks/{notebook_name}"
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

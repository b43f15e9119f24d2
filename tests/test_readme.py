"""The README's promises hold: its figures exist and come from the figure command, its links resolve."""

from __future__ import annotations

import re
from pathlib import Path

from tools.course_notebooks import notebook_paths
from tools.make_figures import FIGURES

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_figure_and_local_link_exists():
    for target in re.findall(r"\]\(((?:figures|notebooks|docs)/[^)#]+)\)", README):
        assert (ROOT / target).exists(), f"README links to {target}, which does not exist"


def test_the_gallery_shows_every_generated_figure():
    for name in FIGURES:
        assert f"figures/{name}.png" in README, f"figures/{name}.png is generated but not shown in the README"


def test_every_notebook_is_listed():
    for path in notebook_paths():
        assert f"(notebooks/{path.name})" in README, f"{path.name} is missing from the README's notebook list"


def test_the_test_command_is_marked_for_ci():
    block = README.split("<!-- test-command -->")[1].split("<!-- /test-command -->")[0]
    assert "pytest" in block and "pip install" in block

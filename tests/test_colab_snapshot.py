"""The package installs on Colab without replacing what Colab has loaded.

environments/colab.txt holds the lines of Colab's published package list that matter to the course (dated and
sourced in its header). Every range the package declares (pyproject.toml's dependencies and extras, and
requirements.txt) must accept the version listed there, so that ``pip install`` in a notebook's setup cell upgrades
nothing Colab has already imported. CI's second notebook pass runs in an environment built from the same file.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tools.colab_environment import snapshot_versions

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "environments" / "colab.txt"

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    tomllib = pytest.importorskip("tomli")


def snapshot() -> dict[str, Version]:
    """environments/colab.txt, parsed by the same function CI's check uses."""
    return {canonicalize_name(name): Version(v) for name, v in snapshot_versions().items()}


def declared_requirements() -> list[tuple[str, Requirement]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    found = [("pyproject.toml dependencies", Requirement(r)) for r in project["dependencies"]]
    for extra, requirements in project.get("optional-dependencies", {}).items():
        found += [(f"pyproject.toml [{extra}]", Requirement(r)) for r in requirements]
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            found.append(("requirements.txt", Requirement(line)))
    return found


def test_the_snapshot_is_dated_and_sourced():
    header = SNAPSHOT.read_text(encoding="utf-8")
    assert re.search(r"googlecolab/backend-info", header)
    assert re.search(r"commit [0-9a-f]{12}", header)
    assert re.search(r"\b20\d\d-\d\d-\d\d\b", header)
    versions = snapshot()
    for name in ("torch", "numpy", "ipywidgets", "pandas", "tokenizers", "ipykernel"):
        assert name in versions, f"environments/colab.txt must list {name}"


@pytest.mark.parametrize("where, requirement", declared_requirements(), ids=lambda x: str(x))
def test_every_range_accepts_what_colab_has(where, requirement):
    versions = snapshot()
    name = canonicalize_name(requirement.name)
    if name not in versions:
        pytest.skip(f"{requirement.name} is not in Colab's list: installing it replaces nothing")
    assert requirement.specifier.contains(versions[name], prereleases=True), (
        f"{where}: {requirement} would replace Colab's {requirement.name} {versions[name]}"
    )


def test_python_range_accepts_colab():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    from packaging.specifiers import SpecifierSet

    assert SpecifierSet(project["requires-python"]).contains("3.13.15")


def test_widget_range_leaves_out_the_release_vs_code_cannot_show():
    ranges = [r for _, r in declared_requirements() if canonicalize_name(r.name) == "ipywidgets"]
    assert ranges
    for requirement in ranges:
        assert not requirement.specifier.contains("8.1.9"), "ipywidgets 8.1.9 renders nothing in VS Code"
        assert requirement.specifier.contains("7.7.1") and requirement.specifier.contains("8.1.8")


def test_the_pretrained_weights_are_an_extra_not_a_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert not any("minilm" in r for r in project["dependencies"])
    assert any("minilm" in r for r in project["optional-dependencies"]["pretrained"])


def test_the_ci_check_names_a_replaced_package():
    from tools.colab_environment import replaced

    expected = snapshot_versions("# a comment\nipywidgets==7.7.1\ntorch==2.11.0\nnumpy==2.1.3\n")
    assert expected == {"ipywidgets": "7.7.1", "torch": "2.11.0", "numpy": "2.1.3"}
    same = {"ipywidgets": "7.7.1", "torch": "2.11.0+cpu", "numpy": "2.1.3", "other": "1.0"}
    assert replaced(expected, same) == []  # a local build tag is the same release
    upgraded = dict(same, ipywidgets="8.1.8")
    assert replaced(expected, upgraded) == ["ipywidgets: Colab has 7.7.1, the environment now has 8.1.8"]
    assert replaced(expected, {"torch": "2.11.0", "numpy": "2.1.3"}) == ["ipywidgets: listed as 7.7.1, not installed"]
    with pytest.raises(ValueError, match="expected name==version"):
        snapshot_versions("ipywidgets>=7\n")

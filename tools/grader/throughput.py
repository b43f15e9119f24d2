"""How long grading takes: notebook 04 released, a class of synthetic right submissions collected, and graded once
per ``--jobs`` value; the seconds go to ``tools/grader/throughput.json``, which docs/grading.md quotes
(tests/test_grader.py checks that both editions of the page say what the file holds).

python -m tools.grader.throughput [--students 20] [--jobs 1 2] [--write]

The submissions are the right answers of tests/test_grader.py (:data:`RIGHT`): a notebook that runs to the end
without an error and within its time limit, as most of a class's will. A submission that runs out of time costs up
to ``--timeout`` seconds more, which this measurement leaves out.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import resource
import tempfile
import time
from pathlib import Path

import nbformat

from tools.course_notebooks import notebook_paths

RESULTS = Path(__file__).with_name("throughput.json")
NOTEBOOK = "04"
# right answers to notebook 04's three exercises, by nbgrader cell id
RIGHT = {
    "answer-4_1": "def my_attention(q, k, v):\n"
    "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
    "    e = torch.exp(scores - scores.amax(dim=-1, keepdim=True))\n"
    "    w = e / e.sum(dim=-1, keepdim=True)\n"
    "    return w @ v, w",
    "answer-4_2": "def my_attention_entropy(weights):\n"
    "    safe = torch.where(weights > 0, weights, torch.ones_like(weights))\n"
    "    return -(weights * torch.log(safe)).sum(dim=-1)",
    "answer-4_3": "def my_queries(w_q):\n"
    "    w_q = w_q.clone()\n"
    '    w_q[features.index("action"), space.index("thing")] = 5.0\n'
    '    w_q[features.index("seeks person"), space.index("thing")] = 5.0\n'
    "    return w_q",
}


def synthetic_submission(released: nbformat.NotebookNode, answers: dict[str, str]) -> nbformat.NotebookNode:
    """The student version ``released`` with the cells named in ``answers`` (nbgrader cell ids) rewritten, and the
    code of ``answers["added"]``, if given, in a cell of the student's own inserted as the fourth cell."""
    notebook = copy.deepcopy(released)
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id]
    if "added" in answers:
        notebook.cells.insert(3, nbformat.v4.new_code_cell(answers["added"]))
    return notebook


def cpu_seconds() -> float:
    """CPU time used so far by this process and its finished children (the kernels, the workers of --jobs)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(students: int, jobs: list[int], timeout: float = 60.0) -> dict:
    """Release notebook 04 in a scratch course directory (the release check timed), collect ``students`` right
    submissions, and grade them once for each value of ``jobs``; the seconds and CPU seconds each grading took,
    with the machine it ran on."""
    from tools.grader.collect import collect
    from tools.grader.grading import grade
    from tools.grader.release import release

    if students < 1 or not jobs or min(jobs) < 1:
        raise ValueError(f"--students and every --jobs must be >= 1, got {students!r} and {jobs!r}")
    runs = []
    with tempfile.TemporaryDirectory(prefix="grader-throughput-") as scratch:
        root, inbox = Path(scratch) / "course", Path(scratch) / "inbox"
        (done,) = release([NOTEBOOK], "v2026.12", root)  # with its check, which runs the teacher's version once
        assignment = done.plan.assignment
        released = nbformat.read(root / "release" / assignment / f"{assignment}.ipynb", as_version=4)
        inbox.mkdir()
        for k in range(students):
            nbformat.write(synthetic_submission(released, RIGHT), inbox / f"s{k + 1:03d}.ipynb")
        collect(inbox, root, assignment)
        for j in jobs:
            load = os.getloadavg()[0]
            start, cpu = time.monotonic(), cpu_seconds()
            rows, _ = grade(root, timeout=timeout, jobs=j, log=lambda line: None)
            seconds, cpu = time.monotonic() - start, cpu_seconds() - cpu
            correct = sum(all(v.verdict == "correct" for v in row.verdicts.values()) for row in rows)
            if correct != students:
                raise RuntimeError(f"only {correct} of {students} right submissions came out correct (jobs={j})")
            runs.append(
                {"jobs": j, "seconds": round(seconds, 1), "cpu_seconds": round(cpu, 1), "load_before": round(load, 2)}
            )
    import nbgrader
    import torch

    return {
        "notebook": notebook_paths([NOTEBOOK])[0].name,
        "release_check_seconds": round(done.seconds, 1),
        "submissions": students,
        "runs": runs,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "nbgrader": nbgrader.__version__,
        },
    }


def load() -> dict:
    """The stored measurement."""
    return json.loads(RESULTS.read_text(encoding="utf-8"))


def per_submission(data: dict, jobs: int) -> float:
    """Seconds per submission with ``jobs`` workers, as measured."""
    run = next(r for r in data["runs"] if r["jobs"] == jobs)
    return run["seconds"] / data["submissions"]


def class_minutes(data: dict, jobs: int, students: int = 60) -> float:
    """Minutes to grade one assignment for ``students`` at the measured rate."""
    return per_submission(data, jobs) * students / 60


def sentence(data: dict, language: str) -> str:
    """What docs/grading.md (``en``) and its Chinese edition (``zh``) say about the measurement."""
    serial, parallel = data["runs"][0], data["runs"][-1]
    n, cpus, j = data["submissions"], data["machine"]["cpus"], parallel["jobs"]
    a, b = per_submission(data, serial["jobs"]), per_submission(data, j)
    m1, m2 = class_minutes(data, serial["jobs"]), class_minutes(data, j)
    cpu = serial["cpu_seconds"] / n
    l1, l2 = serial["load_before"], parallel["load_before"]
    if language == "zh":
        return (
            f"在一台 {cpus} 核的机器上，给笔记本 {data['notebook'][:2]} 的 {n} 份正确提交评分：逐份评分用了 "
            f"{serial['seconds']:.0f} 秒（每份 {a:.1f} 秒），`--jobs {j}` 用了 {parallel['seconds']:.0f} 秒"
            f"（每份 {b:.1f} 秒）；两次开始时，其他任务造成的平均负载分别为 {l1:.1f} 和 {l2:.1f}。"
            f"按这个速度，给 60 个学生评一份作业大约需要 {m1:.0f} 分钟，用 `--jobs {j}` 大约需要 {m2:.0f} 分钟。"
            f"每份提交用掉约 {cpu:.1f} 秒 CPU 时间（内核的加上 nbgrader 的），这就是 `--jobs` 能带来的收益的上限："
            f"N 个空闲的核每 {cpu:.1f} 秒最多评完 N 份。同一台机器上，笔记本 {data['notebook'][:2]} 发布时的检查用了 "
            f"{data['release_check_seconds']:.0f} 秒。"
        )
    return (
        f"On a {cpus}-core machine, grading {n} right submissions of notebook {data['notebook'][:2]} took "
        f"{serial['seconds']:.0f} s one at a time ({a:.1f} s per submission) and {parallel['seconds']:.0f} s with "
        f"`--jobs {j}` ({b:.1f} s per submission), with a load average of {l1:.1f} and {l2:.1f} from other work when "
        f"each run started. At that rate one assignment for 60 students takes about {m1:.0f} minutes, or {m2:.0f} "
        f"with `--jobs {j}`. Each submission used about {cpu:.1f} s of CPU time (its kernel's and nbgrader's), which "
        f"bounds what `--jobs` can gain: N free cores grade at most N submissions per {cpu:.1f} s. On the same "
        f"machine, the release check of notebook {data['notebook'][:2]} took {data['release_check_seconds']:.0f} s."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.grader.throughput", description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=20, help="synthetic right submissions (default 20)")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="the --jobs values to time (default 1 2)")
    parser.add_argument("--write", action="store_true", help=f"store the result in {RESULTS.name}")
    args = parser.parse_args(argv)
    data = measure(args.students, args.jobs)
    print(json.dumps(data, indent=1))
    if args.write:
        RESULTS.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"written: {RESULTS}")
    print(sentence(data, "en"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

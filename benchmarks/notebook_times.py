"""Section 7: how long each course notebook takes to execute top to bottom."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from benchmarks.common import Settings, markdown_table
from tools.course_notebooks import notebook_paths
from tools.execute_notebooks import execute

SECTIONS = (7,)
TITLE = "7. notebooks"


def bench_notebooks(names: list[str] | None) -> list[dict]:
    """Execute copies of the notebooks (the committed ones are left alone) and time each."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in notebook_paths(names):
            copy = Path(tmp) / path.name
            shutil.copy(path, copy)
            seconds = execute(copy)
            rows.append({"notebook": path.name, "seconds": seconds})
            print(f"  {path.name}: {seconds:.1f} s", flush=True)
    return rows


def merge_rows(stored: list[dict], new: list[dict]) -> list[dict]:
    """The stored rows with the new rows in place of those of the same notebooks, in the notebooks' order."""
    by_name = {row["notebook"]: row for row in stored} | {row["notebook"]: row for row in new}
    order = [path.name for path in notebook_paths()]
    return [by_name[name] for name in order if name in by_name]


def run(settings: Settings) -> dict:
    return {"notebooks": bench_notebooks(["00"] if settings.quick else None)}


def report(results: dict) -> list[str]:
    if "notebooks" not in results:
        return []
    total = sum(r["seconds"] for r in results["notebooks"])
    return [
        "",
        f"## 7. Notebook execution times (total {total:.0f} s)",
        "",
        markdown_table(results["notebooks"], ["notebook", "seconds"], {"seconds": ".1f"}),
    ]

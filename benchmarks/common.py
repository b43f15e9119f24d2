"""What every benchmark section shares: the settings of a run, timing, and the Markdown table of a section's rows.

Each section is a module of this package with the same three names: ``SECTIONS`` (the numbers ``--only``
accepts for it), ``TITLE`` (printed when it starts), ``run(settings) -> dict`` (its entries of results.json)
and ``report(results) -> list[str]`` (its lines of results.md, none if results.json has no entry of it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils import benchmark

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Settings:
    """One run: the device, ``quick`` (tiny sizes, to check that every row runs), the minimum seconds each
    timing repeats for, the folder the figures go to, and a nanoGPT checkout to run beside the course (section 8;
    None: keep the stored nanoGPT rows)."""

    device: torch.device
    quick: bool
    run_time: float
    figures: Path
    nanogpt: Path | None = None


def measure(fn: Callable[[], object], min_run_time: float) -> float:
    """Median seconds per call of ``fn``, with every thread torch would use."""
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=min_run_time).median


def sync(device: torch.device) -> None:
    """Wait for the device's queued work, so a timing covers it (CUDA runs asynchronously; the CPU does not)."""
    if device.type == "cuda":
        torch.cuda.synchronize()


def markdown_table(rows: list[dict], columns: list[str], formats: dict[str, str]) -> str:
    """A Markdown table of ``columns`` of ``rows``; a number is written with ``formats[column]`` (default: str)."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        missing = [c for c in columns if c not in row]
        if missing:
            raise ValueError(f"a row has no column {missing[0]!r}; its columns are {sorted(row)}")
        cells = [row[c] if isinstance(row[c], str) else format(row[c], formats.get(c, "")) for c in columns]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)

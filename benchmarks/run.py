"""Benchmarks of the course's model against PyTorch's, on the current device, measured in one run.

    python -m benchmarks.run            # the full set (~10 minutes on two CPU cores), from the repository root
    python -m benchmarks.run --quick    # tiny sizes, to check that everything runs
    python -m benchmarks.run --only 4 5 # re-run some sections, keep the others from results.json
    python -m benchmarks.run --only 8 --nanogpt PATH  # section 8 with nanoGPT's own code run from checkout PATH

Writes benchmarks/results.md (a Markdown table per section), benchmarks/results.json and figures
figures/benchmark_*.png. Ratios compare timings taken in the same run, on the same machine, back to back.
Each section is a module of this package (see benchmarks/common.py).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

from benchmarks import (
    attention_modules,
    attention_scaling,
    copy_task,
    generation,
    kv_cache,
    language_model,
    nanogpt_anchor,
    notebook_times,
    training_step,
)
from benchmarks.common import ROOT, Settings
from transformer_course.utils import get_device

RESULTS = ROOT / "benchmarks"
FIGURES = ROOT / "figures"
SECTIONS = [
    attention_modules,
    training_step,
    attention_scaling,
    kv_cache,
    copy_task,
    notebook_times,
    language_model,
    generation,
]
NOTEBOOK_SECTION = 7


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: check that every row runs")
    parser.add_argument("--skip-notebooks", action="store_true", help="leave out the notebook timings")
    parser.add_argument(
        "--notebooks", nargs="+", metavar="NN", default=None,
        help="section 7: time only these notebooks (03 or 03_positional_encoding), keeping the others' stored rows",
    )  # fmt: skip
    parser.add_argument(
        "--only", type=int, nargs="+", choices=range(1, 10), default=None,
        help="re-run only these sections (1-9) and keep the others from the existing results.json",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=None, help="folder for results.md/json (default: benchmarks/)")
    parser.add_argument(
        "--nanogpt", type=Path, default=None, metavar="PATH",
        help="a nanoGPT checkout: section 8 also runs its train.py (default: keep the stored nanoGPT rows)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.nanogpt is not None:
        try:
            args.nanogpt = nanogpt_anchor.check_checkout(args.nanogpt)
        except ValueError as error:
            parser.error(str(error))
    device = get_device()
    out_dir = args.out or RESULTS
    out_dir.mkdir(parents=True, exist_ok=True)
    settings = Settings(
        device, args.quick, 0.05 if args.quick else 1.0, out_dir if args.out else FIGURES, nanogpt=args.nanogpt
    )
    wanted = set(args.only or range(1, 10)) - ({NOTEBOOK_SECTION} if args.skip_notebooks else set())

    results: dict = json.loads((out_dir / "results.json").read_text()) if args.only else {}
    results["info"] = {
        "device": device.type,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "machine": platform.machine(),
    }
    print(f"device {device.type}, torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)
    if args.notebooks:
        wanted.discard(NOTEBOOK_SECTION)
        print(notebook_times.TITLE, "(only " + ", ".join(args.notebooks) + ")", flush=True)
        results["notebooks"] = notebook_times.merge_rows(
            results.get("notebooks", []), notebook_times.bench_notebooks(args.notebooks)
        )
    for section in SECTIONS:
        if wanted & set(section.SECTIONS):
            print(section.TITLE, flush=True)
            results.update(section.run(settings))
    write_report(results, out_dir)


def report(results: dict) -> str:
    """results.md: a header naming the machine, then each section that ``results`` (results.json) holds."""
    info = results["info"]
    parts = [
        "# Benchmark results",
        "",
        f"Device `{info['device']}` ({info['machine']}), {info['threads']} threads, torch {info['torch']}, "
        f"Python {info['python']}. Regenerate with `python -m benchmarks.run`.",
    ]
    for section in SECTIONS:
        parts += section.report(results)
    return "\n".join(parts) + "\n"


def write_report(results: dict, out_dir: Path) -> None:
    """Write ``out_dir``/results.md and ``out_dir``/results.json."""
    (out_dir / "results.md").write_text(report(results))
    (out_dir / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {out_dir / 'results.md'} and {out_dir / 'results.json'}")


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"benchmarks took {time.perf_counter() - start:.0f} s")

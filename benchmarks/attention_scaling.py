"""Section 4: the written-out attention against F.scaled_dot_product_attention as the sequence grows: time and
peak extra memory, each measured in a fresh process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks.common import ROOT, Settings, markdown_table

SECTIONS = (4,)
TITLE = "4. attention against n"

_MEMORY_PROBE = """
import gc, resource, sys, time, torch
import torch.nn.functional as F
from transformer_course.core.attention import scaled_dot_product_attention
method, n, heads, d_k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])


def status_kb(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])


torch.manual_seed(0)
q, k, v = (torch.randn(1, heads, n, d_k) for _ in range(3))
f = (lambda: scaled_dot_product_attention(q, k, v)[0]) if method == "written_out" else (
    lambda: F.scaled_dot_product_attention(q, k, v))
with torch.no_grad():
    f()  # warm-up: library buffers are allocated once, before the baseline
    gc.collect()
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # reset the resident-memory high-water mark (VmHWM) to the current size
    base = status_kb("VmRSS")
    elapsed = float("inf")
    for _ in range(3):  # the best of three calls: the least disturbed by the rest of the machine
        start = time.perf_counter(); out = f(); elapsed = min(elapsed, time.perf_counter() - start); del out
    peak = status_kb("VmHWM")
print(elapsed, peak, base)
"""


def bench_attention_scaling(lengths: list[int], heads: int = 4, d_k: int = 64) -> list[dict]:
    """One row per n of ``lengths``: q, k, v (1, heads, n, d_k). Each measurement in a fresh process; peak memory
    is the growth of its resident set (Linux) during the calls, above what it held before them."""
    rows = []
    for n in lengths:
        row: dict = {"n": n}
        for method in ("written_out", "sdpa"):
            out = subprocess.run(
                [sys.executable, "-c", _MEMORY_PROBE, method, str(n), str(heads), str(d_k)],
                capture_output=True, text=True, check=True, cwd=ROOT,
            )  # fmt: skip
            elapsed, peak_kb, base_kb = (float(x) for x in out.stdout.split())
            row[f"time {method} (s)"] = elapsed
            row[f"peak extra memory {method} (MB)"] = max(peak_kb - base_kb, 0.0) / 1024
        row["time ratio"] = row["time written_out (s)"] / row["time sdpa (s)"]
        row["scores matrix (MB)"] = heads * n * n * 4 / 2**20
        rows.append(row)
        print(
            f"  attention n={n}: written-out {row['time written_out (s)'] * 1e3:.1f} ms, "
            f"{row['peak extra memory written_out (MB)']:.0f} MB; sdpa {row['time sdpa (s)'] * 1e3:.1f} ms, "
            f"{row['peak extra memory sdpa (MB)']:.0f} MB",
            flush=True,
        )
    return rows


def plot_scaling(rows: list[dict], path: Path) -> None:
    """Draw ``rows`` of :func:`bench_attention_scaling` with the package's scaling figure into ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from transformer_course.viz import scaling_figure, set_style

    set_style()
    fig = scaling_figure(rows)
    fig.savefig(path, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)


def run(settings: Settings) -> dict:
    rows = bench_attention_scaling([64, 128] if settings.quick else [256, 512, 1024, 2048, 4096, 8192])
    plot_scaling(rows, settings.figures / "benchmark_attention_scaling.png")
    return {"attention_scaling": rows}


def report(results: dict) -> list[str]:
    if "attention_scaling" not in results:
        return []
    formats = {
        "time written_out (s)": ".4f",
        "time sdpa (s)": ".4f",
        "time ratio": ".2f",
        "peak extra memory written_out (MB)": ".0f",
        "peak extra memory sdpa (MB)": ".0f",
        "scores matrix (MB)": ".0f",
    }
    return [
        "",
        "## 4. Attention against sequence length (1 sequence, 4 heads, d_k 64, forward)",
        "",
        markdown_table(results["attention_scaling"], ["n", *formats], formats),
    ]

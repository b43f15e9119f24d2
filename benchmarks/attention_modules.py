"""Section 1: the course's multi-head attention (written out, and fused) against nn.MultiheadAttention."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from benchmarks.common import Settings, markdown_table, measure, sync
from transformer_course import MultiHeadAttention
from transformer_course.core.attention import set_attention_backend
from transformer_course.core.interop import mha_to_torch
from transformer_course.utils import seed_everything

SECTIONS = (1,)
TITLE = "1. multi-head attention"


def _attention_calls(ours, fused, theirs, x: Tensor, q: Tensor) -> dict[str, Callable[[], Tensor]]:
    return {
        "ours (written out)": lambda: ours(x),
        "ours (fused)": lambda: fused(x),
        "nn.MultiheadAttention": lambda: theirs(x, x, x, need_weights=False)[0],
        "F.sdpa (core only)": lambda: F.scaled_dot_product_attention(q, q, q),
    }


def _timed_call(fn: Callable[[], Tensor], backward: bool, device: torch.device) -> Callable[[], None]:
    def call() -> None:
        if backward:
            fn().sum().backward()
        else:
            with torch.no_grad():
                fn()
        sync(device)

    return call


def bench_attention_modules(device: torch.device, grid: list[tuple[int, int, int]], run_time: float) -> list[dict]:
    """One row per (batch, n, d_model) of ``grid``: seconds per call of each module on x (batch, n, d_model), 8
    heads, forward and forward+backward, and the ratios against nn.MultiheadAttention."""
    rows = []
    for batch, n, d_model in grid:
        seed_everything(0)
        heads = 8
        ours = MultiHeadAttention(d_model, heads).to(device)
        fused = MultiHeadAttention(d_model, heads).to(device)
        fused.load_state_dict(ours.state_dict())
        set_attention_backend(fused, "fused")
        theirs = mha_to_torch(ours).to(device)
        x = torch.randn(batch, n, d_model, device=device, requires_grad=True)
        q = torch.randn(batch, heads, n, d_model // heads, device=device, requires_grad=True)

        row = {"batch": batch, "n": n, "d_model": d_model}
        for mode in ("forward", "forward+backward"):
            for name, fn in _attention_calls(ours, fused, theirs, x, q).items():
                row[f"{mode}: {name}"] = measure(_timed_call(fn, mode == "forward+backward", device), run_time)
            base = row[f"{mode}: nn.MultiheadAttention"]
            row[f"{mode}: ours/torch"] = row[f"{mode}: ours (written out)"] / base
            row[f"{mode}: fused/torch"] = row[f"{mode}: ours (fused)"] / base
        rows.append(row)
        print(
            f"  attention b={batch} n={n} d={d_model}: fwd ours/torch {row['forward: ours/torch']:.2f}, "
            f"fwd+bwd ours/torch {row['forward+backward: ours/torch']:.2f}",
            flush=True,
        )
    return rows


def run(settings: Settings) -> dict:
    grid = [(2, 16, 32)] if settings.quick else [(8, 64, 256), (8, 256, 256), (8, 64, 512), (8, 256, 512)]
    return {"attention_modules": bench_attention_modules(settings.device, grid, settings.run_time)}


def report(results: dict) -> list[str]:
    if "attention_modules" not in results:
        return []
    seconds = ["forward: ours (written out)", "forward: nn.MultiheadAttention", "forward: F.sdpa (core only)"]
    ratios = [f"{mode}: {name}/torch" for mode in ("forward", "forward+backward") for name in ("ours", "fused")]
    columns = ["batch", "n", "d_model", *seconds[:2], *ratios, seconds[2]]
    formats = {c: ".2e" for c in seconds} | {c: ".2f" for c in ratios}
    return [
        "",
        "## 1. Multi-head attention (seconds per call; ratios against nn.MultiheadAttention)",
        "",
        markdown_table(results["attention_modules"], columns, formats),
    ]

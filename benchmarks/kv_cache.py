"""Section 5: greedy decoding by the encoder-decoder tiny preset with and without the KV cache."""

from __future__ import annotations

import time

import torch

from benchmarks.common import Settings, markdown_table, sync
from transformer_course import Transformer, TransformerConfig
from transformer_course.core.decoding import greedy_decode
from transformer_course.utils import seed_everything

SECTIONS = (5,)
TITLE = "5. KV cache"


def bench_kv_cache(device: torch.device, new_tokens: list[int], batch: int = 64) -> list[dict]:
    """Greedy decoding of exactly N new tokens (no <eos> can stop it early) by the tiny preset, for sources
    (batch, 32); one row per N of ``new_tokens``."""
    seed_everything(0)
    config = TransformerConfig.preset("tiny", src_vocab_size=64, tgt_vocab_size=64, max_len=max(new_tokens) + 1)
    model = Transformer(config).to(device).eval()
    src = torch.randint(3, 64, (batch, 32), device=device)
    rows = []
    for n in new_tokens:
        row: dict = {"new tokens": n}
        tokens = {}
        for use_cache in (False, True):
            start = time.perf_counter()
            # eos_id=-1 never matches a token, so every row decodes exactly n tokens
            tokens[use_cache] = greedy_decode(model, src, max_len=n, use_cache=use_cache, eos_id=-1).tokens
            sync(device)
            row["with cache (s)" if use_cache else "without cache (s)"] = time.perf_counter() - start
        row["speed-up"] = row["without cache (s)"] / row["with cache (s)"]
        row["same tokens"] = "yes" if torch.equal(tokens[False], tokens[True]) else "NO"
        rows.append(row)
        print(f"  KV cache, {n} new tokens: {row['speed-up']:.1f}x faster, same: {row['same tokens']}", flush=True)
    return rows


def run(settings: Settings) -> dict:
    return {"kv_cache": bench_kv_cache(settings.device, [16, 32] if settings.quick else [64, 128, 256, 512])}


def report(results: dict) -> list[str]:
    if "kv_cache" not in results:
        return []
    return [
        "",
        "## 5. Greedy decoding with and without the KV cache (tiny preset, 64 sequences)",
        "",
        markdown_table(
            results["kv_cache"],
            ["new tokens", "without cache (s)", "with cache (s)", "speed-up", "same tokens"],
            {"without cache (s)": ".3f", "with cache (s)": ".3f", "speed-up": ".1f"},
        ),
    ]

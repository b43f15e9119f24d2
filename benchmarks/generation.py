"""Section 9: generation by notebook 15's shipped language model with and without the KV cache."""

from __future__ import annotations

import time

import torch

from benchmarks.common import Settings, markdown_table
from transformer_course.core.decoding import generate
from transformer_course.families.language_model import load_shipped_language_model
from transformer_course.text.corpus import load_stdlib_text
from transformer_course.text.lm_data import encode_corpus

SECTIONS = (9,)
TITLE = "9. generation with and without the KV cache (notebook 15's shipped model)"

PROMPT_TOKENS = 64
NEW_TOKENS = 256


def bench_generation(batches: list[int]) -> list[dict]:
    """Greedy generation of 256 new tokens by the shipped language model from prompts (batch, 64), with and
    without the KV cache, the best of three runs each; one row per batch size of ``batches``."""
    model, tokenizer, config, _ = load_shipped_language_model()
    # as in notebook 15: the prompts are the first tokens of the held-out text (the model's context is 320)
    corpus = encode_corpus(load_stdlib_text().text, tokenizer.vocab_size)
    if corpus.tokenizer.merges != tokenizer.merges:
        raise RuntimeError("the shipped language model's tokenizer is not encode_corpus's on the shipped corpus")
    ids = corpus.held_out_ids
    rows = []
    for batch in batches:
        prompt = ids[: PROMPT_TOKENS * batch].view(batch, PROMPT_TOKENS)  # (batch, 64)
        row: dict = {"prompts": batch, "prompt tokens": PROMPT_TOKENS, "new tokens": NEW_TOKENS}
        row["context"] = config.context
        outputs = {}
        for use_cache in (False, True):
            best = float("inf")
            for _ in range(3):
                start = time.perf_counter()
                with torch.no_grad():
                    outputs[use_cache] = generate(model, prompt, NEW_TOKENS, greedy=True, use_cache=use_cache)
                best = min(best, time.perf_counter() - start)
            row["with cache (tokens/s)" if use_cache else "without cache (tokens/s)"] = NEW_TOKENS * batch / best
        row["speed-up"] = row["with cache (tokens/s)"] / row["without cache (tokens/s)"]
        row["same tokens"] = "yes" if torch.equal(outputs[False], outputs[True]) else "NO"
        rows.append(row)
        speedup, same = row["speed-up"], row["same tokens"]
        print(f"  generation, {batch} prompt(s), 256 new tokens: cache {speedup:.1f}x, same: {same}", flush=True)
    return rows


def run(settings: Settings) -> dict:
    return {"generation": bench_generation([1] if settings.quick else [1, 8])}


def report(results: dict) -> list[str]:
    if "generation" not in results:
        return []
    return [
        "",
        "## 9. Generation with and without the KV cache (notebook 15's shipped model, context 320, greedy)",
        "",
        "Each prompt is 64 tokens of the held-out text; tokens/s counts the new tokens of all prompts.",
        "",
        markdown_table(
            results["generation"],
            ["prompts", "new tokens", "without cache (tokens/s)", "with cache (tokens/s)", "speed-up", "same tokens"],
            {"without cache (tokens/s)": ",.0f", "with cache (tokens/s)": ",.0f", "speed-up": ".1f"},
        ),
    ]

"""Section 8: a language model on the corpus, notebook 15's recipe against a minimal GPT's, for the same wall
clock; held-out loss in nats per character, which compares the two tokenizers."""

from __future__ import annotations

import torch

from benchmarks.common import Settings, markdown_table
from transformer_course.families.language_model import LMConfig, build_language_model
from transformer_course.text.corpus import load_stdlib_text
from transformer_course.text.lm_data import encode_corpus
from transformer_course.training.lm_training import LMTrainConfig, held_out_loss, train_language_model
from transformer_course.utils import seed_everything

SECTIONS = (8,)
TITLE = "8. a language model on the corpus, same wall clock"

LM_RECIPES = {
    # a well-known minimal GPT's CPU recipe: characters as tokens, the GPT-2 style, lr 1e-3
    "baseline: GPT-2 style, characters, lr 1e-3": dict(style="gpt2", vocab_size=None, lr=1e-3, kv_heads=None),
    # notebook 15's: the LLaMA style with grouped K/V heads, 512 BPE tokens, lr 2e-3
    "course: LLaMA style, 512 BPE tokens, lr 2e-3": dict(style="llama", vocab_size=512, lr=2e-3, kv_heads=2),
}
CONTEXT = 64


def bench_language_model(budgets: list[float]) -> list[dict]:
    """Each recipe trained for each wall-clock budget in seconds (its cosine schedule sized to end there), held-out
    loss in nats per character. The corpus is split and encoded as notebook 15 does (``encode_corpus``)."""
    text = load_stdlib_text().text
    rows = []
    for name, recipe in LM_RECIPES.items():
        corpus = encode_corpus(text, recipe["vocab_size"])  # vocab_size None: one token per character
        train_ids, held_out_ids = corpus.train_ids, corpus.held_out_ids
        vocab_size = corpus.tokenizer.vocab_size
        config = LMConfig(style=recipe["style"], num_kv_heads=recipe["kv_heads"])  # 4 x 4 heads, width 128, 64 ids

        def fresh(config: LMConfig = config, vocab_size: int = vocab_size) -> torch.nn.Module:
            seed_everything(0)
            return build_language_model(config, vocab_size)

        probe_config = LMTrainConfig(steps=60, warmup=5)
        probe = train_language_model(fresh(), train_ids, held_out_ids, CONTEXT, probe_config, eval_windows=1)
        seconds_per_step = probe.seconds / probe.steps
        for budget in budgets:
            steps = max(int(budget / seconds_per_step), 200)
            train_config = LMTrainConfig(steps=steps, lr=recipe["lr"], min_lr=1e-4, warmup=100)
            model = fresh()
            history = train_language_model(
                model, train_ids, held_out_ids, CONTEXT, train_config, seconds=budget, eval_windows=1
            )
            nats = held_out_loss(model, held_out_ids, CONTEXT) * len(held_out_ids) / len(corpus.held_out_text)
            rows.append({
                "recipe": name, "budget (s)": budget, "steps": history.steps, "planned steps": steps,
                "seconds": history.seconds, "tokens/s": history.tokens_per_second,
                "characters/s": history.tokens_per_second * corpus.characters_per_token,
                "held-out nats/char": nats,
            })  # fmt: skip
            print(f"  {name}, {budget:.0f} s: {history.steps} steps, {nats:.3f} nats/char", flush=True)
    return rows


def run(settings: Settings) -> dict:
    return {"language_model": bench_language_model([5.0] if settings.quick else [60.0, 120.0, 180.0])}


def report(results: dict) -> list[str]:
    if "language_model" not in results:
        return []
    return [
        "",
        "## 8. A language model on the corpus: held-out loss after the same training time (notebook 15)",
        "",
        "Both recipes: 4 blocks of width 128, 4 heads, 64 tokens of context, batches of 12, AdamW (weight decay "
        "0.1, beta2 0.99), 100 warm-up steps, a cosine decay to 1e-4 sized to end at the budget, no dropout; "
        "the held-out tail is the last 10% of the text. Nats per character make the two tokenizers comparable.",
        "",
        markdown_table(
            results["language_model"],
            ["recipe", "budget (s)", "steps", "tokens/s", "characters/s", "held-out nats/char"],
            {"budget (s)": ".0f", "tokens/s": ",.0f", "characters/s": ",.0f", "held-out nats/char": ".3f"},
        ),
    ]

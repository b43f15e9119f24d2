"""The learning-rate sweep behind notebook 17's peak rates (every weight, the last block, LoRA).

    python -m benchmarks.lora_learning_rates   # about four minutes on one CPU core, from the repository root

Builds notebook 17's data (section 1: the help topics after notebook 15's 90% cut, minus the passages that repeat
training text; the first 80% of what is left is the adaptation part), then splits the adaptation part once more by
position: each run trains on its first 90% and is scored on its last 10%, so the notebook's held-out part is never
used to choose a rate. Every way trains with notebook 17's recipe (80 steps of 12 windows of 64 tokens, AdamW with
betas (0.9, 0.99), 8 warm-up steps, a cosine decay to a tenth of the peak, clipping at 1, no weight decay) at each
peak rate, for two seeds (the seed sets the batches and LoRA's starting A). The old text (the first 30,000
characters of the docstrings) is scored too, for information: the notebook chose on the validation slice alone.

Writes benchmarks/lora_learning_rates.md beside this file.
"""

from __future__ import annotations

import copy
import platform
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from transformer_course.families.language_model import load_shipped_language_model
from transformer_course.text.corpus import load_stdlib_text
from transformer_course.text.lm_data import bits_per_character
from transformer_course.training.lm_training import LMTrainConfig, held_out_loss, train_language_model
from transformer_course.training.lora import add_lora
from transformer_course.utils import seed_everything

OUT = Path(__file__).with_name("lora_learning_rates.md")
CONTEXT, STEPS, BATCH, RANK, ALPHA = 64, 80, 12, 8, 16.0
TARGETS = ("w_q", "w_k", "w_v", "w_o", "w_gate", "w_up", "w_down")
SPAN, LETTERS, MAX_REPEATED = 100, 60, 0.1  # notebook 17, section 1
SEEDS = (0, 1)
RATES = {
    "every weight": (1e-4, 3e-4, 1e-3, 3e-3),
    "last block": (1e-4, 3e-4, 1e-3, 3e-3),
    "LoRA": (1e-4, 3e-4, 1e-3, 3e-3, 1e-2),
}
CHOSEN = {"every weight": 3e-4, "last block": 1e-3, "LoRA": 1e-3}  # the rates notebook 17 uses


def sampled_spans(part: str) -> list[str]:
    """Notebook 17's spans: one of SPAN characters every SPAN characters, kept if it has LETTERS letters or more."""
    spans = (part[i : i + SPAN] for i in range(0, len(part) - SPAN + 1, SPAN))
    return [s for s in spans if sum(c.isalpha() for c in s) >= LETTERS]


def notebook_data() -> tuple[str, str]:
    """(adaptation part, old text) exactly as notebook 17 builds them."""
    corpus = load_stdlib_text()
    text = corpus.text
    cut = int(len(text) * 0.9)
    seen = text[:cut]
    start = len("\n".join(corpus.docstrings)) + 1 + len("\n".join(corpus.comments)) + 1
    passages = []
    for topic in corpus.topics:
        end = start + len(topic)
        if end > cut:
            passages.append(text[max(start, cut) : end])
        start = end + 1
    kept = []
    for passage in passages:
        spans = sampled_spans(passage)
        if sum(s in seen for s in spans) <= MAX_REPEATED * len(spans):
            kept.append(passage)
    new_text = "\n".join(kept)
    return new_text[: int(len(new_text) * 0.8)], text[:30_000]


def every_weight(model: nn.Module, seed: int) -> nn.Module:
    return model.requires_grad_(True)


def last_block(model: nn.Module, seed: int) -> nn.Module:
    model.requires_grad_(False)
    model.blocks[-1].requires_grad_(True)
    model.decoder.norm.requires_grad_(True)
    return model


def lora(model: nn.Module, seed: int) -> nn.Module:
    seed_everything(seed)  # LoRA's starting A
    add_lora(model, TARGETS, RANK, ALPHA)
    return model


WAYS: dict[str, Callable[[nn.Module, int], nn.Module]] = {
    "every weight": every_weight,
    "last block": last_block,
    "LoRA": lora,
}


def main() -> None:
    torch.set_num_threads(1)  # as the notebook
    started = time.perf_counter()
    shipped, tokenizer, _, _ = load_shipped_language_model()
    adapt_text, old_text = notebook_data()
    fast = tokenizer.to_tokenizers()
    split = int(len(adapt_text) * 0.9)
    train_text, val_text = adapt_text[:split], adapt_text[split:]
    train_ids, val_ids, old_ids = (torch.tensor(fast.encode(t).ids) for t in (train_text, val_text, old_text))
    old_before = bits_per_character(held_out_loss(shipped, old_ids, CONTEXT), len(old_ids), len(old_text))
    val_before = bits_per_character(held_out_loss(shipped, val_ids, CONTEXT), len(val_ids), len(val_text))
    rows = []
    for way, prepare in WAYS.items():
        for lr in RATES[way]:
            val, old = [], []
            for seed in SEEDS:
                model = prepare(copy.deepcopy(shipped), seed)
                config = LMTrainConfig(
                    steps=STEPS,
                    batch_size=BATCH,
                    lr=lr,
                    min_lr=lr / 10,
                    warmup=STEPS // 10,
                    weight_decay=0.0,
                    seed=seed,
                )
                history = train_language_model(model, train_ids, val_ids, CONTEXT, config, eval_windows=None)
                val.append(bits_per_character(history.eval_loss[-1], len(val_ids), len(val_text)))
                old.append(bits_per_character(held_out_loss(model, old_ids, CONTEXT), len(old_ids), len(old_text)))
            rows.append((way, lr, val, old))
            print(f"{way:13} lr {lr:g}: validation {sum(val) / len(val):.4f}, old text {sum(old) / len(old):.4f}")
    best = {way: min((r for r in rows if r[0] == way), key=lambda r: sum(r[2])) for way in WAYS}
    lines = [
        "# Notebook 17's learning-rate sweep",
        "",
        f"Regenerate with `python -m benchmarks.lora_learning_rates` ({(time.perf_counter() - started) / 60:.0f} "
        f"minutes here; torch {torch.__version__}, Python {platform.python_version()}, {platform.machine()}, one "
        "torch thread).",
        "",
        f"Training on the first 90% of notebook 17's adaptation part ({len(train_text):,} characters, "
        f"{len(train_ids):,} tokens), scored on its last 10% ({len(val_text):,} characters, {len(val_ids):,} tokens), "
        f"never on the notebook's held-out part. Bits per character, windows of {CONTEXT} tokens; each run "
        f"{STEPS} steps of {BATCH} windows; seeds {', '.join(map(str, SEEDS))} (batches and LoRA's starting A). "
        f"Before fine-tuning: validation {val_before:.4f}, old text {old_before:.4f}. The old text was not used to "
        "choose.",
        "",
        "| way | peak rate | validation, mean | " + " | ".join(f"seed {s}" for s in SEEDS) + " | old text, mean | |",
        "|---|---|---|" + "---|" * len(SEEDS) + "---|---|",
    ]
    for way, lr, val, old in rows:
        marks = []
        if best[way][1] == lr:
            marks.append("lowest validation")
        if CHOSEN[way] == lr:
            marks.append("notebook 17's rate")
        lines.append(
            f"| {way} | {lr:g} | {sum(val) / len(val):.4f} | "
            + " | ".join(f"{v:.4f}" for v in val)
            + f" | {sum(old) / len(old):.4f} | {', '.join(marks)} |"
        )
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()

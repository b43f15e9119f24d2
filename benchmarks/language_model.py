"""Section 8: a language model on the corpus, for the same wall clock: notebook 15's recipe, the course's code with
nanoGPT's README CPU recipe, and nanoGPT's own code (Andrej Karpathy's, run from a checkout given with
``--nanogpt PATH``, see benchmarks/nanogpt_anchor.py); held-out loss in nats and bits per character, which compares
the tokenizers.

Without ``--nanogpt`` the nanoGPT rows already in benchmarks/results.json are kept. The section's entries of
results.json are also written to transformer_course/trained_models/anchor_comparison.json, which notebook 15 reads
(benchmarks/ is not installed on Colab).
"""

from __future__ import annotations

import json
import math
import shlex
import sys
import time
from pathlib import Path

import torch

from benchmarks import nanogpt_anchor
from benchmarks.common import ROOT, Settings, markdown_table
from transformer_course.families.language_model import ANCHOR_COMPARISON, LMConfig, build_language_model
from transformer_course.text.corpus import load_stdlib_text
from transformer_course.text.lm_data import EncodedCorpus, encode_corpus
from transformer_course.training.lm_training import LMTrainConfig, held_out_loss, train_language_model
from transformer_course.utils import seed_everything

SECTIONS = (8,)
TITLE = "8. a language model on the corpus, same wall clock"

BASELINE = "baseline: GPT-2 style, characters, lr 1e-3"
COURSE = "course: LLaMA style, 512 BPE tokens, lr 2e-3"
NANOGPT = "nanoGPT: its own code, characters, lr 1e-3"
LM_RECIPES = {
    # nanoGPT's README CPU recipe run with the course's code: characters as tokens, the GPT-2 style, lr 1e-3
    BASELINE: dict(style="gpt2", vocab_size=None, lr=1e-3, kv_heads=None),
    # notebook 15's: the LLaMA style with grouped K/V heads, 512 BPE tokens, lr 2e-3
    COURSE: dict(style="llama", vocab_size=512, lr=2e-3, kv_heads=2),
}
CONTEXT = 64
HELD_OUT = 0.1
SECTION_KEYS = ("language_model", "language_model_notes")  # the section's entries of results.json
STORED = ROOT / "benchmarks" / "results.json"  # where the nanoGPT rows are kept between runs
ANCHOR = ANCHOR_COMPARISON  # notebook 15 reads it with load_anchor_comparison()
COLUMNS = ["recipe", "budget (s)", "steps", "tokens/s", "characters/s", "held-out nats/char", "held-out bits/char"]
FORMATS = {
    "budget (s)": ".0f", "tokens/s": ",.0f", "characters/s": ",.0f", "held-out nats/char": ".3f",
    "held-out bits/char": ".3f",
}  # fmt: skip


def bench_recipe(name: str, corpus: EncodedCorpus, budgets: list[float]) -> list[dict]:
    """Recipe ``name`` of LM_RECIPES trained on ``corpus`` for each wall-clock budget in seconds (its cosine schedule
    sized from a 60-step probe to end there); held-out loss in nats and bits per character, one row per budget."""
    recipe = LM_RECIPES[name]
    train_ids, held_out_ids = corpus.train_ids, corpus.held_out_ids
    vocab_size = corpus.tokenizer.vocab_size
    config = LMConfig(style=recipe["style"], num_kv_heads=recipe["kv_heads"])  # 4 x 4 heads, width 128, 64 ids

    def fresh() -> torch.nn.Module:
        seed_everything(0)
        return build_language_model(config, vocab_size)

    probe_config = LMTrainConfig(steps=60, warmup=5)
    probe = train_language_model(fresh(), train_ids, held_out_ids, CONTEXT, probe_config, eval_windows=1)
    seconds_per_step = probe.seconds / probe.steps
    rows = []
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
            "held-out nats/char": nats, "held-out bits/char": nats / math.log(2),
        })  # fmt: skip
        print(f"  {name}, {budget:.0f} s: {history.steps} steps, {nats:.3f} nats/char", flush=True)
    return rows


def stored_nanogpt(path: Path = STORED) -> tuple[list[dict], dict | None]:
    """The nanoGPT rows of results.json at ``path`` and the notes on their measurement (none if it has none)."""
    if not path.is_file():
        return [], None
    results = json.loads(path.read_text())
    rows = [row for row in results.get("language_model", []) if row["recipe"] == NANOGPT]
    return rows, results.get("language_model_notes", {}).get("nanoGPT") if rows else None


CHECKOUT_PLACEHOLDER = "PATH/TO/nanoGPT"  # the command is recorded without this machine's path to the checkout


def benchmark_command(checkout: Path, quick: bool) -> str:
    """The command that ran this benchmark (as typed, when it is ``python -m benchmarks.run``), with the checkout's
    path shown as CHECKOUT_PLACEHOLDER: the record names nanoGPT's commit instead."""
    if Path(sys.argv[0]).parts[-2:] == ("benchmarks", "run.py"):
        arguments = [CHECKOUT_PLACEHOLDER if Path(a) == checkout else a for a in sys.argv[1:]]
        return "python -m benchmarks.run " + shlex.join(arguments)
    return f"python -m benchmarks.run --only 8 --nanogpt {CHECKOUT_PLACEHOLDER}" + (" --quick" * quick)


def measure_nanogpt(
    checkout: Path, char_corpus: EncodedCorpus, budgets: list[float], quick: bool
) -> tuple[list[dict], dict]:
    """nanoGPT's rows (see nanogpt_anchor.bench_nanogpt) on the character corpus's split, and the notes on how
    they were measured."""
    rows = nanogpt_anchor.bench_nanogpt(
        checkout, char_corpus.train_text, char_corpus.held_out_text, budgets, NANOGPT, CONTEXT
    )
    vocabulary = len(set(char_corpus.train_text) | set(char_corpus.held_out_text))
    info = {
        "repository": nanogpt_anchor.REPOSITORY, "commit": rows[0]["nanoGPT commit"],
        "README CPU recipe": nanogpt_anchor.README_CPU_RECIPE, "measured": time.strftime("%Y-%m-%d"),
        "benchmark command": benchmark_command(checkout, quick), "threads": torch.get_num_threads(),
        "vocabulary": vocabulary,
    }  # fmt: skip
    return rows, info


def caveats(char_corpus: EncodedCorpus, bpe_corpus: EncodedCorpus, nanogpt: dict | None) -> list[str]:
    """The caveats of the comparison, in plain words, with the corpus's numbers (``nanogpt``: the notes on the
    nanoGPT rows, None if there are none)."""
    text_length = len(char_corpus.train_text) + len(char_corpus.held_out_text)
    characters = CONTEXT * len(bpe_corpus.held_out_text) / len(bpe_corpus.held_out_ids)
    notes = [
        "The baseline rows are the course's own code (its GPT-2 style model and its training loop) run with "
        "nanoGPT's README CPU recipe; the nanoGPT rows are nanoGPT's own, unmodified train.py and model.py.",
        f"Every row trains on the same corpus snapshot ({text_length:,} characters) and is scored on the same "
        f"held-out tail (its last 10%, {len(char_corpus.held_out_text):,} characters), in consecutive, "
        f"non-overlapping windows of {CONTEXT} tokens with every position scored.",
        f"The context is {CONTEXT} characters for the character-level rows (baseline and nanoGPT) but {CONTEXT} BPE "
        f"tokens, about {characters:.0f} characters of the held-out text, for the course recipe.",
        "The learning rates (1e-3 for the character-level rows, 2e-3 for the course recipe) were not tuned for "
        "this corpus or these budgets.",
    ]
    if nanogpt is not None:
        notes += [
            "nanoGPT's number of iterations is sized to the budget from a 60-iteration probe (the median time "
            "train.py logs per iteration), not stopped by a clock; it evaluates only at the start and at the end "
            "(--eval_interval set to the number of iterations; 20 batches of its val split, which is our held-out "
            "tail), and saves its checkpoint at the end if that loss beats the start's. The checkpoint holds every "
            "update but the last one train.py makes after saving. Its throughput leaves out the two iterations "
            "with an evaluation; its wall-clock time, with Python's start-up, is in results.json.",
            f"nanoGPT's vocabulary is built as its prepare.py builds it: the {nanogpt['vocabulary']} distinct "
            "characters of the whole text, held-out tail included; the course's character tokenizer has the "
            f"{char_corpus.tokenizer.vocab_size - 1} characters of the training part plus <unk> "
            f"({char_corpus.tokenizer.vocab_size} ids).",
        ]
    return notes


def write_anchor(entries: dict, path: Path = ANCHOR) -> None:
    """Write the section's entries of results.json to ``path`` (anchor_comparison.json), as results.json is written."""
    path.write_text(json.dumps({key: entries[key] for key in SECTION_KEYS if key in entries}, indent=1) + "\n")


def run(settings: Settings) -> dict:
    """The section's entries of results.json: the rows (nanoGPT's measured or kept, then the course's code's) and
    the notes (caveats, how nanoGPT was run); also written to ANCHOR when the run writes benchmarks/results.json."""
    checkout = None if settings.nanogpt is None else nanogpt_anchor.check_checkout(settings.nanogpt)
    budgets = [5.0] if settings.quick else [60.0, 120.0, 180.0]
    text = load_stdlib_text().text
    corpora = {name: encode_corpus(text, recipe["vocab_size"], HELD_OUT) for name, recipe in LM_RECIPES.items()}
    if checkout is not None:  # first, so that a failure of nanoGPT shows early
        nanogpt_rows, nanogpt_info = measure_nanogpt(checkout, corpora[BASELINE], budgets, settings.quick)
    else:
        nanogpt_rows, nanogpt_info = stored_nanogpt()
    rows = nanogpt_rows + [row for name, corpus in corpora.items() for row in bench_recipe(name, corpus, budgets)]
    notes = {"caveats": caveats(corpora[BASELINE], corpora[COURSE], nanogpt_info)}
    if nanogpt_info is not None:
        notes["nanoGPT"] = nanogpt_info
    entries = {"language_model": rows, "language_model_notes": notes}
    if settings.figures == ROOT / "figures":  # no --out: this run writes the repository's results.json
        write_anchor(entries)
    return entries


def measurement_line(nanogpt: dict | None) -> str:
    """Where the nanoGPT rows come from (or how to measure them)."""
    if nanogpt is None:
        return (
            "No nanoGPT rows yet: measure them with `python -m benchmarks.run --only 8 --nanogpt PATH`, "
            "PATH a nanoGPT checkout."
        )
    return (
        f"The nanoGPT rows were measured on {nanogpt['measured']} with `{nanogpt['benchmark command']}` "
        f"({nanogpt['threads']} threads, nanoGPT commit `{nanogpt['commit'][:12]}`); results.json has each row's "
        "train.py command line."
    )


def report(results: dict) -> list[str]:
    """The section's lines of results.md, written from its entries of ``results`` alone."""
    if "language_model" not in results:
        return []
    notes = results.get("language_model_notes", {})
    # rows measured before bits per character were recorded: the same loss, converted
    rows = [{"held-out bits/char": row["held-out nats/char"] / math.log(2), **row} for row in results["language_model"]]
    lines = [
        "",
        "## 8. A language model on the corpus: held-out loss after the same training time (notebook 15, nanoGPT)",
        "",
        f"The anchor is nanoGPT, Andrej Karpathy's minimal GPT ({nanogpt_anchor.REPOSITORY}), with the CPU recipe "
        "of its README: 4 blocks of width 128, 4 heads, 64 characters of context, batches of 12, AdamW (lr 1e-3, "
        "weight decay 0.1, beta2 0.99), 100 warm-up steps and a cosine decay to 1e-4, no dropout. The "
        "**nanoGPT** rows run nanoGPT's own code with that recipe on our corpus; the **baseline** rows run the "
        "course's code with it; the **course** rows are notebook 15's recipe (the LLaMA style, 512 BPE tokens, "
        "lr 2e-3, the same sizes and optimizer otherwise). Each schedule is sized to end at the budget; the "
        "held-out tail is the last 10% of the text. Nats or bits per character make the tokenizers comparable.",
        "",
        markdown_table(rows, COLUMNS, FORMATS),
    ]
    if notes.get("caveats"):
        lines += ["", "Caveats:", ""] + [f"- {caveat}" for caveat in notes["caveats"]]
    return lines + ["", measurement_line(notes.get("nanoGPT"))]

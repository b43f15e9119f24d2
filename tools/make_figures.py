"""Regenerate every figure under figures/ that the README shows, deterministically.

python -m tools.make_figures           # all figures
python -m tools.make_figures --list    # their names
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from transformer_course.core.decoding import cross_attention_maps, greedy_decode  # noqa: E402
from transformer_course.core.positional import sinusoidal_table  # noqa: E402
from transformer_course.prelude.rnn import RNNCell, chain_jacobians, rnn_step_jacobians, scaled_recurrent_weight  # noqa: E402
from transformer_course.text.tasks import BOS_ID, make_batch  # noqa: E402
from transformer_course.training.checkpoints import load_shipped_checkpoint  # noqa: E402
from transformer_course.training.schedules import noam_lr  # noqa: E402
from transformer_course.utils import seed_everything  # noqa: E402
from transformer_course.viz import (  # noqa: E402
    draw_architecture,
    plot_attention,
    plot_attention_heads,
    scaling_figure,
    set_style,
)

ROOT = Path(__file__).resolve().parent.parent
FIGURES_DIR = ROOT / "figures"


def positional_heatmap() -> Figure:
    table = sinusoidal_table(100, 128)
    fig, ax = plt.subplots(figsize=(9.0, 4.2))
    sns.heatmap(table.numpy(), ax=ax, cmap="RdBu_r", vmin=-1, vmax=1, cbar_kws={"label": "PE value"})
    ax.set_xlabel("dimension i (even: sin, odd: cos)")
    ax.set_ylabel("position")
    ax.set_xticks(range(0, 128, 16), range(0, 128, 16))
    ax.set_yticks(range(0, 100, 10), range(0, 100, 10))
    ax.set_title("Sinusoidal positional encoding, d_model = 128")
    return fig


def gradient_decay() -> Figure:
    """||dS_T/dS_k|| of a tanh RNN against T - k, for recurrent weights with every singular value = scale."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(1, 60, 16, generator=generator) * 0.5
    for scale in (0.5, 0.9, 1.5, 3.0):
        cell = RNNCell(16, 32)
        with torch.no_grad():
            cell.weight_hh.copy_(scaled_recurrent_weight(32, scale, generator))
        _, jacobians = rnn_step_jacobians(cell, x)
        norms = torch.linalg.matrix_norm(chain_jacobians(jacobians)[0], ord=2).flip(0)  # index = T - k
        ax.semilogy(range(len(norms)), norms.clamp_min(1e-30).numpy(), label=f"scale {scale}")
    ax.set_xlabel("distance T - k (time steps)")
    ax.set_ylabel("||dS_T / dS_k|| (spectral norm)")
    ax.set_title("Backpropagation through time in a tanh RNN")
    ax.legend()
    return fig


def warmup_schedule() -> Figure:
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    steps = range(1, 30_001)
    for d_model, warmup in ((512, 4000), (512, 8000), (256, 4000)):
        ax.plot(steps, [noam_lr(s, d_model, warmup) for s in steps], label=f"d_model {d_model}, warm-up {warmup}")
    ax.set_xlabel("training step")
    ax.set_ylabel("learning rate")
    ax.set_title("lr = d_model^-0.5 min(step^-0.5, step warmup^-1.5)")
    ax.legend()
    return fig


def _date_model():
    """The trained date model of notebooks 09 and 10: the checkpoint that ships with the package, the same
    weights on every machine (see tools/build_checkpoints.py)."""
    torch.set_num_threads(1)  # as in notebook 10
    return load_shipped_checkpoint("date_model")


def alignment_map() -> Figure:
    checkpoint = _date_model()
    model, src_vocab, tgt_vocab = checkpoint.model.eval(), checkpoint.src_vocab, checkpoint.tgt_vocab
    text = "Wednesday, March 3, 2021"
    src = make_batch([(text, "")], src_vocab, tgt_vocab).src
    out = greedy_decode(model, src, max_len=20)
    n_out = int(out.lengths[0])
    tgt_in = torch.cat([torch.full((1, 1), BOS_ID), out.tokens[:, :-1]], dim=1)
    weights = cross_attention_maps(model, src, tgt_in)[-1, 0].mean(dim=0)  # last layer, heads averaged
    fig, ax = plt.subplots(figsize=(10.0, 4.8))
    plot_attention(
        weights[:n_out, : len(text)],
        [tgt_vocab.tokens[i] for i in out.tokens[0, :n_out].tolist()],
        [c if c != " " else "·" for c in text],
        ax=ax,
        title=f"cross-attention (last layer): {text!r} -> {tgt_vocab.decode(out.tokens[0].tolist())}",
    )
    ax.set_xlabel("source character")
    ax.set_ylabel("output character being produced")
    return fig


def attention_heads() -> Figure:
    checkpoint = _date_model()
    model, src_vocab, tgt_vocab = checkpoint.model.eval(), checkpoint.src_vocab, checkpoint.tgt_vocab
    text = "3rd of March 2021"
    src = make_batch([(text, "")], src_vocab, tgt_vocab).src
    with torch.no_grad():
        model.encode(src)
    weights = model.encoder.layers[-1].self_attention.attention_weights[0]  # (heads, len, len)
    labels = [c if c != " " else "·" for c in text]
    return plot_attention_heads(
        weights, labels, labels, suptitle="Encoder self-attention heads (last layer) of the trained date model"
    )


def benchmark_attention_scaling() -> Figure | None:
    """Redrawn from benchmarks/results.json (the timings of the last benchmark run), if there is one."""
    results = ROOT / "benchmarks" / "results.json"
    if not results.exists():
        return None

    return scaling_figure(json.loads(results.read_text())["attention_scaling"])


def language_model_curve() -> Figure | None:
    """Notebook 15's shipped language model: its training curve (stored beside it by ``--history-out``) and, if a
    benchmark has run, the held-out loss of the course's recipe and the baseline's after 60, 120 and 180 s."""
    from transformer_course.families.language_model import SHIPPED_LANGUAGE_MODEL, load_shipped_language_model
    from transformer_course.text.corpus import load_stdlib_text
    from transformer_course.text.lm_data import encode_corpus

    history_path = SHIPPED_LANGUAGE_MODEL.with_suffix(".history.json")
    if not history_path.exists():
        return None
    history = json.loads(history_path.read_text())
    _, tokenizer, _, _ = load_shipped_language_model()
    # the shipped model's split, and its tokenizer retrained on the training part: the same merges
    corpus = encode_corpus(load_stdlib_text().text, tokenizer.vocab_size)
    if corpus.tokenizer.merges != tokenizer.merges:
        raise RuntimeError("the shipped language model's tokenizer is not encode_corpus's on the shipped corpus")
    tokens_per_char = {
        "train": len(corpus.train_ids) / len(corpus.train_text),
        "held out": len(corpus.held_out_ids) / len(corpus.held_out_text),
    }
    bits = 1 / torch.log(torch.tensor(2.0)).item()
    results = ROOT / "benchmarks" / "results.json"
    budgets = json.loads(results.read_text()).get("language_model", []) if results.exists() else []
    fig, axes = plt.subplots(1, 2 if budgets else 1, figsize=(11 if budgets else 6, 3.8), squeeze=False)
    ax = axes[0, 0]
    loss = torch.tensor(history["loss"])
    smooth = loss.unfold(0, 50, 10).mean(dim=1) * tokens_per_char["train"] * bits
    ax.plot(torch.arange(len(smooth)) * 10 + 50, smooth, color="C0", alpha=0.6, label="training (mean of 50 steps)")
    held_out = [e * tokens_per_char["held out"] * bits for e in history["eval_loss"]]
    ax.plot(history["eval_steps"], held_out, "o-", color="C1", label="held-out text")
    ax.set(xlabel="step", ylabel="bits per character", title="The shipped GPT (LLaMA style, 512 BPE tokens)")
    ax.set_ylim(1.0, 3.5)
    ax.legend()
    if budgets:
        ax = axes[0, 1]
        for i, recipe in enumerate(dict.fromkeys(row["recipe"] for row in budgets)):
            rows = [row for row in budgets if row["recipe"] == recipe]
            ax.plot([r["budget (s)"] for r in rows], [r["held-out nats/char"] * bits for r in rows], "o-",
                    color=f"C{i + 2}", label=recipe)  # fmt: skip
        ax.set(xlabel="training time (s), 2 CPU cores", ylabel="held-out bits per character",
               title="The same wall clock: notebook 15's recipe vs nanoGPT's")  # fmt: skip
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


# name -> (function that draws it, the notebook that explains it)
FIGURES: dict[str, tuple[Callable[[], Figure | None], str]] = {
    "architecture": (draw_architecture, "00_introduction.ipynb"),
    "gradient_decay": (gradient_decay, "01_rnn_limits.ipynb"),
    "positional_encoding": (positional_heatmap, "03_positional_encoding.ipynb"),
    "attention_heads": (attention_heads, "05_multi_head_attention.ipynb"),
    "warmup_schedule": (warmup_schedule, "09_training.ipynb"),
    "alignment_map": (alignment_map, "10_decoding.ipynb"),
    "benchmark_attention_scaling": (benchmark_attention_scaling, "13_efficient_attention.ipynb"),
    "language_model_curve": (language_model_curve, "15_gpt_from_scratch.ipynb"),
}


def save(fig: Figure, path: Path) -> None:
    # no software version in the PNG metadata, so the file changes only when the picture does
    fig.savefig(path, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="list the figures and exit")
    args = parser.parse_args()
    if args.list:
        for name, (_, notebook) in FIGURES.items():
            print(f"{name}.png  (notebooks/{notebook})")
        return
    FIGURES_DIR.mkdir(exist_ok=True)
    for name, (draw, _) in FIGURES.items():
        seed_everything(0)
        set_style()
        fig = draw()
        if fig is None:
            print(f"figures/{name}.png: skipped (no input for it yet)")
            continue
        save(fig, FIGURES_DIR / f"{name}.png")
        print(f"figures/{name}.png")


if __name__ == "__main__":
    main()

"""Regenerate every figure under figures/ that the README shows, deterministically.

A figure that illustrates a notebook is the one that notebook shows: drawn with the same package functions, settings
and seeds as the notebook's cell (architecture is notebook 00's, gradient_decay notebook 01's computation,
positional_encoding notebook 03's table, warmup_schedule notebook 09's two panels, alignment_map one of notebook 10's
three maps), or, where the figure comes from a model the notebook itself trains, copied from the notebook's stored
output (attention_heads, from notebook 05). tests/test_readme.py checks the copy and 01's numbers against the stored
notebooks. Two figures come from records instead: language_model_curve from the shipped GPT's training history and
benchmark section 8, benchmark_attention_scaling from benchmark section 4 (benchmarks/results.json).

python -m tools.make_figures                       # all figures
python -m tools.make_figures gradient_decay ...    # only these
python -m tools.make_figures --list                # their names and notebooks
"""

from __future__ import annotations

import argparse
import base64
import json
import math
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from transformer_course.core.decoding import cross_attention_maps, greedy_decode  # noqa: E402
from transformer_course.core.positional import sinusoidal_table  # noqa: E402
from transformer_course.prelude.rnn import (  # noqa: E402
    RNNCell,
    chain_jacobians,
    rnn_step_jacobians,
    scaled_recurrent_weight,
    spectral_norms,
)
from transformer_course.text.tasks import BOS_ID, make_batch  # noqa: E402
from transformer_course.training.checkpoints import load_shipped_checkpoint  # noqa: E402
from transformer_course.training.schedules import noam_lr  # noqa: E402
from transformer_course.utils import seed_everything  # noqa: E402
from transformer_course.viz import draw_architecture, plot_attention, scaling_figure, set_style  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIGURES_DIR = ROOT / "figures"
NOTEBOOKS_DIR = ROOT / "notebooks"

# Notebook 01, section 3 (the cell that prints "||dS_T/dS_k|| for a tanh RNN, by distance T - k"): its probe RNN
GRADIENT_SCALES = (0.5, 0.9, 1.0, 1.5, 2.0)
T_PROBE, HIDDEN_PROBE, INPUT_PROBE = 60, 32, 8


def gradient_by_distance(nonlinearity: str = "tanh") -> dict[float, torch.Tensor]:
    """Notebook 01's measurement, with its settings and seed: scale -> ||dS_T/dS_k|| for T - k = 0..60 (float64).

    A float64 RNN of 32 units reads 60 random inputs of 8 numbers; its recurrent matrix is one random rotation (every
    singular value 1) times the scale, its input matrix random, its biases zero. ``nonlinearity`` is "tanh" or
    "identity" (the linear RNN, whose norms are exactly scale^(T-k)).
    """
    if nonlinearity not in ("tanh", "identity"):
        raise ValueError(f"nonlinearity must be 'tanh' or 'identity', got {nonlinearity!r}")
    g = torch.Generator().manual_seed(0)  # drawn in notebook 01's order: inputs, rotation, input matrix
    x_probe = torch.randn(1, T_PROBE, INPUT_PROBE, generator=g, dtype=torch.float64)
    w_rotation = scaled_recurrent_weight(HIDDEN_PROBE, 1.0, g).double()
    u_probe = torch.randn(HIDDEN_PROBE, INPUT_PROBE, generator=g, dtype=torch.float64) / math.sqrt(INPUT_PROBE)
    norms = {}
    for scale in GRADIENT_SCALES:
        cell = RNNCell(INPUT_PROBE, HIDDEN_PROBE, nonlinearity).double()
        with torch.no_grad():
            cell.weight_hh.copy_(w_rotation * scale)
            cell.weight_ih.copy_(u_probe)
            cell.bias_ih.zero_()
            cell.bias_hh.zero_()
        _, jacobians = rnn_step_jacobians(cell, x_probe)
        norms[scale] = spectral_norms(chain_jacobians(jacobians))[0].flip(0)  # index = distance T - k
    return norms


def gradient_decay() -> Figure:
    """Notebook 01's figure of section 3: ||dS_T/dS_k|| against T - k, for the tanh RNN and the linear one."""
    tanh, linear = gradient_by_distance("tanh"), gradient_by_distance("identity")
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.0, 4.0), sharey=True)
    for scale in GRADIENT_SCALES:
        left.semilogy(tanh[scale].numpy(), label=f"scale {scale}")
        right.semilogy(linear[scale].numpy(), label=f"scale {scale}")
    for ax, title in ((left, "tanh RNN"), (right, "linear RNN: scale^(T-k)")):
        ax.axhline(1.0, color="0.4", lw=0.8, ls="--")
        ax.set_xlabel("distance T - k (time steps)")
        ax.set_title(title)
    left.set_ylabel("||dS_T / dS_k||  (log scale)")
    right.legend(title="singular values of W", fontsize=9, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    return fig


def positional_heatmap() -> Figure:
    """Notebook 03's table of section 2: 100 positions x 64 dimensions."""
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    image = ax.imshow(
        sinusoidal_table(100, 64).numpy(), cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest"
    )
    fig.colorbar(image, ax=ax, label="PE value")
    ax.set_xlabel("dimension (even: sin, odd: cos)")
    ax.set_ylabel("position")
    ax.set_title("sinusoidal table (100 positions x 64 dimensions)")
    ax.grid(False)
    fig.tight_layout()
    return fig


def warmup_schedule() -> Figure:
    """Notebook 09's figure of the paper's schedule: three warm-ups at d_model 512, three widths at warm-up 4000."""
    steps = range(1, 20001)
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 3.4), sharey=True)
    for warmup in (1000, 4000, 8000):
        axes[0].plot(steps, [noam_lr(s, 512, warmup) for s in steps], label=f"warmup {warmup}")
    for d_model in (256, 512, 1024):
        axes[1].plot(steps, [noam_lr(s, d_model, 4000) for s in steps], label=f"d_model {d_model}")
    axes[0].set_title("d_model = 512")
    axes[1].set_title("warmup = 4000")
    for ax in axes:
        ax.set_xlabel("step")
        ax.legend()
    axes[0].set_ylabel("learning rate")
    fig.tight_layout()
    return fig


def _date_model():
    """The trained date model of notebooks 09 and 10: the checkpoint that ships with the package, the same
    weights on every machine (see tools/build_checkpoints.py)."""
    torch.set_num_threads(1)  # as in notebook 10
    return load_shipped_checkpoint("date_model")


# one of the three spellings whose maps notebook 10 draws in section 6
ALIGNMENT_EXAMPLE = "WEDNESDAY, MARCH 3, 2021"


def alignment_map() -> Figure:
    """One map of notebook 10's section 6: the last decoder layer's cross-attention, averaged over its heads."""
    checkpoint = _date_model()
    model, src_vocab, tgt_vocab = checkpoint.model.eval(), checkpoint.src_vocab, checkpoint.tgt_vocab
    text = ALIGNMENT_EXAMPLE
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


def stored_notebook_image(notebook: str, cell_id: str) -> bytes:
    """The first PNG that cell ``cell_id`` of notebooks/``notebook`` stored: the figure as the notebook shows it."""
    cells = json.loads((NOTEBOOKS_DIR / notebook).read_text(encoding="utf-8"))["cells"]
    cell = next((c for c in cells if c.get("id") == cell_id), None)
    if cell is None:
        raise ValueError(f"notebooks/{notebook} has no cell with id {cell_id!r}")
    for output in cell.get("outputs", []):
        image = output.get("data", {}).get("image/png")
        if image:
            return base64.b64decode("".join(image) if isinstance(image, list) else image)
    raise ValueError(f"cell {cell_id!r} of notebooks/{notebook} stores no PNG image (execute the notebook first)")


# notebook 05, section 4: the four heads of layer 0 of the model trained there, on one held-out sequence
ATTENTION_HEADS_CELL = ("05_multi_head_attention.ipynb", "003271de")


def attention_heads() -> bytes:
    """Notebook 05's map of the four heads of layer 0 (three find the partner, one the previous token), copied."""
    return stored_notebook_image(*ATTENTION_HEADS_CELL)


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


# name -> (function that draws it, the notebook that explains it); a function gives a figure, the bytes of a PNG
# copied from a notebook, or None when its input does not exist yet
FIGURES: dict[str, tuple[Callable[[], Figure | bytes | None], str]] = {
    "architecture": (draw_architecture, "00_introduction.ipynb"),
    "gradient_decay": (gradient_decay, "01_rnn_limits.ipynb"),
    "positional_encoding": (positional_heatmap, "03_positional_encoding.ipynb"),
    "attention_heads": (attention_heads, "05_multi_head_attention.ipynb"),
    "warmup_schedule": (warmup_schedule, "09_training.ipynb"),
    "alignment_map": (alignment_map, "10_decoding.ipynb"),
    "benchmark_attention_scaling": (benchmark_attention_scaling, "13_efficient_attention.ipynb"),
    "language_model_curve": (language_model_curve, "15_gpt_from_scratch.ipynb"),
}


def save(fig: Figure | bytes, path: Path) -> None:
    if isinstance(fig, bytes):  # a notebook's stored PNG, written as it is
        path.write_bytes(fig)
        return
    # no software version in the PNG metadata, so the file changes only when the picture does
    fig.savefig(path, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="only these figures (default: all)")
    parser.add_argument("--list", action="store_true", help="list the figures and exit")
    args = parser.parse_args()
    if args.list:
        for name, (_, notebook) in FIGURES.items():
            print(f"{name}.png  (notebooks/{notebook})")
        return
    unknown = [name for name in args.names if name not in FIGURES]
    if unknown:
        parser.error(f"no figure named {', '.join(unknown)}; the figures are {', '.join(FIGURES)}")
    FIGURES_DIR.mkdir(exist_ok=True)
    for name, (draw, _) in FIGURES.items():
        if args.names and name not in args.names:
            continue
        seed_everything(0)
        set_style("notebook")  # the committed figures, whatever TRANSFORMER_COURSE_STYLE says
        fig = draw()
        if fig is None:
            print(f"figures/{name}.png: skipped (no input for it yet)")
            continue
        save(fig, FIGURES_DIR / f"{name}.png")
        print(f"figures/{name}.png")


if __name__ == "__main__":
    main()

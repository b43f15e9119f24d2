"""Plots shared by the notebooks: one style, attention heatmaps with token labels, the architecture diagram."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import seaborn as sns
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from torch import Tensor


def set_style() -> None:
    """The course's one plotting style: white grid, readable font sizes, a fixed figure size and DPI.

    Inside IPython it also shows figures as images only, without the text line "<Figure size ...>" that
    Jupyter stores beside each image (a machine-specific object repr in the committed outputs).
    """
    sns.set_theme(style="whitegrid", context="notebook")
    plt.rcParams.update({"figure.figsize": (6.4, 4.0), "figure.dpi": 90, "savefig.dpi": 110, "axes.titlesize": 12})
    _hide_figure_text_repr()


def _hide_figure_text_repr() -> None:
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        # loading the inline backend resets the figure formatters, so load it first (by making a figure)
        plt.close(plt.figure())
        shell.display_formatter.formatters["text/plain"].for_type(Figure, lambda fig, printer, cycle: None)


def plot_attention(
    weights: Tensor,
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    annotate: bool = False,
) -> Axes:
    """Heatmap of one attention matrix.

    weights: (len_q, len_k), rows are queries (y axis), columns keys (x axis); values in [0, 1].
    """
    if weights.dim() != 2:
        raise ValueError(f"weights must be one (len_q, len_k) matrix, got shape {tuple(weights.shape)}")
    len_q, len_k = weights.shape
    for name, labels, n in (("query_labels", query_labels, len_q), ("key_labels", key_labels, len_k)):
        if labels is not None and len(labels) != n:
            raise ValueError(f"{name} has {len(labels)} labels, expected {n}")
    if ax is None:
        _, ax = plt.subplots(figsize=(0.45 * len_k + 2.0, 0.4 * len_q + 1.2))
    sns.heatmap(
        weights.detach().cpu().float().numpy(),
        ax=ax,
        vmin=0.0,
        vmax=1.0,
        cmap="viridis",
        square=True,
        annot=annotate,
        fmt=".2f",
        cbar_kws={"label": "attention weight"},
        xticklabels=list(key_labels) if key_labels is not None else "auto",
        yticklabels=list(query_labels) if query_labels is not None else "auto",
    )
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    ax.tick_params(axis="x", rotation=90)
    ax.tick_params(axis="y", rotation=0)
    if title:
        ax.set_title(title)
    return ax


def _box(ax: Axes, x: float, y: float, w: float, h: float, text: str, color: str) -> None:
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08", fc=color, ec="0.25"))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=9)


def _arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float]) -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color="0.25", lw=1.2))


def draw_architecture() -> Figure:
    """The encoder-decoder Transformer as a block diagram (Post-LN, as in the paper)."""
    fig, ax = plt.subplots(figsize=(8.0, 7.2))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 11)
    ax.axis("off")
    attention, ffn, norm, embed, out = "#f7c6a3", "#a8d5ba", "#f3e79b", "#c9d7f0", "#e0c3e8"
    # encoder (left)
    ax.add_patch(FancyBboxPatch((0.6, 3.0), 3.6, 4.3, boxstyle="round,pad=0.1", fc="0.96", ec="0.5", ls="--"))
    ax.text(0.45, 5.15, "N x", ha="right", va="center", fontsize=11)
    _box(ax, 1.0, 3.3, 2.8, 0.55, "Multi-head self-attention", attention)
    _box(ax, 1.0, 4.05, 2.8, 0.45, "Add & LayerNorm", norm)
    _box(ax, 1.0, 4.95, 2.8, 0.55, "Feed-forward", ffn)
    _box(ax, 1.0, 5.7, 2.8, 0.45, "Add & LayerNorm", norm)
    ax.text(2.4, 6.55, "Encoder", ha="center", fontsize=11, weight="bold")
    _box(ax, 1.0, 1.6, 2.8, 0.6, "Embedding x sqrt(d_model)\n+ positional encoding", embed)
    ax.text(2.4, 0.9, "source tokens", ha="center", fontsize=10)
    _arrow(ax, (2.4, 1.1), (2.4, 1.6))
    _arrow(ax, (2.4, 2.2), (2.4, 3.3))
    for y0, y1 in ((3.85, 4.05), (4.5, 4.95), (5.5, 5.7)):
        _arrow(ax, (2.4, y0), (2.4, y1))
    # decoder (right)
    ax.add_patch(FancyBboxPatch((5.6, 3.0), 3.6, 5.8, boxstyle="round,pad=0.1", fc="0.96", ec="0.5", ls="--"))
    ax.text(9.45, 5.9, "x N", ha="left", va="center", fontsize=11)
    _box(ax, 6.0, 3.3, 2.8, 0.55, "Masked multi-head\nself-attention", attention)
    _box(ax, 6.0, 4.05, 2.8, 0.45, "Add & LayerNorm", norm)
    _box(ax, 6.0, 4.8, 2.8, 0.55, "Multi-head cross-attention", attention)
    _box(ax, 6.0, 5.55, 2.8, 0.45, "Add & LayerNorm", norm)
    _box(ax, 6.0, 6.45, 2.8, 0.55, "Feed-forward", ffn)
    _box(ax, 6.0, 7.2, 2.8, 0.45, "Add & LayerNorm", norm)
    ax.text(7.4, 9.05, "Decoder", ha="center", fontsize=11, weight="bold")
    _box(ax, 6.0, 1.6, 2.8, 0.6, "Embedding x sqrt(d_model)\n+ positional encoding", embed)
    ax.text(7.4, 0.9, "target tokens, shifted right", ha="center", fontsize=10)
    _arrow(ax, (7.4, 1.1), (7.4, 1.6))
    _arrow(ax, (7.4, 2.2), (7.4, 3.3))
    for y0, y1 in ((3.85, 4.05), (4.5, 4.8), (5.35, 5.55), (6.0, 6.45), (7.0, 7.2)):
        _arrow(ax, (7.4, y0), (7.4, y1))
    _box(ax, 6.0, 9.5, 2.8, 0.5, "Linear + softmax", out)
    _arrow(ax, (7.4, 7.65), (7.4, 9.5))
    ax.text(7.4, 10.4, "next-token probabilities", ha="center", fontsize=10)
    _arrow(ax, (7.4, 10.0), (7.4, 10.25))
    # encoder output feeds every decoder layer's cross-attention as K and V
    ax.plot([3.8, 4.6, 4.6], [5.92, 5.92, 5.07], color="0.25", lw=1.2)
    _arrow(ax, (4.6, 5.07), (6.0, 5.07))
    ax.text(5.1, 4.75, "memory\n(K, V)", fontsize=9, ha="center", va="top")
    ax.set_title("The Transformer (Vaswani et al., 2017)", fontsize=12)
    return fig


def plot_position_pair(table: Tensor, pos_a: int, pos_b: int, dims: tuple[int, int] | None = None) -> Figure:
    """Compare two rows of a positional-encoding table over a range of dimensions (notebook 03's widget).

    table: (max_len, d_model); pos_a, pos_b: row indices; dims: (first, last) dimension shown, inclusive
    (default: all). The top panel shows PE(pos_a) and PE(pos_b); the bottom one their product per dimension,
    whose sum over all dimensions is the dot product PE(pos_a) . PE(pos_b).
    """
    if table.dim() != 2:
        raise ValueError(f"table must be (max_len, d_model), got shape {tuple(table.shape)}")
    max_len, d_model = table.shape
    for name, pos in (("pos_a", pos_a), ("pos_b", pos_b)):
        if not 0 <= pos < max_len:
            raise ValueError(f"{name} must be in [0, {max_len}), got {pos}")
    first, last = (0, d_model - 1) if dims is None else dims
    if not 0 <= first <= last < d_model:
        raise ValueError(f"dims must satisfy 0 <= first <= last < {d_model}, got {dims}")
    a, b = table[pos_a].detach().cpu().double(), table[pos_b].detach().cpu().double()
    cosine = float((a @ b) / (a.norm() * b.norm()))
    shown = slice(first, last + 1)
    index = list(range(first, last + 1))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8.0, 4.6), sharex=True, height_ratios=(3, 2))
    top.plot(index, a[shown].numpy(), "o", ms=5, label=f"PE({pos_a})")
    top.plot(index, b[shown].numpy(), "x", ms=6, mew=1.5, label=f"PE({pos_b})")
    top.set_ylim(-1.15, 1.15)
    top.set_ylabel("value")
    top.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=9)
    top.set_title(
        f"positions {pos_a} and {pos_b} (offset {abs(pos_b - pos_a)}): dot product {float(a @ b):.2f}, "
        f"cosine {cosine:.3f} over all {d_model} dims"
    )
    bottom.bar(index, (a * b)[shown].numpy(), color="0.45")
    bottom.axhline(0.0, color="0.2", lw=0.8)
    bottom.set_ylim(-1.1, 1.1)
    bottom.set_ylabel("product")
    bottom.set_xlabel("dimension (low = fast-turning, high = slow)")
    fig.tight_layout()
    return fig


def plot_softmax_row(
    scores: Tensor,
    labels: Sequence[str],
    temperature: float = 1.0,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Bar chart of softmax(scores / temperature) for one query's row of scores (notebook 04's widget).

    scores: (len_k,) raw scores of one query against every key; labels: len_k key names.
    The title gives the temperature, the largest weight and the entropy in nats.
    """
    if scores.dim() != 1:
        raise ValueError(f"scores must be one row (len_k,), got shape {tuple(scores.shape)}")
    if len(labels) != scores.shape[0]:
        raise ValueError(f"got {len(labels)} labels for {scores.shape[0]} scores")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    weights = (scores.detach().cpu().double() / temperature).softmax(dim=-1)
    entropy = float(-(weights * weights.clamp_min(1e-300).log()).sum())
    if ax is None:
        _, ax = plt.subplots(figsize=(0.55 * len(labels) + 2.0, 3.0))
    ax.bar(range(len(labels)), weights.numpy(), color=sns.color_palette("viridis", len(labels)))
    ax.set_xticks(range(len(labels)), list(labels), rotation=45, ha="right")
    ax.set_ylim(0.0, 1.05)
    ax.set_ylabel("attention weight")
    heading = f"T = {temperature:.2f}: max weight {float(weights.max()):.2f}, entropy {entropy:.2f} nats"
    ax.set_title(f"{title}\n{heading}" if title else heading, fontsize=10)
    return ax


def plot_attention_heads(
    weights: Tensor,
    query_labels: Sequence[str],
    key_labels: Sequence[str] | None = None,
    titles: Sequence[str] | None = None,
    suptitle: str | None = None,
) -> Figure:
    """One attention map per head, side by side, sharing one colour scale (notebook 05).

    weights: (heads, len_q, len_k), values in [0, 1]; query_labels: len_q names; key_labels: len_k names (default:
    the query labels, as in self-attention); titles: one per head (default "head 0", "head 1", ...).
    """
    if weights.dim() != 3:
        raise ValueError(f"weights must be (heads, len_q, len_k), got shape {tuple(weights.shape)}")
    heads, len_q, len_k = weights.shape
    key_labels = query_labels if key_labels is None else key_labels
    for name, labels, n in (("query_labels", query_labels, len_q), ("key_labels", key_labels, len_k)):
        if len(labels) != n:
            raise ValueError(f"{name} has {len(labels)} labels, expected {n}")
    titles = [f"head {h}" for h in range(heads)] if titles is None else list(titles)
    if len(titles) != heads:
        raise ValueError(f"got {len(titles)} titles for {heads} heads")
    size = 0.28 * max(len_q, len_k) + 0.9
    fig, axes = plt.subplots(1, heads, figsize=(size * heads + 1.2, size + 0.6), squeeze=False)
    for h, ax in enumerate(axes[0]):
        sns.heatmap(
            weights[h].detach().cpu().float().numpy(),
            ax=ax,
            vmin=0.0,
            vmax=1.0,
            cmap="viridis",
            square=True,
            cbar=False,
            xticklabels=list(key_labels),
            yticklabels=list(query_labels) if h == 0 else False,
        )
        ax.set_title(titles[h], fontsize=10)
        ax.set_xlabel("key")
        ax.tick_params(axis="x", rotation=90, labelsize=8)
        ax.tick_params(axis="y", rotation=0, labelsize=8)
    axes[0][0].set_ylabel("query")
    fig.colorbar(axes[0][-1].collections[0], ax=list(axes[0]), label="attention weight", fraction=0.03, pad=0.02)
    if suptitle:
        fig.suptitle(suptitle, fontsize=11)
    return fig


def plot_masks(
    masks: Tensor,
    titles: Sequence[str],
    query_labels: Sequence[str] | None = None,
    key_labels: Sequence[str] | None = None,
    suptitle: str | None = None,
) -> Figure:
    """Boolean attention masks side by side (notebook 06): a filled cell may attend, an empty one is blocked.

    masks: (n, len_q, len_k) bool, ``True`` = may attend (the package's convention); titles: n panel titles;
    query_labels, key_labels: axis names (default: positions 0, 1, ...).
    """
    if masks.dim() != 3 or masks.dtype != torch.bool:
        raise ValueError(f"masks must be a bool (n, len_q, len_k) tensor, got {masks.dtype} {tuple(masks.shape)}")
    n, len_q, len_k = masks.shape
    if len(titles) != n:
        raise ValueError(f"got {len(titles)} titles for {n} masks")
    query_labels = [str(i) for i in range(len_q)] if query_labels is None else list(query_labels)
    key_labels = [str(j) for j in range(len_k)] if key_labels is None else list(key_labels)
    size = 0.3 * max(len_q, len_k) + 1.0
    fig, axes = plt.subplots(1, n, figsize=(size * n + 0.4, size + 0.5), squeeze=False)
    for i, ax in enumerate(axes[0]):
        sns.heatmap(
            masks[i].detach().cpu().int().numpy(),
            ax=ax,
            vmin=0,
            vmax=1,
            cmap=["#f2f2f2", "#3a6fb0"],
            square=True,
            cbar=False,
            linewidths=0.5,
            linecolor="white",
            xticklabels=key_labels,
            yticklabels=query_labels if i == 0 else False,
        )
        ax.set_title(titles[i], fontsize=10)
        ax.set_xlabel("key position")
        ax.tick_params(axis="x", rotation=0, labelsize=8)
        ax.tick_params(axis="y", rotation=0, labelsize=8)
    axes[0][0].set_ylabel("query position")
    legend = "blue: may attend, grey: blocked"
    fig.suptitle(f"{suptitle}\n({legend})" if suptitle else legend, fontsize=11)
    fig.tight_layout()
    return fig


def scaling_figure(rows: list[dict]) -> Figure:
    """Time and peak memory of attention against n, written out vs F.scaled_dot_product_attention (log-log).

    rows: the "scaling" rows of ``benchmarks/results.json`` (one per n, keys as ``benchmarks/run_benchmarks.py``
    writes them).
    """
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(10, 3.8))
    ns = [r["n"] for r in rows]
    methods = (("written_out", "written out (scores materialised)"), ("sdpa", "F.scaled_dot_product_attention"))
    for method, label in methods:
        ax_t.plot(ns, [r[f"time {method} (s)"] * 1e3 for r in rows], marker="o", label=label)
        ax_m.plot(ns, [max(r[f"peak extra memory {method} (MB)"], 0.1) for r in rows], marker="o", label=label)
    ax_m.plot(ns, [r["scores matrix (MB)"] for r in rows], ls="--", color="0.5", label="one n x n score matrix")
    for ax, ylabel in ((ax_t, "time per call (ms)"), (ax_m, "peak extra memory (MB)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length n (tokens)")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
    ax_t.set_title("attention time against n")
    ax_m.set_title("attention memory against n")
    fig.tight_layout()
    return fig

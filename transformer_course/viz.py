"""Plots shared by the notebooks: one style, attention heatmaps with token labels, the architecture diagram, labels
that do not collide on a scatter plot.

The style has a projector setting for teaching in a hall: ``set_style("projector")``, or the environment variable
``TRANSFORMER_COURSE_STYLE=projector`` for every notebook's own ``set_style()`` call. It draws the same plots larger
and sharper (see :func:`set_style`); it is off unless asked for, and the notebooks' stored outputs are drawn without it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from matplotlib.text import Annotation
from matplotlib.transforms import Bbox
from torch import Tensor

from transformer_course.language import get_language, tr, use_chinese_font

STYLES = ("notebook", "projector")
STYLE_VARIABLE = "TRANSFORMER_COURSE_STYLE"  # the style set_style() picks when it is not given one
PROJECTOR_DPI = 120  # figures on screen in the projector style (notebook style: 90); saved ones PROJECTOR_SAVE_DPI
PROJECTOR_SAVE_DPI = 150  # (notebook style: 110)
PROJECTOR_SCALE = 1.5  # the projector style's text, and the figures this module sizes, against the notebook style
PROJECTOR_MIN_FONT = 14.0  # points: no text the course's plots write is smaller in the projector style
_style = "notebook"  # the style set last by set_style()


def set_style(style: str | None = None) -> None:
    """The course's one plotting style: white grid, readable font sizes, a fixed figure size and DPI.

    ``style`` is "notebook" (the default) or "projector", for teaching with a projector: the same plots, drawn at
    :data:`PROJECTOR_DPI` dpi instead of 90 (saved at 150 instead of 110), in seaborn's "talk" context (text and
    lines 1.5 times the notebook context's: ticks 16.5 pt, labels and titles 18 pt), every size the plots of this
    module set themselves 1.5 times larger and at least :data:`PROJECTOR_MIN_FONT` (14) points, and the figures they
    size themselves 1.5 times larger, so that their layout keeps room for the text. None (no argument) takes the
    style from the environment variable ``TRANSFORMER_COURSE_STYLE`` ("notebook" when it is unset), so a teacher
    who starts JupyterLab with ``TRANSFORMER_COURSE_STYLE=projector`` gets every notebook's figures for the
    projector from the ``set_style()`` call the notebook already makes.

    In the Chinese edition (``set_language("zh")``) it keeps a Chinese font as the fallback for Chinese text.

    Inside IPython it also shows figures as images only, without the text line "<Figure size ...>" that
    Jupyter stores beside each image (a machine-specific object repr in the committed outputs).
    """
    global _style
    where = f" (the environment variable {STYLE_VARIABLE})" if style is None else ""
    style = os.environ.get(STYLE_VARIABLE, "notebook") if style is None else style
    if style not in STYLES:
        raise ValueError(f"style must be one of {STYLES}, got {style!r}{where}")
    _style = style
    projector = style == "projector"
    sns.set_theme(style="whitegrid", context="talk" if projector else "notebook")
    plt.rcParams.update(
        {
            "figure.figsize": (6.4, 4.0),
            "figure.dpi": PROJECTOR_DPI if projector else 90,
            "savefig.dpi": PROJECTOR_SAVE_DPI if projector else 110,
            "axes.titlesize": 12 * PROJECTOR_SCALE if projector else 12,
        }
    )
    if get_language() == "zh":  # seaborn's theme has just reset the fonts
        use_chinese_font()
    _hide_figure_text_repr()


def _font(size: float) -> float:
    """A font size (points) this module sets: as given in the notebook style; in the projector style
    :data:`PROJECTOR_SCALE` times larger and at least :data:`PROJECTOR_MIN_FONT`."""
    return max(PROJECTOR_MIN_FONT, PROJECTOR_SCALE * size) if _style == "projector" else size


def _size(width: float, height: float) -> tuple[float, float]:
    """A figure size (inches) this module sets: as given in the notebook style, :data:`PROJECTOR_SCALE` times
    larger in the projector style."""
    scale = PROJECTOR_SCALE if _style == "projector" else 1.0
    return (width * scale, height * scale)


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
        _, ax = plt.subplots(figsize=_size(0.45 * len_k + 2.0, 0.4 * len_q + 1.2))
    sns.heatmap(
        weights.detach().cpu().float().numpy(),
        ax=ax,
        vmin=0.0,
        vmax=1.0,
        cmap="viridis",
        square=True,
        annot=annotate,
        fmt=".2f",
        cbar_kws={"label": tr("attention weight", "注意力权重")},
        xticklabels=list(key_labels) if key_labels is not None else "auto",
        yticklabels=list(query_labels) if query_labels is not None else "auto",
    )
    ax.set_xlabel(tr("key (attended to)", "键（被关注方）"))
    ax.set_ylabel(tr("query (attending)", "查询（关注方）"))
    ax.tick_params(axis="x", rotation=90)
    ax.tick_params(axis="y", rotation=0)
    if title:
        ax.set_title(title)
    return ax


def _box(ax: Axes, x: float, y: float, w: float, h: float, text: str, color: str) -> None:
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08", fc=color, ec="0.25"))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=_font(9))


def _arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float]) -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color="0.25", lw=1.2))


def draw_architecture() -> Figure:
    """The encoder-decoder Transformer as a block diagram (Post-LN, as in the paper's Figure 1).

    Each sub-layer (attention or feed-forward) has a residual connection: the arrow that goes around it, from
    its input to the "Add & LayerNorm" box above it, which computes LayerNorm(x + sublayer(x)).
    """
    fig, ax = plt.subplots(figsize=_size(8.8, 8.6))
    ax.set_xlim(-0.7, 11.7)
    ax.set_ylim(0.3, 12.2)
    ax.axis("off")
    attention, ffn, norm, embed, out = "#f7c6a3", "#a8d5ba", "#f3e79b", "#c9d7f0", "#e0c3e8"
    width, tall, short = 3.0, 0.6, 0.45  # box width, height of a sub-layer box, height of an Add & LayerNorm box

    def stack(x: float, sublayers: list[tuple[str, str]], side: float) -> float:
        """Sub-layers bottom-up from y = 3.4, each followed by Add & LayerNorm, with its residual arrow drawn
        on the left (side < 0) or right (side > 0) of the boxes. Returns the top of the last box."""
        middle, y = x + width / 2, 3.4
        lane = x - 0.3 if side < 0 else x + width + 0.3  # where the residual arrows run
        edge = x if side < 0 else x + width
        for text, color in sublayers:
            branch = y + 0.2  # the residual leaves the main path here, below the sub-layer
            ax.plot([middle, lane, lane], [branch, branch, branch + 0.6 + tall + 0.4 + short / 2], color="0.25", lw=1.2)
            ax.plot([middle], [branch], "o", color="0.25", ms=3.5)
            _arrow(ax, (middle, y), (middle, y + 0.6))
            _box(ax, x, y + 0.6, width, tall, text, color)
            top = y + 0.6 + tall
            _arrow(ax, (middle, top), (middle, top + 0.4))
            _box(ax, x, top + 0.4, width, short, tr("Add & LayerNorm", "相加与归一化"), norm)
            _arrow(ax, (lane, top + 0.4 + short / 2), (edge, top + 0.4 + short / 2))
            y = top + 0.4 + short
        return y

    # encoder (left), residual arrows on its left
    encoder_x, decoder_x = 0.9, 7.0
    encoder_top = stack(
        encoder_x,
        [(tr("Multi-head self-attention", "多头自注意力"), attention), (tr("Feed-forward", "前馈网络"), ffn)],
        side=-1,
    )
    ax.add_patch(
        FancyBboxPatch((0.3, 3.15), 4.2, encoder_top - 2.75, boxstyle="round,pad=0.1", fc="none", ec="0.5", ls="--")
    )
    ax.text(0.1, (3.15 + encoder_top + 0.4) / 2, "N ×", ha="right", va="center", fontsize=_font(11))
    ax.text(
        1.55, encoder_top + 0.15, tr("Encoder", "编码器"), ha="center", va="bottom", fontsize=_font(11), weight="bold"
    )
    # decoder (right), residual arrows on its right
    decoder_top = stack(
        decoder_x,
        [
            (tr("Masked multi-head\nself-attention", "带掩码的\n多头自注意力"), attention),
            (tr("Multi-head\ncross-attention", "多头\n交叉注意力"), attention),
            (tr("Feed-forward", "前馈网络"), ffn),
        ],
        side=1,
    )
    ax.add_patch(
        FancyBboxPatch(
            (decoder_x - 0.6, 3.15), 4.2, decoder_top - 2.75, boxstyle="round,pad=0.1", fc="none", ec="0.5", ls="--"
        )
    )
    ax.text(
        decoder_x + width + 0.9,
        (3.15 + decoder_top + 0.4) / 2,
        "× N",
        ha="left",
        va="center",
        fontsize=_font(11),
    )
    ax.text(
        decoder_x + 0.65,
        decoder_top + 0.15,
        tr("Decoder", "解码器"),
        ha="center",
        va="bottom",
        fontsize=_font(11),
        weight="bold",
    )
    # inputs
    for x, label in (
        (encoder_x, tr("source tokens", "源词元")),
        (decoder_x, tr("target tokens, shifted right", "目标词元（右移一位）")),
    ):
        middle = x + width / 2
        _box(
            ax,
            x - 0.15,
            1.6,
            width + 0.3,
            0.7,
            tr("Embedding × √d_model\n+ positional encoding", "嵌入 × √d_model\n+ 位置编码"),
            embed,
        )
        ax.text(middle, 0.85, label, ha="center", va="center", fontsize=_font(10))
        _arrow(ax, (middle, 1.05), (middle, 1.6))
        ax.plot([middle, middle], [2.3, 3.4], color="0.25", lw=1.2)
    # the encoder's output (memory) enters every decoder layer's cross-attention as keys and values
    cross_y = 3.4 + 0.6 + tall + 0.4 + short + 0.6 + tall / 2  # middle of the cross-attention box
    ax.plot(
        [encoder_x + width, 5.1, 5.1], [encoder_top - short / 2, encoder_top - short / 2, cross_y], color="0.25", lw=1.2
    )
    _arrow(ax, (5.1, cross_y), (decoder_x, cross_y))
    ax.text(
        5.2,
        cross_y - 0.12,
        tr("encoder\noutput\n(K, V)", "编码器\n输出\n(K, V)"),
        fontsize=_font(9),
        ha="left",
        va="top",
    )
    # output layer
    middle = decoder_x + width / 2
    _box(ax, decoder_x, decoder_top + 0.9, width, 0.5, tr("Linear + softmax", "线性层 + softmax"), out)
    _arrow(ax, (middle, decoder_top), (middle, decoder_top + 0.9))
    _arrow(ax, (middle, decoder_top + 1.4), (middle, decoder_top + 1.8))
    ax.text(
        middle,
        decoder_top + 1.95,
        tr("next-token probabilities", "下一个词元的概率"),
        ha="center",
        va="bottom",
        fontsize=_font(10),
    )
    ax.text(
        -0.6,
        0.35,
        tr(
            "Each arrow that goes around a sub-layer is a residual connection: Add & LayerNorm computes "
            "LayerNorm(x + sublayer(x)).",
            "每条绕过子层的箭头都是一个残差连接：“相加与归一化”计算 LayerNorm(x + sublayer(x))。",
        ),
        fontsize=_font(8.5),
        ha="left",
        va="bottom",
        color="0.3",
    )
    ax.set_title(tr("The Transformer (Vaswani et al., 2017)", "Transformer（Vaswani 等，2017）"), fontsize=_font(12))
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
    fig, (top, bottom) = plt.subplots(2, 1, figsize=_size(8.0, 4.6), sharex=True, height_ratios=(3, 2))
    top.plot(index, a[shown].numpy(), "o", ms=5, label=f"PE({pos_a})")
    top.plot(index, b[shown].numpy(), "x", ms=6, mew=1.5, label=f"PE({pos_b})")
    top.set_ylim(-1.15, 1.15)
    top.set_ylabel(tr("value", "值"))
    top.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=_font(9))
    top.set_title(
        tr(
            f"positions {pos_a} and {pos_b} (offset {abs(pos_b - pos_a)}): dot product {float(a @ b):.2f}, "
            f"cosine {cosine:.3f} over all {d_model} dims",
            f"位置 {pos_a} 和 {pos_b}（相差 {abs(pos_b - pos_a)}）：在全部 {d_model} 维上，点积 {float(a @ b):.2f}，"
            f"余弦 {cosine:.3f}",
        )
    )
    bottom.bar(index, (a * b)[shown].numpy(), color="0.45")
    bottom.axhline(0.0, color="0.2", lw=0.8)
    bottom.set_ylim(-1.1, 1.1)
    bottom.set_ylabel(tr("product", "乘积"))
    bottom.set_xlabel(tr("dimension (low = fast-turning, high = slow)", "维度（下标小的维度转得快，下标大的转得慢）"))
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
        _, ax = plt.subplots(figsize=_size(0.55 * len(labels) + 2.0, 3.0))
    ax.bar(range(len(labels)), weights.numpy(), color=sns.color_palette("viridis", len(labels)))
    ax.set_xticks(range(len(labels)), list(labels), rotation=45, ha="right")
    ax.set_ylim(0.0, 1.05)
    ax.set_ylabel(tr("attention weight", "注意力权重"))
    heading = tr(
        f"T = {temperature:.2f}: max weight {float(weights.max()):.2f}, entropy {entropy:.2f} nats",
        f"T = {temperature:.2f}：最大权重 {float(weights.max()):.2f}，熵 {entropy:.2f} 奈特",
    )
    ax.set_title(f"{title}\n{heading}" if title else heading, fontsize=_font(10))
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
    titles = [tr(f"head {h}", f"{h} 号头") for h in range(heads)] if titles is None else list(titles)
    if len(titles) != heads:
        raise ValueError(f"got {len(titles)} titles for {heads} heads")
    size = 0.28 * max(len_q, len_k) + 0.9
    fig, axes = plt.subplots(1, heads, figsize=_size(size * heads + 1.2, size + 0.6), squeeze=False)
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
        ax.set_title(titles[h], fontsize=_font(10))
        ax.set_xlabel(tr("key", "键"))
        ax.tick_params(axis="x", rotation=90, labelsize=_font(8))
        ax.tick_params(axis="y", rotation=0, labelsize=_font(8))
    axes[0][0].set_ylabel(tr("query", "查询"))
    fig.colorbar(
        axes[0][-1].collections[0],
        ax=list(axes[0]),
        label=tr("attention weight", "注意力权重"),
        fraction=0.03,
        pad=0.02,
    )
    if suptitle:
        fig.suptitle(suptitle, fontsize=_font(11))
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
    fig, axes = plt.subplots(1, n, figsize=_size(size * n + 0.4, size + 0.5), squeeze=False)
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
        ax.set_title(titles[i], fontsize=_font(10))
        ax.set_xlabel(tr("key position", "键的位置"))
        ax.tick_params(axis="x", rotation=0, labelsize=_font(8))
        ax.tick_params(axis="y", rotation=0, labelsize=_font(8))
    axes[0][0].set_ylabel(tr("query position", "查询的位置"))
    legend = tr("blue: may attend, grey: blocked", "蓝色：可以关注；灰色：被屏蔽")
    fig.suptitle(f"{suptitle}\n" + tr(f"({legend})", f"（{legend}）") if suptitle else legend, fontsize=_font(11))
    fig.tight_layout()
    return fig


def label_points(
    ax: Axes,
    xy: Sequence[Sequence[float]] | Tensor | np.ndarray,
    labels: Sequence[str],
    colors: Sequence[str] | None = None,
    fontsize: float = 8,
) -> list[Annotation]:
    """Write each label near its point of a scatter plot without covering a point or another label (notebook 02).

    xy: (n, 2) data coordinates of the points, already drawn on ``ax``; labels: n strings; colors: n text colours
    (default: the style's text colour); fontsize: in points (the projector style enlarges it, see
    :func:`set_style`). Each label goes to the first spot, on rings of growing radius around its
    point (16 directions a ring, up and to the right first), that lies inside the axes, covers no point and no label
    written before, and whose line to its point crosses no label (in a crowd that leaves no such spot, the line may
    cross one). A label beyond the first ring gets a thin grey line to its point. Set the axes limits (e.g.
    ``ax.margins``) before calling: the spots are found in pixels. Returns the n annotations.
    """
    points = np.asarray(xy.detach().cpu() if isinstance(xy, Tensor) else xy, dtype=float)
    if points.ndim != 2 or points.shape[1] != 2:
        raise ValueError(f"xy must be (n, 2) point coordinates, got shape {points.shape}")
    n = points.shape[0]
    if len(labels) != n:
        raise ValueError(f"got {len(labels)} labels for {n} points")
    colors = [None] * n if colors is None else list(colors)
    if len(colors) != n:
        raise ValueError(f"got {len(colors)} colors for {n} points")
    if not fontsize > 0:
        raise ValueError(f"fontsize must be above 0, got {fontsize}")
    fontsize = _font(fontsize)  # larger in the projector style
    fig = ax.figure
    fig.canvas.draw()  # fixes the axes limits, so that data coordinates can be turned into pixels
    renderer, frame, px_per_pt = fig.canvas.get_renderer(), ax.get_window_extent(), fig.dpi / 72
    pixels = ax.transData.transform(points)  # (n, 2)
    taken = [Bbox.from_bounds(x - 4, y - 4, 8, 8) for x, y in pixels]  # the markers, then the labels written

    def free(box: Bbox, x: float, y: float, line_may_cross: bool = False) -> bool:
        """Inside the frame, clear of every marker and label, and (unless allowed) its line to (x, y) crosses no
        label."""
        inside = frame.x0 < box.x0 and box.x1 < frame.x1 and frame.y0 < box.y0 and box.y1 < frame.y1
        if not inside or any(box.overlaps(other) for other in taken):
            return False
        line = [
            (x + t / 10 * (box.x0 + box.width / 2 - x), y + t / 10 * (box.y0 + box.height / 2 - y)) for t in range(11)
        ]
        return line_may_cross or not any(other.contains(*p) for other in taken[n:] for p in line)

    annotations = []
    for (x, y), label, color in zip(pixels, labels, colors):
        probe = ax.text(0, 0, label, fontsize=fontsize)
        size = probe.get_window_extent(renderer)
        probe.remove()
        w, h = size.width + 2, size.height
        spots = [  # (radius, box) for 16 directions on each ring, up and to the right first
            (
                radius,
                Bbox.from_bounds(
                    x + (radius + w / 2) * math.cos(a) - w / 2, y + (radius + h / 2) * math.sin(a) - h / 2, w, h
                ),
            )
            for radius in range(4, 200, 6)
            for a in (math.pi / 4 + step * math.pi / 8 for step in range(16))
        ]
        # in a crowd every line may cross a label: then a spot clear of the others is still better than none
        radius, box = next((spot for spot in spots if free(spot[1], x, y)), None) or next(
            (spot for spot in spots if free(spot[1], x, y, line_may_cross=True)),
            (4, Bbox.from_bounds(x + 4, y + 4, w, h)),
        )
        taken.append(box)
        line = {"arrowstyle": "-", "color": "0.6", "lw": 0.6, "shrinkA": 0, "shrinkB": 2}
        annotation = ax.annotate(
            label,
            xy=ax.transData.inverted().transform((x, y)),
            xytext=((box.x0 + w / 2 - x) / px_per_pt, (box.y0 + h / 2 - y) / px_per_pt),
            textcoords="offset points",
            ha="center",
            va="center",
            fontsize=fontsize,
            color=color,
            arrowprops=line if radius > 4 else None,
        )
        annotations.append(annotation)
    return annotations


def scaling_figure(rows: list[dict]) -> Figure:
    """Time and peak memory of attention against n, written out vs F.scaled_dot_product_attention (log-log).

    rows: the "scaling" rows of ``benchmarks/results.json`` (one per n, keys as ``benchmarks/attention_scaling.py``
    writes them).
    """
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=_size(10, 3.8))
    ns = [r["n"] for r in rows]
    methods = (
        ("written_out", tr("written out (scores materialised)", "直接写出（分数矩阵放进内存）")),
        ("sdpa", "F.scaled_dot_product_attention"),
    )
    for method, label in methods:
        ax_t.plot(ns, [r[f"time {method} (s)"] * 1e3 for r in rows], marker="o", label=label)
        ax_m.plot(ns, [max(r[f"peak extra memory {method} (MB)"], 0.1) for r in rows], marker="o", label=label)
    ax_m.plot(
        ns,
        [r["scores matrix (MB)"] for r in rows],
        ls="--",
        color="0.5",
        label=tr("one n x n score matrix", "一个 n x n 分数矩阵"),
    )
    for ax, ylabel in (
        (ax_t, tr("time per call (ms)", "每次调用的时间（毫秒）")),
        (ax_m, tr("peak extra memory (MB)", "额外内存峰值（MB）")),
    ):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(tr("sequence length n (tokens)", "序列长度 n（词元）"))
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=_font(8))
    ax_t.set_title(tr("attention time against n", "注意力耗时随 n 的变化"))
    ax_m.set_title(tr("attention memory against n", "注意力内存随 n 的变化"))
    fig.tight_layout()
    return fig

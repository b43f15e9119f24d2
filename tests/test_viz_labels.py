"""label_points (notebook 02's 2-D map) writes every label, keeps the labels of a dense cluster apart and inside
the axes, and rejects bad shapes with a clear message."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.text import Text

from transformer_course.viz import label_points


def scatter(points: torch.Tensor):
    fig, ax = plt.subplots(figsize=(6.0, 4.5))
    ax.scatter(points[:, 0], points[:, 1], s=25)
    ax.margins(0.15)
    return fig, ax


def test_labels_of_a_dense_cluster_do_not_overlap_and_all_are_drawn():
    g = torch.Generator().manual_seed(0)
    cluster = 0.02 * torch.randn(24, 2, generator=g)  # 24 points far closer together than a label is wide
    spread = torch.tensor([[-1.0, -1.0], [1.0, 1.0]])  # two points far away set the axes limits
    points = torch.cat([cluster, spread])
    words = [f"word{i}" for i in range(len(points))]
    fig, ax = scatter(points)
    annotations = label_points(ax, points, words, colors=["C1"] * len(points))
    fig.canvas.draw()  # places the annotations where they will be drawn
    renderer = fig.canvas.get_renderer()
    boxes = [Text.get_window_extent(a, renderer) for a in annotations]  # the text alone, without its line
    frame = ax.get_window_extent(renderer)
    assert [a.get_text() for a in annotations] == words
    assert all(a.get_color() == "C1" for a in annotations)
    overlapping = [(i, j) for i in range(len(boxes)) for j in range(i) if boxes[i].overlaps(boxes[j])]
    assert overlapping == []
    assert all(frame.x0 < b.x0 and b.x1 < frame.x1 and frame.y0 < b.y0 and b.y1 < frame.y1 for b in boxes)
    assert sum(a.arrow_patch is not None for a in annotations) >= 20  # most had to move: a line joins them
    plt.close(fig)


def test_a_lone_point_keeps_its_label_on_the_first_rings():
    points = [[0.0, 0.0], [1.0, 1.0]]
    fig, ax = scatter(torch.tensor(points))
    annotations = label_points(ax, points, ["a", "b"])
    offsets = torch.tensor([a.xyann for a in annotations])  # label centre - point, in points (1/72 inch)
    assert (offsets.norm(dim=1) < 15).all()  # no farther than the second ring (radius 10 px) needs
    assert offsets[1, 1] < 0  # the top-right point's label cannot go up and out of the frame: it goes below
    plt.close(fig)


@pytest.mark.parametrize(
    "xy, labels, colors, message",
    [
        (torch.zeros(3, 3), ["a", "b", "c"], None, r"xy must be \(n, 2\) point coordinates, got shape \(3, 3\)"),
        (torch.zeros(2), ["a", "b"], None, r"xy must be \(n, 2\) point coordinates, got shape \(2,\)"),
        (torch.zeros(3, 2), ["a", "b"], None, "got 2 labels for 3 points"),
        (torch.zeros(2, 2), ["a", "b"], ["C0"], "got 1 colors for 2 points"),
    ],
)
def test_bad_shapes_raise_value_error(xy, labels, colors, message):
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match=message):
        label_points(ax, xy, labels, colors)
    plt.close(fig)


def test_fontsize_must_be_positive():
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="fontsize must be above 0, got 0"):
        label_points(ax, [[0.0, 0.0]], ["a"], fontsize=0)
    plt.close(fig)

"""The plots added for notebooks 05 and 06 draw what they are given and reject bad input with a clear message."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
import torch

from transformer_course import causal_mask
from transformer_course.viz import plot_attention_heads, plot_masks


def test_plot_attention_heads_draws_one_panel_per_head():
    weights = torch.softmax(torch.randn(3, 4, 5), dim=-1)
    fig = plot_attention_heads(weights, list("abcd"), list("vwxyz"), suptitle="cross")
    assert len(fig.axes) == 3 + 1  # three heads and the shared colour bar
    assert [ax.get_title() for ax in fig.axes[:3]] == ["head 0", "head 1", "head 2"]
    plt.close(fig)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(weights=torch.rand(4, 4), query_labels=list("abcd")), "(heads, len_q, len_k)"),
        (dict(weights=torch.rand(2, 4, 4), query_labels=list("abc")), "query_labels has 3 labels, expected 4"),
        (dict(weights=torch.rand(2, 4, 5), query_labels=list("abcd")), "key_labels has 4 labels, expected 5"),
        (dict(weights=torch.rand(2, 3, 3), query_labels=list("abc"), titles=["one"]), "1 titles for 2 heads"),
    ],
)
def test_plot_attention_heads_rejects_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plot_attention_heads(**kwargs)


def test_plot_masks_draws_one_panel_per_mask():
    masks = causal_mask(4)[0].expand(2, 4, 4)
    fig = plot_masks(masks, ["first", "second"])
    assert [ax.get_title() for ax in fig.axes] == ["first", "second"]
    plt.close(fig)


@pytest.mark.parametrize(
    "masks, titles, message",
    [
        (torch.ones(2, 3, 3), ["a", "b"], "must be a bool"),
        (torch.ones(3, 3, dtype=torch.bool), ["a"], "must be a bool"),
        (torch.ones(2, 3, 3, dtype=torch.bool), ["a"], "1 titles for 2 masks"),
    ],
)
def test_plot_masks_rejects_bad_input(masks, titles, message):
    with pytest.raises(ValueError, match=message):
        plot_masks(masks, titles)

"""The projector style of the course's plots (``transformer_course.viz.set_style("projector")``, or the environment
variable TRANSFORMER_COURSE_STYLE=projector): every text of every plot at least 14 pt, at 120 dpi. The notebook style,
the default, keeps the sizes the notebooks' stored figures were drawn with, also after the projector style was on."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.figure import Figure
from matplotlib.text import Text

from transformer_course import viz

WORDS = "the cat sat on the mat".split()


@pytest.fixture(autouse=True)
def _style_restored():
    """Each test's styles stay inside it: matplotlib's settings and the module's style come back as they were."""
    style = viz._style
    with matplotlib.rc_context():
        yield
    viz._style = style
    plt.close("all")


def figures() -> dict[str, Figure]:
    """One figure of each kind the course draws through viz, and a plain one drawn with the style alone."""
    g = torch.Generator().manual_seed(0)
    scatter, ax = plt.subplots()
    points = torch.randn(8, 2, generator=g)
    ax.scatter(points[:, 0], points[:, 1])
    ax.margins(0.2)
    viz.label_points(ax, points, [f"w{i}" for i in range(8)])
    plain, ax = plt.subplots()
    ax.plot([0.0, 1.0, 0.5], label="loss")
    ax.set(title="a plain figure", xlabel="step", ylabel="loss")
    ax.legend()
    rows = [
        {
            "n": n,
            "time written_out (s)": n * 1e-6,
            "time sdpa (s)": n * 5e-7,
            "peak extra memory written_out (MB)": n / 100,
            "peak extra memory sdpa (MB)": n / 1000,
            "scores matrix (MB)": n / 200,
        }
        for n in (64, 128, 256)
    ]
    return {
        "plot_attention": viz.plot_attention(
            torch.softmax(torch.randn(6, 6, generator=g), -1), WORDS, WORDS, annotate=True, title="weights"
        ).figure,
        "draw_architecture": viz.draw_architecture(),
        "plot_position_pair": viz.plot_position_pair(torch.randn(20, 16, generator=g).clamp(-1, 1), 0, 3),
        "plot_softmax_row": viz.plot_softmax_row(torch.randn(6, generator=g), WORDS, title="row").figure,
        "plot_attention_heads": viz.plot_attention_heads(
            torch.softmax(torch.randn(2, 6, 6, generator=g), -1), WORDS, suptitle="heads"
        ),
        "plot_masks": viz.plot_masks(torch.ones(2, 6, 6).tril().bool(), ["a", "b"], suptitle="masks"),
        "label_points": scatter,
        "scaling_figure": viz.scaling_figure(rows),
        "plain": plain,
    }


def text_sizes(fig: Figure) -> list[float]:
    """The size, in points, of every piece of text the figure shows."""
    fig.canvas.draw()
    return [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def png(fig: Figure) -> bytes:
    data = io.BytesIO()
    fig.savefig(data, format="png", bbox_inches="tight")
    return data.getvalue()


def test_the_projector_style_writes_every_text_at_14_points_or_more_at_120_dpi():
    viz.set_style("projector")
    assert viz.PROJECTOR_MIN_FONT == 14 and viz.PROJECTOR_DPI == 120
    for name, fig in figures().items():
        sizes = text_sizes(fig)
        assert len(sizes) >= 3, name
        assert min(sizes) >= 14, f"{name}: text of {min(sizes)} pt in the projector style"
        assert fig.dpi == 120, name
    assert plt.rcParams["savefig.dpi"] == 150


def test_the_notebook_style_keeps_the_sizes_of_the_stored_figures():
    """The sizes set_style() set before the projector style existed: 90 dpi (110 saved), 6.4 x 4 inches, titles
    12 pt, seaborn's notebook context (ticks 11 pt); the plots' own sizes, such as plot_masks' 8-pt ticks and its
    figure 0.3 inch a cell, as they were."""
    viz.set_style()
    expected = {"figure.dpi": 90, "savefig.dpi": 110, "axes.titlesize": 12, "xtick.labelsize": 11}
    assert {key: plt.rcParams[key] for key in expected} == expected
    assert list(plt.rcParams["figure.figsize"]) == [6.4, 4.0]
    drawn = figures()
    smallest = {name: min(text_sizes(fig)) for name, fig in drawn.items()}
    assert smallest["plot_masks"] == 8 and smallest["plot_attention_heads"] == 8 and smallest["label_points"] == 8
    assert smallest["draw_architecture"] == 8.5 and smallest["scaling_figure"] == 8
    assert tuple(drawn["plot_masks"].get_size_inches()) == pytest.approx((2 * (0.3 * 6 + 1.0) + 0.4, 0.3 * 6 + 1.5))
    assert tuple(drawn["draw_architecture"].get_size_inches()) == pytest.approx((8.8, 8.6))
    assert all(fig.dpi == 90 for fig in drawn.values())


def test_the_projector_style_leaves_nothing_behind():
    """Back in the notebook style, every figure is drawn to the same bytes as before the projector style was on."""
    viz.set_style("notebook")
    settings, before = dict(plt.rcParams), {name: png(fig) for name, fig in figures().items()}
    plt.close("all")
    viz.set_style("projector")
    projected = {name: png(fig) for name, fig in figures().items()}
    plt.close("all")
    viz.set_style("notebook")
    assert dict(plt.rcParams) == settings
    assert {name: png(fig) for name, fig in figures().items()} == before
    assert all(projected[name] != before[name] for name in before), "the projector style changed nothing"


def test_the_style_comes_from_the_environment_when_not_given(monkeypatch):
    monkeypatch.setenv(viz.STYLE_VARIABLE, "projector")
    viz.set_style()
    assert plt.rcParams["figure.dpi"] == 120 and viz._font(8) == 14
    monkeypatch.delenv(viz.STYLE_VARIABLE)
    viz.set_style()
    assert plt.rcParams["figure.dpi"] == 90 and viz._font(8) == 8


def test_an_unknown_style_is_refused():
    with pytest.raises(ValueError, match="'poster'"):
        viz.set_style("poster")


def test_an_unknown_style_in_the_environment_is_refused(monkeypatch):
    monkeypatch.setenv(viz.STYLE_VARIABLE, "big")
    with pytest.raises(ValueError, match="TRANSFORMER_COURSE_STYLE"):
        viz.set_style()

"""The reader's language (transformer_course.language): one switch for the checkers, the claims and the figures."""

from __future__ import annotations

import json
import textwrap
import warnings

import matplotlib
import matplotlib.pyplot as plt
import pytest

from transformer_course import language
from transformer_course.language import CHINESE_FONTS, get_language, set_language, tr


def test_the_language_is_english_until_set_and_a_wrong_one_is_named():
    assert get_language() == "en" and tr("yes", "是") == "yes"
    set_language("zh")
    assert get_language() == "zh" and tr("yes", "是") == "是"
    with pytest.raises(ValueError, match=r"language must be one of \('en', 'zh'\), got 'fr'"):
        set_language("fr")
    assert get_language() == "zh"


def test_chinese_text_in_a_figure_draws_without_a_missing_glyph_warning(tmp_path):
    if language.chinese_font(rescan=True) is None:
        pytest.skip(f"no Chinese font on this machine (any of {', '.join(CHINESE_FONTS)}); .ci/run installs one")
    from transformer_course.viz import set_style

    with matplotlib.rc_context():
        set_language("zh")
        set_style("projector")  # seaborn's theme resets the fonts; set_style puts the Chinese one back
        fig, ax = plt.subplots()
        ax.set_title("注意力权重 (attention)")
        ax.plot([0, 1], [0, 1], label="正弦")
        ax.legend()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fig.savefig(tmp_path / "zh.png")
        plt.close(fig)
        set_style("notebook")


def test_without_a_chinese_font_one_note_in_chinese_says_what_to_install(monkeypatch, capsys):
    monkeypatch.setattr(language, "chinese_font", lambda rescan=False: None)
    monkeypatch.setattr(language, "_font_missing_noted", False)
    with warnings.catch_warnings():
        assert language.use_chinese_font() is None
        assert language.use_chinese_font() is None
        out = capsys.readouterr().out
        assert out.count("没有找到中文字体") == 1 and language.COLAB_FONT_PACKAGE in out


def test_a_name_used_as_data_is_shown_in_the_readers_language(monkeypatch):
    monkeypatch.setattr(language, "display_names", lambda lang: {"plain": "普通堆叠", "warm-up {}": "预热 {} 步"})
    monkeypatch.setattr(language, "_name_patterns", language._name_patterns.__wrapped__)
    assert language.display_name("plain") == "plain"  # English: the name itself
    set_language("zh")
    try:
        assert language.display_name("plain") == "普通堆叠"
        assert language.display_name("warm-up 30") == "预热 30 步"
        with pytest.warns(UserWarning, match=r"'residual' 没有对应的中文名.*transformer_course/display_names/zh/"):
            assert language.display_name("residual") == "residual"
        with warnings.catch_warnings():  # a name a learner wrote in Chinese is shown as it is, silently
            warnings.simplefilter("error")
            assert language.display_name("各 6 层") == "各 6 层"
    finally:
        set_language("en")


def test_a_yes_or_no_is_shown_in_the_readers_language():
    assert (language.display_name(True), language.display_name(False)) == ("True", "False")
    set_language("zh")
    try:
        assert (language.display_name(True), language.display_name(False)) == ("是", "否")
    finally:
        set_language("en")


def test_a_name_shown_two_ways_in_two_notebooks_is_named(monkeypatch, tmp_path):
    folder = tmp_path / "display_names" / "zh"
    folder.mkdir(parents=True)
    (folder / "07_a.json").write_text(json.dumps({"plain": "普通堆叠"}), encoding="utf-8")
    (folder / "08_b.json").write_text(json.dumps({"plain": "朴素", "moe": "混合专家"}), encoding="utf-8")
    monkeypatch.setattr(language.resources, "files", lambda package: tmp_path)
    assert language.display_name_conflicts("zh") == ["'plain' is '普通堆叠' in 07_a.json and '朴素' in 08_b.json"]


def test_the_shipped_chinese_names_agree_and_are_chinese():
    assert language.display_name_conflicts("zh") == []
    names = language.display_names("zh")
    assert names, "no Chinese display names were found in the package"
    for name, shown in names.items():
        assert name.count("{}") == shown.count("{}"), f"{name!r} and {shown!r} fill in a different number of {{}}"
        assert shown.strip(), f"{name!r} is shown as nothing"


def test_fill_wraps_english_exactly_as_textwrap_does():
    text = (
        "Timings depend on the machine and on what else it is running; the ratios printed above come from this run. "
        * 3
    )
    assert language.fill(text, 60, initial_indent="- ", subsequent_indent="  ") == textwrap.fill(
        text, 60, initial_indent="- ", subsequent_indent="  "
    )


def test_fill_wraps_chinese_by_screen_columns_and_never_starts_a_line_with_a_closing_mark():
    text = (
        "计时取决于机器以及它同时运行的程序，上面打印的比值来自本次运行。"
        "在空闲的机器上，FlashAttention 式的计算核通常更快。"
    ) * 3
    lines = language.fill(text, 40, initial_indent="- ", subsequent_indent="  ").split("\n")
    assert len(lines) > 3
    assert all(language.display_width(line) <= 40 for line in lines), lines
    assert not any(line.lstrip()[0] in "，。、：；）”" for line in lines), lines
    assert "".join(line[2:] for line in lines).replace(" ", "") == text.replace(" ", "")
    assert "FlashAttention" in "".join(lines)  # a Latin word is never split

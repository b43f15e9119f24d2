"""The instructor guide's sizes, reading times, run times, training times and quoted outputs are the notebooks'
(tools/guide_numbers.py), and its demos name cells under the headings they give."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tools.guide_numbers import (
    CHARACTERS_PER_MINUTE,
    GUIDES,
    LAB_KITS,
    QUOTES,
    SIX_WEEK_SESSIONS,
    NotebookSize,
    chinese_heading_problems,
    demo_problems,
    demo_references,
    longest_running,
    notebook_sizes,
    prose_units,
    quote_problems,
    regenerate,
    session_line,
    session_notebooks,
    settings_problems,
    six_week_line_problems,
    six_week_plan,
    six_week_summary,
    size_table,
    training_line,
    training_runs,
)


@pytest.mark.parametrize("language", sorted(GUIDES))
def test_each_guide_quotes_the_notebooks_as_they_are(language):
    text = GUIDES[language].read_text(encoding="utf-8")
    assert regenerate(language, text, notebook_sizes(language)) == text, (
        f"{GUIDES[language].name} disagrees with the notebooks: run python -m tools.guide_numbers --write"
    )


def test_every_notebook_has_a_run_time_from_the_benchmark():
    untimed = [size.name for size in notebook_sizes().values() if size.seconds is None]
    assert not untimed, f"benchmarks/results.json has no run of {untimed}: python -m benchmarks.run --only 7"


SIZES = {"00": NotebookSize("00_a.ipynb", 1200, 150, 3.0), "01": NotebookSize("01_b.ipynb", 240, 30, None)}


def test_chinese_prose_is_counted_in_characters_and_read_at_its_own_rate():
    assert prose_units("注意力（attention）把 3 个词元混合。", "zh") == 9 + 1 + 1  # 9 characters, a word, a number
    assert prose_units("Attention mixes 3 tokens.", "en") == 4
    chinese = NotebookSize("00_a.ipynb", 2500, 150, 3.0, CHARACTERS_PER_MINUTE)
    assert chinese.reading_minutes == 20.0  # 2500 / 250 + 150 / 15
    sizes = notebook_sizes("zh")
    assert all(size.per_minute == CHARACTERS_PER_MINUTE for size in sizes.values())
    assert sizes.keys() == notebook_sizes("en").keys()
    with pytest.raises(ValueError, match="language"):
        notebook_sizes("fr")


def test_the_generated_numbers():
    assert SIZES["00"].reading_minutes == 20.0  # 1200 / 120 + 150 / 15
    table = size_table("en", SIZES)
    assert "| 00_a.ipynb | 3.0 | 1,200 | 150 | 20 |" in table and "| 01_b.ipynb | - | 240 | 30 | 4 |" in table
    assert table.endswith("| all | - | 1,440 | 180 | 24 |")
    assert session_line("en", ["00", "01"], SIZES).startswith("Reading time 24 min; run time 3.0 s + - s")
    with pytest.raises(ValueError, match=r"\['07'\]"):
        session_line("en", ["07"], SIZES)
    with pytest.raises(ValueError, match="language"):
        size_table("fr", SIZES)


def test_a_changed_notebook_makes_the_guide_stale():
    guide = (
        "<!-- notebook-sizes -->\nold\n<!-- /notebook-sizes -->\n\n(1 minutes over the term; per week 1 and 1 minutes)"
        "\n\n| 1 | 1 | 00 | 5 min | x |\n| 2 | 2 | 01 | 5 min | y |\n\n### Session 1 (week 1): notebook 00\n\n"
        "Reading time 5 min; run time 1.0 s (old). More text.\n\n### Session 2 (week 2): notebooks 01\n"
    )
    new = regenerate("en", guide, SIZES)
    assert "| 1 | 1 | 00 | 20 min | x |" in new and "| 2 | 2 | 01 | 4 min | y |" in new
    assert "(24 minutes over the term; per week 20 and 4 minutes)" in new
    assert "Reading time 20 min; run time 3.0 s (benchmark section 7; see section 1). More text." in new
    assert regenerate("en", new, SIZES) == new
    with pytest.raises(ValueError, match="notebook-sizes"):
        regenerate("en", "no table here", SIZES)


# ------------------------------------------------------------------ quotes, demos, training lines, the six-week plan
@pytest.mark.parametrize("language", sorted(GUIDES))
def test_each_guide_quotes_the_notebooks_stored_outputs(language):
    problems = quote_problems(language, GUIDES[language].read_text(encoding="utf-8"))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("language", sorted(GUIDES))
def test_every_demo_cell_sits_under_the_heading_it_is_named_by(language):
    text = GUIDES[language].read_text(encoding="utf-8")
    assert len(demo_references(text)) > 40, "the demos of section 3 are no longer found"
    problems = demo_problems(text)
    assert not problems, "\n".join(problems)


def _notebook(folder: Path, name: str, cells: list[tuple[str, str, str]]) -> None:
    """A notebook file of (cell type, source, printed output) cells."""
    made = []
    for kind, source, printed in cells:
        cell = {"cell_type": kind, "source": source, "metadata": {}}
        if kind == "code":
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": printed}] if printed else []
        made.append(cell)
    (folder / name).write_text(json.dumps({"cells": made}), encoding="utf-8")


def test_a_demo_under_another_heading_or_a_missing_quote_is_named(tmp_path):
    _notebook(
        tmp_path,
        "09_x.ipynb",
        [
            ("markdown", "# 09 · Title\n## 9. The real run", ""),
            ("code", "small_config = 1\nprint('date task: 400 steps in 9.8 s')", "date task: 400 steps in 9.8 s\n"),
            ("markdown", "## 11. The recipe\n### A table", ""),
            ("code", "# a comment\nseeds = (0, 1)", ""),
        ],
    )
    guide = (
        "| 5 | **Demo** 09 § *11. The recipe*, cell `seeds = (0, 1)`, then **Demo** 09 § *9. The real run*, cell "
        "`small_config = 1` and the table (`print('date`). |\n"
        "| 5 | **Demo** 09 § *11. The recipe*, cell `small_config = 1`. |"
    )
    assert demo_references(guide) == [
        ("09", "11. The recipe", "seeds = (0, 1)"),
        ("09", "9. The real run", "small_config = 1"),
        ("09", "9. The real run", "print('date"),
        ("09", "11. The recipe", "small_config = 1"),
    ]
    problems = demo_problems(guide, tmp_path)
    assert len(problems) == 1 and "sits under '09 · Title > 9. The real run'" in problems[0]
    assert "no code cell" in demo_problems("**Demo** 09 § *9. The real run*, cell `gone`", tmp_path)[0]
    zh = "**演示** 09 § *11. The recipe*（中文版：§ *11. 方案*），单元格 `seeds = (0, 1)`。"
    assert demo_references(zh) == [("09", "11. The recipe", "seeds = (0, 1)")]


def test_training_lines_come_from_the_stored_outputs(tmp_path):
    printed = "llama: 500 steps in 26.7 s, held-out 2.271 bits/character\ngpt2: 464 steps in 25.0 s, held-out 2.5\n"
    _notebook(tmp_path, "15_x.ipynb", [("code", "train()", printed)])
    assert training_runs("15", tmp_path) == [
        {"name": "llama", "steps": "500", "seconds": "26.7"},
        {"name": "gpt2", "steps": "464", "seconds": "25.0"},
    ]
    assert training_line("en", ["15"], tmp_path) == (
        "Training in the run shown: llama: 500 steps, 26.7 s; gpt2: 464 steps, 25.0 s (the notebook's stored outputs)."
    )
    assert training_line("zh", ["15"], tmp_path).startswith("现场训练（本次运行）：llama: 500 步，26.7 s；")
    _notebook(tmp_path, "16_x.ipynb", [("code", "train()", "nothing trained\n")])
    with pytest.raises(ValueError, match="no training run"):
        training_runs("16", tmp_path)
    with pytest.raises(ValueError, match="no pattern"):
        training_runs("03", tmp_path)
    guide = (
        "<!-- notebook-sizes -->\n<!-- /notebook-sizes -->\n### Session 13 (week 7): notebook 15, the capstone\n\n"
        "Training in the run shown: old.\n"
    )
    sizes = {"15": NotebookSize("15_x.ipynb", 120, 15, 100.0)}
    assert "llama: 500 steps, 26.7 s; gpt2" in regenerate("en", guide, sizes, tmp_path)


def test_a_changed_quote_is_named(tmp_path):
    _notebook(tmp_path, "14_x.ipynb", [("code", "check()", "holds: something else\n")])
    quote = next(q for q in QUOTES if q.notebook == "14")
    assert quote_problems("en", quote.en, tmp_path, (quote,)) == [f"notebook 14 no longer prints {quote.outputs[0]!r}"]
    assert quote_problems("zh", "", tmp_path, (quote,))[0] == f"the zh guide no longer says {quote.zh!r}"


def test_the_longest_running_notebooks_are_named_in_order():
    seconds = {"00": 1.0, "09": 70.0, "11": 30.0, "15": 130.0}
    sizes = {n: NotebookSize(f"{n}_x.ipynb", 1, 1, s) for n, s in seconds.items()}
    assert longest_running(sizes, 2) == ["15", "09"]
    said = "The four notebooks that take longest to run (old) train models live."
    guide = f"<!-- notebook-sizes -->\n<!-- /notebook-sizes -->\n{said}"
    assert "(15, 09, 11 and 00) train" in regenerate("en", guide, sizes)


SIX = (
    "<!-- six-week-plan -->\n| week | sessions | notebooks | reading | run | class | work | workload | graded |\n"
    "| 1 | 1, 2 | 00, 01 | 1 | 1.0 | 3.0 | 2.5 | 1.0 | A1 |\n| 2 | 3, lab | 01 | 1 | 1.0 | 3.0 | 1.0 | 1.0 | P |\n"
    "| 3 | lab, results | - | 9 | 9.0 | 3.0 | 2.0 | 1.0 | R |\n"
    "| all | 4 | x | 1 | 1.0 | 1.0 | 1.0 | 1.0 | all |\n| optional | - | 00 | 1 | 1.0 | - | - | - | none |\n"
    "<!-- /six-week-plan -->"
)


def test_the_six_week_plan_adds_reading_class_and_work():
    new = six_week_plan("en", SIX, SIZES)
    # week 1: 20 + 4 reading minutes, 3.0 s of run time (01 is untimed), 24/60 + 3.0 + 2.5 = 5.9 hours
    assert "| 1 | 1, 2 | 00, 01 | 24 | 3.0 | 3.0 | 2.5 | 5.9 | A1 |" in new
    assert "| 2 | 3, lab | 01 | 4 | 0.0 | 3.0 | 1.0 | 4.1 | P |" in new
    assert "| 3 | lab, results | - | 0 | 0.0 | 3.0 | 2.0 | 5.0 | R |" in new  # a week that teaches no notebook
    assert "| all | 4 | 3 notebooks | 28 | 3.0 | 9.0 | 5.5 | 15.0 | all |" in new
    assert "| optional | - | 00 | 20 | 3.0 | - | - | - | none |" in new
    assert six_week_plan("en", new, SIZES) == new
    summary = six_week_summary("en", new)
    guide = f"<!-- notebook-sizes -->\n<!-- /notebook-sizes -->\n{SIX}\n\n{summary}."
    assert "| 24 | 3.0 | 3.0 | 2.5 | 5.9 |" in regenerate("en", guide, SIZES)
    with pytest.raises(ValueError, match=r"\['07'\]"):
        six_week_plan("en", SIX.replace("| 00, 01 |", "| 07 |"), SIZES)


@pytest.mark.parametrize("language", sorted(GUIDES))
def test_the_grade_weights_add_up_to_100_percent(language):
    text = GUIDES[language].read_text(encoding="utf-8")
    block = text.split("<!-- grade-weights -->")[1].split("<!-- /grade-weights -->")[0]
    weights = [float(w) for w in re.findall(r"^\|[^|]+\| ([\d.]+)% \|", block, re.MULTILINE)]
    *parts, total = weights
    assert len(parts) >= 5 and sum(parts) == total == 100.0, weights


@pytest.mark.parametrize("language", sorted(GUIDES))
def test_the_six_week_plan_names_existing_exercises_and_sessions(language):
    """Every exercise the weekly outcomes name has a checker (section 8's table), and the plan's weeks 1 to 5 are
    sessions of section 3 (their notebooks as the session headings name them)."""
    text = GUIDES[language].read_text(encoding="utf-8")
    plan = text.split("<!-- six-week-plan -->")[1].split("### 2.2")[0]
    lists = re.findall(r"(?:exercises|练习) ((?:\d{1,2}\.\d(?:, |、)?)+)", plan.split("<!-- /six-week-plan -->")[1])
    named = {number for found in lists for number in re.findall(r"\d{1,2}\.\d", found)}
    checked = set(re.findall(r"\((\d{1,2}\.\d)[,，)]", text.split("## 8.")[1])) | set(
        re.findall(r"[（(](\d{1,2}\.\d)[，,)）]", text.split("## 8.")[1])
    )
    assert named and named <= checked, f"exercises without a checker: {sorted(named - checked)}"
    sessions = session_notebooks(text)
    taught = []
    for row in re.finditer(r"^\| (\d) \| ([\d, +]+) \| ([\d, ]+) \|", plan, re.MULTILINE):
        numbers = re.findall(r"\d+", row.group(2))  # "5 + 6, 7": sessions 5 and 6 taught together, then 7
        notebooks = [n for session in numbers for n in sessions[session]]
        week = row.group(1)
        assert notebooks == row.group(3).split(", "), f"week {week}: sessions {numbers} teach {notebooks}"
        taught += numbers
    assert taught == list(SIX_WEEK_SESSIONS), f"the six-week table teaches sessions {taught}"


def test_the_six_week_summary_follows_the_table():
    new = six_week_plan("en", SIX, SIZES)
    # weeks of 5.9, 4.1 and 5.0 hours; reading 24, 4 and 0 minutes, so at 1.5 times the reading 6.1, 4.1 and 5.0
    said = (
        "About 15 hours over the six weeks, 5 a week on average; the heaviest are week 1 (5.9 hours) and week 3 "
        "(5.0 hours). With the reading at 1.5 times the table's, about 15 hours, 5 a week, and 6.1 in week 1"
    )
    assert six_week_summary("en", new) == said
    assert six_week_summary("zh", new) == (
        "六周共约 15 小时，平均每周 5 小时；最重的是第 1 周（5.9 小时）和第 3 周（5.0 小时）。"
        "阅读时间按表中的 1.5 倍计算，则共约 15 小时，平均每周 5 小时，第 1 周为 6.1 小时"
    )
    assert six_week_summary("en", new, slow=3.0).endswith("about 16 hours, 5 a week, and 6.7 in week 1")
    wrapped = said.replace("15 hours", "99 hours").replace(" With the", "\nWith the")  # wrapped in the guide
    guide = f"<!-- notebook-sizes -->\n<!-- /notebook-sizes -->\n{SIX}\n\n{wrapped}."
    assert regenerate("en", guide, SIZES).endswith(said + ".")
    with pytest.raises(ValueError, match="not the sentence that sums it up"):
        regenerate("en", f"<!-- notebook-sizes -->\n<!-- /notebook-sizes -->\n{SIX}\n\nAbout 15 hours.", SIZES)
    with pytest.raises(ValueError, match="at least two weeks"):
        six_week_summary("en", "| 1 | 1 | 00 | 1 | 1.0 | 3.0 | 1.0 | 4.0 | x |")


@pytest.mark.parametrize("language", sorted(GUIDES))
def test_the_stated_slide_limits_and_projector_setting_are_the_codes(language):
    guide, lab_kit = (paths[language].read_text(encoding="utf-8") for paths in (GUIDES, LAB_KITS))
    assert settings_problems(language, guide, lab_kit) == []
    wrong_guide = guide.replace("more than 120 words", "more than 200 words").replace(
        "不超过 120 个词", "不超过 200 个词"
    )
    problems = settings_problems(language, wrong_guide, lab_kit.replace("120 dpi", "100 dpi"))
    assert len(problems) == 2 and "200" in problems[0] and "100" in problems[1], problems
    notebook_dpi = lab_kit.replace("instead of 90", "instead of 80").replace("而不是 90 dpi", "而不是 80 dpi")
    assert settings_problems(language, guide, notebook_dpi) == [
        f"the {language} lab kit page says the notebook style draws at 80 dpi; viz.py does not"
    ]
    assert "no longer states" in settings_problems(language, "", lab_kit)[0]


@pytest.mark.parametrize("language", sorted(GUIDES))
def test_every_session_of_the_six_week_plan_says_what_changes_in_it(language):
    text = GUIDES[language].read_text(encoding="utf-8")
    assert six_week_line_problems(language, text) == []
    heading = "### Session 7 (week 4): notebook 09\n" if language == "en" else "### 第 7 次课（第 4 周）：笔记本 09\n"
    assert heading in text
    sheet = text.split(heading)[1].split("\n### ")[0]
    without = text.replace(sheet, sheet.replace("*In the six-week plan*", "").replace("*六周计划中*", ""))
    assert [p.split("session ")[1].split(" ")[0] for p in six_week_line_problems(language, without)] == ["7"]


def test_the_chinese_headings_beside_the_demos_are_the_chinese_notebooks():
    text = GUIDES["zh"].read_text(encoding="utf-8")
    problems = chinese_heading_problems(text)
    assert not problems, "\n".join(problems)


def test_a_stale_chinese_heading_is_named(tmp_path):
    _notebook(tmp_path, "15_x.ipynb", [("markdown", "# 15 · 标题\n## 7. 写作：温度与 top-p\n### 试一试", "")])
    guide = (
        "| 10 | **演示** 15 § *Try it*（第 8 节中；中文版：§ *试一试*），交互控件（`a`）；然后**演示** 15 § "
        "*4. Training*（中文版：§ *4. 训练同样长的时间*），单元格 `b`。 |"
    )
    problems = chinese_heading_problems(guide, tmp_path)
    assert problems == ["demo 15 § '4. Training': the Chinese notebook has no heading '4. 训练同样长的时间'"]

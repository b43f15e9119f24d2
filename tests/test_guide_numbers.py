"""The instructor guide's sizes, reading times, run times, training times and quoted outputs are the notebooks'
(tools/guide_numbers.py), and its demos name cells under the headings they give."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tools.guide_numbers import (
    GUIDES,
    QUOTES,
    NotebookSize,
    chinese_heading_problems,
    demo_problems,
    demo_references,
    longest_running,
    notebook_sizes,
    quote_problems,
    regenerate,
    session_line,
    session_notebooks,
    six_week_plan,
    six_week_summary,
    size_table,
    training_line,
    training_runs,
)


@pytest.mark.parametrize("language", sorted(GUIDES))
def test_each_guide_quotes_the_notebooks_as_they_are(language):
    text = GUIDES[language].read_text(encoding="utf-8")
    assert regenerate(language, text, notebook_sizes()) == text, (
        f"{GUIDES[language].name} disagrees with the notebooks: run python -m tools.guide_numbers --write"
    )


def test_every_notebook_has_a_run_time_from_the_benchmark():
    untimed = [size.name for size in notebook_sizes().values() if size.seconds is None]
    assert not untimed, f"benchmarks/results.json has no run of {untimed}: python -m benchmarks.run --only 7"


SIZES = {"00": NotebookSize("00_a.ipynb", 1200, 150, 3.0), "01": NotebookSize("01_b.ipynb", 240, 30, None)}


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
    assert training_line("zh", ["15"], tmp_path).startswith("现场训练（这里显示的这次运行）：llama: 500 步，26.7 s；")
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
    "| all | 4 | x | 1 | 1.0 | 1.0 | 1.0 | 1.0 | all |\n| optional | - | 00 | 1 | 1.0 | - | - | - | none |\n"
    "<!-- /six-week-plan -->"
)


def test_the_six_week_plan_adds_reading_class_and_work():
    new = six_week_plan("en", SIX, SIZES)
    # week 1: 20 + 4 reading minutes, 3.0 s of run time (01 is untimed), 24/60 + 3.0 + 2.5 = 5.9 hours
    assert "| 1 | 1, 2 | 00, 01 | 24 | 3.0 | 3.0 | 2.5 | 5.9 | A1 |" in new
    assert "| 2 | 3, lab | 01 | 4 | 0.0 | 3.0 | 1.0 | 4.1 | P |" in new
    assert "| all | 4 | 3 notebooks | 28 | 3.0 | 6.0 | 3.5 | 10.0 | all |" in new
    assert "| optional | - | 00 | 20 | 3.0 | - | - | - | none |" in new
    assert six_week_plan("en", new, SIZES) == new
    guide = f"<!-- notebook-sizes -->\n<!-- /notebook-sizes -->\n{SIX}"
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
    for row in re.finditer(r"^\| (\d) \| (\d+), (\d+) \| ([\d, ]+) \|", plan, re.MULTILINE):
        notebooks = sessions[row.group(2)] + sessions[row.group(3)]
        week = row.group(1)
        assert notebooks == row.group(4).split(", "), f"week {week}: sessions {row.group(2, 3)} teach {notebooks}"


def test_the_six_week_summary_follows_the_table():
    new = six_week_plan("en", SIX, SIZES)
    said = (
        "About 10 hours over the six weeks, 5 a week on average; the heaviest are week 1 (5.9 hours) and week 2 "
        "(4.1 hours)"
    )
    assert six_week_summary("en", new) == said
    assert (
        six_week_summary("zh", new)
        == "六周共约 10 小时，平均每周 5 小时；最重的是第 1 周（5.9 小时）和第 2 周（4.1 小时）"
    )
    guide = f"<!-- notebook-sizes -->\n<!-- /notebook-sizes -->\n{SIX}\n\n" + said.replace("10 hours", "99 hours") + "."
    assert regenerate("en", guide, SIZES).endswith(said + ".")
    with pytest.raises(ValueError, match="at least two weeks"):
        six_week_summary("en", "| 1 | 1 | 00 | 1 | 1.0 | 3.0 | 1.0 | 4.0 | x |")


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

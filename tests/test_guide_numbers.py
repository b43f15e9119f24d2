"""The instructor guide's sizes, reading times and run times are the notebooks' (tools/guide_numbers.py)."""

from __future__ import annotations

import pytest

from tools.guide_numbers import GUIDES, NotebookSize, notebook_sizes, regenerate, session_line, size_table


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

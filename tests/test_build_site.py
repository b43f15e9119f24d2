"""The course site builds from the committed notebooks, and nothing on it is loaded from outside the site."""

from __future__ import annotations

import re

import nbformat

from tools.build_site import COLAB_BADGE, default_slide_type, with_slide_metadata
from tools.course_notebooks import notebook_paths

# an attribute that makes the browser fetch something when the page is shown (links the reader clicks are fine)
FETCHED = re.compile(r"""<(?:script|img|link|iframe|source)\b[^>]*\b(?:src|href)=["'](https?:)?//""", re.IGNORECASE)


def test_default_slide_types_follow_headings():
    assert default_slide_type(nbformat.v4.new_markdown_cell("## Section\ntext")) == "slide"
    assert default_slide_type(nbformat.v4.new_markdown_cell("### Part")) == "subslide"
    assert default_slide_type(nbformat.v4.new_markdown_cell("plain text")) == "-"
    assert default_slide_type(nbformat.v4.new_code_cell("# a comment, not a heading")) == "-"


def test_existing_slide_metadata_is_kept():
    cell = nbformat.v4.new_markdown_cell("## Section")
    cell.metadata["slideshow"] = {"slide_type": "skip"}
    nb, added = with_slide_metadata(nbformat.v4.new_notebook(cells=[cell]))
    assert added == 0 and nb.cells[0].metadata["slideshow"]["slide_type"] == "skip"


def test_every_notebook_has_a_page_and_a_deck(built_site):
    for path in notebook_paths(None):
        page = built_site / "notebooks" / f"{path.stem}.html"
        deck = built_site / "slides" / f"{path.stem}.slides.html"
        assert page.exists() and deck.exists(), path.stem
        assert "mathjax/tex-chtml-full.js" in deck.read_text(encoding="utf-8")
    landing = (built_site / "site" / "index.html").read_text(encoding="utf-8")
    for path in notebook_paths(None):
        assert f'href="../notebooks/{path.stem}.html"' in landing, f"the landing page does not link {path.stem}"
        assert f'href="../slides/{path.stem}.slides.html"' in landing, f"the landing page has no slides for {path.stem}"
    assert (built_site / "search.html").exists() and (built_site / "searchindex.js").exists()
    assert (built_site / "docs" / "instructor_guide.html").exists()
    assert (built_site / "benchmarks" / "results.html").exists()


def test_no_page_fetches_anything_from_outside_the_site(built_site):
    pages = [p for p in built_site.rglob("*.html") if "_static" not in p.parts]
    assert len(pages) > 30
    for page in pages:
        text = page.read_text(encoding="utf-8")
        fetched = FETCHED.findall(text)
        assert not fetched, f"{page.relative_to(built_site)} loads something from another site"
        assert COLAB_BADGE not in text, f"{page.relative_to(built_site)} shows the Colab badge from Colab's site"
    for library in ["mathjax/tex-chtml-full.js", "reveal.js/dist/reveal.js", "require.js", "jquery.min.js"]:
        assert (built_site / "_static" / library).exists(), library

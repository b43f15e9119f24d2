"""The static site and slides build from the committed notebooks."""

from __future__ import annotations

import nbformat

from tools.build_site import build, default_slide_type, with_slide_metadata
from tools.course_notebooks import notebook_paths


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


def test_site_and_slides_build_for_the_introduction(tmp_path):
    written = build(["00"], slides_only=False, annotate=False, out=tmp_path)
    names = sorted(p.relative_to(tmp_path).as_posix() for p in written)
    first = notebook_paths(["00"])[0].stem
    assert names == sorted([f"notebooks/{first}.html", f"slides/{first}.slides.html", "index.html"])
    page = (tmp_path / "notebooks" / f"{first}.html").read_text()
    assert "data:image/png;base64" in page  # figures are embedded: the page stands alone
    assert "reveal" in (tmp_path / "slides" / f"{first}.slides.html").read_text().lower()
    assert f'href="notebooks/{first}.html"' in (tmp_path / "index.html").read_text()

"""Build the course for reading and teaching without a kernel: static HTML pages and reveal.js slides.

    python tools/build_site.py                # _site/index.html, _site/notebooks/*.html, _site/slides/*.html
    python tools/build_site.py --slides-only  # only the slides
    python tools/build_site.py 03 04          # only some notebooks

Slides come from the notebooks' own cells: each cell's ``metadata.slideshow.slide_type`` decides where slides
break. Cells without one get a default from their heading (a "#"/"##" heading starts a slide, "###" a
sub-slide, everything else continues the current slide); ``--annotate`` writes those defaults into the
notebooks, so a teacher can then adjust them in JupyterLab's property inspector.
"""

from __future__ import annotations

import argparse
import html
import sys
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter, SlidesExporter

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tools.course_notebooks import ROOT, notebook_paths  # noqa: E402

SITE = ROOT / "_site"


def default_slide_type(cell: nbformat.NotebookNode) -> str:
    """Where a cell falls in the slides when it says nothing itself."""
    if cell.cell_type == "markdown":
        first_line = cell.source.lstrip().split("\n", 1)[0]
        if first_line.startswith(("# ", "## ")):
            return "slide"
        if first_line.startswith("### "):
            return "subslide"
    return "-"


def with_slide_metadata(nb: nbformat.NotebookNode) -> tuple[nbformat.NotebookNode, int]:
    """The notebook with a slide type on every cell (existing ones kept); also returns how many were added."""
    added = 0
    for cell in nb.cells:
        slideshow = cell.metadata.setdefault("slideshow", {})
        if "slide_type" not in slideshow:
            slideshow["slide_type"] = default_slide_type(cell)
            added += 1
    return nb, added


def title_of(nb: nbformat.NotebookNode, fallback: str) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("# "):
            return cell.source.split("\n", 1)[0][2:].strip()
    return fallback


def build(names: list[str] | None, slides_only: bool, annotate: bool, out: Path) -> list[Path]:
    written = []
    entries = []
    page_exporter = HTMLExporter(embed_images=True)
    slide_exporter = SlidesExporter(reveal_scroll=True)
    for path in notebook_paths(names):
        nb = nbformat.read(path, as_version=4)
        nb, added = with_slide_metadata(nb)
        if annotate and added:
            nbformat.write(nb, path)
        stem = path.stem
        targets = [("slides", slide_exporter, f"{stem}.slides.html")]
        if not slides_only:
            targets.insert(0, ("notebooks", page_exporter, f"{stem}.html"))
        for folder, exporter, filename in targets:
            body, _ = exporter.from_notebook_node(nb)
            target = out / folder / filename
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body, encoding="utf-8")
            written.append(target)
        entries.append((stem, title_of(nb, stem)))
    if not slides_only:
        rows = "\n".join(
            f'<li><a href="notebooks/{stem}.html">{html.escape(title)}</a> '
            f'(<a href="slides/{stem}.slides.html">slides</a>)</li>'
            for stem, title in entries
        )
        index = out / "index.html"
        index.write_text(
            '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            "<title>transformer-course</title></head>\n<body>\n<h1>The Transformer, step by step</h1>\n"
            f'<p>The course\'s notebooks with their outputs, for reading without a kernel.</p>\n<ol start="0">\n'
            f"{rows}\n</ol>\n</body></html>\n",
            encoding="utf-8",
        )
        written.append(index)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="notebook numbers or file names (default: all)")
    parser.add_argument("--slides-only", action="store_true", help="build only the slides")
    parser.add_argument("--annotate", action="store_true", help="write default slide types into the notebooks")
    parser.add_argument("--out", type=Path, default=SITE, help="output folder (default: _site/)")
    args = parser.parse_args()
    for path in build(args.names, args.slides_only, args.annotate, args.out):
        print(path.relative_to(args.out.parent) if path.is_relative_to(args.out.parent) else path)


if __name__ == "__main__":
    main()

"""Build the course site for reading and teaching without a kernel: a Jupyter Book and reveal.js slides.

    python tools/build_site.py                # the book and every deck into _site/
    python tools/build_site.py --slides-only  # only the slides (into _site/slides/)
    python tools/build_site.py 03 04          # the book, and the decks of some notebooks only

The book is `jupyter-book build` of the committed notebooks (no re-execution), with its configuration, table of
contents and landing page in site/. Nothing on a built page is loaded from a CDN: MathJax, reveal.js, require.js
and jQuery come from the npm packages pinned in site/package.json (installed with `npm ci` on the first build)
and are copied into _site/_static/, so the site works offline and behind a firewall.

Slides come from the notebooks' own cells: each cell's ``metadata.slideshow.slide_type`` decides where slides
break. Cells without one get a default from their heading (a "#"/"##" heading starts a slide, "###" a
sub-slide, everything else continues the current slide); ``--annotate`` writes those defaults into the
notebooks, so a teacher can then adjust them in JupyterLab's property inspector.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
from nbconvert import SlidesExporter

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tools.course_notebooks import ROOT, notebook_paths  # noqa: E402

SITE = ROOT / "_site"
SITE_SOURCE = ROOT / "site"
NODE_MODULES = SITE_SOURCE / "node_modules"
# what the pages load, as (file or folder in node_modules, where it goes under _static/)
BROWSER_LIBRARIES = [
    ("mathjax/es5", "mathjax"),
    ("reveal.js/dist", "reveal.js/dist"),
    ("reveal.js/plugin/notes", "reveal.js/plugin/notes"),
    ("requirejs/require.js", "require.js"),
    ("jquery/dist/jquery.min.js", "jquery.min.js"),
]
# the notebooks' Colab badge image, drawn by the course (site/_static/), so that showing it fetches nothing
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
# the slides live in _site/slides/, one level below _static/
SLIDE_URLS = {
    "reveal_url_prefix": "../_static/reveal.js",
    "require_js_url": "../_static/require.js",
    "jquery_url": "../_static/jquery.min.js",
    "mathjax_url": "../_static/mathjax/tex-chtml-full.js",
}


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


def install_browser_libraries() -> None:
    """`npm ci` in site/ unless the pinned packages are there already (the npm registry is the only download)."""
    if all((NODE_MODULES / source).exists() for source, _ in BROWSER_LIBRARIES):
        return
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is needed once to install the site's browser libraries (site/package.json)")
    subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=SITE_SOURCE, check=True)


def copy_browser_libraries(out: Path) -> None:
    for source, target in BROWSER_LIBRARIES:
        origin, destination = NODE_MODULES / source, out / "_static" / target
        destination.parent.mkdir(parents=True, exist_ok=True)
        if origin.is_dir():
            shutil.copytree(origin, destination, dirs_exist_ok=True)
        else:
            shutil.copy2(origin, destination)


def use_local_badges(out: Path) -> None:
    """Point every page's Colab badge image at the course's own copy (the link still opens Colab)."""
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        if COLAB_BADGE in text:
            local = Path(os.path.relpath(out / "_static" / "colab-badge.svg", page.parent)).as_posix()
            page.write_text(text.replace(COLAB_BADGE, local), encoding="utf-8")


def build_book(out: Path) -> None:
    """`jupyter-book build` of the whole course into ``out`` (any warning fails the build)."""
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    with tempfile.TemporaryDirectory() as scratch:
        command = [str(jupyter_book), "build", str(ROOT), "--config", str(SITE_SOURCE / "_config.yml")]
        command += ["--toc", str(SITE_SOURCE / "_toc.yml"), "--path-output", scratch, "-W", "--keep-going", "-q"]
        subprocess.run(command, check=True)
        shutil.copytree(Path(scratch) / "_build" / "html", out, dirs_exist_ok=True)


def build_slides(names: list[str] | None, annotate: bool, out: Path) -> list[Path]:
    """One reveal.js deck per notebook in ``out``/slides/, loading its libraries from ``out``/_static/."""
    exporter = SlidesExporter(
        template_name="slides_template",
        extra_template_basedirs=[str(SITE_SOURCE)],
        reveal_scroll=True,
        reveal_theme="white",  # its fonts ship with reveal.js; nbconvert's default theme fetches Google Fonts
        **SLIDE_URLS,
    )
    written = []
    for path in notebook_paths(names):
        nb = nbformat.read(path, as_version=4)
        nb, added = with_slide_metadata(nb)
        if annotate and added:
            nbformat.write(nb, path)
        body, _ = exporter.from_notebook_node(nb)
        target = out / "slides" / f"{path.stem}.slides.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body, encoding="utf-8")
        written.append(target)
    return written


def build(names: list[str] | None, slides_only: bool, annotate: bool, out: Path) -> list[Path]:
    """Build the site into ``out``; returns the slide decks and, unless ``slides_only``, the landing page."""
    install_browser_libraries()
    written = []
    if not slides_only:
        build_book(out)
        written.append(out / "index.html")
    copy_browser_libraries(out)
    written += build_slides(names, annotate, out)
    shutil.copy2(SITE_SOURCE / "_static" / "colab-badge.svg", out / "_static" / "colab-badge.svg")
    use_local_badges(out)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="notebook numbers or file names for the slides (default: all)")
    parser.add_argument("--slides-only", action="store_true", help="build only the slides")
    parser.add_argument("--annotate", action="store_true", help="write default slide types into the notebooks")
    parser.add_argument("--out", type=Path, default=SITE, help="output folder (default: _site/)")
    args = parser.parse_args()
    for path in build(args.names, args.slides_only, args.annotate, args.out):
        print(path.relative_to(args.out.parent) if path.is_relative_to(args.out.parent) else path)


if __name__ == "__main__":
    main()

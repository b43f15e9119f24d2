"""The slide decks (tools/build_site.py) are slides: every heading of a notebook starts one, whether or not it starts a
cell, and no slide of any deck, English or Chinese, is larger than a projector shows (MAX_SLIDE_WORDS words,
MAX_SLIDE_LINES lines); prose left off a slide is in the speaker notes, long code continues on the next slides, long
outputs are cut short with the whole text in the notes, figures stay.

Every deck is checked on the notebook that feeds nbconvert (a pure function of the notebook file: fast); notebook 06's
decks are built for real (in both languages) and measured again on their HTML, and in Chromium, where no slide may be
taller than reveal.js's slide. tests/test_build_site.py measures the HTML of every deck of the built site.
"""

from __future__ import annotations

import copy
import math
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from tools.build_site import (
    build_slides,
    chinese_notebooks,
    copy_browser_libraries,
    deck_notebook,
)
from tools.course_notebooks import NOTEBOOKS, notebook_paths
from tools.slides import (
    CUT,
    MAX_SLIDE_LINES,
    MAX_SLIDE_WORDS,
    cut_block,
    deck_slide_sizes,
    markdown_plain,
    notebook_slide_sizes,
    prose_words,
    slide_notebook,
    wrapped_lines,
)

DECKS = notebook_paths() + chinese_notebooks()
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING_LINE = re.compile(r"^#{1,6} \S")


def deck_id(path: Path) -> str:
    return f"{'en' if path.parent == NOTEBOOKS else path.parent.name}-{path.name[:2]}"


def slide_type(cell: nbformat.NotebookNode) -> str:
    return cell.metadata.get("slideshow", {}).get("slide_type", "-")


def headings(nb: nbformat.NotebookNode) -> list[str]:
    """Every heading line of a notebook's Markdown (not in fenced code), in order."""
    found = []
    for cell in nb.cells:
        if cell.cell_type != "markdown" or slide_type(cell) in ("skip", "notes"):
            continue
        fenced = False
        for line in cell.source.split("\n"):
            if FENCE.match(line):
                fenced = not fenced
            elif not fenced and HEADING_LINE.match(line):
                found.append(line)
    return found


def slide_headings(deck: nbformat.NotebookNode) -> list[str]:
    """The first line of every deck cell that starts a slide and is a heading."""
    return [
        cell.source.split("\n", 1)[0]
        for cell in deck.cells
        if slide_type(cell) in ("slide", "subslide") and HEADING_LINE.match(cell.source)
    ]


@pytest.mark.parametrize("path", DECKS, ids=deck_id)
def test_every_heading_starts_a_slide_and_every_slide_fits(path):
    nb = nbformat.read(path, as_version=4)
    deck = deck_notebook(path)
    nbformat.validate(deck)
    assert slide_headings(deck) == headings(nb), "a heading that starts no slide, or a slide from no heading"
    sizes = notebook_slide_sizes(deck)
    too_large = [(i, s) for i, s in enumerate(sizes) if s.words > MAX_SLIDE_WORDS or s.lines > MAX_SLIDE_LINES]
    assert not too_large, f"slides larger than {MAX_SLIDE_WORDS} words or {MAX_SLIDE_LINES} lines: {too_large[:5]}"
    shown = [o for c in deck.cells if c.cell_type == "code" for o in c.outputs]
    figures = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
    assert sum("image/png" in o.get("data", {}) for o in shown) == len(figures), "a figure is missing from the deck"


def test_notebook_06_has_many_slides_now():
    """06's deck had 3 slides, one of them 2,110 words and 292 lines of code: now a slide per heading, and as many
    more as its prose and code need."""
    for path in (NOTEBOOKS / "06_masks.ipynb", NOTEBOOKS / "zh" / "06_masks.ipynb"):
        nb = nbformat.read(path, as_version=4)
        sizes = notebook_slide_sizes(deck_notebook(path))
        code_lines = sum(wrapped_lines(c.source, 70) for c in nb.cells if c.cell_type == "code")
        assert len(sizes) >= len(headings(nb)) >= 10
        assert len(sizes) >= math.ceil(code_lines / MAX_SLIDE_LINES) >= 10
        assert len(sizes) >= 40, f"{path.parent.name}: {len(sizes)} slides"


def test_chinese_counts_about_the_words_of_english():
    """Two Chinese characters count as a word: counted so, the Chinese notebooks hold about as many words as the
    English ones (within 10%; 97% after the fluency pass of issue 37 removed the glosses), so a Chinese slide shows
    about as much of a notebook as an English one."""
    totals = {"en": 0.0, "zh": 0.0}
    for path in chinese_notebooks():
        pair = {"en": NOTEBOOKS / path.name, "zh": path}
        for language, source in pair.items():
            cells = nbformat.read(source, as_version=4).cells
            totals[language] += sum(prose_words(markdown_plain(c.source)) for c in cells if c.cell_type == "markdown")
    assert totals["en"] > 10_000 and 0.9 <= totals["zh"] / totals["en"] <= 1.1, totals


# ---------------------------------------------------------------------------------------------------------------
# How a notebook is laid out, on small notebooks


def markdown(source: str, **slideshow: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_markdown_cell(source)
    if slideshow:
        cell.metadata["slideshow"] = slideshow
    return cell


def code(source: str, *outputs: nbformat.NotebookNode) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = list(outputs)
    return cell


def notebook(*cells: nbformat.NotebookNode) -> nbformat.NotebookNode:
    return nbformat.v4.new_notebook(cells=list(cells))


def test_a_heading_inside_a_cell_starts_a_slide():
    nb = notebook(markdown("# Title\n\nIntro."), markdown("Before.\n\n## Part A\nText A.\n\n### Detail\nText B."))
    deck = slide_notebook(nb)
    assert [(slide_type(c), c.source) for c in deck.cells] == [
        ("slide", "# Title\n\nIntro."),
        ("-", "Before."),
        ("slide", "## Part A\n\nText A."),
        ("subslide", "### Detail\n\nText B."),
    ]
    assert len(notebook_slide_sizes(deck)) == 3


def test_prose_beyond_a_slide_goes_to_the_speaker_notes():
    sentences = [f"Sentence {i} says a few more words about masks here." for i in range(40)]
    paragraph = " ".join(sentences)
    deck = slide_notebook(notebook(markdown(f"## Masks\n\n{paragraph}\n\n$$M_{{ij}} = 0$$")))
    shown, notes = deck.cells[0], [c for c in deck.cells if slide_type(c) == "notes"]
    assert shown.source.startswith(f"## Masks\n\n{sentences[0]} {sentences[1]}")
    assert f"{CUT}\n\n$$M_{{ij}} = 0$$" in shown.source, "cut after a whole sentence; the formula still shown"
    assert len(notes) == 1 and paragraph in notes[0].source
    (size,) = notebook_slide_sizes(deck)
    assert size.words <= MAX_SLIDE_WORDS and size.lines <= MAX_SLIDE_LINES


def test_a_cut_leaves_no_markup_open():
    english = "Some words first. " * 8 + "**Causal leak. The test.** Change a later token and look. " * 10
    chinese = "前面的话很多。" * 30 + "**因果泄漏测试。** 改变之后的词元，再看 logits。" * 5
    for text, words in ((english, 40), (chinese, 110)):
        part = cut_block("paragraph", text, lambda size, words=words: size.words <= words)
        assert part.endswith(CUT) and text.startswith(part.removesuffix(CUT))
        assert part.count("**") % 2 == 0, part[-40:]
    assert cut_block("paragraph", english, lambda size: size.words <= 2) == "Some words …"
    assert cut_block("paragraph", english, lambda size: size.words < 1) is None


def test_long_code_continues_on_the_next_slides_cut_between_statements():
    functions = [
        f"def f{i}(x):\n" + "".join(f"    x = x + {j}\n" for j in range(8)) + "    return x\n" for i in range(8)
    ]
    source = "\n".join(functions)
    deck = slide_notebook(notebook(markdown("## Code"), code(source)))
    chunks = [c for c in deck.cells if c.cell_type == "code"]
    assert len(chunks) >= 3
    assert all(c.source.startswith("def f") for c in chunks), "a slide's code starts in the middle of a function"
    assert [line for c in chunks for line in c.source.split("\n") if line] == [x for x in source.split("\n") if x]
    continued = [c.source for c in deck.cells if slide_type(c) == "subslide"]
    assert continued and all(s == '<p class="slide-continued">Code (continued)</p>' for s in continued)
    assert all(s.lines <= MAX_SLIDE_LINES for s in notebook_slide_sizes(deck))


def test_a_long_output_is_cut_short_with_the_whole_of_it_in_the_notes():
    text = "".join(f"step {i}: loss {1 / (i + 1):.4f}\n" for i in range(100))
    stream = nbformat.v4.new_output("stream", name="stdout", text=text)
    image = nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"})
    deck = slide_notebook(notebook(markdown("## Training"), code("train()", stream, image)), language="zh")
    outputs = [o for c in deck.cells if c.cell_type == "code" for o in c.outputs]
    assert outputs[0].text.startswith("step 0: loss 1.0000\n") and "另有" in outputs[0].text.splitlines()[-1]
    assert outputs[1] == image, "the figure is kept"
    notes = [c.source for c in deck.cells if slide_type(c) == "notes"]
    assert len(notes) == 1 and text.rstrip() in notes[0]
    assert all(s.lines <= MAX_SLIDE_LINES for s in notebook_slide_sizes(deck))
    hidden = [c for c in deck.cells if c.metadata.get("transient", {}).get("remove_source")]
    assert hidden, "outputs on a slide of their own show without their code"


def test_a_progress_bar_shows_its_last_state():
    writes = [f"\rstep {i}/3" for i in (1, 2, 3)] + ["\n", "done\n"]
    outputs = [nbformat.v4.new_output("stream", name="stdout", text=t) for t in writes]
    deck = slide_notebook(notebook(markdown("## Run"), code("run()", *outputs)))
    assert [o.text for c in deck.cells if c.cell_type == "code" for o in c.outputs] == ["step 3/3\ndone\n"]


def test_a_cells_own_slide_type_is_kept_and_the_notebook_is_not_changed():
    nb = notebook(
        markdown("# Title"),
        markdown("Hidden.", slide_type="skip"),
        markdown("Say this.", slide_type="notes"),
        markdown("Own slide.", slide_type="slide"),
    )
    before = copy.deepcopy(nb)
    deck = slide_notebook(nb)
    assert nb == before
    assert [(slide_type(c), c.source) for c in deck.cells] == [
        ("slide", "# Title"),
        ("notes", "Say this."),
        ("slide", "Own slide."),
    ]
    assert len({c.id for c in slide_notebook(notebook(markdown("## A\nx\n## B\ny"))).cells}) == 2


def test_an_unknown_language_is_refused():
    with pytest.raises(ValueError, match="'fr'"):
        slide_notebook(notebook(markdown("# Title")), language="fr")


def test_wrapped_lines_count_what_a_browser_draws():
    assert wrapped_lines("", 70) == 0 and wrapped_lines("x\n", 70) == 1 and wrapped_lines("x\n\n", 70) == 2
    assert wrapped_lines("a" * 70, 70) == 1 and wrapped_lines("a" * 71, 70) == 2
    assert wrapped_lines("word " * 30, 20) == 8, "wrapped at spaces: three 5-character words a line"
    assert wrapped_lines("中" * 35, 70) == 1 and wrapped_lines("中" * 36, 70) == 2, "a Chinese character is two wide"


# ---------------------------------------------------------------------------------------------------------------
# Notebook 06's decks, built: measured on their HTML, offline, and in Chromium

CDN = re.compile(r"(https?:)?//[^\"'\s]*(unpkg|jsdelivr|cdnjs|mathjax\.org|googleapis|cloudflare|cdn\.)", re.I)
LOADED = re.compile(r"""<(?:script|link)\b[^>]*\b(?:src|href)=["']([^"']+)["']""", re.I)
REQUIRED = re.compile(r"""require\(\s*\{[^}]*\}\s*,\s*\[([^\]]*)\]""", re.S)


@pytest.fixture(scope="module")
def decks_06(tmp_path_factory):
    """Notebook 06's English and Chinese decks, built as the site builds them, with their libraries."""
    out = tmp_path_factory.mktemp("slides")
    sources = [NOTEBOOKS / "06_masks.ipynb", NOTEBOOKS / "zh" / "06_masks.ipynb"]
    before = [p.read_bytes() for p in sources]
    copy_browser_libraries(out)
    copy_browser_libraries(out / "zh")
    english = build_slides(["06"], annotate=False, out=out)
    chinese = build_slides(["06"], annotate=False, out=out / "zh", paths=chinese_notebooks(["06"]))
    assert [p.read_bytes() for p in sources] == before, "building a deck wrote into a notebook"
    return dict(zip(sources, english + chinese))


def test_the_built_decks_of_06_show_what_their_notebooks_say(decks_06):
    for source, deck in decks_06.items():
        page = deck.read_text(encoding="utf-8")
        laid_out = deck_notebook(source)
        expected, measured = notebook_slide_sizes(laid_out), deck_slide_sizes(page)
        assert len(measured) == len(expected) >= 40
        for i, (html, cells) in enumerate(zip(measured, expected)):
            assert html.words <= cells.words + 1e-9 and html.lines <= cells.lines + 1e-9, f"slide {i}: {html} {cells}"
            assert html.fits(), f"slide {i} of {deck.name}: {html}"
        notes = sum(slide_type(c) == "notes" for c in laid_out.cells)
        assert notes > 0 and page.count('<aside class="notes">') == notes


def test_the_decks_load_maths_and_reveal_from_the_site_only(decks_06):
    for deck in decks_06.values():
        page = deck.read_text(encoding="utf-8")
        assert not CDN.search(page), f"{deck.name} names a CDN"
        required = REQUIRED.search(page)
        loaded = LOADED.findall(page) + re.findall(r'"([^"]+)"', required[1] if required else "")
        assert any("mathjax/tex-chtml-full.js" in url for url in loaded)
        assert any(url.endswith("reveal.js/dist/reveal.js") for url in loaded)
        assert any(url.endswith("plugin/notes/notes.js") for url in loaded), "no speaker notes"
        for url in loaded:
            assert not re.match(r"^([a-z]+:)?//", url), f"{deck.name} loads {url}"
            assert (deck.parent / url).resolve().is_file(), f"{deck.name} loads {url}, which is not in the site"


def test_no_slide_of_06_is_taller_than_the_slide_in_chromium(decks_06):
    """In Chromium, offline: each slide of the English deck, laid out on its own, fits reveal.js's 960 x 700 pixels
    (and its formulas are typeset by the local MathJax)."""
    playwright_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")
    chromium = Path("/usr/bin/chromium")
    if not chromium.exists() and shutil.which("chromium") is None:
        pytest.skip("no Chromium (apt-get install chromium)")
    deck = decks_06[NOTEBOOKS / "06_masks.ipynb"]
    every_slide_shown = (
        ".reveal .slides section { display: block !important; visibility: visible !important; position: relative"
        " !important; transform: none !important; height: auto !important; top: auto !important }"
    )
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium), args=["--no-sandbox"])
        page = browser.new_context(offline=True, viewport={"width": 1280, "height": 800}).new_page()
        page.goto(deck.resolve().as_uri())
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=60_000)
        page.evaluate("() => MathJax.startup.promise")
        page.add_style_tag(content=every_slide_shown)
        heights = page.evaluate(
            """() => Array.from(document.querySelectorAll('.reveal .slides section'))
                .filter(s => !s.querySelector('section')).map(s => s.scrollHeight)"""
        )
        typeset = page.evaluate("() => document.querySelectorAll('mjx-container').length")
        browser.close()
    assert len(heights) == len(deck_slide_sizes(deck.read_text(encoding="utf-8")))
    assert typeset > 10
    assert max(heights) <= 700, f"slides taller than 700 pixels: {[(i, h) for i, h in enumerate(heights) if h > 700]}"

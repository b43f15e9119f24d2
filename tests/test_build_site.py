"""The course site builds from the committed notebooks, in English and Chinese (zh/), with the playground
(playground/), and nothing on it is loaded from outside the site."""

from __future__ import annotations

import base64
import gzip
import json
import re

import nbformat
import pytest
import yaml

from tools.build_site import (
    COLAB_BADGE,
    ENGLISH_GUIDE_PAGE,
    PLAYGROUND_MAX_BYTES,
    PLAYGROUND_SOURCE,
    SITE_SOURCE,
    TEACHING_PAGES,
    ZH_GLOSSARY,
    ZH_GUIDE,
    chinese_landing_page,
    chinese_notebooks,
    chinese_teaching_pages,
    deck_notebook,
    english_chapters,
    existing_toc,
    file_script,
    glossary_search_words,
    gzip_base64,
    link_decks,
    link_english_docs,
    link_untranslated_to_english,
    public_toc,
    stage_chinese_book,
    teacher_files_in,
    toc_files,
    with_slide_metadata,
)
from tools.course_notebooks import notebook_paths
from tools.slides import MAX_SLIDE_LINES, MAX_SLIDE_WORDS, deck_slide_sizes, default_slide_type, notebook_slide_sizes
from tools.translations import CJK

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


# ---------------------------------------------------------------------------------------------------------------
# The Chinese edition: a second book in zh/, with the Chinese notebooks that exist (notebooks/zh/)

HREF = re.compile(r"""\b(?:href|src)=["']([^"'#?]+)(?:[#?][^"']*)?["']""")


def _local_links(page):
    """The targets of a page's relative links and sources (not URLs, anchors or queries), as paths."""
    for target in HREF.findall(page.read_text(encoding="utf-8")):
        if not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target) and not target.startswith(("/", "?")):
            yield target, (page.parent / target).resolve()


def test_the_chinese_landing_page_lists_the_chinese_notebooks():
    zh = chinese_notebooks()
    template = "# 标题\n\n<!-- zh-notebooks: the list -->\n\n尾注\n"
    page = chinese_landing_page(template, zh)
    assert page.startswith("# 标题\n\n") and page.endswith("\n\n尾注\n") and "<!-- zh-notebooks" not in page
    for path in zh:
        assert f"(../notebooks/zh/{path.stem}.ipynb)" in page
        assert f'href="../slides/{path.stem}.slides.html"' in page
    for path in english_chapters():
        if path.name not in {p.name for p in zh}:
            assert f'href="../../notebooks/{path.stem}.html"' in page, f"{path.stem}'s English page is not linked"
    nothing_yet = chinese_landing_page(template, [])
    assert CJK.search(nothing_yet) and all(
        f'href="../../notebooks/{p.stem}.html"' in nothing_yet for p in english_chapters()
    )


def test_a_deck_links_to_the_other_notebooks_decks():
    source = "Next: [05 · Heads](05_multi_head_attention.ipynb), [06](06_masks.ipynb)"
    nb = link_decks(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(source)]))
    assert nb.cells[0].source == "Next: [05 · Heads](05_multi_head_attention.slides.html), [06](06_masks.slides.html)"
    nb = link_decks(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(source)]), {"06_masks.ipynb"})
    assert nb.cells[0].source.endswith("[06](../../slides/06_masks.slides.html)")


def test_links_to_notebooks_without_a_chinese_version_open_the_english_page():
    cell = nbformat.v4.new_markdown_cell(
        "下一章：[05 · 多头注意力](05_multi_head_attention.ipynb#x)，[04](04_a.ipynb)。"
    )
    nb = link_untranslated_to_english(nbformat.v4.new_notebook(cells=[cell]), {"04_a.ipynb"})
    assert nb.cells[0].source == (
        '下一章：<a href="../../../notebooks/05_multi_head_attention.html#x">05 · 多头注意力</a>，[04](04_a.ipynb)。'
    )


def test_the_chinese_edition_has_a_page_and_a_deck_per_chinese_notebook(built_site):
    zh_site = built_site / "zh"
    zh = chinese_notebooks()
    landing_page = zh_site / "site" / "index.html"
    landing = landing_page.read_text(encoding="utf-8")
    assert '<html lang="zh-CN"' in landing
    for path in zh:
        page = zh_site / "notebooks" / "zh" / f"{path.stem}.html"
        deck = zh_site / "slides" / f"{path.stem}.slides.html"
        assert page.exists() and deck.exists(), path.stem
        assert "mathjax/tex-chtml-full.js" in deck.read_text(encoding="utf-8")
        text = page.read_text(encoding="utf-8")
        assert f"/blob/main/notebooks/zh/{path.name}" in text, f"{path.stem}'s page does not open the Chinese notebook"
        assert "尚未作答" in text or "not attempted yet" not in text, f"{path.stem} shows English checker lines"
        assert f'href="../notebooks/zh/{path.stem}.html"' in landing, (
            f"the Chinese landing page does not link {path.stem}"
        )
        assert f'href="../slides/{path.stem}.slides.html"' in landing, f"no Chinese slides for {path.stem}"
    decks = sorted(p.name for p in (zh_site / "slides").glob("*.slides.html"))
    assert decks == [f"{p.stem}.slides.html" for p in zh], "a Chinese deck of a notebook that has no Chinese version"
    for library in ["mathjax/tex-chtml-full.js", "reveal.js/dist/reveal.js", "require.js", "jquery.min.js"]:
        assert (zh_site / "_static" / library).exists(), f"zh/_static/{library}: the Chinese book works on its own"
    assert (zh_site / "search.html").exists() and (zh_site / "index.html").exists()


def test_the_two_landing_pages_link_to_each_other(built_site):
    english = built_site / "site" / "index.html"
    chinese = built_site / "zh" / "site" / "index.html"
    assert (english.parent / "../zh/site/index.html").resolve() == chinese.resolve()
    assert 'href="../zh/site/index.html"' in english.read_text(encoding="utf-8"), "no link to the Chinese edition"
    assert 'href="../../site/index.html"' in chinese.read_text(encoding="utf-8"), "no link back to the English site"


def test_every_link_on_the_site_leads_somewhere(built_site):
    """Pages and decks of both books: a link between the books, to a notebook with no Chinese version yet (its
    English page), or from a deck to another notebook (that notebook's deck) opens a file of the site."""
    pages = [p for p in built_site.rglob("*.html") if "_static" not in p.parts]
    broken = [
        f"{page.relative_to(built_site)} -> {target}"
        for page in pages
        for target, path in _local_links(page)
        if not path.exists()
    ]
    assert not broken, f"{len(broken)} broken links: {broken[:10]}"


def test_glossary_search_words_are_the_chinese_terms_of_the_table():
    glossary = (
        "# 术语表\n\nText with 中文 outside the table.\n\n| English | 中文 |\n|---|---|\n"
        "| multi-head attention | 多头注意力 |\n| Pre-LN / Post-LN | 前置归一化（Pre-LN） / 后置归一化（Post-LN） |\n"
        "| softmax | softmax |\n| head | 头 |\n| attention heads | 多头注意力 |\n"
    )
    assert glossary_search_words(glossary) == ["中文", "多头注意力", "前置归一化", "后置归一化"]
    real = glossary_search_words(ZH_GLOSSARY.read_text(encoding="utf-8"))
    assert {"多头注意力", "位置编码", "教师强制", "标签平滑", "束搜索"} <= set(real)


def _search_index(book):
    """A built book's search index: its pages (docnames) and, per indexed word, the pages it is on (in a heading,
    which Sphinx keeps in "titleterms", or in the text, "terms")."""
    text = (book / "searchindex.js").read_text(encoding="utf-8")
    index = json.loads(text[text.index("(") + 1 : text.rindex(")")])
    words: dict[str, set[str]] = {}
    for kind in ("titleterms", "terms"):
        for word, found in index[kind].items():
            words.setdefault(word, set()).update(
                index["docnames"][i] for i in (found if isinstance(found, list) else [found])
            )
    return index["docnames"], words


def test_the_chinese_book_indexes_whole_chinese_terms(built_site):
    """Sphinx indexes Chinese only through jieba, and looks a typed Chinese phrase up as one word: the glossary's
    terms must be in the index whole, on the pages that teach them."""
    docnames, terms = _search_index(built_site / "zh")
    expected = {
        "多头注意力": "notebooks/zh/05_multi_head_attention",
        "掩码": "notebooks/zh/06_masks",
        "教师强制": "notebooks/zh/09_training",
        "束搜索": "notebooks/zh/10_decoding",
        "字节对编码": "notebooks/zh/15_gpt_from_scratch",
    }
    for word, page in expected.items():
        assert page in terms.get(word, set()), f"the Chinese search index does not find {word} on {page}"
    assert "docs/instructor_guide.zh-CN" in docnames, "the Chinese instructor guide is not a page of the Chinese book"


def test_the_chinese_book_has_the_chinese_instructor_guide(built_site):
    guide = built_site / "zh" / "docs" / "instructor_guide.zh-CN.html"
    text = guide.read_text(encoding="utf-8")
    assert '<html lang="zh-CN"' in text and "教师指南" in text
    assert f'href="{ENGLISH_GUIDE_PAGE}"' in text, "the Chinese guide does not link the English guide's page"
    assert (guide.parent / ENGLISH_GUIDE_PAGE).resolve() == (built_site / "docs" / "instructor_guide.html").resolve()
    landing = (built_site / "zh" / "site" / "index.html").read_text(encoding="utf-8")
    assert 'href="../docs/instructor_guide.zh-CN.html"' in landing, "the Chinese landing page does not link the guide"


# ---------------------------------------------------------------------------------------------------------------
# The playground: notebook 15's GPT in the browser (site/playground/, built into playground/)

PLAYGROUND_PAGES = {"en": "index.html", "zh": "index.zh-CN.html"}
ELEMENT_ID = re.compile(r"""\bid=["']([^"']+)["']""")


def test_the_playground_pages_have_the_same_parts_in_both_languages():
    """The Chinese page is a translation of the English one: the same elements (the script finds them by id), the same
    scripts, and links to the same notebooks, the Chinese page to the Chinese notebooks' pages."""
    texts = {lang: (PLAYGROUND_SOURCE / name).read_text(encoding="utf-8") for lang, name in PLAYGROUND_PAGES.items()}
    assert ELEMENT_ID.findall(texts["en"]) == ELEMENT_ID.findall(texts["zh"])
    scripts = {lang: re.findall(r'<script [^>]*src="([^"]+)"', text) for lang, text in texts.items()}
    assert scripts["en"] == scripts["zh"] and scripts["en"][-1] == "playground.js"
    notebooks = {lang: re.findall(r'href="([^"]*notebooks/[^"]+\.html)"', text) for lang, text in texts.items()}
    assert [n.replace("../zh/notebooks/zh/", "../notebooks/") for n in notebooks["zh"]] == notebooks["en"]
    assert {"10_decoding", "04_scaled_dot_product_attention", "05_multi_head_attention", "15_gpt_from_scratch"} <= {
        n.rsplit("/", 1)[-1].removesuffix(".html") for n in notebooks["en"]
    }
    assert '<html lang="zh-CN">' in texts["zh"] and CJK.search(texts["zh"])


def test_a_playground_file_script_holds_its_value():
    value = {"a": '引号 " and </script>', "b": [1, 2]}
    script = file_script("x.json", value)
    assert script.startswith("window.coursePlaygroundFiles = window.coursePlaygroundFiles || {};\n")
    assert json.loads(script.split(" = ", 2)[-1].rstrip(";\n")) == value
    data = bytes(range(256)) * 10
    assert gzip.decompress(base64.b64decode(gzip_base64(data))) == data
    assert gzip_base64(data) == gzip_base64(data), "the same bytes on every build"


def test_the_playground_is_in_the_site_and_under_10_mb(built_site):
    folder = built_site / "playground"
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) < PLAYGROUND_MAX_BYTES
    for name in [*PLAYGROUND_PAGES.values(), "ort/ort.wasm.min.js", "model/gpt_stdlib.onnx.js", "model/tokenizer.js"]:
        assert (folder / name).is_file(), name
    english = (built_site / "site" / "index.html").read_text(encoding="utf-8")
    chinese = (built_site / "zh" / "site" / "index.html").read_text(encoding="utf-8")
    assert 'href="../playground/index.html"' in english, "the landing page does not link the playground"
    assert 'href="../../playground/index.zh-CN.html"' in chinese, "the Chinese landing page does not link its page"
    assert (built_site / "zh" / "site" / "../../playground/index.zh-CN.html").resolve().is_file()


# ---------------------------------------------------------------------------------------------------------------
# The decks: slides a projector shows (tests/test_slides.py checks how they are laid out)

CDN = re.compile(r"(https?:)?//[^\"'\s]*(unpkg|jsdelivr|cdnjs|mathjax\.org|googleapis|cloudflare|cdn\.)", re.I)


def test_every_deck_of_the_site_fits_a_projector(built_site):
    """Every slide of every deck of both books, measured on its HTML: at most MAX_SLIDE_WORDS words and
    MAX_SLIDE_LINES lines, and as many slides as the notebook laid out for it has; no deck names a CDN (its maths and
    reveal.js come from the book's _static/)."""
    sources = {("slides", p.stem): p for p in notebook_paths()}
    sources.update({("zh/slides", p.stem): p for p in chinese_notebooks()})
    for (folder, stem), source in sources.items():
        page = (built_site / folder / f"{stem}.slides.html").read_text(encoding="utf-8")
        sizes = deck_slide_sizes(page)
        assert len(sizes) == len(notebook_slide_sizes(deck_notebook(source))), f"{folder}/{stem}"
        too_large = [(i, size) for i, size in enumerate(sizes) if not size.fits()]
        assert not too_large, f"{folder}/{stem}: over {MAX_SLIDE_WORDS} words or {MAX_SLIDE_LINES} lines: {too_large}"
        assert not CDN.search(page), f"{folder}/{stem} names a CDN"


# ---------------------------------------------------------------------------------------------------------------
# The teachers' pages are on the site once they exist; the teacher's material (teacher/) never is


def test_the_teaching_pages_are_in_the_table_of_contents_once_they_exist(tmp_path):
    toc = yaml.safe_load((SITE_SOURCE / "_toc.yml").read_text(encoding="utf-8"))
    teaching = next(part for part in toc["parts"] if part["caption"] == "Teaching and measuring")
    assert {f"docs/{name}" for name in TEACHING_PAGES} <= {c["file"] for c in teaching["chapters"]}
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "lab_kit.md").write_text("# Lab kit\n", encoding="utf-8")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "00_introduction.ipynb").write_text("{}", encoding="utf-8")
    kept = toc_files(existing_toc(toc, tmp_path))
    assert "docs/lab_kit" in kept and "docs/grading" not in kept and "docs/instructor_guide" not in kept
    assert "notebooks/00_introduction" in kept and "notebooks/01_rnn_limits" not in kept
    (tmp_path / "docs" / "grading.zh-CN.md").write_text("# 评分\n", encoding="utf-8")
    assert chinese_teaching_pages(tmp_path / "docs") == [ZH_GUIDE, tmp_path / "docs" / "grading.zh-CN.md"]


def test_a_chinese_teaching_page_links_the_english_page_of_the_english_book():
    text = "[English](instructor_guide.md#6) · [中文](lab_kit.zh-CN.md) · [x](no_such_page.md)"
    assert link_english_docs(text) == (
        f'<a href="{ENGLISH_GUIDE_PAGE}#6">English</a> · [中文](lab_kit.zh-CN.md) · [x](no_such_page.md)'
    )


def test_no_table_of_contents_lists_teacher_material(tmp_path):
    english = yaml.safe_load((SITE_SOURCE / "_toc.yml").read_text(encoding="utf-8"))
    stage_chinese_book(tmp_path / "zh", chinese_notebooks()[:1])
    chinese = yaml.safe_load((tmp_path / "zh" / "_toc.yml").read_text(encoding="utf-8"))
    for toc in (english, chinese):
        files = toc_files(toc)
        assert len(files) > 2 and not [f for f in files if f.split("/")[0] == "teacher"]
        assert public_toc(toc) == toc
    assert toc_files(chinese)[-len(chinese_teaching_pages()) :] == [f"docs/{p.stem}" for p in chinese_teaching_pages()]
    assert not list((tmp_path / "zh").rglob("teacher")), "the Chinese book's sources hold a teacher/ folder"
    leaky = {"root": "site/index", "parts": [{"chapters": [{"file": "docs/lab_kit"}, {"file": "teacher/assignments"}]}]}
    with pytest.raises(ValueError, match="teacher/assignments"):
        public_toc(leaky)
    config = yaml.safe_load((SITE_SOURCE / "_config.yml").read_text(encoding="utf-8"))
    assert "teacher" in config["exclude_patterns"]


def test_teacher_files_are_found_wherever_a_build_copies_them(tmp_path):
    teacher, site = tmp_path / "teacher", tmp_path / "site"
    teacher.mkdir()
    (teacher / "key.py").write_text("ANSWER = 42\n", encoding="utf-8")
    (site / "_downloads" / "0a1b").mkdir(parents=True)
    (site / "docs").mkdir()
    (site / "docs" / "lab_kit.html").write_text("<p>ANSWER = 41</p>", encoding="utf-8")
    assert teacher_files_in(site, teacher) == []
    (site / "_downloads" / "0a1b" / "renamed.py").write_text("ANSWER = 42\n", encoding="utf-8")
    (site / "teacher").mkdir()
    (site / "teacher" / "assignments.html").write_text("<p>keys</p>", encoding="utf-8")
    assert sorted(p.name for p in teacher_files_in(site, teacher)) == ["assignments.html", "renamed.py"]


def test_the_built_site_holds_no_teacher_material(built_site):
    assert teacher_files_in(built_site) == []
    for book in (built_site, built_site / "zh"):
        docnames, _ = _search_index(book)
        assert not [d for d in docnames if d.startswith("teacher")], "a page of the site comes from teacher/"

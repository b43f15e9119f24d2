"""Build the course site for reading and teaching without a kernel: a Jupyter Book and reveal.js slides.

    python -m tools.build_site                # the book and every deck into _site/
    python -m tools.build_site --slides-only  # only the slides (into _site/slides/)
    python -m tools.build_site 03 04          # the book, and the decks of some notebooks only
    python -m tools.build_site --language en  # only the English site (default: English and Chinese)

The book is `jupyter-book build` of the committed notebooks (no re-execution), with its configuration, table of
contents and landing page in site/. Nothing on a built page is loaded from a CDN: MathJax, reveal.js, require.js
and jQuery come from the npm packages pinned in site/package.json (installed with `npm ci` on the first build)
and are copied into _site/_static/, so the site works offline and behind a firewall. The teachers' pages of docs/
(the instructor guide, TEACHING_PAGES) are in its table of contents once their file exists; the teacher's material
in teacher/ (the assignments' keys) never is, and the build fails if any of it reaches the site.

Slides come from the notebooks' own cells, laid out for a projector on a copy (``slide_notebook``; the notebooks are
only read): every heading starts a slide, whether or not it starts a cell ("#" and "##" a new slide, deeper ones a
sub-slide below it), and no slide shows more than MAX_SLIDE_WORDS = 120 words of prose or is taller than
MAX_SLIDE_LINES = 27 lines of code, on reveal.js's 960 x 700 pixel slide (prose, headings, tables, formulas,
outputs and figures count as the lines they take, measured in Chromium: SlideSize and the constants beside it).
Prose that does not fit is cut after its first sentences (marked "…"), with the whole of it in the speaker notes
(press S); a code cell longer than a slide goes on continuation slides (titled "... (continued)"), cut between
statements; an output that does not fit goes on the next slide, a long text output cut short there with the whole
text in the notes; figures are kept, at most 360 pixels high. tests/test_slides.py checks every deck of both
languages against these limits. A cell's own ``metadata.slideshow.slide_type`` is kept ("skip" leaves it out,
"notes" puts it in the notes, "slide" and "subslide" start a slide); ``--annotate`` writes the default of each
cell (a "#"/"##" heading first: "slide", "###": "sub-slide") into the notebooks, so a teacher can adjust them in
JupyterLab's property inspector. The decks load MathJax and reveal.js from _static/ like the book, so their maths
and speaker notes work offline too.

The playground, _site/playground/ (an English and a Chinese page, site/playground/), runs notebook 15's GPT in the
browser with ONNX Runtime Web from the npm package pinned in site/package.json, and the model exported by
``python -m tools.export_onnx``: it generates text token by token and shows the next-token probabilities and the
attention of each layer and head. Its files take under 10 MB; it too works offline, also opened from disk.

The Chinese edition is a second book in _site/zh/, laid out as the English one (_site/zh/site/index.html, its
notebooks in _site/zh/notebooks/zh/, its decks in _site/zh/slides/, its own _static/), so it also works on its
own. It holds the Chinese notebooks that exist (notebooks/zh/, built by ``python -m tools.translations build``) and
the Chinese instructor guide and teachers' pages (docs/*.zh-CN.md): its table of contents and landing page (from
site/index.zh-CN.md) are written at build time into a scratch copy of the sources, where a link to a notebook with
no Chinese version yet, or to an English page of docs/, opens the English page instead. The two landing pages
link to each other. Its search index holds Chinese words cut by jieba, with the glossary's terms
(translations/zh/GLOSSARY.md) kept whole.
"""

from __future__ import annotations

import argparse
import ast
import base64
import copy
import gzip
import html
import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import nbformat
import yaml
from bs4 import BeautifulSoup
from nbconvert import SlidesExporter

from tools.course_notebooks import NOTEBOOKS, ROOT, notebook_paths
from tools.translations import translated_notebooks

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
# the playground (site/playground/): notebook 15's GPT run in the browser by ONNX Runtime Web. Its pages, script and
# style are copied; ONNX Runtime's script too; its WebAssembly and the model (python -m tools.export_onnx) go into
# classic scripts as gzip in base64, with the tokenizer and the export's manifest as JSON, so that the page also works
# opened from disk (file://), where a page may neither fetch() a file nor import a module
PLAYGROUND_SOURCE = SITE_SOURCE / "playground"
PLAYGROUND_FOLDER = "playground"
PLAYGROUND_PAGES = ("index.html", "index.zh-CN.html", "playground.js", "playground.css")
ONNX_RUNTIME = "onnxruntime-web/dist"
# ONNX Runtime Web's CPU build (its WebAssembly without WebGPU); without cross-origin isolation it runs on one thread
ONNX_RUNTIME_SCRIPT, ONNX_RUNTIME_GLUE, ONNX_RUNTIME_WASM = (
    "ort.wasm.min.js",
    "ort-wasm-simd-threaded.mjs",
    "ort-wasm-simd-threaded.wasm",
)
PLAYGROUND_MODEL = ("gpt_stdlib.onnx", "tokenizer.json", "gpt_stdlib.export.json")
PLAYGROUND_MAX_BYTES = 10_000_000  # everything the page loads
# the notebooks' Colab badge image, drawn by the course (site/_static/), so that showing it fetches nothing
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
# the slides live in _site/slides/, one level below _static/
SLIDE_URLS = {
    "reveal_url_prefix": "../_static/reveal.js",
    "require_js_url": "../_static/require.js",
    "jquery_url": "../_static/jquery.min.js",
    "mathjax_url": "../_static/mathjax/tex-chtml-full.js",
}
LANGUAGES = ("en", "zh")
# the Chinese book: its folder in the site, its landing page's template, what its configuration changes
ZH_FOLDER = "zh"
ZH_LANDING = SITE_SOURCE / "index.zh-CN.md"
ZH_LIST_MARKER = re.compile(r"^<!-- zh-notebooks:.*-->$", re.MULTILINE)
ZH_GUIDE = ROOT / "docs" / "instructor_guide.zh-CN.md"
# the Chinese guide's link to its English version, and where that version is from the Chinese book's docs/ folder
ZH_GUIDE_ENGLISH_LINK = "[English](instructor_guide.md)"
ENGLISH_GUIDE_PAGE = "../../docs/instructor_guide.html"
# the course's Chinese terms, which the Chinese book's search index keeps whole (jieba alone cuts 多头注意力 into
# 多头 and 注意力, and Sphinx's search box looks a typed Chinese phrase up as one word)
ZH_GLOSSARY = ROOT / "translations" / "zh" / "GLOSSARY.md"
ZH_TITLE = "Transformer 逐步详解"
ZH_FOOTER = "本站每个输出都是笔记本中保存的输出，与英文版相同，并由课程的测试检查。"
# pages for teachers beside the instructor guide, in docs/ (English NAME.md, Chinese NAME.zh-CN.md): in both books'
# tables of contents (site/_toc.yml; the Chinese one is written by stage_chinese_book), each left out of the build
# while its file does not exist yet
TEACHING_PAGES = ("lab_kit", "grading")
# the teacher's material (the assignments' keys and rubrics): never a page, nor a file, of the site
TEACHER_FOLDER = "teacher"
ENGLISH_DOCS_LINK = re.compile(r"\[(?P<text>[^\]]*)\]\((?P<name>[a-z0-9_]+)\.md(?P<anchor>#[^)]*)?\)")
CHINESE_DOCS_LINK = re.compile(r"\[(?P<text>[^\]]*)\]\((?P<name>[a-z0-9_]+)\.zh-CN\.md(?P<anchor>#[^)]*)?\)")


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
    runtime = [f"{ONNX_RUNTIME}/{name}" for name in (ONNX_RUNTIME_SCRIPT, ONNX_RUNTIME_GLUE, ONNX_RUNTIME_WASM)]
    if all((NODE_MODULES / source).exists() for source in [s for s, _ in BROWSER_LIBRARIES] + runtime):
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


def file_script(name: str, value: str | dict) -> str:
    """A classic script that stores ``value`` (a string, or JSON) as the file ``name`` in the playground's
    ``window.coursePlaygroundFiles``."""
    files = "window.coursePlaygroundFiles"
    return f"{files} = {files} || {{}};\n{files}[{json.dumps(name)}] = {json.dumps(value, ensure_ascii=False)};\n"


def gzip_base64(data: bytes) -> str:
    """``data`` gzipped (the same bytes on every build) and base64-encoded, as the playground unpacks it."""
    return base64.b64encode(gzip.compress(data, compresslevel=9, mtime=0)).decode("ascii")


def build_playground(out: Path) -> list[Path]:
    """The playground in ``out``/playground/: its English and Chinese pages, its script and style, ONNX Runtime
    Web's script, and its WebAssembly, the model, the tokenizer and the export's manifest as classic scripts
    (ort/, model/). Returns the files written; the page loads all of them, at most :data:`PLAYGROUND_MAX_BYTES`."""
    folder = out / PLAYGROUND_FOLDER
    (folder / "ort").mkdir(parents=True, exist_ok=True)
    (folder / "model").mkdir(exist_ok=True)
    for name in PLAYGROUND_PAGES:
        shutil.copy2(PLAYGROUND_SOURCE / name, folder / name)
    runtime, ort, model = NODE_MODULES / ONNX_RUNTIME, folder / "ort", folder / "model"
    shutil.copy2(runtime / ONNX_RUNTIME_SCRIPT, ort / ONNX_RUNTIME_SCRIPT)
    glue = (runtime / ONNX_RUNTIME_GLUE).read_text(encoding="utf-8")
    (ort / f"{ONNX_RUNTIME_GLUE}.js").write_text(file_script(ONNX_RUNTIME_GLUE, glue), encoding="utf-8")
    wasm = gzip_base64((runtime / ONNX_RUNTIME_WASM).read_bytes())
    (ort / f"{ONNX_RUNTIME_WASM}.js").write_text(file_script(ONNX_RUNTIME_WASM, wasm), encoding="utf-8")
    graph, tokenizer, manifest = (PLAYGROUND_SOURCE / name for name in PLAYGROUND_MODEL)
    (model / f"{graph.name}.js").write_text(file_script(graph.name, gzip_base64(graph.read_bytes())), encoding="utf-8")
    as_json = [file_script(p.name, json.loads(p.read_text(encoding="utf-8"))) for p in (tokenizer, manifest)]
    (model / "tokenizer.js").write_text("".join(as_json), encoding="utf-8")
    written = sorted(p for p in folder.rglob("*") if p.is_file())
    total = sum(p.stat().st_size for p in written)
    if total > PLAYGROUND_MAX_BYTES:
        raise RuntimeError(f"the playground's files take {total:,} bytes, over {PLAYGROUND_MAX_BYTES:,}")
    return written


def use_local_badges(out: Path) -> None:
    """Point every page's Colab badge image at the course's own copy (the link still opens Colab)."""
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        if COLAB_BADGE in text:
            local = Path(os.path.relpath(out / "_static" / "colab-badge.svg", page.parent)).as_posix()
            page.write_text(text.replace(COLAB_BADGE, local), encoding="utf-8")


def build_book(out: Path, source: Path | None = None) -> None:
    """`jupyter-book build` of the whole course into ``out`` (any warning fails the build); of another book when
    ``source`` holds one (with its _config.yml and _toc.yml)."""
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    root, settings = (ROOT, SITE_SOURCE) if source is None else (source, source)
    toc = public_toc(existing_toc(yaml.safe_load((settings / "_toc.yml").read_text(encoding="utf-8")), root))
    with tempfile.TemporaryDirectory() as scratch:
        toc_file = Path(scratch) / "_toc.yml"
        toc_file.write_text(yaml.safe_dump(toc, allow_unicode=True, sort_keys=False), encoding="utf-8")
        command = [str(jupyter_book), "build", str(root), "--config", str(settings / "_config.yml")]
        command += ["--toc", str(toc_file), "--path-output", scratch, "-W", "--keep-going", "-q"]
        subprocess.run(command, check=True)
        shutil.copytree(Path(scratch) / "_build" / "html", out, dirs_exist_ok=True)


def toc_files(toc: dict) -> list[str]:
    """Every file a table of contents names: its root, then its chapters (and their sections), in order."""

    def files(entries: list[dict]) -> list[str]:
        return [
            f
            for entry in entries
            for f in ([entry["file"]] if "file" in entry else []) + files(entry.get("sections", []))
        ]

    return [
        toc["root"],
        *files([c for part in toc.get("parts", []) for c in part.get("chapters", [])] + toc.get("chapters", [])),
    ]


def existing_toc(toc: dict, root: Path) -> dict:
    """``toc`` without the chapters whose file (a .md or .ipynb under ``root``) does not exist, such as a teachers'
    page (:data:`TEACHING_PAGES`) not written yet."""

    def exists(entry: dict) -> bool:
        return "file" not in entry or any((root / f"{entry['file']}{s}").is_file() for s in (".md", ".ipynb"))

    toc = copy.deepcopy(toc)
    for part in toc.get("parts", []):
        part["chapters"] = [chapter for chapter in part.get("chapters", []) if exists(chapter)]
    toc["parts"] = [part for part in toc.get("parts", []) if part["chapters"]]
    return toc


def public_toc(toc: dict) -> dict:
    """``toc``, after checking that it names nothing in teacher/ (the keys students must not see)."""
    private = [f for f in toc_files(toc) if Path(f).parts[0] == TEACHER_FOLDER]
    if private:
        raise ValueError(f"the site's table of contents names teacher material, which is never published: {private}")
    return toc


def teacher_files_in(out: Path, teacher: Path | None = None) -> list[Path]:
    """The files of a built site that are teacher material: under a folder named teacher/, or a copy of a file in
    ``teacher`` (default: the repository's teacher/), as Sphinx makes of a file a page links to (_downloads/)."""
    teacher = ROOT / TEACHER_FOLDER if teacher is None else teacher
    keys = {p.read_bytes() for p in teacher.rglob("*") if p.is_file()} if teacher.is_dir() else set()
    sizes = {len(key) for key in keys}
    found = []
    for path in out.rglob("*"):
        if not path.is_file():
            continue
        if TEACHER_FOLDER in path.relative_to(out).parts[:-1] or (
            path.stat().st_size in sizes and path.read_bytes() in keys
        ):
            found.append(path)
    return found


def chinese_notebooks(names: list[str] | None = None) -> list[Path]:
    """The Chinese notebooks that exist (notebooks/zh/), in order; ``names`` picks some by number or file name."""
    paths = translated_notebooks(ZH_FOLDER)
    if not names:
        return paths
    wanted = {p.name for p in notebook_paths(names)}
    return [p for p in paths if p.name in wanted]


def english_chapters() -> list[Path]:
    """The notebooks the English book has a page for (site/_toc.yml), in order."""
    toc = yaml.safe_load((SITE_SOURCE / "_toc.yml").read_text(encoding="utf-8"))
    files = [chapter["file"] for part in toc.get("parts", []) for chapter in part.get("chapters", [])]
    return [p for p in notebook_paths() if f"notebooks/{p.stem}" in files]


def chinese_title(path: Path) -> str:
    """The Chinese title of a Chinese notebook: its first heading after "NN · "."""
    first = nbformat.read(path, as_version=4).cells[0].source.strip().splitlines()[0]
    return first.lstrip("# ").split(" · ", 1)[-1].strip()


def chinese_landing_page(template: str, paths: list[Path]) -> str:
    """The Chinese landing page: ``template`` with the list of Chinese notebooks and their decks at its marker,
    and links to the English pages of the notebooks (those in the English book) not translated yet."""
    translated = {p.name for p in paths}
    lines = [f"- **{p.name[:2]}** · [{chinese_title(p)}](../notebooks/zh/{p.stem}.ipynb)" for p in paths]
    if not paths:
        lines.append("中文笔记本尚未生成（`python -m tools.translations build`）。")
    missing = [p for p in english_chapters() if p.name not in translated]
    if missing:
        links = ", ".join(f'<a href="../../notebooks/{p.stem}.html">{p.name[:2]}</a>' for p in missing)
        lines += ["", f'<p class="untranslated">尚无中文版的笔记本（英文页面）：{links}</p>']
    deck = "每个笔记本一套 reveal.js 幻灯片，由笔记本自身的单元格生成：每个标题开始一张幻灯片，"
    deck += "长代码和长输出接续到后面的幻灯片，放不下的文字在演讲者备注里（按 S 键）。断网也能用："
    lines += ["", "## 幻灯片", "", deck, ""]
    lines.append('<ul class="slide-links">')
    lines += [f'  <li><a href="../slides/{p.stem}.slides.html">{p.name[:2]}</a></li>' for p in paths]
    lines.append("</ul>")
    if not ZH_LIST_MARKER.search(template):
        raise RuntimeError(f"{ZH_LANDING.relative_to(ROOT)} has no '<!-- zh-notebooks: ... -->' line")
    return ZH_LIST_MARKER.sub(lambda _: "\n".join(lines), template, count=1)


def glossary_search_words(glossary: str) -> list[str]:
    """The Chinese words of the glossary's table (its second column), each run of two or more Chinese characters, in
    order and without repeats: 多头注意力, 层归一化, 位置编码, ..."""
    words: dict[str, None] = {}
    for line in glossary.splitlines():
        columns = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.lstrip().startswith("|") and len(columns) == 2:
            words.update(dict.fromkeys(re.findall(r"[\u4e00-\u9fff]{2,}", columns[1])))
    return list(words)


NOTEBOOK_LINK = re.compile(r"\[(?P<text>[^\]]*)\]\((?P<name>\d\d_[a-z0-9_]+\.ipynb)(?P<anchor>#[^)]*)?\)")


def link_untranslated_to_english(nb: nbformat.NotebookNode, translated: set[str]) -> nbformat.NotebookNode:
    """Point each link to a notebook that has no Chinese version yet at that notebook's English page (the book
    would fail on a link to a page it does not have)."""

    def to_english(match: re.Match) -> str:
        if match["name"] in translated:
            return match[0]
        page = f"../../../notebooks/{match['name'].removesuffix('.ipynb')}.html{match['anchor'] or ''}"
        return f'<a href="{page}">{match["text"]}</a>'

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = NOTEBOOK_LINK.sub(to_english, cell.source)
    return nb


def link_decks(nb: nbformat.NotebookNode, elsewhere: set[str] | None = None) -> nbformat.NotebookNode:
    """In a deck, a link to another notebook opens that notebook's deck, in the same folder, or for the
    notebooks named in ``elsewhere`` (those with no Chinese version yet) the English deck in ../../slides/."""

    def to_deck(match: re.Match) -> str:
        deck = f"{match['name'].removesuffix('.ipynb')}.slides.html"
        folder = "../../slides/" if elsewhere and match["name"] in elsewhere else ""
        return f"[{match['text']}]({folder}{deck})"

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = NOTEBOOK_LINK.sub(to_deck, cell.source)
    return nb


def stage_chinese_book(stage: Path, paths: list[Path]) -> None:
    """The sources of the Chinese book in ``stage``, laid out as in the repository: site/index.md (the landing
    page), site/_static/, notebooks/zh/, docs/ (the Chinese instructor guide and teachers' pages,
    :func:`chinese_teaching_pages`, their links to English pages of docs/ pointed at the English book's pages),
    figures/, README.md (the landing page includes its commands), and the book's _config.yml and _toc.yml."""
    (stage / "site").mkdir(parents=True)
    shutil.copytree(SITE_SOURCE / "_static", stage / "site" / "_static")
    template = ZH_LANDING.read_text(encoding="utf-8")
    (stage / "site" / "index.md").write_text(chinese_landing_page(template, paths), encoding="utf-8")
    shutil.copy2(ROOT / "README.md", stage / "README.md")
    if (ROOT / "figures").is_dir():
        shutil.copytree(ROOT / "figures", stage / "figures")
    guide = ZH_GUIDE.read_text(encoding="utf-8")
    if ZH_GUIDE_ENGLISH_LINK not in guide:
        raise RuntimeError(
            f"{ZH_GUIDE.relative_to(ROOT)} no longer links its English version as {ZH_GUIDE_ENGLISH_LINK}"
        )
    (stage / "docs").mkdir()
    teaching_pages = chinese_teaching_pages()
    for page in teaching_pages:
        # the English pages are pages of the English book, not of this one
        text = link_english_docs(page.read_text(encoding="utf-8"))
        (stage / "docs" / page.name).write_text(text, encoding="utf-8")
    translated = {p.name for p in paths}
    for path in paths:
        target = stage / "notebooks" / ZH_FOLDER / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(link_untranslated_to_english(nbformat.read(path, as_version=4), translated), target)
    config = yaml.safe_load((SITE_SOURCE / "_config.yml").read_text(encoding="utf-8"))
    config["sphinx"].pop("local_extensions", None)  # its pages' links to English pages are pointed above
    config["title"] = ZH_TITLE
    config["html"]["extra_footer"] = ZH_FOOTER
    config["sphinx"]["config"]["language"] = "zh_CN"
    search_words = stage / "search_words.txt"  # a jieba user dictionary: one word a line
    search_words.write_text("\n".join(glossary_search_words(ZH_GLOSSARY.read_text(encoding="utf-8"))) + "\n", "utf-8")
    config["sphinx"]["config"]["html_search_options"] = {"dict": str(search_words)}
    (stage / "_config.yml").write_text(yaml.safe_dump(config, allow_unicode=True, sort_keys=False), encoding="utf-8")
    chapters = [{"file": f"notebooks/{ZH_FOLDER}/{p.stem}"} for p in paths]
    course = [{"caption": "课程", "numbered": False, "chapters": chapters}] if chapters else []
    pages = [f"docs/{page.stem}" for page in teaching_pages]
    teaching = {"caption": "教学", "chapters": [{"file": page} for page in pages]}
    toc = {"format": "jb-book", "root": "site/index", "parts": [*course, teaching]}
    (stage / "_toc.yml").write_text(yaml.safe_dump(toc, allow_unicode=True, sort_keys=False), encoding="utf-8")


def chinese_teaching_pages(docs: Path | None = None) -> list[Path]:
    """The Chinese book's pages for teachers, in order: the Chinese instructor guide, then each of
    :data:`TEACHING_PAGES` whose Chinese file (NAME.zh-CN.md in ``docs``, default docs/) exists."""
    docs = ROOT / "docs" if docs is None else docs
    pages = [docs / f"{name}.zh-CN.md" for name in TEACHING_PAGES]
    return [ZH_GUIDE] + [page for page in pages if page.is_file()]


def link_english_docs(text: str) -> str:
    """In a Chinese page of docs/, each link to an English page of docs/ (``[English](lab_kit.md)``) pointed at
    that page in the English book."""

    def to_english(match: re.Match) -> str:
        if not (ROOT / "docs" / f"{match['name']}.md").is_file():
            return match[0]
        return f'<a href="../../docs/{match["name"]}.html{match["anchor"] or ""}">{match["text"]}</a>'

    return ENGLISH_DOCS_LINK.sub(to_english, text)


def link_chinese_docs(text: str) -> str:
    """In an English page of docs/, each link to a Chinese page of docs/ (``[中文](lab_kit.zh-CN.md)``) pointed at
    that page in the Chinese book (_site/zh/docs/), which the English book does not hold."""
    chinese = {page.name for page in chinese_teaching_pages()}

    def to_chinese(match: re.Match) -> str:
        page = f"{match['name']}.zh-CN"
        if f"{page}.md" not in chinese:
            return match[0]
        return f'<a href="../{ZH_FOLDER}/docs/{page}.html{match["anchor"] or ""}">{match["text"]}</a>'

    return CHINESE_DOCS_LINK.sub(to_chinese, text)


def setup(app: object) -> dict:
    """A Sphinx extension of the English book (site/_config.yml, ``local_extensions``): its pages of docs/ link
    their Chinese editions (:func:`link_chinese_docs`)."""

    def read(_app: object, docname: str, source: list[str]) -> None:
        if docname.startswith("docs/"):
            source[0] = link_chinese_docs(source[0])

    app.connect("source-read", read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def build_chinese_book(out: Path) -> None:
    """`jupyter-book build` of the Chinese edition (the Chinese notebooks that exist) into ``out``."""
    if importlib.util.find_spec("jieba") is None:  # without it Sphinx silently indexes no Chinese word at all
        raise RuntimeError("the Chinese book's search index needs jieba: pip install -r requirements-dev.txt")
    with tempfile.TemporaryDirectory() as scratch:
        stage = Path(scratch) / "source"
        stage_chinese_book(stage, chinese_notebooks())
        build_book(out, source=stage)


# ---------------------------------------------------------------------------------------------------------------
# The slides: one per heading, none larger than a projector shows (see the module's docstring)

MAX_SLIDE_WORDS = 120  # words of prose on one slide
MAX_SLIDE_LINES = 27  # the height of one slide, in lines of code (24 pixels of reveal.js's 700-pixel-high slide)
# what takes how many lines, measured on the decks in Chromium (tests/test_slides.py checks one deck there)
CODE_COLUMNS = 70  # characters in a line of code before the slide wraps it (19-pixel monospace, 810 pixels)
OUTPUT_COLUMNS = 70  # characters in a line of text output, or of code in the prose, before it wraps
WORDS_PER_LINE = 11  # words in a line of prose (20-pixel text, 795 pixels wide)
BLOCK_LINES = 1  # the space above a paragraph or a list item
HEADING_LINES = 4  # a "##" (or deeper) heading, with its margins
TITLE_LINES = 12  # a notebook's "#" title (50-pixel text, usually two lines)
MATHS_ROW_LINES = 2  # a row of a displayed formula
TABLE_WORDS_PER_LINE = 6  # a row of a table in the prose is one line and one more per 6 words (narrow columns wrap)
OUTPUT_ROW_LINES = 1.5  # a row of a table that a cell outputs (a DataFrame)
FIGURE_LINES = 16  # a figure: the slide template shows it at most 360 pixels high
CELL_LINES = 1  # the padding around a cell
# Chinese has no spaces: two characters count as a word; counted so, the Chinese notebooks hold more words than the
# English ones (tests/test_slides.py checks), so a Chinese slide holds no more of the text than an English one
CHINESE_CHARACTERS_PER_WORD = 2
MIN_CODE_LINES = 8  # a cell too long for one slide starts on the current slide only if this many lines are free
CONTINUED = {"en": "{} (continued)", "zh": "{}（续）"}
MORE_LINES = {"en": "… {} more lines in the speaker notes", "zh": "…… 另有 {} 行，见演讲者备注"}
FULL_OUTPUT = {"en": "The whole output:", "zh": "完整输出："}
CUT = " …"  # ends prose cut short on a slide (the speaker notes hold all of it)

HEADING = re.compile(r"^(#{1,6})\s+\S")
DISPLAY_MATHS = re.compile(r"\$\$(.+?)\$\$", re.DOTALL)
INLINE_MATHS = re.compile(r"(?<![\\$])\$(?!\$)[^$\n]+?(?<!\\)\$")
WORD = re.compile(r"[^\W_]+")
CHINESE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
MARKDOWN_IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]*)[^)]*\)|<img\b[^>]*>")
LINK_TARGET = re.compile(r"\]\([^)]*\)")
HTML_TAG = re.compile(r"</?(?:a|p|span|div|br|img|sup|sub|b|i|em|strong|code|details|summary|kbd)\b[^>]*>", re.I)
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")
LIST_START = re.compile(r"^\s*(?:[-*+]|1[.)])\s")  # a list that can interrupt a paragraph
TABLE_RULE = re.compile(r"^\s*\|?[\s:|-]+\|?\s*$")
SENTENCE_END = re.compile(r"[.!?][\"')\]*_]*(?=\s)|[。！？；][”’）*_]*")


@dataclass(frozen=True)
class SlideSize:
    """How much one slide shows: ``words`` of prose and its height in ``lines`` of code. It fits a projected slide
    when it has at most :data:`MAX_SLIDE_WORDS` words and :data:`MAX_SLIDE_LINES` lines."""

    words: float = 0.0
    lines: float = 0.0

    def __add__(self, other: SlideSize) -> SlideSize:
        return SlideSize(self.words + other.words, self.lines + other.lines)

    def fits(self) -> bool:
        return self.words <= MAX_SLIDE_WORDS and self.lines <= MAX_SLIDE_LINES


def prose_words(text: str) -> float:
    """Words of prose in ``text`` (plain text, or Markdown without its link targets and tags): runs of letters or
    digits, two Chinese characters a word, a formula (``$...$`` or ``$$...$$``) one word."""
    text = INLINE_MATHS.sub(" x ", DISPLAY_MATHS.sub(" x ", text))
    return len(CHINESE.findall(text)) / CHINESE_CHARACTERS_PER_WORD + len(WORD.findall(CHINESE.sub(" ", text)))


def prose_size(text: str) -> SlideSize:
    """A paragraph or a list item of prose: its words, and its lines (:data:`BLOCK_LINES` above it, then
    :data:`WORDS_PER_LINE` words a line, and :data:`MATHS_ROW_LINES` per row of a displayed formula)."""
    words = prose_words(DISPLAY_MATHS.sub(" ", text))
    rows = sum(1 + formula.count("\\\\") for formula in DISPLAY_MATHS.findall(text))
    lines = (BLOCK_LINES + math.ceil(words / WORDS_PER_LINE) if words else 0) + MATHS_ROW_LINES * rows
    return SlideSize(prose_words(text), lines)


def heading_size(text: str, level: int) -> SlideSize:
    return SlideSize(prose_words(text), TITLE_LINES if level == 1 else HEADING_LINES)


def table_row_size(text: str) -> SlideSize:
    words = prose_words(text)
    return SlideSize(words, 1 + math.ceil(words / TABLE_WORDS_PER_LINE))


def wrapped_lines(text: str, columns: int) -> int:
    """Lines of monospace ``text`` on a slide that wraps it at ``columns`` characters, as a browser wraps a
    ``pre-wrap`` block: at spaces, a word longer than a line anywhere (a Chinese character takes two columns).
    Breaking only at spaces, it counts at least the lines a browser draws."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # as an HTML page reads a carriage return
    text = text.removesuffix("\n")  # a block's last line break starts no line; more than one leave blank lines
    lines = text.split("\n") if text else []
    return sum(line_rows(line.expandtabs(4), columns) for line in lines)


def line_rows(line: str, columns: int) -> int:
    rows, used = 1, 0
    for token in re.findall(r" +|[^ ]+", line):
        width = sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in token)
        if token[0] == " " or used + width <= columns:
            used += width  # spaces at the end of a line hang past its edge
            continue
        if used:
            rows, used = rows + 1, 0
        rows += (width - 1) // columns
        used = width - columns * ((width - 1) // columns)
    return rows


def mono_size(text: str, columns: int) -> SlideSize:
    return SlideSize(lines=wrapped_lines(text, columns))


def is_badge(source: str) -> bool:
    """Whether an image is the notebooks' "Open in Colab" badge (a button in the text, not a figure)."""
    return "colab-badge" in source


def markdown_plain(text: str) -> str:
    """Markdown as a slide shows its words: no images (their alt text is not shown), link targets or tags."""
    return HTML_TAG.sub(" ", LINK_TARGET.sub("]", MARKDOWN_IMAGE.sub(" ", text)))


def markdown_blocks(source: str) -> list[tuple[str, str]]:
    """A Markdown cell's blocks, in order, as (kind, text): "heading" (one line), "fence" (fenced code), "maths"
    (a displayed formula), "table", "list" or "paragraph"; blank lines separate them, except inside fences and
    displayed formulas."""
    blocks: list[tuple[str, str]] = []
    current: list[str] = []
    fence, maths = "", False

    def flush() -> None:
        if not current:
            return
        text = "\n".join(current)
        first = current[0].strip()
        if first.startswith(("```", "~~~")):
            kind = "fence"
        elif first.startswith("$$") and text.strip().endswith("$$"):
            kind = "maths"
        elif all(line.lstrip().startswith("|") for line in current):
            kind = "table"
        elif LIST_ITEM.match(current[0]):
            kind = "list"
        else:
            kind = "paragraph"
        blocks.append((kind, text))
        current.clear()

    for line in source.split("\n"):
        stripped = line.strip()
        if not fence and not maths and not stripped:
            flush()
            continue
        if not fence and not maths and HEADING.match(line):
            flush()
            blocks.append(("heading", line))
            continue
        if not fence and not maths and current and stripped.startswith(("```", "~~~")):
            flush()
        elif not fence and not maths and current and LIST_START.match(line) and not LIST_ITEM.match(current[0]):
            flush()  # a list right after a paragraph's line ends the paragraph
        current.append(line)
        if fence:
            fence = "" if stripped.startswith(fence) else fence
        elif stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
        elif stripped.count("$$") % 2:
            maths = not maths
    flush()
    return blocks


def block_size(kind: str, text: str) -> SlideSize:
    """What one Markdown block (:func:`markdown_blocks`) takes on a slide."""
    if kind == "heading":
        level = len(text) - len(text.lstrip("#"))
        return heading_size(markdown_plain(text.lstrip("#")), level)
    if kind == "fence":
        inner = text.split("\n")[1:]
        if inner and inner[-1].strip().startswith(("```", "~~~")):
            inner = inner[:-1]
        return mono_size("\n".join(inner), OUTPUT_COLUMNS)
    if kind == "table":
        rows = [row for row in text.split("\n") if not TABLE_RULE.match(row)]
        return sum((table_row_size(markdown_plain(row.replace("|", " "))) for row in rows), SlideSize())
    figures = sum(1 for m in MARKDOWN_IMAGE.finditer(text) if not is_badge(m[0]))
    items = list_items(text) if kind == "list" else [text]
    return sum((prose_size(markdown_plain(item)) for item in items), SlideSize(lines=FIGURE_LINES * figures))


def list_items(text: str) -> list[str]:
    """The items of a Markdown list (a nested item is an item of its own)."""
    items: list[list[str]] = []
    for line in text.split("\n"):
        if LIST_ITEM.match(line) or not items:
            items.append([])
        items[-1].append(LIST_ITEM.sub("", line, count=1))
    return ["\n".join(item) for item in items]


def markdown_size(source: str) -> SlideSize:
    return sum((block_size(kind, text) for kind, text in markdown_blocks(source)), SlideSize())


def heading_pieces(source: str) -> list[str]:
    """A Markdown cell cut before each heading (none inside fenced code or a displayed formula): the text before
    the first heading, if any, then one piece per heading."""
    pieces: list[list[str]] = [[]]
    fence, maths = "", False
    for line in source.split("\n"):
        stripped = line.strip()
        if not fence and not maths and HEADING.match(line) and any(s.strip() for s in pieces[-1]):
            pieces.append([])
        pieces[-1].append(line)
        if fence:
            fence = "" if stripped.startswith(fence) else fence
        elif stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
        elif stripped.count("$$") % 2:
            maths = not maths
    return ["\n".join(piece).strip("\n") for piece in pieces if any(line.strip() for line in piece)]


def _masked(text: str) -> str:
    """``text`` with its inline code, formulas and links turned into x's, so that nothing cuts inside them."""
    for pattern in (r"`[^`]*`", DISPLAY_MATHS.pattern, INLINE_MATHS.pattern, r"\[[^\]]*\]\([^)]*\)", r"<[^>]*>"):
        text = re.sub(pattern, lambda m: "x" * len(m[0]), text, flags=re.DOTALL)
    return text


def cut_block(kind: str, text: str, fits: Callable[[SlideSize], bool]) -> str | None:
    """The longest beginning of a paragraph, list or table that ``fits``, ending in :data:`CUT`: whole sentences
    (whole items, whole rows) if at least one fits, else whole words; None if nothing fits."""
    if kind == "table":
        lines = text.split("\n")
        head = 2 if len(lines) > 1 and TABLE_RULE.match(lines[1]) else 1
        for end in range(len(lines) - 1, head, -1):
            part = "\n".join(lines[:end])
            if fits(block_size(kind, part)):
                return part
        return None
    if kind not in ("paragraph", "list"):
        return None
    masked = _masked(text)
    if kind == "list":
        ends = [m.start() for m in re.finditer(r"\n(?=\s*(?:[-*+]|\d+[.)])\s)", masked)]
    else:
        ends = [m.end() for m in SENTENCE_END.finditer(masked)]
    words = [m.start() for m in re.finditer(r"\s", masked)] + [m.end() for m in CHINESE.finditer(masked)]
    for candidates in (ends, words):
        for end in sorted(set(candidates), reverse=True):
            part = text[:end].rstrip()
            balanced = part.count("**") % 2 == 0 and part.replace("``", "").count("`") % 2 == 0
            if part and balanced and end < len(text.rstrip()) and fits(block_size(kind, part + CUT)):
                return part + CUT
    return None


def is_widget(output: nbformat.NotebookNode) -> bool:
    """Whether an output is a widget (which a deck, without a kernel, cannot draw)."""
    return "application/vnd.jupyter.widget-view+json" in output.get("data", {})


def output_size(output: nbformat.NotebookNode) -> SlideSize:
    """What one output of a code cell takes on a slide (in the form the HTML shows: a widget shows nothing, a
    DataFrame a line per row, an image a figure, text its lines)."""
    if output.output_type == "stream":
        return mono_size(output.text, OUTPUT_COLUMNS)
    if output.output_type == "error":
        return mono_size(strip_ansi("\n".join(output.traceback)), OUTPUT_COLUMNS)
    data = output.get("data", {})
    if is_widget(output):
        return SlideSize()
    if "text/html" in data:
        return SlideSize(lines=OUTPUT_ROW_LINES * max(1, data["text/html"].count("<tr")))
    if any(kind in data for kind in ("image/svg+xml", "image/png", "image/jpeg")):
        return SlideSize(lines=FIGURE_LINES)
    if "text/markdown" in data:
        return markdown_size(data["text/markdown"])
    return mono_size(data.get("text/plain", ""), OUTPUT_COLUMNS)


def strip_ansi(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)


def output_text(output: nbformat.NotebookNode) -> str | None:
    """The text an output shows, when it shows text (a stream, a traceback, a plain or an HTML table's text)."""
    if output.output_type == "stream":
        return output.text
    if output.output_type == "error":
        return strip_ansi("\n".join(output.traceback))
    data = output.get("data", {})
    if is_widget(output) or "text/markdown" in data:
        return None
    if any(kind in data for kind in ("image/svg+xml", "image/png", "image/jpeg")):
        return None
    return data.get("text/plain")


def truncated_output(output: nbformat.NotebookNode, lines: float, language: str) -> nbformat.NotebookNode:
    """A stream holding the first lines of ``output``'s text that take at most ``lines - 1`` lines on the slide,
    and a last line that says how many more the speaker notes hold."""
    text = output_text(output) or ""
    rows = text.rstrip("\n").split("\n")
    kept, used = [], 0
    for row in rows:
        height = wrapped_lines(row or " ", OUTPUT_COLUMNS)
        if used + height > lines - 1:
            break
        kept.append(row)
        used += height
    shown = "\n".join(kept + [MORE_LINES[language].format(len(rows) - len(kept))]) + "\n"
    return nbformat.v4.new_output("stream", name="stdout", text=shown)


def merged_streams(outputs: list[nbformat.NotebookNode]) -> list[nbformat.NotebookNode]:
    """The outputs as a terminal shows them: consecutive writes to the same stream as one text, and of a line
    rewritten after a carriage return (a progress bar) only its last version."""
    merged: list[nbformat.NotebookNode] = []
    for output in outputs:
        last = merged[-1] if merged else None
        if output.output_type == "stream" and last and last.output_type == "stream" and last.name == output.name:
            last.text += output.text
        else:
            merged.append(copy.deepcopy(output))
    for output in merged:
        if output.output_type == "stream":
            output.text = re.sub(r"[^\n]*\r(?=[^\n])", "", output.text)
    return merged


def statement_starts(lines: list[str]) -> dict[int, int]:
    """Where a chunk of a code cell may end: the index of each line that starts a statement (with the comments
    just above it), and that statement's indentation; IPython's ``%`` and ``!`` lines read as statements."""
    magic = re.compile(r"^(\s*)[%!].*$")
    source = "\n".join(magic.sub(r"\1pass", line) for line in lines)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {i: len(line) - len(line.lstrip()) for i, line in enumerate(lines) if line.strip()}
    starts: dict[int, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt):
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
            while first > 0 and lines[first - 1].strip().startswith("#"):
                first -= 1
            starts[first] = min(starts.get(first, node.col_offset), node.col_offset)
    return starts


def code_break(lines: list[str], start: int, room: float, starts: dict[int, int]) -> int:
    """Where the chunk of ``lines`` from ``start`` ends: it takes at most ``room`` lines (at least one line), and
    ends, if it can, before a statement, preferring the least indented one in its second half."""
    end, used = start, 0
    while end < len(lines) and used + wrapped_lines(lines[end] or " ", CODE_COLUMNS) <= room:
        used += wrapped_lines(lines[end] or " ", CODE_COLUMNS)
        end += 1
    end = max(end, start + 1)
    if end == len(lines):
        return end
    half = start + max(1, (end - start) // 2)
    candidates = [i for i in starts if half <= i <= end]
    if not candidates:
        return end
    return min(candidates, key=lambda i: (starts[i], -i))


def heading_title(line: str) -> str:
    """A heading's words, for the title of its continuation slides (maths kept, Markdown removed)."""
    text = markdown_plain(line.lstrip("#").strip()).replace("`", "").replace("**", "").strip("[]* ")
    return html.escape(re.sub(r"[\[\]]", "", text), quote=False)


class _Deck:
    """The cells of a deck being laid out: what the current slide holds, its heading, where the next slide
    starts."""

    def __init__(self, language: str) -> None:
        self.language = language
        self.cells: list[nbformat.NotebookNode] = []
        self.size = SlideSize()
        self.title = ""
        self.pending = ""  # the slide type of the next cell shown ("slide" or "subslide"), "" to continue
        self.fresh = True  # the current slide shows nothing yet but its continuation title
        self.ids: dict[str, int] = {}

    def new_id(self, cell: nbformat.NotebookNode) -> str:
        """A cell id made from ``cell``'s, different for each cell of the deck made from it."""
        base = str(cell.get("id") or "cell")
        self.ids[base] = self.ids.get(base, 0) + 1
        return f"{base[:56]}-s{self.ids[base]}"

    def copy(self, cell: nbformat.NotebookNode, **changes: object) -> nbformat.NotebookNode:
        new = copy.deepcopy(cell)
        new.update(changes, id=self.new_id(cell))
        return new

    def markdown(self, cell: nbformat.NotebookNode, source: str) -> nbformat.NotebookNode:
        new = nbformat.v4.new_markdown_cell(source)
        new["id"] = self.new_id(cell)
        return new

    def new_slide(self, slide_type: str) -> None:
        self.size, self.pending, self.fresh = SlideSize(), slide_type, True

    def continuation_title(self) -> str:
        """The Markdown of the title of a slide that continues the current heading ("" if there is none)."""
        if not self.title:
            return ""
        return f'<p class="slide-continued">{CONTINUED[self.language].format(self.title)}</p>'

    def continuation(self, cell: nbformat.NotebookNode) -> None:
        """A new (vertical) slide that continues the current heading, titled so if there is one."""
        self.new_slide("subslide")
        title = self.continuation_title()
        if title:
            self.show(self.markdown(cell, title), markdown_size(title))
            self.fresh = True

    def fits(self, size: SlideSize) -> bool:
        return (self.size + size).fits()

    def fits_a_new_slide(self, size: SlideSize) -> bool:
        """Whether ``size`` fits on a continuation slide, under its title."""
        title = self.continuation_title()
        return (size + (markdown_size(title) + SlideSize(lines=CELL_LINES) if title else SlideSize())).fits()

    def room(self) -> float:
        """The lines left on the current slide for one more cell."""
        return MAX_SLIDE_LINES - self.size.lines - CELL_LINES

    def show(self, cell: nbformat.NotebookNode, size: SlideSize) -> None:
        """``cell`` on the current slide, which it takes ``size`` of (and :data:`CELL_LINES` for its padding)."""
        cell.metadata["slideshow"] = {"slide_type": self.pending or "-"}
        self.pending, self.fresh = "", False
        self.size += size + SlideSize(lines=CELL_LINES)
        self.cells.append(cell)

    def note(self, cell: nbformat.NotebookNode, source: str) -> None:
        notes = self.markdown(cell, source)
        notes.metadata["slideshow"] = {"slide_type": "notes"}
        self.cells.append(notes)

    def prose(self, cell: nbformat.NotebookNode, piece: str, starts: str) -> None:
        """One heading's piece of a Markdown cell (or the text before its first heading): as much as fits, whole
        blocks, then the first sentences of the next one; displayed formulas after a cut if they fit; the whole
        piece in the speaker notes if anything was left out."""
        blocks = markdown_blocks(piece)
        if starts:
            self.new_slide(starts)
            self.title = heading_title(blocks[0][1])
        elif not self.fits(markdown_size(piece) + SlideSize(lines=CELL_LINES)) and not self.fresh:
            self.continuation(cell)
        shown, used, omitted = [], self.size + SlideSize(lines=CELL_LINES), False
        for kind, text in blocks:
            size = block_size(kind, text)
            if (used + size).fits() and (not omitted or kind in ("heading", "maths")):
                shown.append(text)
                used += size
                continue
            if not omitted:
                part = cut_block(kind, text, lambda s, used=used: (used + s).fits())
                if part is not None:
                    shown.append(part)
                    used += block_size(kind, part)
            omitted = True
        if shown:
            source = "\n\n".join(shown)
            self.show(self.copy(cell, source=source), markdown_size(source))
        if omitted:
            self.note(cell, "\n\n".join(text for kind, text in blocks if kind != "heading"))

    def code(self, cell: nbformat.NotebookNode) -> None:
        """A code cell: on the current slide if it fits, else on a continuation slide, split across several at
        statements if it is longer than a slide; its outputs after it, each on a continuation slide when the
        current one is full, a text too long for a slide cut short with the whole text in the speaker notes. A
        widget's output is left out: a deck has no kernel to draw it."""
        lines = cell.source.rstrip().split("\n") if cell.source.strip() else []
        outputs = [o for o in merged_streams(cell.outputs) if not is_widget(o)]
        if not lines and not outputs:
            return
        whole = mono_size(cell.source, CODE_COLUMNS) + SlideSize(lines=CELL_LINES)
        if lines and not self.fits(whole) and not self.fresh:
            if self.fits_a_new_slide(whole) or self.room() < MIN_CODE_LINES:
                self.continuation(cell)
        starts, start, target = statement_starts(lines), 0, None
        while start < len(lines):
            if start > 0 or self.room() < 1 or (self.room() < MIN_CODE_LINES and not self.fresh):
                self.continuation(cell)  # each further part of the cell on a slide of its own
            end = code_break(lines, start, self.room(), starts)
            chunk = "\n".join(lines[start:end]).strip("\n")
            target = self.copy(cell, source=chunk, outputs=[])
            self.show(target, mono_size(chunk, CODE_COLUMNS))
            start = end
        for output in outputs:
            size = output_size(output)
            new_cell = target is None or target is not self.cells[-1]
            if not self.fits(size + SlideSize(lines=CELL_LINES if new_cell else 0)):
                self.continuation(cell)
                new_cell = True
            full = output_text(output)
            cut = not self.fits(size + SlideSize(lines=CELL_LINES)) and full is not None
            if cut:
                output = truncated_output(output, self.room(), self.language)
                size = output_size(output)
            if new_cell:
                target = self.copy(cell, outputs=[])
                target.metadata["transient"] = {"remove_source": True}  # nbconvert shows its outputs only
                self.show(target, SlideSize())
            target.outputs.append(output)
            self.size += size
            if cut:
                fence = "````" if "```" in full else "```"
                self.note(cell, f"{FULL_OUTPUT[self.language]}\n\n{fence}text\n{full.rstrip()}\n{fence}")


def slide_notebook(nb: nbformat.NotebookNode, language: str = "en") -> nbformat.NotebookNode:
    """The notebook as its deck shows it (a new notebook; ``nb`` is not changed): a slide per heading, whether or
    not it starts a cell ("#" and "##" a new slide, deeper ones a sub-slide below it), and no slide larger than
    :data:`MAX_SLIDE_WORDS` words and :data:`MAX_SLIDE_LINES` lines (:class:`SlideSize`). Prose that does not fit
    is cut after its first sentences, the whole of it in the speaker notes (reveal.js's, slide type "notes");
    code longer than a slide goes on continuation slides, cut between statements; an output that does not fit
    goes on the next slide, a long text output cut short there with the whole in the notes; figures are kept.
    A cell's own slide type is kept: "skip" leaves it out, "notes" keeps it in the notes, "slide" and "subslide"
    start a slide."""
    if language not in CONTINUED:
        raise ValueError(f"language must be one of {sorted(CONTINUED)}, not {language!r}")
    deck = _Deck(language)
    for cell in nb.cells:
        own = cell.get("metadata", {}).get("slideshow", {}).get("slide_type", "-")
        if own == "skip":
            continue
        if own == "notes":
            deck.cells.append(copy.deepcopy(cell))
        elif cell.cell_type == "markdown":
            for index, piece in enumerate(heading_pieces(cell.source)):
                starts = default_slide_type(nbformat.v4.new_markdown_cell(piece))
                if HEADING.match(piece) and starts == "-":
                    starts = "subslide"
                if index == 0 and own in ("slide", "subslide"):
                    starts = own
                deck.prose(cell, piece, "" if starts == "-" else starts)
        elif cell.cell_type == "code":
            deck.code(cell)
    return nbformat.v4.new_notebook(cells=deck.cells, metadata=copy.deepcopy(nb.metadata))


def notebook_slide_sizes(nb: nbformat.NotebookNode) -> list[SlideSize]:
    """The size of each slide of a notebook laid out by :func:`slide_notebook`, as nbconvert groups its cells
    (a "slide" or "subslide" cell starts one; notes and skipped cells are not shown)."""
    sizes: list[SlideSize] = []
    for cell in nb.cells:
        slide_type = cell.metadata.get("slideshow", {}).get("slide_type", "-")
        if slide_type in ("notes", "skip"):
            continue
        if not sizes or slide_type in ("slide", "subslide"):
            sizes.append(SlideSize())
        sizes[-1] += SlideSize(lines=CELL_LINES)
        if cell.cell_type == "markdown":
            sizes[-1] += markdown_size(cell.source)
        elif cell.cell_type == "code":
            if not cell.metadata.get("transient", {}).get("remove_source"):
                sizes[-1] += mono_size(cell.source, CODE_COLUMNS)
            for output in cell.outputs:
                sizes[-1] += output_size(output)
    return sizes


def deck_slide_sizes(page: str) -> list[SlideSize]:
    """The size of each slide of a built deck (reveal.js HTML), measured on what it shows, as
    :func:`slide_notebook` counts it: its prose by paragraph and list item, headings, rows of tables, lines of
    code (wrapped at :data:`CODE_COLUMNS` characters) and of text output (at :data:`OUTPUT_COLUMNS`), rows of
    table outputs, figures, and cells; the speaker notes are not shown."""
    soup = BeautifulSoup(page, "html.parser")
    sizes = []
    for section in soup.find_all("section"):
        if section.find("section"):
            continue  # a column of sub-slides: each is measured on its own
        for hidden in section.find_all(["script", "style"]) + section.select("aside.notes"):
            hidden.decompose()
        size = SlideSize(lines=CELL_LINES * len(section.select(".jp-Cell")))
        for prose in section.select(".jp-RenderedMarkdown"):
            for image in prose.find_all("img"):
                size += SlideSize(lines=0 if is_badge(str(image.get("src", ""))) else FIGURE_LINES)
                image.decompose()
            for pre in prose.find_all("pre"):
                size += mono_size(pre.get_text(), OUTPUT_COLUMNS)
                pre.decompose()
            for row in prose.find_all("tr"):
                size += table_row_size(row.get_text(" "))
                row.decompose()
            for heading in prose.find_all(["h1", "h2", "h3", "h4", "h5", "h6"]):
                size += heading_size(heading.get_text(" "), int(heading.name[1]))
                heading.decompose()
            for block in reversed(prose.find_all(["p", "li"])):  # a nested item before the item around it
                size += prose_size(block.get_text(" "))
                block.decompose()
            size += prose_size(prose.get_text(" "))
        for pre in section.select(".jp-CodeCell .jp-InputArea pre"):
            size += mono_size(pre.get_text(), CODE_COLUMNS)
        for output in section.select(".jp-OutputArea-output"):
            images, rows = output.find_all("img"), output.find_all("tr")
            size += SlideSize(lines=FIGURE_LINES * len(images) + OUTPUT_ROW_LINES * len(rows))
            if not images and not rows:
                size += sum((mono_size(pre.get_text(), OUTPUT_COLUMNS) for pre in output.find_all("pre")), SlideSize())
        sizes.append(size)
    return sizes


def deck_notebook(path: Path) -> nbformat.NotebookNode:
    """What the deck of the notebook at ``path`` (English, or Chinese in notebooks/zh/) is made from: the notebook
    laid out by :func:`slide_notebook`, its links to other notebooks opening their decks (:func:`link_decks`). The
    file is only read."""
    english = path.resolve().parent == NOTEBOOKS
    untranslated = {p.name for p in notebook_paths()} - {p.name for p in translated_notebooks(ZH_FOLDER)}
    nb = link_decks(nbformat.read(path, as_version=4), None if english else untranslated)
    return slide_notebook(nb, "en" if english else "zh")


def build_slides(names: list[str] | None, annotate: bool, out: Path, paths: list[Path] | None = None) -> list[Path]:
    """One reveal.js deck per notebook in ``out``/slides/, made from :func:`deck_notebook` (a slide per heading,
    none larger than a projector shows, speaker notes) and loading its libraries from ``out``/_static/; the English
    notebooks unless ``paths`` names others (the Chinese ones, which ``annotate`` never writes to)."""
    exporter = SlidesExporter(
        template_name="slides_template",
        extra_template_basedirs=[str(SITE_SOURCE)],
        reveal_scroll=True,
        reveal_theme="white",  # its fonts ship with reveal.js; nbconvert's default theme fetches Google Fonts
        **SLIDE_URLS,
    )
    written = []
    for path in notebook_paths(names) if paths is None else paths:
        if annotate and path.parent == NOTEBOOKS:
            nb, added = with_slide_metadata(nbformat.read(path, as_version=4))
            if added:
                nbformat.write(nb, path)
        body, _ = exporter.from_notebook_node(deck_notebook(path))
        target = out / "slides" / f"{path.stem}.slides.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body, encoding="utf-8")
        written.append(target)
    return written


def build(
    names: list[str] | None,
    slides_only: bool,
    annotate: bool,
    out: Path,
    languages: tuple[str, ...] = LANGUAGES,
) -> list[Path]:
    """Build the site into ``out`` (the Chinese edition into ``out``/zh/); returns the slide decks and, unless
    ``slides_only``, the landing pages."""
    install_browser_libraries()
    written = []
    books = []
    if "en" in languages:
        books.append((out, None))
    if "zh" in languages:
        books.append((out / ZH_FOLDER, chinese_notebooks(names)))
    for book, paths in books:
        if not slides_only:
            if paths is None:
                build_book(book)
            else:
                build_chinese_book(book)
            written.append(book / "index.html")
        copy_browser_libraries(book)
        written += build_slides(names, annotate, book, paths)
        shutil.copy2(SITE_SOURCE / "_static" / "colab-badge.svg", book / "_static" / "colab-badge.svg")
    for book, _ in reversed(books):  # the Chinese pages first, so that each book shows its own copy
        use_local_badges(book)
    if not slides_only:  # one playground, with an English and a Chinese page, linked from both landing pages
        playground = build_playground(out)
        written += [p for p in playground if p.suffix == ".html"]
    leaked = teacher_files_in(out)
    if leaked:
        raise RuntimeError(f"the built site holds teacher material (teacher/): {[str(p) for p in leaked[:5]]}")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="notebook numbers or file names for the slides (default: all)")
    parser.add_argument("--slides-only", action="store_true", help="build only the slides")
    parser.add_argument("--annotate", action="store_true", help="write default slide types into the notebooks")
    parser.add_argument("--out", type=Path, default=SITE, help="output folder (default: _site/)")
    parser.add_argument("--language", choices=LANGUAGES, action="append", help="en or zh (default: both)")
    args = parser.parse_args()
    languages = tuple(args.language or LANGUAGES)
    for path in build(args.names, args.slides_only, args.annotate, args.out, languages):
        print(path.relative_to(args.out.parent) if path.is_relative_to(args.out.parent) else path)


if __name__ == "__main__":
    main()

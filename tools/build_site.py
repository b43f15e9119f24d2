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

Slides come from the notebooks' own cells, laid out for a projector on a copy by tools/slides.py (every heading starts
a slide; none shows more than 120 words of prose or 27 lines; what does not fit goes on continuation slides or into
the speaker notes, press S). A cell's own ``metadata.slideshow.slide_type`` is kept; ``--annotate`` writes the
default of each cell into the notebooks, so a teacher can adjust them in JupyterLab's property inspector. The decks
load MathJax and reveal.js from _static/ like the book, so their maths and speaker notes work offline too.

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
import base64
import copy
import gzip
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import yaml
from nbconvert import SlidesExporter

from tools.course_notebooks import NOTEBOOKS, ROOT, notebook_paths
from tools.slides import slide_notebook, with_slide_metadata
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

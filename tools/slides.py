"""The slide layout of the course's decks: every heading of a notebook starts a slide, and no slide is larger than a
projector shows.

``slide_notebook`` lays a notebook out on a copy (the notebook is only read): "#" and "##" headings start a new slide,
deeper ones a sub-slide below it, whether or not they start a cell; no slide shows more than MAX_SLIDE_WORDS = 120
words of prose or is taller than MAX_SLIDE_LINES = 27 lines of code, on reveal.js's 960 x 700 pixel slide (prose,
headings, tables, formulas, outputs and figures count as the lines they take, measured in Chromium: SlideSize and
the constants beside it). Prose that does not fit is cut after its first sentences (marked "…"), with the whole of
it in the speaker notes; a code cell longer than a slide goes on continuation slides, cut between statements; an
output that does not fit goes on the next slide, a long text output cut short there with the whole text in the
notes; figures are kept. ``deck_slide_sizes`` measures a built deck's HTML. tools/build_site.py builds the decks
from these notebooks; tests/test_slides.py checks every deck of both languages against the limits.
"""

from __future__ import annotations

import ast
import copy
import html
import math
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

import nbformat
from bs4 import BeautifulSoup


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

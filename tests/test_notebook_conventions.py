"""Every committed notebook keeps the course's conventions (see COURSE_DESIGN.md).

nbval re-runs the notebooks and compares outputs; this file checks what nbval cannot: that the stored outputs
come from one clean top-to-bottom run, hold no machine-specific text, and that each notebook has the parts a
reader relies on. The Chinese notebooks (notebooks/zh/, built by ``python -m tools.translations build``; nbval
does not run them) keep the same conventions in Chinese: title, Colab badge, goals, summary and setup cell.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from tools.course_notebooks import NOTEBOOK_NAME, NOTEBOOKS, colab_badge, colab_setup_block, notebook_paths
from tools.translations import translated_badge, translated_notebooks

PATHS = notebook_paths()
MACHINE_PATH = re.compile(r"(/root/|/home/|/tmp/|/work/|/Users/|site-packages|[A-Za-z]:\\\\)")
OBJECT_REPR = re.compile(r"(<[\w.]+ (object )?at 0x[0-9a-fA-F]+>|<Figure size|<matplotlib\.|<Axes|<torch\.)")
# Float noise: a number in scientific notation with digits after the point and a tiny exponent (1.2e-07), which
# changes between CPUs; settings such as eps=1e-09 have no digits after the point and are not matched.
FLOAT_NOISE = re.compile(r"\b\d\.\d+e-(0[5-9]|[1-9]\d)\b")
LIBRARY_VERSION = re.compile(r"\b(torch|numpy|python|matplotlib)[ =:]+v?\d+\.\d+", re.IGNORECASE)
# A cell whose output nbval ignores carries the tag (nbval reads it; a reader does not see it) and, in its metadata,
# why its output differs between machines. tests/ignored_outputs.json lists those cells by id, notebook by notebook.
IGNORE_TAG = "nbval-ignore-output"
IGNORE_REASON = "nbval_ignore_output_because"
IGNORED_OUTPUTS = Path(__file__).parent / "ignored_outputs.json"
TITLE = re.compile(r"^# (\d\d) · .+\(.*[\u4e00-\u9fff]+.*\)\s*$", re.MULTILINE)
# the Chinese title: "# 04 · 缩放点积注意力", Chinese, with no English title in parentheses after it (as in d2l-zh;
# names such as BERT or RoPE stay)
ZH_TITLE = re.compile(r"^# (\d\d) · (?=[^\n]*[\u4e00-\u9fff])(?![^\n]*（[A-Za-z][^）\n]*）\s*$)[^\n]+$", re.MULTILINE)
ZH_PATHS = translated_notebooks("zh")


def _nbval_ignores(cell) -> bool:
    """True if nbval, by its own rules (cell tags and comment markers), skips this cell or ignores its output."""
    from nbval.plugin import find_comment_markers, find_metadata_tags

    options = dict(find_metadata_tags(cell.metadata))
    options.update(find_comment_markers(cell.source))
    return options.get("skip", False) or options.get("check", True) is False


def _compared(cell) -> bool:
    """True if nbval compares this cell's outputs (it is not marked to be ignored or skipped)."""
    return cell.cell_type == "code" and not _nbval_ignores(cell)


def _text_outputs(cell) -> list[str]:
    texts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            texts.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            texts.append(str(out.data.get("text/plain", "")))
            texts.append(str(out.data.get("text/html", "")))
        elif out.output_type == "error":
            texts.append("\n".join(out.traceback))
    return texts


def test_there_are_notebooks_and_their_numbers_are_contiguous():
    assert PATHS, "no notebooks found"
    numbers = [int(NOTEBOOK_NAME.match(p.name).group(1)) for p in PATHS]
    assert numbers == list(range(len(numbers))), f"notebook numbers must run 00, 01, ... without gaps: {numbers}"
    strays = [p.name for p in NOTEBOOKS.glob("*.ipynb") if not NOTEBOOK_NAME.match(p.name)]
    assert not strays, f"notebooks must be named NN_topic.ipynb: {strays}"


@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
class TestNotebook:
    def test_executed_once_top_to_bottom(self, path):
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
        counts = [c.execution_count for c in code]
        assert counts == list(range(1, len(code) + 1)), f"execution counts should be 1..{len(code)}, got {counts}"

    def test_no_errors_and_nothing_on_stderr(self, path):
        nb = nbformat.read(path, as_version=4)
        for i, cell in enumerate(nb.cells):
            for out in cell.get("outputs", []):
                assert out.output_type != "error", f"cell {i} stored an error: {out.get('ename')}"
                assert not (out.output_type == "stream" and out.name == "stderr"), f"cell {i} wrote to stderr"

    def test_no_machine_paths_or_object_reprs(self, path):
        nb = nbformat.read(path, as_version=4)
        for i, cell in enumerate(nb.cells):
            for text in _text_outputs(cell):
                assert not MACHINE_PATH.search(text), f"cell {i} shows a machine path: {MACHINE_PATH.search(text)[0]}"
                assert not OBJECT_REPR.search(text), f"cell {i} shows an object repr: {OBJECT_REPR.search(text)[0]}"

    def test_kernelspec_is_python3(self, path):
        nb = nbformat.read(path, as_version=4)
        assert nb.metadata.get("kernelspec", {}).get("name") == "python3"

    def test_title_badge_goals_and_summary(self, path):
        nb = nbformat.read(path, as_version=4)
        first = nb.cells[0]
        assert first.cell_type == "markdown"
        match = TITLE.search(first.source)
        assert match, "the first cell must start with '# NN · Topic (中文术语)'"
        assert match.group(1) == path.name[:2], "the title's number must match the file name"
        assert colab_badge(path.name) in first.source, "the first cell must carry this notebook's Colab badge"
        markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
        assert re.search(r"^#+ .*Learning goals", markdown, re.MULTILINE), "no 'Learning goals' heading"
        assert re.search(r"^#+ .*Summary", markdown, re.MULTILINE), "no 'Summary' heading"

    def test_first_code_cell_is_the_shared_setup(self, path):
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code and code[0].source.startswith(colab_setup_block(path.name)), (
            "the first code cell must start with tools.course_notebooks.colab_setup_block()"
        )

    def test_compared_outputs_hold_on_any_machine(self, path):
        """Raw float noise and library versions differ between machines, so nbval must not compare them."""
        nb = nbformat.read(path, as_version=4)
        for i, cell in enumerate(nb.cells):
            if not _compared(cell):
                continue
            for text in _text_outputs(cell):
                noise = FLOAT_NOISE.search(text)
                assert not noise, f"cell {i} prints float noise ({noise[0]}) that nbval compares: print a bound"
                if path.name[:2] != "00":  # 00's environment check prints versions; the sanitizer masks them there
                    version = LIBRARY_VERSION.search(text)
                    assert not version, f"cell {i} prints a library version ({version[0]}) that nbval compares"

    def test_each_ignored_cell_is_tagged_and_says_why(self, path):
        """An ignored output is marked by the cell tag, never by a comment a reader sees, and the cell's metadata
        says why its output differs between machines."""
        nb = nbformat.read(path, as_version=4)
        for i, cell in enumerate(nb.cells):
            assert "NBVAL" not in cell.source, f"cell {i}: mark an ignored output with the tag {IGNORE_TAG!r}"
            tagged = IGNORE_TAG in cell.metadata.get("tags", [])
            reason = str(cell.metadata.get(IGNORE_REASON, "")).strip()
            assert tagged == bool(reason), (
                f"cell {i}: a cell tagged {IGNORE_TAG!r} says why in metadata[{IGNORE_REASON!r}], and only such a cell"
            )
            assert tagged == (cell.cell_type == "code" and _nbval_ignores(cell)), f"cell {i}: nbval reads it otherwise"

    def test_nbval_ignores_exactly_the_recorded_cells(self, path):
        """The cells whose outputs nbval ignores are the ones tests/ignored_outputs.json records: moving the marker
        from a comment to a tag (or editing a notebook) must not start or stop comparing an output unnoticed."""
        nb = nbformat.read(path, as_version=4)
        ignored = [cell.id for cell in nb.cells if cell.cell_type == "code" and _nbval_ignores(cell)]
        recorded = json.loads(IGNORED_OUTPUTS.read_text(encoding="utf-8")).get(path.name)
        assert ignored == recorded, (
            f"nbval ignores the outputs of {ignored}, tests/ignored_outputs.json records {recorded}: "
            "update the record when you mean to change which outputs are compared"
        )


def translated_notebook_problems(nb: nbformat.NotebookNode, name: str) -> list[str]:
    """What keeps a Chinese notebook (``name`` is its file name) from the course's conventions: the title
    ``# NN · 中文标题`` (no English title after it), the Colab badge opening notebooks/zh/, the 学习目标 and 小结
    headings, the shared setup cell (its comments in Chinese) that sets the reader's language."""
    found = []
    first = nb.cells[0] if nb.cells else None
    if first is None or first.cell_type != "markdown":
        return ["the first cell must be markdown with the title and the Colab badge"]
    match = ZH_TITLE.search(first.source)
    if not match:
        found.append("the first cell must start with '# NN · 中文标题' (no English title in parentheses)")
    elif match.group(1) != name[:2]:
        found.append("the title's number must match the file name")
    if translated_badge(name, "zh") not in first.source:
        found.append(f"the first cell must carry the Colab badge of notebooks/zh/{name}")
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    if not re.search(r"^#+ .*学习目标", markdown, re.MULTILINE):
        found.append("no '学习目标' heading")
    if not re.search(r"^#+ .*小结", markdown, re.MULTILINE):
        found.append("no '小结' heading")
    code = [c for c in nb.cells if c.cell_type == "code"]
    if not (code and code[0].source.startswith(colab_setup_block(name, language="zh"))):
        found.append("the first code cell must start with tools.course_notebooks.colab_setup_block(language='zh')")
    shown = [i for i, c in enumerate(nb.cells) if "NBVAL" in c.source]
    if shown:
        found.append(f"cells {shown} show an NBVAL marker: ignored outputs are marked by a cell tag")
    return found


def test_each_chinese_notebook_translates_an_english_one():
    english = {p.name for p in PATHS}
    strays = [p.name for p in (NOTEBOOKS / "zh").glob("*.ipynb") if p.name not in english]
    assert not strays, f"notebooks/zh/ holds notebooks with no English original: {strays}"


@pytest.mark.parametrize("path", ZH_PATHS, ids=[p.name for p in ZH_PATHS])
class TestChineseNotebook:
    def test_title_badge_goals_summary_and_setup(self, path):
        problems = translated_notebook_problems(nbformat.read(path, as_version=4), path.name)
        assert not problems, f"notebooks/zh/{path.name}: " + "; ".join(problems)

    def test_kernelspec_is_python3(self, path):
        nb = nbformat.read(path, as_version=4)
        assert nb.metadata.get("kernelspec", {}).get("name") == "python3"

"""The Chinese edition: catalogues that record which English text (markdown and code) they translate, and
notebooks/zh/ built from them by ``python -m tools.translations build`` and then run, so its outputs are Chinese.

Three tests are strict on purpose and fail until the translation is complete, built and run: every English notebook
has a complete, current catalogue; every Chinese notebook is what ``build`` writes now, with every code cell run
since it changed; every Chinese code cell is the English program and its run printed the same numbers. The others
work on a copy of one notebook with a made-up catalogue in a temporary folder, so they hold whatever the real
catalogues' state: they show that a changed English cell is named, that a code translation that changes the program
is refused, that a hand-edited Chinese notebook is caught, and what ``build`` writes.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from test_notebook_conventions import translated_notebook_problems

from tools.code_translation import display_strings, same_program
from tools.course_notebooks import NOTEBOOKS, ROOT, colab_badge, colab_setup_block, notebook_paths
from tools.translations import (
    CatalogueProblems,
    Entry,
    build,
    catalogue_path,
    code_to_translate,
    markdown_cells,
    notebook_text,
    pretranslated_code,
    problems,
    read_catalogue,
    rehash,
    relocate_links,
    skeleton,
    source_hash,
    stale,
    translated_badge,
    translated_notebook,
    translated_notebooks,
    translated_path,
    write_catalogue,
)

PATHS = notebook_paths()
ZH_PATHS = translated_notebooks("zh")
SAMPLE = "04"  # the notebook the temporary-folder tests copy
NUMBER = re.compile(r"(?<![A-Za-z0-9_.,])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[+-]?\d+)?")


# ---------------------------------------------------------------------------------------------------------------
# The strict tests: the real catalogues and notebooks/zh/


def test_every_english_notebook_has_a_complete_current_catalogue():
    found = [problem for path in PATHS for problem in problems(path, "zh")]
    shown = "\n".join(found[:40]) + (f"\n... and {len(found) - 40} more" if len(found) > 40 else "")
    assert not found, f"{len(found)} catalogue problems (python -m tools.translations check):\n{shown}"


def test_every_chinese_notebook_is_what_build_writes_now():
    found = [problem for path in PATHS for problem in stale(path, "zh")]
    shown = "\n".join(found[:40]) + (f"\n... and {len(found) - 40} more" if len(found) > 40 else "")
    assert not found, f"notebooks/zh/ is not up to date (python -m tools.translations build):\n{shown}"


def _ignored(cell: nbformat.NotebookNode) -> bool:
    return "nbval-ignore-output" in cell.metadata.get("tags", [])


def _kinds(cell: nbformat.NotebookNode) -> list[tuple]:
    """The kinds of a cell's outputs in order, one stream for consecutive pieces of it (how a stream is cut into
    outputs depends on timing; nbval joins them too)."""
    kinds: list[tuple] = []
    for output in cell.outputs:
        kind = (output.get("output_type"), output.get("name"), sorted(output.get("data", {})))
        if not (kinds and kind[0] == "stream" and kinds[-1] == kind):
            kinds.append(kind)
    return kinds


def _numbers(cell: nbformat.NotebookNode) -> set[str]:
    """The numbers a cell printed (a translation may put them in another order, and say "第 7 行" for "row 7")."""
    text = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
    return set(NUMBER.findall(text))


def code_and_output_differences(english: nbformat.NotebookNode, chinese: nbformat.NotebookNode) -> list[str]:
    """Where the Chinese notebook's cells differ from the English ones other than as the edition allows: the same
    cells in the same order; each code cell the same program (:func:`tools.code_translation.same_program`), the
    setup cell with the Chinese setup block (which sets the language); each code cell run, with the same kinds of
    output and, where nbval compares them, every number the English cell printed printed too (the Chinese may print
    more: "第 7 行" for "row 7"); each markdown cell records the hash of the current English."""
    found = []
    name = chinese.metadata.get("translation", {}).get("en_notebook", "x.ipynb").rsplit("/", 1)[-1]
    if [(c.cell_type, c.get("id")) for c in english.cells] != [(c.cell_type, c.get("id")) for c in chinese.cells]:
        return ["its cells (types and ids, in order) are not the English notebook's"]
    first_code = next(i for i, c in enumerate(english.cells) if c.cell_type == "code")
    for index, (en, zh) in enumerate(zip(english.cells, chinese.cells)):
        where = f"cell {index} ({en.cell_type} {en.get('id')})"
        if en.cell_type == "markdown":
            if zh.metadata.get("translation", {}).get("en_sha256") != source_hash(en.source):
                found.append(f"{where}: translates another version of the English cell")
            continue
        if en.cell_type != "code":
            continue
        source = zh.source
        if index == first_code and not source.startswith(colab_setup_block(name, language="zh")):
            found.append(f"{where}: the setup cell does not start with the Chinese setup block (it sets the language)")
        if not same_program(pretranslated_code(en.source, index == first_code, name), source):
            found.append(f"{where}: its code is not the English cell's program")
        if en.source.strip() and zh.execution_count is None:
            found.append(f"{where}: it has not been run")
        if _kinds(en) != _kinds(zh):
            found.append(f"{where}: its outputs are not of the kinds the English cell's are")
        elif not _ignored(en) and not _numbers(en) <= _numbers(zh):
            missing = sorted(_numbers(en) - _numbers(zh))[:6]
            found.append(f"{where}: it did not print numbers the English cell printed: {missing}")
    return found


@pytest.mark.parametrize("path", ZH_PATHS, ids=[p.name for p in ZH_PATHS])
def test_chinese_code_is_the_english_program_and_printed_the_same_numbers(path):
    english = nbformat.read(NOTEBOOKS / path.name, as_version=4)
    found = code_and_output_differences(english, nbformat.read(path, as_version=4))
    assert not found, f"notebooks/zh/{path.name}: " + "; ".join(found[:10])


def test_a_chinese_run_that_printed_another_number_is_caught():
    english = nbformat.read(NOTEBOOKS / "00_introduction.ipynb", as_version=4)
    chinese = nbformat.read(NOTEBOOKS / "zh" / "00_introduction.ipynb", as_version=4)
    assert code_and_output_differences(english, chinese) == []
    index, cell = next(
        (i, c)
        for i, c in enumerate(chinese.cells)
        if c.cell_type == "code" and not _ignored(c) and "237,332" in "".join(o.get("text", "") for o in c.outputs)
    )
    for output in cell.outputs:
        if output.get("output_type") == "stream":
            output.text = output.text.replace("237,332", "237,331")
    found = code_and_output_differences(english, chinese)
    assert found == [f"cell {index} (code {cell.id}): it did not print numbers the English cell printed: ['237,332']"]


# ---------------------------------------------------------------------------------------------------------------
# A temporary course: one English notebook and a complete catalogue


def made_up_translation(source: str) -> str:
    """A stand-in for a translator's work: Chinese in every entry, the title, badge and headings as the
    conventions want them (the badge is left English on purpose: ``build`` points it at notebooks/zh/)."""
    title = re.match(r"^# (\d\d) · (.+?) \((.+)\)\s*$", source.splitlines()[0]) if source else None
    lines = source.splitlines()
    if title:
        lines[0] = f"# {title[1]} · {title[3]}"  # the Chinese title the English one carries in parentheses
    text = "\n".join(lines).replace("Learning goals", "学习目标").replace("Summary", "小结")
    return text if title else f"{text}\n\n（译文）"


def made_up_code_translation(source: str, notebook_name: str) -> str:
    """A stand-in for a translated code cell: "译：" before every text a reader sees, the comments replaced by one
    Chinese comment, the setup block's Chinese kept as it is."""
    block = colab_setup_block(notebook_name, language="zh")
    head, rest = (block, source[len(block) :]) if source.startswith(block) else ("", source)
    tree = ast.parse(rest)
    for node in display_strings(tree):
        if isinstance(node, ast.Constant):
            node.value = "译：" + node.value
        else:
            node.values.insert(0, ast.Constant("译："))
    return head + ("\n" if head else "") + "# 译文（注释已译）\n" + ast.unparse(tree)


@pytest.fixture
def course(tmp_path):
    """tmp/notebooks/NN_name.ipynb (a copy of the sample) and a complete tmp/translations/zh/NN_name.md."""
    notebook = tmp_path / "notebooks" / notebook_paths([SAMPLE])[0].name
    notebook.parent.mkdir()
    shutil.copy2(notebook_paths([SAMPLE])[0], notebook)
    translations = tmp_path / "translations"
    english = {c.id: c for c in nbformat.read(notebook, as_version=4).cells}
    entries = [Entry(c.id, source_hash(c.source), made_up_translation(c.source)) for c in markdown_cells(notebook)]
    entries += [
        Entry(cell_id, source_hash(english[cell_id].source), made_up_code_translation(source, notebook.name), "code")
        for cell_id, source in code_to_translate(notebook).items()
    ]
    write_catalogue(catalogue_path(notebook, "zh", translations), entries)
    return notebook, translations


def edit_cell(notebook: Path, index: int, change) -> nbformat.NotebookNode:
    """Apply ``change`` to cell ``index`` of the notebook file and save it; returns the changed cell."""
    nb = nbformat.read(notebook, as_version=4)
    change(nb.cells[index])
    nbformat.write(nb, notebook)
    return nb.cells[index]


def edit_entry(notebook: Path, translations: Path, cell_id: str, change) -> None:
    path = catalogue_path(notebook, "zh", translations)
    entries = [
        Entry(e.cell_id, e.en_hash, change(e.text), e.kind) if e.cell_id == cell_id else e for e in read_catalogue(path)
    ]
    write_catalogue(path, entries)


def fake_run(target: Path) -> None:
    """What running the Chinese notebook records, without running it: one output and a count per code cell."""
    nb = nbformat.read(target, as_version=4)
    for count, cell in enumerate((c for c in nb.cells if c.cell_type == "code"), start=1):
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"第 {count} 格的输出\n")]
        cell.execution_count = count
    nbformat.write(nb, target)


def test_a_changed_english_cell_is_named_until_its_translation_is_updated(course):
    notebook, translations = course
    assert problems(notebook, "zh", translations) == []
    index = [i for i, c in enumerate(nbformat.read(notebook, as_version=4).cells) if c.cell_type == "markdown"][2]

    def reword(cell):
        cell.source += "\n\nA sentence the translation does not have yet."

    cell = edit_cell(notebook, index, reword)
    found = problems(notebook, "zh", translations)
    assert len(found) == 1, found
    assert found[0].startswith(f"{notebook.name}: markdown cell {cell.id} ") and "changed since" in found[0]
    with pytest.raises(CatalogueProblems) as refused:
        translated_notebook(notebook, "zh", translations)
    assert cell.id in str(refused.value)
    # the translator updates the entry, then records the English version it now translates
    edit_entry(notebook, translations, cell.id, lambda text: text + "\n\n译文尚未包含的一句话。")
    assert problems(notebook, "zh", translations) != [], "the entry's hash is still the old one"
    rehash(notebook, cell.id, "zh", translations)
    assert problems(notebook, "zh", translations) == []
    built = translated_notebook(notebook, "zh", translations)
    assert built.cells[index].source.endswith("译文尚未包含的一句话。")
    assert built.cells[index].metadata["translation"] == {"en_sha256": source_hash(cell.source)}


def test_missing_untranslated_and_extra_entries_are_named(course):
    notebook, translations = course
    path = catalogue_path(notebook, "zh", translations)
    cells = markdown_cells(notebook)
    entries = read_catalogue(path)
    first, second = (next(i for i, e in enumerate(entries) if e.cell_id == c.id) for c in cells[1:3])
    entries[first] = Entry(cells[1].id, entries[first].en_hash, cells[1].source)  # still the English text
    del entries[second]
    entries.append(Entry("deadbeef", "0" * 12, "多余的条目"))
    entries.append(Entry("cafef00d", "0" * 12, "x = 1  # 多余", "code"))
    write_catalogue(path, entries)
    found = "\n".join(problems(notebook, "zh", translations))
    assert f"markdown cell {cells[1].id} " in found and "is not translated" in found
    assert f"markdown cell {cells[2].id} " in found and "has no translation" in found
    assert "catalogue entry deadbeef matches no markdown cell" in found
    assert "catalogue code entry cafef00d matches no code cell" in found
    path.unlink()
    assert problems(notebook, "zh", translations) == [f"{notebook.name}: no catalogue {path}"]


def test_a_code_translation_must_be_the_same_program_and_in_chinese(course):
    notebook, translations = course
    english = {c.id: c for c in nbformat.read(notebook, as_version=4).cells}
    needed = code_to_translate(notebook)
    cell_id = next(i for i in needed if "print(" in english[i].source and i != next(iter(needed)))
    source = english[cell_id].source

    def named(*words: str) -> list[str]:
        return [p for p in problems(notebook, "zh", translations) if all(w in p for w in words)]

    # a missing entry is named with the English it shows
    path = catalogue_path(notebook, "zh", translations)
    write_catalogue(path, [e for e in read_catalogue(path) if e.cell_id != cell_id])
    assert named(f"code cell {cell_id} ", "shows English", "has no translation")
    # the English source as the entry: not translated
    write_catalogue(path, [*read_catalogue(path), Entry(cell_id, source_hash(source), source, "code")])
    assert named(f"code cell {cell_id} ", "not translated") or named(f"code cell {cell_id} ", "still has English")
    # translated text, but one more argument: not the same program
    translated = made_up_code_translation(source, notebook.name)
    edit_entry(notebook, translations, cell_id, lambda _: translated)
    assert not named(f"code cell {cell_id} ")
    changed = translated.replace("print(", "print(1, ", 1)  # one more thing printed
    assert changed != translated
    edit_entry(notebook, translations, cell_id, lambda _: changed)
    assert named(f"code cell {cell_id}", "not the same program")
    # an English change to the cell makes the entry stale
    edit_entry(notebook, translations, cell_id, lambda _: translated)
    edit_cell(notebook, list(english).index(cell_id), lambda c: setattr(c, "source", c.source + "\nx = 1"))
    assert named(f"code cell {cell_id} ", "changed since it was translated")


def test_the_program_check_allows_text_and_refuses_data():
    english = """sentence = "the cat sat"  # data the model reads
print(f"{n} tokens in {t:.1f} s")
check(ok, "the loss falls below 2", measured=loss)
ax.set_title("Attention weights")
table = pd.DataFrame({"loss": [1.0]})
fig = plot_masks(m, titles=["padding", f"head {h}"], suptitle=f"{'left' if left else 'right'} padding")
print(f"{'n':>6} {'loss':>8}")
print("relative work: " + ", ".join(f"n = {n}: {r:g}x" for n, r in rows))
"""
    chinese = """sentence = "the cat sat"  # 模型读的数据
print(f"用时 {t:.1f} 秒，共 {n} 个词元")
check(ok, "损失降到 2 以下", measured=loss)
ax.set_title("注意力权重")
table = pd.DataFrame({"损失": [1.0]})
fig = plot_masks(m, titles=["填充", f"头 {h}"], suptitle=f"{'左侧' if left else '右侧'}填充")
print(f"{'n':>6} {'损失':>6}")
print("相对计算量：" + "，".join(f"n = {n} 时为 {r:g}" for n, r in rows))
"""
    assert same_program(english, chinese)
    assert not same_program(english, chinese.replace("if left else", "if not left else"))  # the choice's test
    # a choice between two texts may go altogether (Chinese has no plural), but not a field that computes a value
    plural = "print(f\"{n} head{'s' if n > 1 else ''} in {t:.1f} s\")\n"
    assert same_program(plural, 'print(f"{n} 个头，用时 {t:.1f} 秒")\n')
    assert same_program(plural, "print(f\"{n} 个头{'' if n > 1 else ''}，用时 {t:.1f} 秒\")\n")
    assert not same_program(plural, "print(f\"{n} 个头{'' if n > 2 else ''}，用时 {t:.1f} 秒\")\n")
    assert not same_program(plural, 'print(f"{n} 个头")\n')
    assert not same_program(english, chinese.replace('"the cat sat"', '"那只猫坐着"'))  # data
    assert not same_program(english, chinese.replace("{t:.1f}", "{t:.2f}"))  # a field's format
    assert not same_program(english, chinese.replace("measured=loss", "measured=None"))
    assert not same_program(english, chinese.replace("for n, r in rows", "for n, r in rows[1:]"))  # the items shown


def test_build_writes_the_chinese_notebook_and_keeps_outputs_only_for_unchanged_code(course):
    notebook, translations = course
    target = build(notebook, "zh", translations)
    assert target == notebook.parent / "zh" / notebook.name == translated_path(notebook, "zh")
    english = nbformat.read(notebook, as_version=4)
    chinese = nbformat.read(target, as_version=4)
    text = target.read_text(encoding="utf-8")
    # written as nbformat writes the English notebooks, and the same bytes every time
    assert text == notebook_text(chinese) and text.endswith("}\n") and text.startswith('{\n "cells": [\n  {\n')
    build(notebook, "zh", translations)
    assert target.read_text(encoding="utf-8") == text
    # markdown: the catalogue's text, the hash of the English it translates, the badge opening notebooks/zh/
    entries = {e.cell_id: e for e in read_catalogue(catalogue_path(notebook, "zh", translations))}
    for en, zh in zip(english.cells, chinese.cells):
        if en.cell_type == "markdown":
            assert zh.metadata["translation"] == {"en_sha256": source_hash(en.source)}
            assert zh.source == relocate_links(
                entries[en.id].text.replace(colab_badge(notebook.name), translated_badge(notebook.name))
            )
        elif en.id in entries:
            assert zh.source.startswith(entries[en.id].text) and zh.metadata == en.metadata
        else:
            assert zh.source == en.source and zh.metadata == en.metadata
    assert colab_badge(notebook.name) not in chinese.cells[0].source
    assert f"/blob/main/notebooks/zh/{notebook.name})" in chinese.cells[0].source
    assert chinese.metadata["translation"]["language"] == "zh"
    assert chinese.metadata["kernelspec"] == english.metadata["kernelspec"]
    # code: the setup cell starts with the shared block in Chinese, which sets the language before the restart check
    code = [c for c in chinese.cells if c.cell_type == "code"]
    assert code[0].source.startswith(colab_setup_block(notebook.name, language="zh"))
    setup = code[0].source
    assert setup.index('set_language("zh")') < setup.index("stop_if_restart_needed()")
    # no English output is copied: the notebook is to be run, and until then every code cell is named
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    unrun = stale(notebook, "zh", translations)
    assert len(unrun) == sum(bool(c.source.strip()) for c in code) and "has not been run" in unrun[0]
    assert f"python -m tools.execute_notebooks --language zh {SAMPLE}" in unrun[0]
    # after a run, a rebuild keeps the outputs; a changed translation clears that cell's only
    fake_run(target)
    assert stale(notebook, "zh", translations) == []
    ran = target.read_text(encoding="utf-8")
    build(notebook, "zh", translations)
    assert target.read_text(encoding="utf-8") == ran
    changed = list(code_to_translate(notebook))[1]
    edit_entry(notebook, translations, changed, lambda text: "# 译者改了一条注释\n" + text)
    build(notebook, "zh", translations)
    rebuilt = nbformat.read(target, as_version=4)
    cleared = [c.id for c in rebuilt.cells if c.cell_type == "code" and c.execution_count is None]
    assert cleared == [changed]
    assert translated_notebook_problems(rebuilt, notebook.name) == []


def test_a_hand_edited_chinese_notebook_is_caught(course):
    notebook, translations = course
    target = build(notebook, "zh", translations)
    fake_run(target)
    english = nbformat.read(notebook, as_version=4)
    code = [i for i, c in enumerate(english.cells) if c.cell_type == "code"]

    def edit_code(cell):
        cell.source += "\nprint('edited by hand')"

    cell = edit_cell(target, code[2], edit_code)
    found = stale(notebook, "zh", translations)
    assert any(f"cell {code[2]} (code {cell.id}): 'source' differs from what build writes" in f for f in found), found
    differences = code_and_output_differences(english, nbformat.read(target, as_version=4))
    assert f"cell {code[2]} (code {cell.id}): its code is not the English cell's program" in differences
    # a translation edited in the notebook instead of the catalogue is caught too
    build(notebook, "zh", translations)
    cell = edit_cell(target, 0, lambda c: setattr(c, "source", c.source + "\n手工修改。"))
    assert (
        f"cell 0 (markdown {cell.id}): 'source' differs from what build writes"
        in stale(notebook, "zh", translations)[0]
    )
    target.unlink()
    assert "does not exist" in stale(notebook, "zh", translations)[0]


def test_skeleton_adds_the_missing_code_entries_and_keeps_the_translated_ones(course):
    notebook, translations = course
    path = catalogue_path(notebook, "zh", translations)
    entries = read_catalogue(path)
    code_entries = [e for e in entries if e.kind == "code"]
    dropped = code_entries[1]
    write_catalogue(path, [e for e in entries if e is not dropped])
    skeleton(notebook, "zh", translations)
    again = {(e.kind, e.cell_id): e for e in read_catalogue(path)}
    assert again[("code", dropped.cell_id)].text == code_to_translate(notebook)[dropped.cell_id]  # to translate over
    assert again[("code", code_entries[0].cell_id)] == code_entries[0]  # kept


def test_links_that_leave_the_notebooks_folder_still_resolve(course):
    notebook, translations = course
    sample = "See ![the model](../figures/architecture.png) and [the README](../README.md)."
    assert (
        relocate_links(sample) == "See ![the model](../../figures/architecture.png) and [the README](../../README.md)."
    )
    kept = "[05](05_multi_head_attention.ipynb), [a section](#summary), [PyTorch](https://pytorch.org/docs/)"
    assert relocate_links(kept) == kept
    assert relocate_links('<img src="../figures/a.png" width="300">') == '<img src="../../figures/a.png" width="300">'
    assert relocate_links("[ref]: ../docs/instructor_guide.md") == "[ref]: ../../docs/instructor_guide.md"
    # in a built notebook, an English cell's "../" link opens the same file from notebooks/zh/
    nb = nbformat.read(notebook, as_version=4)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(f"{sample}\n", id="linkcell"))
    nbformat.write(nb, notebook)
    path = catalogue_path(notebook, "zh", translations)
    entries = read_catalogue(path)
    entries.insert(1, Entry("linkcell", source_hash(f"{sample}\n"), "见 ![模型](../figures/architecture.png)。"))
    write_catalogue(path, entries)
    built = translated_notebook(notebook, "zh", translations)
    target = re.search(r"\]\(([^)]+)\)", built.cells[1].source)[1]
    assert target == "../../figures/architecture.png"
    assert (NOTEBOOKS / "zh" / target).resolve() == (ROOT / "figures" / "architecture.png").resolve()
    assert (ROOT / "figures" / "architecture.png").exists()


def test_nbval_runs_both_editions(tmp_path):
    """pytest (the README's command) collects the notebooks under notebooks/zh/ as well as notebooks/*.ipynb: the
    Chinese outputs are checked by running them, as the English ones are."""
    folder = tmp_path / "notebooks"
    (folder / "zh").mkdir(parents=True)
    english = notebook_paths(["00"])[0]
    shutil.copy2(english, folder / english.name)
    shutil.copy2(english, folder / "zh" / english.name)
    command = [sys.executable, "-m", "pytest", "-c", "pyproject.toml", "--collect-only", "-p", "no:randomly"]
    collected = subprocess.run([*command, str(folder)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]
    files = re.findall(r"^\s*<IPyNbFile (\S+)>", collected.stdout, re.MULTILINE)
    assert files == [english.name, english.name], f"pytest would run these notebooks: {files}"
    assert "<Dir zh>" in collected.stdout

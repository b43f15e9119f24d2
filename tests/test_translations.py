"""The Chinese edition: catalogues that record which English text they translate, and notebooks/zh/ built from
them by ``python -m tools.translations build``.

Two tests are strict on purpose and fail until the translation is complete and built: every English notebook has
a complete, current catalogue, and every Chinese notebook is what ``build`` writes now. The others work on a
copy of one notebook with a made-up catalogue in a temporary folder, so they hold whatever the real catalogues'
state: they show that a changed English cell is named, that a hand-edited Chinese notebook is caught, and what
``build`` writes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from test_notebook_conventions import translated_notebook_problems

from tools.course_notebooks import NOTEBOOKS, ROOT, colab_badge, colab_setup_block, notebook_paths
from tools.translations import (
    CatalogueProblems,
    Entry,
    build,
    catalogue_path,
    import_exercise_checkers,
    markdown_cells,
    notebook_text,
    problems,
    read_catalogue,
    rehash,
    relocate_links,
    setup_lines,
    source_hash,
    stale,
    translated_badge,
    translated_notebook,
    translated_notebooks,
    translated_path,
    write_catalogue,
)
from transformer_course.exercises import EXERCISES, Exercise, translate_feedback

PATHS = notebook_paths()
ZH_PATHS = translated_notebooks("zh")
SAMPLE = "04"  # the notebook the temporary-folder tests copy
NOT_ATTEMPTED = re.compile(r"^Exercise (\d+\.\d+) \(.*\): not attempted yet - ", re.MULTILINE)


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


def code_and_output_differences(english: nbformat.NotebookNode, chinese: nbformat.NotebookNode) -> list[str]:
    """Where the Chinese notebook's cells differ from the English ones other than as the edition allows: the same
    cells in the same order; code identical except the setup cell's added lines; outputs identical except each
    checker's "not attempted yet" line in Chinese; each markdown cell records the hash of the current English."""
    import_exercise_checkers()
    found = []
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
        expected = en.source.rstrip() + "\n\n" + setup_lines("zh") if index == first_code else en.source
        if zh.source != expected:
            found.append(f"{where}: its code differs from the English cell")
        if zh.execution_count != en.execution_count:
            found.append(f"{where}: its execution count differs from the English cell")
        if len(zh.outputs) != len(en.outputs):
            found.append(f"{where}: it has {len(zh.outputs)} outputs, the English cell {len(en.outputs)}")
            continue
        for number, (en_out, zh_out) in enumerate(zip(en.outputs, zh.outputs)):
            if en_out.get("output_type") == "stream" and zh_out.get("output_type") == "stream":
                en_lines, zh_lines = en_out.text.splitlines(), zh_out.text.splitlines()
                same = len(en_lines) == len(zh_lines) and all(
                    z == (translate_feedback(e, "zh") if NOT_ATTEMPTED.match(e) else e)
                    for e, z in zip(en_lines, zh_lines)
                )
                rest_same = {k: v for k, v in en_out.items() if k != "text"} == {
                    k: v for k, v in zh_out.items() if k != "text"
                }
                if not (same and rest_same and en_out.text.endswith("\n") == zh_out.text.endswith("\n")):
                    found.append(f"{where}: output {number} differs from the English one")
            elif en_out != zh_out:
                found.append(f"{where}: output {number} differs from the English one")
    return found


@pytest.mark.parametrize("path", ZH_PATHS, ids=[p.name for p in ZH_PATHS])
def test_chinese_code_and_outputs_are_the_english_ones(path):
    english = nbformat.read(NOTEBOOKS / path.name, as_version=4)
    found = code_and_output_differences(english, nbformat.read(path, as_version=4))
    assert not found, f"notebooks/zh/{path.name}: " + "; ".join(found[:10])


# ---------------------------------------------------------------------------------------------------------------
# A temporary course: one English notebook and a complete catalogue


def made_up_translation(source: str) -> str:
    """A stand-in for a translator's work: Chinese in every entry, the title, badge and headings as the
    conventions want them (the badge is left English on purpose: ``build`` points it at notebooks/zh/)."""
    title = re.match(r"^# (\d\d) · (.+?) \((.+)\)\s*$", source.splitlines()[0]) if source else None
    lines = source.splitlines()
    if title:
        lines[0] = f"# {title[1]} · {title[3]}（{title[2]}）"
    text = "\n".join(lines).replace("Learning goals", "学习目标").replace("Summary", "小结")
    return text if title else f"{text}\n\n（译文）"


@pytest.fixture
def registered_exercises():
    """Every exercise the sample's outputs name is registered, with a placeholder title where its checker module
    does not register it yet; the registry is restored afterwards."""
    import_exercise_checkers()
    saved = dict(EXERCISES)
    nb = nbformat.read(notebook_paths([SAMPLE])[0], as_version=4)
    outputs = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    for number in NOT_ATTEMPTED.findall(outputs):
        if number not in EXERCISES:
            Exercise(number, f"exercise {number}", f"练习题 {number}")
    yield
    EXERCISES.clear()
    EXERCISES.update(saved)


@pytest.fixture
def course(tmp_path, registered_exercises):
    """tmp/notebooks/NN_name.ipynb (a copy of the sample) and a complete tmp/translations/zh/NN_name.md."""
    notebook = tmp_path / "notebooks" / notebook_paths([SAMPLE])[0].name
    notebook.parent.mkdir()
    shutil.copy2(notebook_paths([SAMPLE])[0], notebook)
    translations = tmp_path / "translations"
    entries = [Entry(c.id, source_hash(c.source), made_up_translation(c.source)) for c in markdown_cells(notebook)]
    write_catalogue(catalogue_path(notebook, "zh", translations), entries)
    return notebook, translations


def edit_cell(notebook: Path, index: int, change) -> nbformat.NotebookNode:
    """Apply ``change`` to cell ``index`` of the notebook file and save it; returns the changed cell."""
    nb = nbformat.read(notebook, as_version=4)
    change(nb.cells[index])
    nbformat.write(nb, notebook)
    return nb.cells[index]


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
    path = catalogue_path(notebook, "zh", translations)
    entries = [
        Entry(e.cell_id, e.en_hash, e.text + "\n\n译文尚未包含的一句话。") if e.cell_id == cell.id else e
        for e in read_catalogue(path)
    ]
    write_catalogue(path, entries)
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
    entries[1] = Entry(entries[1].cell_id, entries[1].en_hash, cells[1].source)  # still the English text
    del entries[2]
    entries.append(Entry("deadbeef", "0" * 12, "多余的条目"))
    write_catalogue(path, entries)
    found = "\n".join(problems(notebook, "zh", translations))
    assert f"markdown cell {cells[1].id} " in found and "is not translated" in found
    assert f"markdown cell {cells[2].id} " in found and "has no translation" in found
    assert "catalogue entry deadbeef matches no markdown cell" in found
    path.unlink()
    assert problems(notebook, "zh", translations) == [f"{notebook.name}: no catalogue {path}"]


def test_build_writes_the_chinese_notebook(course):
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
    assert stale(notebook, "zh", translations) == []
    # markdown: the catalogue's text, the hash of the English it translates, the badge opening notebooks/zh/
    entries = {e.cell_id: e for e in read_catalogue(catalogue_path(notebook, "zh", translations))}
    for en, zh in zip(english.cells, chinese.cells):
        if en.cell_type == "markdown":
            assert zh.metadata["translation"] == {"en_sha256": source_hash(en.source)}
            assert zh.source == relocate_links(
                entries[en.id].text.replace(colab_badge(notebook.name), translated_badge(notebook.name))
            )
    assert colab_badge(notebook.name) not in chinese.cells[0].source
    assert f"/blob/main/notebooks/zh/{notebook.name})" in chinese.cells[0].source
    assert chinese.metadata["translation"]["language"] == "zh"
    assert chinese.metadata["kernelspec"] == english.metadata["kernelspec"]
    # code: the setup cell still starts with the shared block and ends by setting the language
    setup = next(c for c in chinese.cells if c.cell_type == "code")
    assert setup.source.startswith(colab_setup_block(notebook.name))
    assert setup.source.endswith(
        '\nfrom transformer_course.exercises import set_language\n\nset_language("zh")  # '
        "the exercise checkers answer in Chinese"
    )
    # outputs: the checkers' "not attempted yet" lines in Chinese, everything else as stored
    streams = "".join(o.get("text", "") for c in chinese.cells for o in c.get("outputs", []))
    assert "not attempted yet" not in streams
    assert len(re.findall(r"^练习 \d+\.\d+（.+）：尚未作答——", streams, re.MULTILINE)) == len(
        NOT_ATTEMPTED.findall("".join(o.get("text", "") for c in english.cells for o in c.get("outputs", [])))
    )
    assert code_and_output_differences(english, chinese) == []
    assert translated_notebook_problems(chinese, notebook.name) == []


def test_a_hand_edited_chinese_notebook_is_caught(course):
    notebook, translations = course
    target = build(notebook, "zh", translations)
    english = nbformat.read(notebook, as_version=4)
    code = [i for i, c in enumerate(english.cells) if c.cell_type == "code"]
    with_output = next(i for i in code[1:] if english.cells[i].outputs)

    def edit_code(cell):
        cell.source += "\nprint('edited by hand')"

    def edit_output(cell):
        out = cell.outputs[0]
        if out.output_type == "stream":
            out.text = "edited by hand\n" + out.text
        else:
            out.data["text/plain"] = "edited by hand"

    for index, change, what in [(code[2], edit_code, "source"), (with_output, edit_output, "outputs")]:
        build(notebook, "zh", translations)
        cell = edit_cell(target, index, change)
        found = stale(notebook, "zh", translations)
        assert found and f"cell {index} (code {cell.id}): '{what}' differs from what build writes" in found[0], found
        differences = code_and_output_differences(english, nbformat.read(target, as_version=4))
        assert differences and differences[0].startswith(f"cell {index} (code {cell.id}): "), differences
    # a translation edited in the notebook instead of the catalogue is caught too
    build(notebook, "zh", translations)
    cell = edit_cell(target, 0, lambda c: setattr(c, "source", c.source + "\n手工修改。"))
    assert (
        f"cell 0 (markdown {cell.id}): 'source' differs from what build writes"
        in stale(notebook, "zh", translations)[0]
    )
    target.unlink()
    assert "does not exist" in stale(notebook, "zh", translations)[0]


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


def test_nbval_and_the_notebook_tools_never_run_the_chinese_notebooks(tmp_path):
    """pytest (the README's command and .ci/run's `pytest notebooks`) collects no notebook under notebooks/zh/
    (pyproject.toml's norecursedirs); tools/execute_notebooks.py and the other tools take notebook_paths(), which
    holds only notebooks/*.ipynb."""
    assert PATHS and all(path.parent == NOTEBOOKS for path in notebook_paths())
    folder = tmp_path / "notebooks"
    (folder / "zh").mkdir(parents=True)
    english = notebook_paths(["00"])[0]
    shutil.copy2(english, folder / english.name)
    shutil.copy2(english, folder / "zh" / english.name)
    command = [sys.executable, "-m", "pytest", "-c", "pyproject.toml", "--collect-only", "-p", "no:randomly"]
    collected = subprocess.run([*command, str(folder)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]
    files = re.findall(r"^\s*<IPyNbFile (\S+)>", collected.stdout, re.MULTILINE)
    assert files == [english.name], f"pytest would run these notebooks: {files}"
    assert "<Dir zh>" not in collected.stdout

"""The translation catalogues: one Markdown file per notebook under ``translations/<language>/``, and the
translated notebooks built from them under ``notebooks/<language>/``.

A catalogue holds one entry per markdown cell of the English notebook, and one per code cell that shows the reader
English (comments, docstrings, printed text, claims, figure labels: :mod:`tools.code_translation`), in the
notebook's order::

    <!-- cell 528da808 · en 3f2a9c1b7d4e -->
    # 04 · 缩放点积注意力
    ...
    <!-- code 9b1c40aa · en 0d5e2f6a9c3b -->
    ```python
    # 每一行是一个查询对所有键的权重
    ...
    ```

``cell``/``code`` is the English cell's id; ``en`` is the first 12 hex digits of the SHA-256 of the English source the
entry translates. When an English cell changes, its hash changes and the entry is stale until it is translated
again and its ``en`` updated; ``python -m tools.translations check`` names every such cell. A code entry must be the
same program as the English cell, with only comments, docstrings and the text the reader sees changed
(:func:`tools.code_translation.same_program`); ``check`` names any that is not.

    python -m tools.translations skeleton 04      # add the missing entries, with the English to translate over
    python -m tools.translations check            # stale, missing or untranslated entries, per notebook
    python -m tools.translations rehash 04 CELL   # after updating a translation, record the current English hash
    python -m tools.translations build [04 ...]   # write notebooks/zh/NN_name.ipynb from the English + catalogue
    python -m tools.translations build --check    # only say which notebooks/zh/ files differ from a fresh build
    python -m tools.execute_notebooks --language zh 04   # then run it, so its outputs are the Chinese ones

``build`` makes the Chinese notebook's sources from the English one: each markdown cell becomes its translation
(links that leave ``notebooks/`` get one more ``../``, the Colab badge opens the Chinese file) and records the hash of
the English text it translates in ``metadata.translation.en_sha256``; each code cell becomes its translation, or
stays as it is when it shows no English; the first code cell (the shared setup) has its setup block in Chinese,
which calls ``set_language("zh")`` before the restart check (so even that check's sentence is Chinese). Outputs are
not copied from the English notebook: a Chinese notebook's outputs are those of running it
(``tools.execute_notebooks``), and nbval checks them as it does the English ones.
``build`` keeps a cell's stored outputs while its source is unchanged and clears them when it changes; ``build
--check`` compares the sources and metadata and names the cells that have not been run since they changed.
"""

from __future__ import annotations

import argparse
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from tools.code_translation import english_text, program_differences, same_program, untranslated
from tools.course_notebooks import NOTEBOOK_NAME, ROOT, colab_badge, colab_setup_block, notebook_paths

TRANSLATIONS = ROOT / "translations"
MARKER = re.compile(r"^<!-- (?P<kind>cell|code) (?P<cell>[\w-]+) · en (?P<en>[0-9a-f]{12}) -->$", re.MULTILINE)
FENCE = re.compile(r"\A```python\n(?P<code>.*?)\n?```\Z", re.DOTALL)
CJK = re.compile(r"[\u4e00-\u9fff]")


@dataclass(frozen=True)
class Entry:
    cell_id: str
    en_hash: str
    text: str  # a markdown cell's translation; a code cell's translated source (without its fence)
    kind: str = "cell"  # "cell" (markdown) or "code"


class CatalogueProblems(Exception):
    """A notebook cannot be built: its catalogue is missing, stale or incomplete (``problems`` lists why)."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


def source_hash(source: str) -> str:
    """The first 12 hex digits of the SHA-256 of a cell's source (UTF-8)."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:12]


def catalogue_path(notebook: Path, language: str = "zh", translations: Path | None = None) -> Path:
    return (translations or TRANSLATIONS) / language / f"{notebook.stem}.md"


def _shown(path: Path) -> str:
    """``path`` relative to the repository when it is inside it (error messages), else as it is."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def read_catalogue(path: Path) -> list[Entry]:
    """The entries of one catalogue, in file order; each text without the newline that ends it."""
    text = path.read_text(encoding="utf-8")
    markers = list(MARKER.finditer(text))
    if not markers:
        raise ValueError(f"{path} has no '<!-- cell ID · en HASH -->' markers")
    if text[: markers[0].start()].strip():
        raise ValueError(f"{path} has text before its first marker")
    entries = []
    for marker, following in zip(markers, markers[1:] + [None]):
        end = following.start() if following else len(text)
        body = text[marker.end() : end].removeprefix("\n").removesuffix("\n")
        if marker["kind"] == "code":
            fenced = FENCE.match(body.strip("\n"))
            if fenced is None:
                raise ValueError(f"{path}: code entry {marker['cell']} is not one ```python ... ``` block")
            body = fenced["code"]
        entries.append(Entry(marker["cell"], marker["en"], body, marker["kind"]))
    return entries


def _entry_text(entry: Entry) -> str:
    body = f"```python\n{entry.text}\n```" if entry.kind == "code" else entry.text
    return f"<!-- {entry.kind} {entry.cell_id} · en {entry.en_hash} -->\n{body}\n"


def write_catalogue(path: Path, entries: list[Entry]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(_entry_text(e) for e in entries), encoding="utf-8")


def markdown_cells(notebook: Path) -> list:
    nb = nbformat.read(notebook, as_version=4)
    return [cell for cell in nb.cells if cell.cell_type == "markdown"]


def code_cells(notebook: Path) -> list:
    nb = nbformat.read(notebook, as_version=4)
    return [cell for cell in nb.cells if cell.cell_type == "code"]


def pretranslated_code(cell_source: str, first: bool, notebook_name: str, language: str = "zh") -> str:
    """A code cell before its catalogue entry applies: the first (setup) cell with the setup block's comments in
    ``language``; any other cell as it is."""
    block = colab_setup_block(notebook_name)
    if first and cell_source.startswith(block):
        return colab_setup_block(notebook_name, language=language) + cell_source[len(block) :]
    return cell_source


def _translated(english: str, translation: str, notebook_name: str, language: str = "zh") -> bool:
    """False if the cell (as :func:`pretranslated_code` gives it) shows a reader English after the setup block and
    the translation has no Chinese there."""
    block = colab_setup_block(notebook_name, language=language)
    rest_en, rest_zh = english.removeprefix(block), translation.removeprefix(block)
    return not english_text(rest_en) or bool(CJK.search(rest_zh))


def code_to_translate(notebook: Path, language: str = "zh") -> dict[str, str]:
    """The code cells of ``notebook`` that show the reader English, by id: their source as the catalogue entry
    starts from (:func:`pretranslated_code`)."""
    cells = code_cells(notebook)
    found = {}
    for index, cell in enumerate(cells):
        source = pretranslated_code(cell.source, index == 0, notebook.name, language)
        if english_text(source):
            found[cell.id] = source
    return found


def problems(notebook: Path, language: str = "zh", translations: Path | None = None) -> list[str]:
    """What keeps ``notebook``'s catalogue from matching it: each missing, stale, untranslated or extra entry, and
    each code entry that is not the same program as its cell."""
    path = catalogue_path(notebook, language, translations)
    if not path.is_file():
        return [f"{notebook.name}: no catalogue {_shown(path)}"]
    all_entries = read_catalogue(path)
    entries = {e.cell_id: e for e in all_entries if e.kind == "cell"}
    code_entries = {e.cell_id: e for e in all_entries if e.kind == "code"}
    found = []
    cells = markdown_cells(notebook)
    for cell in cells:
        first_line = cell.source.strip().splitlines()[0][:60] if cell.source.strip() else ""
        where = f"{notebook.name}: markdown cell {cell.id} ({first_line!r})"
        entry = entries.get(cell.id)
        if entry is None:
            found.append(f"{where} has no translation")
        elif entry.en_hash != source_hash(cell.source):
            found.append(f"{where} changed since it was translated (en {entry.en_hash} -> {source_hash(cell.source)})")
        elif cell.source.strip() and (entry.text.strip() == cell.source.strip() or not CJK.search(entry.text)):
            found.append(f"{where} is not translated (its entry is the English text, or has no Chinese)")
    extra = set(entries) - {cell.id for cell in cells}
    found += [f"{notebook.name}: catalogue entry {cell_id} matches no markdown cell" for cell_id in sorted(extra)]
    needed = code_to_translate(notebook, language)
    code = code_cells(notebook)
    for index, cell in enumerate(code):
        first_line = cell.source.strip().splitlines()[0][:60] if cell.source.strip() else ""
        where = f"{notebook.name}: code cell {cell.id} ({first_line!r})"
        entry = code_entries.get(cell.id)
        if entry is None:
            if cell.id in needed:
                english = english_text(needed[cell.id])[0][:50]
                found.append(f"{where} shows English ({english!r}) and has no translation")
            continue
        if entry.en_hash != source_hash(cell.source):
            found.append(f"{where} changed since it was translated (en {entry.en_hash} -> {source_hash(cell.source)})")
        elif not _translated(
            pretranslated_code(cell.source, index == 0, notebook.name, language), entry.text, notebook.name, language
        ):
            found.append(f"{where} is not translated (its entry has no Chinese beyond the setup block)")
        elif untranslated(entry.text):
            found.append(f"{where} still has English a reader sees: {untranslated(entry.text)[0][:60]!r}")
        elif not same_program(pretranslated_code(cell.source, index == 0, notebook.name, language), entry.text):
            found.append(
                f"{where}: the translation is not the same program as the English cell (only comments, docstrings "
                f"and the text a reader sees may change): " + program_differences(cell.source, entry.text)
            )
    extra = set(code_entries) - {cell.id for cell in code}
    found += [f"{notebook.name}: catalogue code entry {cell_id} matches no code cell" for cell_id in sorted(extra)]
    return found


def skeleton(notebook: Path, language: str = "zh", translations: Path | None = None) -> Path:
    """The catalogue with an entry for every cell that needs one: the entries it has stay, the missing ones get
    the English text (markdown) or the source (code) to translate over, in the notebook's order."""
    path = catalogue_path(notebook, language, translations)
    have = {(e.kind, e.cell_id): e for e in read_catalogue(path)} if path.is_file() else {}
    needed = code_to_translate(notebook, language)
    entries = []
    for cell in nbformat.read(notebook, as_version=4).cells:
        kind = "cell" if cell.cell_type == "markdown" else "code"
        if (kind, cell.id) in have:
            entries.append(have[(kind, cell.id)])
        elif kind == "cell":
            entries.append(Entry(cell.id, source_hash(cell.source), cell.source))
        elif cell.id in needed:
            entries.append(Entry(cell.id, source_hash(cell.source), needed[cell.id], "code"))
    write_catalogue(path, entries)
    return path


def rehash(notebook: Path, cell_id: str, language: str = "zh", translations: Path | None = None) -> None:
    """Record that the entry for ``cell_id`` (markdown or code) now translates the English cell as it is."""
    path = catalogue_path(notebook, language, translations)
    cells = {cell.id: cell for cell in nbformat.read(notebook, as_version=4).cells}
    if cell_id not in cells:
        raise SystemExit(f"{notebook.name} has no cell {cell_id}")
    entries = [
        Entry(e.cell_id, source_hash(cells[cell_id].source), e.text, e.kind) if e.cell_id == cell_id else e
        for e in read_catalogue(path)
    ]
    write_catalogue(path, entries)


# ---------------------------------------------------------------------------------------------------------------
# Building the translated notebooks


def translated_path(notebook: Path, language: str = "zh") -> Path:
    """Where the translation of ``notebook`` lives: ``notebooks/zh/NN_name.ipynb`` beside ``notebooks/NN_name``."""
    return notebook.parent / language / notebook.name


_LINK_TARGETS = [
    re.compile(r"\]\(\s*<?(?P<target>[^)\s>]+)"),  # [text](target) and ![alt](target)
    re.compile(r"""\b(?:src|href)\s*=\s*["'](?P<target>[^"']+)"""),  # <img src="..."> and <a href="...">
    re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(?P<target>[^\s>]+)", re.MULTILINE),  # [label]: target
]
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_SIBLING_NOTEBOOK = re.compile(r"^[^/]+\.ipynb(#.*)?$")


def relocated_target(target: str) -> str:
    """A link target written in ``notebooks/`` as it reads from ``notebooks/<language>/``: a link to another
    notebook stays (it opens that notebook's translation), any other relative path gets one more ``../``
    (``../figures/a.png`` -> ``../../figures/a.png``); URLs, anchors and absolute paths stay."""
    if _SCHEME.match(target) or target.startswith(("#", "/", "{")) or _SIBLING_NOTEBOOK.match(target):
        return target
    return f"../{target}"


def relocate_links(markdown: str) -> str:
    """``markdown`` with every relative link and image target relocated (see :func:`relocated_target`)."""

    def replace(match: re.Match) -> str:
        start, end = (position - match.start() for position in match.span("target"))
        return match[0][:start] + relocated_target(match["target"]) + match[0][end:]

    for pattern in _LINK_TARGETS:
        markdown = pattern.sub(replace, markdown)
    return markdown


def translated_badge(notebook_name: str, language: str = "zh") -> str:
    """The "Open in Colab" badge of the translated notebook (it opens ``notebooks/<language>/NN_name.ipynb``)."""
    return colab_badge(f"{language}/{notebook_name}")


def translated_markdown(text: str, notebook_name: str, language: str = "zh") -> str:
    """A catalogue entry as the translated notebook shows it: links relocated, the badge opening the translation."""
    text = text.replace(colab_badge(notebook_name), translated_badge(notebook_name, language))
    return relocate_links(text)


def translated_notebook(
    notebook: Path, language: str = "zh", translations: Path | None = None, stored: nbformat.NotebookNode | None = None
) -> nbformat.NotebookNode:
    """The translation of ``notebook`` (see the module's docstring), with the outputs of ``stored`` (the translated
    notebook as it is now) for each code cell whose source has not changed; raises CatalogueProblems if its
    catalogue does not match it."""
    found = problems(notebook, language, translations)
    if found:
        raise CatalogueProblems(found)
    all_entries = read_catalogue(catalogue_path(notebook, language, translations))
    entries = {e.cell_id: e for e in all_entries if e.kind == "cell"}
    code_entries = {e.cell_id: e for e in all_entries if e.kind == "code"}
    kept = {cell.id: cell for cell in stored.cells if cell.cell_type == "code"} if stored is not None else {}
    nb = nbformat.read(notebook, as_version=4)
    seen_code = False
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            en_hash = source_hash(cell.source)
            cell.source = translated_markdown(entries[cell.id].text, notebook.name, language)
            cell.metadata["translation"] = {"en_sha256": en_hash}
        elif cell.cell_type == "code":
            entry = code_entries.get(cell.id)
            source = entry.text if entry else pretranslated_code(cell.source, not seen_code, notebook.name, language)
            cell.source = source
            seen_code = True
            previous = kept.get(cell.id)
            if previous is not None and previous.source == cell.source:
                cell.outputs, cell.execution_count = previous.outputs, previous.execution_count
            else:
                cell.outputs, cell.execution_count = [], None
    nb.metadata["translation"] = {"language": language, "en_notebook": f"../{notebook.name}"}
    if stored is not None:  # what running it records (its Python's version is dropped, as for the English)
        for key in ("kernelspec", "language_info", "widgets"):  # widgets: the state of the run's widgets
            if key in stored.metadata:
                nb.metadata[key] = stored.metadata[key]
    return nb


def notebook_text(nb: nbformat.NotebookNode) -> str:
    """The notebook as ``nbformat.write`` stores it (indent 1, sorted keys, a final newline)."""
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


def build(notebook: Path, language: str = "zh", translations: Path | None = None, target: Path | None = None) -> Path:
    """Write the translation of ``notebook`` (to ``target``, by default notebooks/<language>/NN_name.ipynb)."""
    target = target or translated_path(notebook, language)
    stored = nbformat.read(target, as_version=4) if target.is_file() else None
    text = notebook_text(translated_notebook(notebook, language, translations, stored))
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.is_file() or target.read_text(encoding="utf-8") != text:
        target.write_text(text, encoding="utf-8")
    return target


def _cell_name(index: int, cell) -> str:
    return f"cell {index} ({cell.get('cell_type')} {cell.get('id', '?')})"


def differences(actual: nbformat.NotebookNode, expected: nbformat.NotebookNode) -> list[str]:
    """How ``actual`` differs from ``expected``, cell by cell (source, outputs, execution count, metadata, ...)."""
    found = []
    if len(actual.cells) != len(expected.cells):
        found.append(f"has {len(actual.cells)} cells, a fresh build has {len(expected.cells)}")
    for index, (got, want) in enumerate(zip(actual.cells, expected.cells)):
        for key in sorted(set(got) | set(want)):
            if got.get(key) != want.get(key):
                found.append(f"{_cell_name(index, want)}: {key!r} differs from what build writes")
    for key in sorted(set(actual.metadata) | set(expected.metadata)):
        if actual.metadata.get(key) != expected.metadata.get(key):
            found.append(f"notebook metadata {key!r} differs from a fresh build")
    if (actual.nbformat, actual.nbformat_minor) != (expected.nbformat, expected.nbformat_minor):
        found.append("its nbformat version differs from a fresh build")
    return found


def not_run(nb: nbformat.NotebookNode) -> list[str]:
    """The code cells of a translated notebook that have not been run since their source last changed."""
    return [
        _cell_name(index, cell)
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and cell.source.strip() and cell.execution_count is None
    ]


def stale(notebook: Path, language: str = "zh", translations: Path | None = None) -> list[str]:
    """Why notebooks/<language>/NN_name.ipynb is not what ``build`` and a run would write now (empty if it is)."""
    target = translated_path(notebook, language)
    shown = _shown(target)
    if not target.is_file():
        return [f"{shown} does not exist: python -m tools.translations build {notebook.name[:2]}"]
    actual_text = target.read_text(encoding="utf-8")
    actual = nbformat.reads(actual_text, as_version=4)
    try:
        expected = translated_notebook(notebook, language, translations, stored=actual)
    except CatalogueProblems as error:
        return [f"{shown} cannot be rebuilt, its catalogue does not match the English notebook:"] + error.problems
    unrun = [
        f"{shown}: {cell} has not been run since it changed: python -m tools.execute_notebooks --language "
        f"{language} {notebook.name[:2]}"
        for cell in not_run(expected)
    ]
    if actual_text == notebook_text(expected):
        return unrun
    found = differences(actual, expected)
    return [f"{shown}: {difference}" for difference in found or ["its bytes differ from a fresh build"]] + unrun


def translated_notebooks(language: str = "zh") -> list[Path]:
    """The translated notebooks that exist, in order."""
    folder = ROOT / "notebooks" / language
    return sorted(p for p in folder.glob("*.ipynb") if NOTEBOOK_NAME.match(p.name))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["skeleton", "check", "rehash", "build"])
    parser.add_argument("names", nargs="*", help="notebooks by number or name (default: all); rehash: NN CELL")
    parser.add_argument("--language", default="zh")
    parser.add_argument("--check", action="store_true", help="build: write nothing, name the stale notebooks")
    args = parser.parse_args(argv)
    if args.command == "rehash":
        if len(args.names) != 2:
            parser.error("rehash takes a notebook and a cell id")
        rehash(notebook_paths(args.names[:1])[0], args.names[1], args.language)
        return 0
    paths = notebook_paths(args.names or None)
    if args.command == "skeleton":
        for path in paths:
            print(f"wrote {skeleton(path, args.language).relative_to(ROOT)}")
        return 0
    if args.command == "build":
        return build_command(paths, args.language, args.check)
    found = [problem for path in paths for problem in problems(path, args.language)]
    print("\n".join(found) if found else f"all {len(paths)} catalogues match their notebooks")
    return 1 if found else 0


def build_command(paths: list[Path], language: str, check_only: bool) -> int:
    failed = 0
    for path in paths:
        if check_only:
            found = stale(path, language)
            print("\n".join(found) if found else f"{_shown(translated_path(path, language))} is up to date")
            failed += bool(found)
            continue
        try:
            print(f"wrote {_shown(build(path, language))}")
        except CatalogueProblems as error:
            print(f"not built: {path.name}, its catalogue does not match it:", *error.problems, sep="\n  ")
            failed += 1
    if failed:
        verb = "are stale or missing" if check_only else "were not built"
        print(f"{failed} of {len(paths)} translated notebooks {verb}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

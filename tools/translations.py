"""The translation catalogues: one Markdown file per notebook under ``translations/<language>/``.

A catalogue holds one entry per markdown cell of the English notebook, in the notebook's order::

    <!-- cell 528da808 · en 3f2a9c1b7d4e -->
    # 04 · 缩放点积注意力 (Scaled dot-product attention)
    ...

``cell`` is the English cell's id; ``en`` is the first 12 hex digits of the SHA-256 of the English source the
entry translates. When an English cell changes, its hash changes and the entry is stale until it is translated
again and its ``en`` updated; ``python tools/translations.py check`` names every such cell.

    python tools/translations.py skeleton 04      # write a catalogue with the English text to translate over
    python tools/translations.py check            # stale, missing or untranslated entries, per notebook
    python tools/translations.py rehash 04 CELL   # after updating a translation, record the current English hash
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tools.course_notebooks import ROOT, notebook_paths  # noqa: E402

TRANSLATIONS = ROOT / "translations"
MARKER = re.compile(r"^<!-- cell (?P<cell>[\w-]+) · en (?P<en>[0-9a-f]{12}) -->$", re.MULTILINE)
CJK = re.compile(r"[\u4e00-\u9fff]")


@dataclass(frozen=True)
class Entry:
    cell_id: str
    en_hash: str
    text: str


def source_hash(source: str) -> str:
    """The first 12 hex digits of the SHA-256 of a cell's source (UTF-8)."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:12]


def catalogue_path(notebook: Path, language: str = "zh") -> Path:
    return TRANSLATIONS / language / f"{notebook.stem}.md"


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
        entries.append(Entry(marker["cell"], marker["en"], body))
    return entries


def write_catalogue(path: Path, entries: list[Entry]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    parts = [f"<!-- cell {e.cell_id} · en {e.en_hash} -->\n{e.text}\n" for e in entries]
    path.write_text("".join(parts), encoding="utf-8")


def markdown_cells(notebook: Path) -> list:
    nb = nbformat.read(notebook, as_version=4)
    return [cell for cell in nb.cells if cell.cell_type == "markdown"]


def problems(notebook: Path, language: str = "zh") -> list[str]:
    """What keeps ``notebook``'s catalogue from matching it: each missing, stale, untranslated or extra entry."""
    path = catalogue_path(notebook, language)
    if not path.is_file():
        return [f"{notebook.name}: no catalogue {path.relative_to(ROOT)}"]
    entries = {e.cell_id: e for e in read_catalogue(path)}
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
    return found


def skeleton(notebook: Path, language: str = "zh") -> Path:
    """A catalogue with the English text in every entry, to be translated over (never committed as it is)."""
    path = catalogue_path(notebook, language)
    entries = [Entry(cell.id, source_hash(cell.source), cell.source) for cell in markdown_cells(notebook)]
    write_catalogue(path, entries)
    return path


def rehash(notebook: Path, cell_id: str, language: str = "zh") -> None:
    """Record that the entry for ``cell_id`` now translates the English cell as it is."""
    path = catalogue_path(notebook, language)
    cells = {cell.id: cell for cell in markdown_cells(notebook)}
    if cell_id not in cells:
        raise SystemExit(f"{notebook.name} has no markdown cell {cell_id}")
    entries = [
        Entry(e.cell_id, source_hash(cells[cell_id].source), e.text) if e.cell_id == cell_id else e
        for e in read_catalogue(path)
    ]
    write_catalogue(path, entries)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["skeleton", "check", "rehash"])
    parser.add_argument("names", nargs="*", help="notebooks by number or name (default: all); rehash: NN CELL")
    parser.add_argument("--language", default="zh")
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
    found = [problem for path in paths for problem in problems(path, args.language)]
    print("\n".join(found) if found else f"all {len(paths)} catalogues match their notebooks")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())

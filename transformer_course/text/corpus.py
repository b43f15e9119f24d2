"""An English corpus that is on every machine offline: the text inside Python's own standard library.

The notebooks read it with :func:`load_stdlib_text`, from a snapshot shipped inside the package
(``corpus_data/stdlib_text.json.gz``), so every Python from 3.10 to 3.13 sees the same words: the standard
library's text changes between Python versions (3.11.7 and 3.13.0 differ by about 10% of their words).
The snapshot was made once by ``python -m tools.build_corpus_snapshot``, which runs :func:`collect_stdlib_text`
and records which Python produced it; :func:`load_stdlib_text` checks its SHA-256 checksum.
The text is the Python Software Foundation's, under the PSF licence (``corpus_data/LICENSE-PSF.txt``).

:func:`collect_stdlib_text` gathers three kinds of prose written by the CPython developers:

* the docstrings of the standard library's modules, classes and functions (every public module is imported,
  one by one, in a fresh interpreter);
* the full-line comments of the standard library's ``.py`` files;
* ``pydoc_data.topics``, the text that ``help("if")`` and friends print.

The collection runs in a separate, fresh interpreter (``python -I``), so nothing the calling process has
imported (PyTorch, for instance, patches parts of ``inspect``) changes what is found, and nothing the standard
library does on import touches the caller. Nothing is downloaded. The text differs between Python versions,
which is why the notebooks read the snapshot instead.

:func:`tokenize` turns text into lower-case words and :class:`WordVocabulary` numbers the frequent ones.
This module uses only the standard library, so it can also run as the collecting script itself.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib
import inspect
import json
import os
import pkgutil
import re
import subprocess
import sys
import sysconfig
import tempfile
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

# Modules that open windows or browsers, print on import, or are test suites and installers, not prose.
# ``encodings`` is skipped because its comments are code-point tables ("0x41 -> LATIN CAPITAL LETTER A").
SKIPPED_MODULES: tuple[str, ...] = (
    "antigravity",
    "encodings",
    "ensurepip",
    "idlelib",
    "test",
    "this",
    "tkinter",
    "turtle",
    "turtledemo",
    "venv",
)
_SKIPPED_DIRECTORIES = ("site-packages", "dist-packages", "tests", "__pycache__")
_COMMENT_LINE = re.compile(r"^[ \t]*#(.*)$", re.MULTILINE)
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def _skipped(dotted_name: str) -> bool:
    parts = dotted_name.split(".")
    return parts[0] in SKIPPED_MODULES or any(part.startswith("_") for part in parts)


def _docstrings_of(module: object, add: object) -> None:
    """Feed ``add`` the docstrings of a module and of the classes, functions and methods it defines."""
    add(getattr(module, "__doc__", None))  # type: ignore[operator]
    name = getattr(module, "__name__", None)
    for obj in list(vars(module).values()):
        if not (inspect.isclass(obj) or inspect.isroutine(obj)) or getattr(obj, "__module__", None) != name:
            continue  # imported from elsewhere: counted where it is defined
        add(obj.__doc__)  # type: ignore[operator]
        if inspect.isclass(obj):
            for member in list(vars(obj).values()):
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                if inspect.isroutine(member) or isinstance(member, property):
                    add(member.__doc__)  # type: ignore[operator]


def _collect_here() -> dict[str, list[str]]:
    """Run inside the fresh interpreter: returns {"docstrings": [...], "comments": [...], "topics": [...]}."""
    warnings.simplefilter("ignore")  # deprecated modules warn on import; we only read their text
    docstrings: list[str] = []
    seen: set[str] = set()

    def add(doc: object) -> None:
        if isinstance(doc, str):
            doc = inspect.cleandoc(doc)
            if doc and doc not in seen:  # re-exported objects share a docstring: keep it once
                seen.add(doc)
                docstrings.append(doc)

    for name in sorted(sys.stdlib_module_names):
        if _skipped(name):
            continue
        try:
            module = importlib.import_module(name)
        except BaseException:  # noqa: BLE001 - a module missing on this platform, or one that exits
            continue
        _docstrings_of(module, add)
        for info in pkgutil.walk_packages(getattr(module, "__path__", []), name + ".", onerror=lambda _: None):
            if _skipped(info.name):
                continue
            try:
                submodule = importlib.import_module(info.name)
            except BaseException:  # noqa: BLE001
                continue
            _docstrings_of(submodule, add)

    comments: list[str] = []
    stdlib = sysconfig.get_paths()["stdlib"]
    for root, dirs, files in os.walk(stdlib):
        dirs[:] = sorted(d for d in dirs if not (_skipped(d) or d in _SKIPPED_DIRECTORIES))
        for file_name in sorted(files):
            if not file_name.endswith(".py") or file_name.startswith("_"):
                continue
            with open(os.path.join(root, file_name), encoding="utf-8", errors="replace") as handle:
                source = handle.read()
            # full-line comments only: a '#' after code could sit inside a string literal
            comments.extend(line.strip() for line in _COMMENT_LINE.findall(source) if line.strip())

    topics_module = importlib.import_module("pydoc_data.topics")
    topics = [topics_module.topics[key] for key in sorted(topics_module.topics)]
    return {"docstrings": docstrings, "comments": comments, "topics": topics}


@dataclass(frozen=True)
class StdlibText:
    """The three parts of the standard library's prose, each a list of passages (strings)."""

    docstrings: list[str]
    comments: list[str]
    topics: list[str]

    @property
    def text(self) -> str:
        """All passages joined by newlines: docstrings, then comments, then help topics."""
        return "\n".join([*self.docstrings, *self.comments, *self.topics])


def collect_stdlib_text(timeout: float = 300.0) -> StdlibText:
    """Collect the prose of the running Python's standard library in a fresh interpreter.

    Imports every public standard-library module except :data:`SKIPPED_MODULES` (a few seconds), reads
    the comment lines of its ``.py`` files and ``pydoc_data.topics``. Nothing is downloaded.
    """
    if timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout}")
    command = [sys.executable, "-I", "-X", "utf8", "-W", "ignore", os.path.abspath(__file__), "--collect"]
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=timeout,
        cwd=tempfile.gettempdir(),  # anything an imported module writes lands outside the project
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"collecting the standard library's text failed:\n{result.stderr[-2000:]}")
    # stray prints from imported modules may precede our line: the JSON is the last line
    parts = json.loads(result.stdout.strip().splitlines()[-1])
    return StdlibText(parts["docstrings"], parts["comments"], parts["topics"])


SNAPSHOT_PATH = Path(__file__).resolve().parent.parent / "corpus_data" / "stdlib_text.json.gz"
# SHA-256 of StdlibText.text for the shipped snapshot; python -m tools.build_corpus_snapshot prints the new value.
SNAPSHOT_SHA256 = "ff96c6b89ba97b5d6479c83df471021e9e259b2e8aaa3207e10bfef8d0ebf457"


def _text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_snapshot(text: StdlibText, path: str | os.PathLike, python_version: str) -> str:
    """Write ``text`` as gzip-compressed JSON with the Python version that produced it; returns its SHA-256.

    The file's bytes depend only on the text (no time stamp inside), so rebuilding from the same Python gives
    the same file.
    """
    payload = {
        "python": python_version,
        "built_by": "python -m tools.build_corpus_snapshot",
        "sha256": _text_sha256(text.text),
        "docstrings": text.docstrings,
        "comments": text.comments,
        "topics": text.topics,
    }
    data = json.dumps(payload, ensure_ascii=False, indent=0).encode("utf-8")
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as handle:
        handle.write(data)
    return payload["sha256"]


def snapshot_info(path: str | os.PathLike = SNAPSHOT_PATH) -> dict[str, str]:
    """Where the snapshot came from: ``{"python": "3.11.7", "built_by": ..., "sha256": ...}``."""
    payload = _read_snapshot(path)
    return {key: payload[key] for key in ("python", "built_by", "sha256")}


def _read_snapshot(path: str | os.PathLike) -> dict:
    if not os.path.exists(path):
        raise ValueError(
            f"no corpus snapshot at {os.fspath(path)!r}; build it with python -m tools.build_corpus_snapshot"
        )
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def load_stdlib_text(
    path: str | os.PathLike = SNAPSHOT_PATH, expected_sha256: str | None = SNAPSHOT_SHA256
) -> StdlibText:
    """The standard library's prose from the shipped snapshot: the same words on every Python and machine.

    Raises ``ValueError`` if the file is missing or its text does not match ``expected_sha256`` (pass ``None``
    to skip the check, e.g. for a snapshot you built yourself).
    """
    payload = _read_snapshot(path)
    text = StdlibText(payload["docstrings"], payload["comments"], payload["topics"])
    if expected_sha256 is not None:
        found = _text_sha256(text.text)
        if found != expected_sha256:
            raise ValueError(
                f"the corpus snapshot at {os.fspath(path)!r} has checksum {found}, expected {expected_sha256}: "
                "the file was changed or damaged"
            )
    return text


def tokenize(text: str) -> list[str]:
    """Lower-case words: runs of letters a-z, with one inner apostrophe allowed ("don't").

    Digits, punctuation and underscores separate words, so ``os.path.join`` gives "os", "path", "join".
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    return _WORD.findall(text.lower())


class WordVocabulary:
    """The words that occur at least ``min_count`` times, numbered from the most frequent (0) down.

    Ties in frequency are broken alphabetically, so the numbering is reproducible. Unlike
    :class:`transformer_course.text.tasks.Vocabulary` there is no ``<unk>``: asking for a word that is not here
    raises a ``ValueError`` that names it.
    """

    def __init__(self, words: Iterable[str], min_count: int = 5) -> None:
        if not isinstance(min_count, int) or min_count < 1:
            raise ValueError(f"min_count must be a positive int, got {min_count!r}")
        counts = Counter(words)
        kept = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
        if not kept:
            raise ValueError(f"no word occurs at least min_count={min_count} times")
        self.min_count = min_count
        self.words: list[str] = kept
        self.counts: list[int] = [counts[w] for w in kept]
        self.index: dict[str, int] = {w: i for i, w in enumerate(kept)}
        self.total_words = sum(counts.values())  # tokens in the text, including rare words that were dropped

    def __len__(self) -> int:
        return len(self.words)

    def __contains__(self, word: object) -> bool:
        return word in self.index

    def __repr__(self) -> str:
        return f"WordVocabulary({len(self)} words, min_count={self.min_count})"

    def id(self, word: str) -> int:
        """The id of ``word``; a ``ValueError`` names the word if it is not in the vocabulary."""
        try:
            return self.index[word]
        except KeyError:
            from ..language import tr  # here, not at the top: this file also runs as a script (collect_stdlib_text)

            lower = isinstance(word, str) and word.lower() in self.index
            hint = tr(" (words are lower case)", "（词表里的词都是小写）") if lower else ""
            raise ValueError(
                tr(
                    f"word {word!r} is not in the vocabulary{hint}: it has {len(self)} words, each seen at least "
                    f"{self.min_count} times in the corpus",
                    f"词 {word!r} 不在词表中{hint}。词表有 {len(self)} 个词，每个在语料中至少出现 {self.min_count} 次",
                )
            ) from None

    def ids(self, words: Sequence[str]) -> list[int]:
        """The ids of several words; raises ``ValueError`` naming the first unknown word."""
        return [self.id(w) for w in words]

    def encode(self, tokens: Iterable[str]) -> list[int]:
        """Ids of a running text; words not in the vocabulary (the rare ones) are dropped, as word2vec does."""
        index = self.index
        return [index[t] for t in tokens if t in index]

    def word(self, idx: int) -> str:
        """The word with id ``idx``."""
        if not isinstance(idx, int) or not 0 <= idx < len(self.words):
            raise ValueError(f"word id must be an int in [0, {len(self.words)}), got {idx!r}")
        return self.words[idx]


if __name__ == "__main__" and sys.argv[1:] == ["--collect"]:
    sys.stdout.write("\n" + json.dumps(_collect_here()) + "\n")

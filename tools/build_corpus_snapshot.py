"""Build the corpus snapshot that notebooks 02 and 11 read: the prose of this Python's standard library.

    python -m tools.build_corpus_snapshot

Run it once, with the Python whose text should become the course's corpus, then put the printed checksum into
``transformer_course/text/corpus.py`` (``SNAPSHOT_SHA256``) and re-execute the notebooks that read the corpus. The
snapshot records which Python produced it. The course's snapshot was built with Python 3.11.7.
"""

from __future__ import annotations

import platform

from transformer_course.text.corpus import SNAPSHOT_PATH, collect_stdlib_text, tokenize, write_snapshot


def main() -> None:
    text = collect_stdlib_text()
    SNAPSHOT_PATH.parent.mkdir(parents=True, exist_ok=True)
    sha256 = write_snapshot(text, SNAPSHOT_PATH, platform.python_version())
    print(f"Python {platform.python_version()}: {len(tokenize(text.text)):,} words")
    print(f"wrote {SNAPSHOT_PATH} ({SNAPSHOT_PATH.stat().st_size:,} bytes)")
    print(f"SNAPSHOT_SHA256 = {sha256!r}")


if __name__ == "__main__":
    main()

"""The instructor guide's numbers that come from the notebooks, generated so that they cannot drift from them.

* the table of section 1 (between ``<!-- notebook-sizes -->`` and ``<!-- /notebook-sizes -->``): each notebook's run
  time (benchmark section 7, ``python -m benchmarks.run --only 7``, stored in benchmarks/results.json), its words of
  prose, its non-blank lines of code, and a reading time of words / 120 + lines / 15 minutes;
* each session's line "Reading time ... min; run time ... s (...)." (in Chinese "阅读时间 ... min；运行时间 ...
  s（...）。"), for the notebooks its heading names;
* the "read before class" column of section 2's term table (the reading minutes of the session's notebooks), and the
  sentence that adds them up over the term and per week.

Both guides (docs/instructor_guide.md and its Chinese edition) are rewritten the same way; the sizes are the English
notebooks'. ``tests/test_guide_numbers.py`` fails while a guide disagrees with the notebooks.

    python -m tools.guide_numbers            # print the table
    python -m tools.guide_numbers --write    # rewrite both guides
    python -m tools.guide_numbers --check    # exit 1, naming each stale place
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass

from tools.course_notebooks import ROOT, notebook_paths

GUIDES = {"en": ROOT / "docs" / "instructor_guide.md", "zh": ROOT / "docs" / "instructor_guide.zh-CN.md"}
RESULTS = ROOT / "benchmarks" / "results.json"
WORDS_PER_MINUTE, LINES_PER_MINUTE = 120, 15
TABLE_START, TABLE_END = "<!-- notebook-sizes -->", "<!-- /notebook-sizes -->"
HEADERS = {
    "en": ("notebook", "run time (s)", "words of prose", "lines of code", "reading time (min)", "all"),
    "zh": ("笔记本", "运行时间 (s)", "正文词数", "代码行数", "阅读时间 (min)", "全部"),
}
# "### Session 3 (week 2): notebooks 03 and 04" / "### 第 3 次课（第 2 周）：笔记本 03 和 04"
SESSION_HEADING = re.compile(
    r"^### (?:Session (\d+) \(week \d+\)|第 (\d+) 次课（第 \d+ 周）)[:：]\s*(?:notebooks?|笔记本)\s+(.+)$"
)
NOTEBOOK_NUMBER = re.compile(r"\b(\d\d)\b")
SESSION_LINE = {
    "en": re.compile(r"^Reading time \d+ min; run time [^(]*\([^)]*\)\."),
    "zh": re.compile(r"^阅读时间 \d+ min；运行时间 [^（]*（[^）]*）。"),
}
# a row of section 2's term table: | week | session | notebooks | read before class | ...
TERM_ROW = re.compile(r"^\| (\d+) \| (\d+) \| ([\d, ]+) \| (\d+) min \|")
TERM_TOTAL = {
    "en": re.compile(r"\(\d[\d,]*\s+minutes\s+over\s+the\s+term;\s+per\s+week\s+[\d,\sand]+?\s+minutes\)"),
    "zh": re.compile(r"（整个学期共 \d[\d,]* 分钟；每周分别为 [\d、和 ]+ 分钟）"),
}


@dataclass(frozen=True)
class NotebookSize:
    """One notebook's size and times: ``seconds`` is None when the benchmark has no run of it."""

    name: str
    words: int
    lines: int
    seconds: float | None

    @property
    def reading_minutes(self) -> float:
        return self.words / WORDS_PER_MINUTE + self.lines / LINES_PER_MINUTE


def notebook_sizes() -> dict[str, NotebookSize]:
    """Every English notebook's size, by its two-digit number ("03"), with its run time from benchmark section 7."""
    times = {}
    if RESULTS.exists():
        rows = json.loads(RESULTS.read_text(encoding="utf-8"))["notebooks"]
        times = {row["notebook"]: row["seconds"] for row in rows}
    sizes = {}
    for path in notebook_paths():
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        words = sum(len("".join(c["source"]).split()) for c in cells if c["cell_type"] == "markdown")
        lines = sum(
            1 for c in cells if c["cell_type"] == "code" for line in "".join(c["source"]).splitlines() if line.strip()
        )
        sizes[path.name[:2]] = NotebookSize(path.name, words, lines, times.get(path.name))
    return sizes


def _seconds(size: NotebookSize) -> str:
    return "-" if size.seconds is None else f"{size.seconds:.1f}"


def size_table(language: str, sizes: dict[str, NotebookSize]) -> str:
    """Section 1's table in ``language`` ("en" or "zh"), with a last row of totals."""
    if language not in HEADERS:
        raise ValueError(f"language must be one of {sorted(HEADERS)}, got {language!r}")
    *columns, total_label = HEADERS[language]
    rows = ["| " + " | ".join(columns) + " |", "|---|---|---|---|---|"]
    for size in sizes.values():
        rows.append(
            f"| {size.name} | {_seconds(size)} | {size.words:,} | {size.lines:,} | {round(size.reading_minutes)} |"
        )
    timed = [s.seconds for s in sizes.values() if s.seconds is not None]
    total_seconds = f"{sum(timed):.1f}" if len(timed) == len(sizes) else "-"
    words, lines = sum(s.words for s in sizes.values()), sum(s.lines for s in sizes.values())
    reading = sum(round(s.reading_minutes) for s in sizes.values())
    rows.append(f"| {total_label} | {total_seconds} | {words:,} | {lines:,} | {reading:,} |")
    return "\n".join(rows)


def session_line(language: str, numbers: list[str], sizes: dict[str, NotebookSize]) -> str:
    """The reading and run time of a session's notebooks, as its line in the guide."""
    missing = [n for n in numbers if n not in sizes]
    if missing:
        raise ValueError(f"the guide names notebooks {missing}, which do not exist")
    minutes = sum(round(sizes[n].reading_minutes) for n in numbers)
    seconds = " + ".join(f"{_seconds(sizes[n])} s" for n in numbers)
    if language == "en":
        return f"Reading time {minutes} min; run time {seconds} (benchmark section 7; see section 1)."
    return f"阅读时间 {minutes} min；运行时间 {seconds}（基准测试第 7 节；见第 1 节）。"


def session_notebooks(text: str) -> dict[str, list[str]]:
    """Session number -> the two-digit numbers of the notebooks its heading names."""
    sessions = {}
    for line in text.splitlines():
        match = SESSION_HEADING.match(line)
        if match:
            number = match.group(1) or match.group(2)
            sessions[number] = NOTEBOOK_NUMBER.findall(match.group(3).split(",")[0].split("，")[0])
    return sessions


def regenerate(language: str, text: str, sizes: dict[str, NotebookSize]) -> str:
    """``text`` (a guide) with its generated numbers rewritten from ``sizes``."""
    start, end = text.find(TABLE_START), text.find(TABLE_END)
    if start < 0 or end < start:
        raise ValueError(f"the {language} guide has no {TABLE_START} ... {TABLE_END} block")
    text = text[: start + len(TABLE_START)] + "\n" + size_table(language, sizes) + "\n" + text[end:]
    sessions = session_notebooks(text)
    lines, current, weekly = text.split("\n"), None, {}
    for i, line in enumerate(lines):
        heading = SESSION_HEADING.match(line)
        if heading:
            current = heading.group(1) or heading.group(2)
        elif current is not None and SESSION_LINE[language].match(line):
            lines[i] = SESSION_LINE[language].sub(session_line(language, sessions[current], sizes), line, count=1)
            current = None
        row = TERM_ROW.match(line)
        if row and row.group(2) in sessions:
            minutes = sum(round(sizes[n].reading_minutes) for n in sessions[row.group(2)])
            lines[i] = line.replace(f" {row.group(4)} min |", f" {minutes} min |", 1)
            weekly[int(row.group(1))] = weekly.get(int(row.group(1)), 0) + minutes
    text = "\n".join(lines)
    if weekly:
        per_week = [str(weekly[week]) for week in sorted(weekly)]
        total = sum(weekly.values())
        if language == "en":
            said = f"({total:,} minutes over the term; per week {', '.join(per_week[:-1])} and {per_week[-1]} minutes)"
        else:
            said = f"（整个学期共 {total:,} 分钟；每周分别为 {'、'.join(per_week[:-1])} 和 {per_week[-1]} 分钟）"
        text = TERM_TOTAL[language].sub(said, text, count=1)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite both guides")
    parser.add_argument("--check", action="store_true", help="exit 1 if a guide is stale")
    args = parser.parse_args()
    sizes = notebook_sizes()
    if not (args.write or args.check):
        print(size_table("en", sizes))
        return 0
    stale = []
    for language, path in GUIDES.items():
        text = path.read_text(encoding="utf-8")
        new = regenerate(language, text, sizes)
        if new != text:
            stale.append(path.relative_to(ROOT))
            if args.write:
                path.write_text(new, encoding="utf-8")
    if args.check and stale:
        print("stale: " + ", ".join(map(str, stale)) + " (python -m tools.guide_numbers --write)")
        return 1
    for path in stale if args.write else []:
        print(f"rewrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The instructor guide's numbers that come from the notebooks, generated or checked so that they cannot drift.

Generated (``--write`` rewrites both guides, ``--check`` names each stale place):

* the table of section 1 (between ``<!-- notebook-sizes -->`` and ``<!-- /notebook-sizes -->``): each notebook's run
  time (benchmark section 7, ``python -m benchmarks.run --only 7``, stored in benchmarks/results.json), its words of
  prose, its non-blank lines of code, and a reading time of words / 120 + lines / 15 minutes; in the Chinese guide,
  the Chinese notebook's characters of prose (:func:`prose_units`) and characters / 250 + lines / 15 minutes;
* each session's line "Reading time ... min; run time ... s (...)." (in Chinese "阅读时间 ... min；运行时间 ...
  s（...）。"), for the notebooks its heading names, and for the notebooks that print their training runs
  (:data:`RUN_LINES`) the line "Training in the run shown: ..." ("现场训练（本次运行）：...") read from their
  stored outputs;
* the "read before class" column of section 2's term table (the reading minutes of the session's notebooks), and the
  sentence that adds them up over the term and per week;
* the notebooks that take longest to run, named in section 2 (:data:`LONGEST`), and the reading minutes of the
  six-week plan's merged sessions (:data:`MERGED_READING`);
* the six-week plan's table (between ``<!-- six-week-plan -->`` and ``<!-- /six-week-plan -->``): each week's
  reading minutes and run time from its notebooks ("-": none), and its workload in hours, reading + class + assignment
  work (the last two are the plan's inputs, written in the row); and the sentence under it, which adds the weeks up,
  also with the reading at :data:`SLOW_READING` times the table's.

Checked (``--check`` and tests/test_guide_numbers.py):

* :data:`QUOTES`: sentences of the guides that quote a notebook's printed output, each with the lines it quotes,
  which must be among that notebook's stored outputs;
* every demo (``**Demo** 09 § *heading*, cell `first line```) names a code cell that sits under that heading, and
  the Chinese guide's Chinese heading beside it is a heading of the Chinese notebook;
* :func:`settings_problems`: the slide limits the guides state are tools/slides.py's, and the projector setting the
  lab kit pages (docs/lab_kit.md and its Chinese edition) state is transformer_course/viz.py's;
* every session sheet the six-week plan teaches has its line "In the six-week plan" (:data:`SIX_WEEK_SESSIONS`).

Both guides (docs/instructor_guide.md and its Chinese edition) are rewritten the same way; the English guide's sizes
are the English notebooks', the Chinese guide's the Chinese notebooks' (the run times are the English notebooks' for
both: the same programs).

    python -m tools.guide_numbers            # print the table
    python -m tools.guide_numbers --write    # rewrite both guides
    python -m tools.guide_numbers --check    # exit 1, naming each stale place
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import dataclass
from pathlib import Path

from tools.course_notebooks import NOTEBOOKS, ROOT, notebook_paths

GUIDES = {"en": ROOT / "docs" / "instructor_guide.md", "zh": ROOT / "docs" / "instructor_guide.zh-CN.md"}
LAB_KITS = {"en": ROOT / "docs" / "lab_kit.md", "zh": ROOT / "docs" / "lab_kit.zh-CN.md"}
RESULTS = ROOT / "benchmarks" / "results.json"
WORDS_PER_MINUTE, LINES_PER_MINUTE = 120, 15
# Chinese prose: characters (and English words or numbers in it, one each) per minute; the guide says why
CHARACTERS_PER_MINUTE = 250
PER_MINUTE = {"en": WORDS_PER_MINUTE, "zh": CHARACTERS_PER_MINUTE}
CJK_OR_WORD = re.compile(r"[\u4e00-\u9fff]|[A-Za-z0-9_]+")
TABLE_START, TABLE_END = "<!-- notebook-sizes -->", "<!-- /notebook-sizes -->"
SIX_START, SIX_END = "<!-- six-week-plan -->", "<!-- /six-week-plan -->"
HEADERS = {
    "en": ("notebook", "run time (s)", "words of prose", "lines of code", "reading time (min)", "all"),
    "zh": ("笔记本", "运行时间 (s)", "正文字数", "代码行数", "阅读时间 (min)", "全部"),
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
TRAINING_LINE = {
    "en": re.compile(r"^Training in the run shown: .*$"),
    "zh": re.compile(r"^现场训练（本次运行）：.*$"),
}
# a row of section 2's term table: | week | session | notebooks | read before class | ...
TERM_ROW = re.compile(r"^\| (\d+) \| (\d+) \| ([\d, ]+) \| (\d+) min \|")
TERM_TOTAL = {
    "en": re.compile(r"\(\d[\d,]*\s+minutes\s+over\s+the\s+term;\s+per\s+week\s+[\d,\sand]+?\s+minutes\)"),
    "zh": re.compile(r"（整个学期共 \d[\d,]* 分钟；每周分别为 [\d、和 ]+ 分钟）"),
}
# The notebooks with the longest run times, named in section 2 in that order.
LONGEST = 4
LONGEST_SAID = {
    "en": re.compile(r"(The four notebooks that take longest to run \()[^)]*(\))"),
    "zh": re.compile(r"(运行时间最长的四个笔记本（)[^）]*(）)"),
}
# A row of the six-week table: | week | sessions | notebooks | reading (min) | run time (s) | class (h) |
# assignment work (h) | workload (h) | ... ; "optional" rows have "-" for the three hour columns.
SIX_ROW = re.compile(
    r"^\| (?P<week>\d+|optional|选读) \| (?P<sessions>[^|]+?) \| (?P<notebooks>\d\d(?:, \d\d)*|-) \| "
    r"[\d,]+ \| [\d.]+ \| (?P<cls>[\d.]+|-) \| (?P<work>[\d.]+|-) \| (?P<hours>[\d.]+|-) \|(?P<rest>.*)$"
)
# Reading at this many times the table's speed, for students who read code slowly: the sentence under the six-week
# table gives the totals both ways.
SLOW_READING = 1.5
# the sentence under the six-week table that sums it up (it may be wrapped: any run of white space matches a space)
SIX_SAID = {
    language: re.compile(pattern.replace(" ", r"\s+"))
    for language, pattern in {
        "en": r"About \d+ hours over the six weeks, \d+ a week on average; the heaviest are week \d+ \([\d.]+ hours\) "
        r"and week \d+ \([\d.]+ hours\)\. With the reading at [\d.]+ times the table's, about \d+ hours, \d+ a "
        r"week, and [\d.]+ in week \d+",
        "zh": r"六周共约 \d+ 小时，平均每周 \d+ 小时；最重的是第 \d+ 周（[\d.]+ 小时）和第 \d+ 周（[\d.]+ 小时）。"
        r"阅读时间按表中的 [\d.]+ 倍计算，则共约 \d+ 小时，平均每周 \d+ 小时，第 \d+ 周为 [\d.]+ 小时",
    }.items()
}
# The full term's sessions the six-week plan teaches: each sheet says what changes there ("In the six-week plan").
SIX_WEEK_SESSIONS = ("1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "13")
SIX_WEEK_LINE = {"en": "*In the six-week plan*", "zh": "*六周计划中*"}
SIX_TOTAL = re.compile(
    r"^\| (?P<label>all|合计) \| (?P<sessions>\d+) \| [^|]+ \| [\d,]+ \| [\d.]+ \| "
    r"[\d.]+ \| [\d.]+ \| [\d.]+ \|(?P<rest>.*)$"
)
SIX_NOTEBOOKS_WORD = {"en": "notebooks", "zh": "个笔记本"}
# The lines of stored output in which a notebook reports its training runs: name, steps (if printed), seconds.
RUN_LINES = {
    "15": re.compile(r"^(?P<name>llama|gpt2|lstm): (?P<steps>\d+) steps in (?P<seconds>[\d.]+) s\b", re.MULTILINE),
    "16": re.compile(r"^(?P<name>[\w ,]+): (?P<steps>\d+) steps in (?P<seconds>[\d.]+) s\b", re.MULTILINE),
    "17": re.compile(r"^(?P<name>[^:\n]+): held-out new text .*; (?P<seconds>[\d.]+) s of training$", re.MULTILINE),
}


@dataclass(frozen=True)
class NotebookSize:
    """One notebook's size and times: ``seconds`` is None when the benchmark has no run of it."""

    name: str
    words: int  # of prose: English words, or in a Chinese notebook its characters (prose_units)
    lines: int
    seconds: float | None
    per_minute: int = WORDS_PER_MINUTE  # the reading rate of ``words``

    @property
    def reading_minutes(self) -> float:
        return self.words / self.per_minute + self.lines / LINES_PER_MINUTE


@dataclass(frozen=True)
class Quote:
    """A place where the guides quote a notebook: ``outputs`` must be among notebook ``notebook``'s stored outputs,
    and the English guide must contain ``en``, the Chinese guide ``zh`` (None: the Chinese guide does not quote it)."""

    notebook: str
    outputs: tuple[str, ...]
    en: str
    zh: str | None


QUOTES = (
    Quote(  # session 1's demo of 01: the counts are checked, the timings only shown
        "01",
        (
            "  1024   134,217,728   2,415,919,104          18.00",
            "seen on this run: attention takes longer than the RNN at every n from 256 to 1024",
        ),
        "the notebook checks the counts and only shows its timings: in the run shown attention took longer than the "
        "RNN at every $n$ from 256 to 1024",
        "笔记本检查的是计数，计时只是展示出来：在本次运行中，从 256 到 1024 的每个 $n$ 上注意力都比 RNN 慢",
    ),
    Quote(  # session 1's demo and M1: hand-made attention in 00
        "00",
        ("weights of 'it' (row 7): [0.125, 0.125,", "weights of 'it' (row 7): [0.07, 0.51,"),
        "*it* puts 0.51 of its weight on *cat*",
        "*it* 把 0.51 的权重放在 *cat* 上",
    ),
    Quote(  # session 1's setup check
        "00",
        ("python >= 3.10 and torch >= 2.5: True",),
        "The environment cell must print `python >= 3.10 and torch >= 2.5: True`.",
        "环境检查单元必须打印 `python >= 3.10 and torch >= 2.5: True`。",
    ),
    Quote(  # session 7: what 09 trains live, section by section
        "09",
        (
            "copy task: 200 steps in",
            "date task: 400 steps in",
            "date task, 1 + 1 layers, batch 32, 400 steps",
            "full recipe (shipped): token accuracy",
        ),
        "section 9 trains one date model of 1 + 1 layers with batches of 32 for 400 steps",
        "第 9 节训练一个 1 + 1 层、批次大小 32 的日期模型，共 400 步",
    ),
    Quote(  # section 7.1: the 99% is the shipped model's, checked in 09 section 10
        "09",
        (
            "holds: the full recipe's model is above 99% exact match on 2000 held-out dates",
            "holds: the live run is more than 10 points behind it",
        ),
        "09 checks, in section 10, that the shipped model is above 99% exact match on 2000 held-out dates, and that "
        "the live run of section 9 is more than 10 points behind it",
        "09 在第 10 节检查：随课程包发布的模型在 2000 个留出日期上的精确匹配率高于 99%，"
        "而第 9 节的现场运行落后它 10 个百分点以上",
    ),
    Quote(  # D7: the recipes' exact matches, as 09 section 11 checks them
        "09",
        ("holds: the two recipes' mean exact matches are within 15 points of each other",),
        "the two recipes' mean exact matches are within 15 points of each other (checked)",
        "两种方案的平均精确匹配率相差不到 15 个百分点（已检查）",
    ),
    Quote(  # session 7's demo of 09 section 11: no clear gain, inside the seed spread
        "09",
        ("paper's mean minus course's mean: +0.0088; the larger seed spread: 0.0720",),
        "in the run shown the paper's recipe is 0.9 points ahead (its mean minus the course's, +0.0088), less than the "
        "spread between two seeds of one recipe (0.0720",
        "在本次运行中，论文方案领先 0.9 个百分点（它的平均值减去课程方案的平均值，+0.0088），"
        "小于同一方案两个随机种子之间的差距（0.0720",
    ),
    Quote(  # session 7's demo of label smoothing
        "09",
        ("loss by hand 4.245 = F.cross_entropy 4.245; the eps/(V-1) version gives 4.257",),
        "give different losses for the same logits (4.245 and 4.257)",
        "给出不同的损失（loss）（4.245 和 4.257）",
    ),
    Quote(  # A4's brief: the shipped date model's beam and greedy outputs
        "10",
        ("exact match: greedy 298/300, beam 298/300; the outputs differ in 0",),
        'prints "the outputs differ in 0", with exact match 298 of 300 for both',
        "打印出 “the outputs differ in 0”，两者的精确匹配都是 300 个中的 298 个",
    ),
    Quote(  # section 7.2: the line 14 prints
        "14",
        ("holds: every number of our six vectors is within 1e-6 of the stored reference vectors (max |diff| < 1e-6)",),
        "prints `holds: every number of our six vectors is within 1e-6 of the stored reference vectors "
        "(max |diff| < 1e-6)`",
        "打印 `holds: every number of our six vectors is within 1e-6 of the stored reference vectors "
        "(max |diff| < 1e-6)`",
    ),
    Quote(  # section 7.3: the shipped GPT against the live run
        "15",
        (
            "shipped model: 1.562 bits/character, trained for 3000 steps in 27 minutes",
            "live model of section 5: 2.271 bits/character",
        ),
        "it took 27 minutes and reached 1.562 bits per character on the held-out text, against 2.271 for the live "
        "LLaMA-style run of 15's section 5",
        "训练花了 27 分钟，在留出文本上达到每字符 1.562 比特，而 15 第 5 节现场训练的 LLaMA 式模型为 2.271",
    ),
    Quote(  # the mini-project's baseline: 15's live LLaMA-style run
        "15",
        ("llama   3,924 million FLOPs per step -> 500 steps", "llama: 500 steps in"),
        "the LLaMA-style run of 15's section 5 (500 steps of 12 windows of 64 tokens)",
        "15 第 5 节的 LLaMA 式模型运行（500 步，每步 12 个 64 词元的窗口）",
    ),
)


def prose_units(markdown: str, language: str = "en") -> int:
    """How much prose ``markdown`` holds: its words (English), or its Chinese characters plus each English word or
    number among them (Chinese)."""
    if language == "zh":
        return len(CJK_OR_WORD.findall(markdown))
    return len(markdown.split())


def notebook_sizes(language: str = "en") -> dict[str, NotebookSize]:
    """Every notebook's size, by its two-digit number ("03"), with its run time from benchmark section 7: the English
    notebooks', or with ``language`` "zh" the Chinese notebooks' (notebooks/zh/) read at
    :data:`CHARACTERS_PER_MINUTE`."""
    if language not in PER_MINUTE:
        raise ValueError(f"language must be one of {sorted(PER_MINUTE)}, got {language!r}")
    times = {}
    if RESULTS.exists():
        rows = json.loads(RESULTS.read_text(encoding="utf-8"))["notebooks"]
        times = {row["notebook"]: row["seconds"] for row in rows}
    sizes = {}
    for english in notebook_paths():
        path = english if language == "en" else english.parent / language / english.name
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        words = sum(prose_units("".join(c["source"]), language) for c in cells if c["cell_type"] == "markdown")
        lines = sum(
            1 for c in cells if c["cell_type"] == "code" for line in "".join(c["source"]).splitlines() if line.strip()
        )
        sizes[path.name[:2]] = NotebookSize(path.name, words, lines, times.get(path.name), PER_MINUTE[language])
    return sizes


def _notebook_path(number: str, folder: Path = NOTEBOOKS) -> Path:
    matches = sorted(folder.glob(f"{number}_*.ipynb"))
    if not matches:
        raise ValueError(f"no notebook {number!r} in {folder}")
    return matches[0]


def stored_outputs(number: str, folder: Path = NOTEBOOKS) -> str:
    """The text of every stored output of notebook ``number`` ("09"): streams and plain-text results, in order."""
    cells = json.loads(_notebook_path(number, folder).read_text(encoding="utf-8"))["cells"]
    texts = []
    for cell in cells:
        for output in cell.get("outputs", []):
            if "text" in output:
                texts.append("".join(output["text"]))
            elif "text/plain" in output.get("data", {}):
                texts.append("".join(output["data"]["text/plain"]))
    return "\n".join(texts)


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


def _check_numbers(numbers: list[str], sizes: dict[str, NotebookSize]) -> None:
    missing = [n for n in numbers if n not in sizes]
    if missing:
        raise ValueError(f"the guide names notebooks {missing}, which do not exist")


def session_line(language: str, numbers: list[str], sizes: dict[str, NotebookSize]) -> str:
    """The reading and run time of a session's notebooks, as its line in the guide."""
    _check_numbers(numbers, sizes)
    minutes = sum(round(sizes[n].reading_minutes) for n in numbers)
    seconds = " + ".join(f"{_seconds(sizes[n])} s" for n in numbers)
    if language == "en":
        return f"Reading time {minutes} min; run time {seconds} (benchmark section 7; see section 1)."
    return f"阅读时间 {minutes} min；运行时间 {seconds}（基准测试第 7 节；见第 1 节）。"


def training_runs(number: str, folder: Path = NOTEBOOKS) -> list[dict[str, str]]:
    """The training runs notebook ``number`` reports in its stored outputs: name, steps (or None) and seconds."""
    if number not in RUN_LINES:
        raise ValueError(f"notebook {number!r} has no pattern for its training runs; have {sorted(RUN_LINES)}")
    runs = [m.groupdict() for m in RUN_LINES[number].finditer(stored_outputs(number, folder))]
    if not runs:
        raise ValueError(f"notebook {number}'s stored outputs report no training run")
    return runs


def training_line(language: str, numbers: list[str], folder: Path = NOTEBOOKS) -> str:
    """The guide's line on a session's training runs, in the run shown (the stored outputs)."""
    parts = []
    for number in numbers:
        for run in training_runs(number, folder):
            if language == "en":
                steps = f"{run['steps']} steps, " if run.get("steps") else ""
            else:
                steps = f"{run['steps']} 步，" if run.get("steps") else ""
            parts.append(f"{run['name']}: {steps}{run['seconds']} s")
    if language == "en":
        return f"Training in the run shown: {'; '.join(parts)} (the notebook's stored outputs)."
    return f"现场训练（本次运行）：{'；'.join(parts)}（笔记本存储的输出）。"


def longest_running(sizes: dict[str, NotebookSize], count: int = LONGEST) -> list[str]:
    """The ``count`` notebooks with the longest run times, longest first."""
    timed = [n for n, s in sizes.items() if s.seconds is not None]
    return sorted(timed, key=lambda n: -sizes[n].seconds)[:count]


def _listed(language: str, items: list[str]) -> str:
    if language == "en":
        return f"{', '.join(items[:-1])} and {items[-1]}" if len(items) > 1 else items[0]
    return f"{'、'.join(items[:-1])} 和 {items[-1]}" if len(items) > 1 else items[0]


def _six_numbers(match: re.Match) -> list[str]:
    """The notebooks a row of the six-week table teaches ("-": none)."""
    return [] if match["notebooks"] == "-" else match["notebooks"].split(", ")


def six_week_row(match: re.Match, sizes: dict[str, NotebookSize]) -> tuple[str, float | None]:
    """One row of the six-week table with its generated columns, and its workload in hours (None: optional)."""
    numbers = _six_numbers(match)
    _check_numbers(numbers, sizes)
    reading = sum(round(sizes[n].reading_minutes) for n in numbers)
    seconds = sum(sizes[n].seconds or 0.0 for n in numbers)
    if match["cls"] == "-" or match["work"] == "-":
        workload, said = None, "-"
    else:
        workload = round(reading / 60 + float(match["cls"]) + float(match["work"]), 1)
        said = f"{workload:.1f}"
    row = (
        f"| {match['week']} | {match['sessions']} | {match['notebooks']} | {reading:,} | {seconds:.1f} | "
        f"{match['cls']} | {match['work']} | {said} |{match['rest']}"
    )
    return row, workload


def six_week_plan(language: str, block: str, sizes: dict[str, NotebookSize]) -> str:
    """The six-week table (``block``, the text between its markers) with its numbers regenerated; the "all" row
    adds up the weeks (not the optional rows), each column as shown."""
    lines, weeks = block.split("\n"), []
    for i, line in enumerate(lines):
        match = SIX_ROW.match(line)
        if match:
            lines[i], workload = six_week_row(match, sizes)
            if workload is not None:
                weeks.append((_six_numbers(match), float(match["cls"]), float(match["work"]), workload))
    for i, line in enumerate(lines):
        total = SIX_TOTAL.match(line)
        if total:
            if not weeks:
                raise ValueError("the six-week table has a total row but no week rows")
            numbers = [n for week in weeks for n in week[0]]
            reading = sum(round(sizes[n].reading_minutes) for n in numbers)
            seconds = sum(round(sum(sizes[n].seconds or 0.0 for n in week[0]), 1) for week in weeks)
            cls, work, hours = (sum(week[k] for week in weeks) for k in (1, 2, 3))
            lines[i] = (
                f"| {total['label']} | {total['sessions']} | {len(numbers)} {SIX_NOTEBOOKS_WORD[language]} | "
                f"{reading:,} | {seconds:.1f} | {cls:.1f} | {work:.1f} | {hours:.1f} |{total['rest']}"
            )
    return "\n".join(lines)


def six_week_summary(language: str, block: str, slow: float = SLOW_READING) -> str:
    """The sentence that sums up the six-week table ``block`` (already regenerated): total and mean hours, and the two
    heaviest weeks; then the total, the mean and the heaviest week again with the reading at ``slow`` times the
    table's minutes."""
    rows = [m for m in map(SIX_ROW.match, block.split("\n")) if m and m["hours"] != "-"]
    if len(rows) < 2:
        raise ValueError("the six-week table needs at least two weeks with a workload")
    hours = {int(m["week"]): float(m["hours"]) for m in rows}
    reading = {int(m["week"]): int(m.group(0).split(" | ")[3].replace(",", "")) / 60 for m in rows}
    slow_hours = {week: round(h + (slow - 1) * reading[week], 1) for week, h in hours.items()}
    total, (first, second) = sum(hours.values()), sorted(hours, key=lambda w: -hours[w])[:2]
    slow_total, heaviest = sum(slow_hours.values()), max(slow_hours, key=lambda w: slow_hours[w])
    if language == "en":
        return (
            f"About {total:.0f} hours over the six weeks, {total / len(hours):.0f} a week on average; the heaviest are "
            f"week {first} ({hours[first]:.1f} hours) and week {second} ({hours[second]:.1f} hours). With the reading "
            f"at {slow:g} times the table's, about {slow_total:.0f} hours, {slow_total / len(hours):.0f} a week, and "
            f"{slow_hours[heaviest]:.1f} in week {heaviest}"
        )
    return (
        f"六周共约 {total:.0f} 小时，平均每周 {total / len(hours):.0f} 小时；"
        f"最重的是第 {first} 周（{hours[first]:.1f} 小时）和第 {second} 周（{hours[second]:.1f} 小时）。"
        f"阅读时间按表中的 {slow:g} 倍计算，则共约 {slow_total:.0f} 小时，平均每周 {slow_total / len(hours):.0f} 小时，"
        f"第 {heaviest} 周为 {slow_hours[heaviest]:.1f} 小时"
    )


def session_notebooks(text: str) -> dict[str, list[str]]:
    """Session number -> the two-digit numbers of the notebooks its heading names."""
    sessions = {}
    for line in text.splitlines():
        match = SESSION_HEADING.match(line)
        if match:
            number = match.group(1) or match.group(2)
            sessions[number] = NOTEBOOK_NUMBER.findall(match.group(3).split(",")[0].split("，")[0])
    return sessions


def _between(text: str, start: str, end: str, language: str) -> tuple[int, int]:
    first, last = text.find(start), text.find(end)
    if first < 0 or last < first:
        raise ValueError(f"the {language} guide has no {start} ... {end} block")
    return first + len(start), last


def regenerate(language: str, text: str, sizes: dict[str, NotebookSize], folder: Path = NOTEBOOKS) -> str:
    """``text`` (a guide) with its generated numbers rewritten from ``sizes`` and the notebooks in ``folder``."""
    start, end = _between(text, TABLE_START, TABLE_END, language)
    text = text[:start] + "\n" + size_table(language, sizes) + "\n" + text[end:]
    if SIX_START in text:
        start, end = _between(text, SIX_START, SIX_END, language)
        block = six_week_plan(language, text[start:end], sizes)
        text = text[:start] + block + text[end:]
        if not SIX_SAID[language].search(text):
            raise ValueError(f"the {language} guide has a six-week table but not the sentence that sums it up")
        text = SIX_SAID[language].sub(lambda _: six_week_summary(language, block), text, count=1)
    sessions = session_notebooks(text)
    lines, current, weekly = text.split("\n"), None, {}
    for i, line in enumerate(lines):
        heading = SESSION_HEADING.match(line)
        if heading:
            current = heading.group(1) or heading.group(2)
        elif current is not None and SESSION_LINE[language].match(line):
            lines[i] = SESSION_LINE[language].sub(session_line(language, sessions[current], sizes), line, count=1)
        elif current is not None and TRAINING_LINE[language].match(line):
            lines[i] = training_line(language, sessions[current], folder)
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
    longest = _listed(language, longest_running(sizes))
    text = LONGEST_SAID[language].sub(lambda m: f"{m.group(1)}{longest}{m.group(2)}", text, count=1)
    return MERGED_READING[language].sub(lambda m: _merged_reading(m, sizes), text)


# the six-week plan's merged sessions: "notebooks 07 and 08, 121 minutes of reading" (Chinese: "课前阅读 121 分钟")
MERGED_READING = {
    "en": re.compile(r"(notebooks (\d\d) and (\d\d), )\d+( minutes of reading)"),
    "zh": re.compile(r"(笔记本 (\d\d) 和 (\d\d)，课前阅读 )\d+( 分钟)"),
}


def _merged_reading(match: re.Match, sizes: dict[str, NotebookSize]) -> str:
    minutes = sum(round(sizes[n].reading_minutes) for n in (match.group(2), match.group(3)))
    return f"{match.group(1)}{minutes}{match.group(4)}"


# "**Demo** 09 § *11. The paper's recipe, measured*, cell `seeds = (0, 1)`"; in the Chinese guide the English
# heading is followed by "（中文版：§ *中文标题*）"
DEMO = re.compile(r"\*\*(?:Demo|演示)\*\* ?(\d\d)")
DEMO_HEADING = re.compile(r"§ \*(.+?)\*(?=[,，:：(（ ]|$)")
DEMO_CELL = re.compile(r"(?:cell |单元格 |\(|（)`([^`]+)`")


def demo_references(text: str) -> list[tuple[str, str, str]]:
    """Every (notebook, section heading, quoted cell line) that a demo of the guide ``text`` names."""
    found = []
    for line in text.splitlines():
        marks = list(DEMO.finditer(line))
        for k, mark in enumerate(marks):
            segment = line[mark.end() : marks[k + 1].start() if k + 1 < len(marks) else len(line)]
            segment = re.sub(r"（中文版：§ \*.+?\*）", "", segment)
            headings = list(DEMO_HEADING.finditer(segment))
            for j, heading in enumerate(headings):
                part = segment[heading.end() : headings[j + 1].start() if j + 1 < len(headings) else len(segment)]
                found += [(mark.group(1), heading.group(1), cell) for cell in DEMO_CELL.findall(part)]
    return found


# "§ *Try it*（第 8 节中；中文版：§ *试一试*）": the Chinese notebook's heading, after the English one
CHINESE_HEADING = re.compile(r"§ \*(.+?)\*（(?:[^）]*；)?中文版：§ \*(.+?)\*）")


def chinese_heading_problems(text: str, folder: Path = NOTEBOOKS / "zh") -> list[str]:
    """The Chinese headings the guide ``text`` gives beside a demo's English one that the Chinese notebook lacks."""
    problems = []
    for line in text.splitlines():
        for mark in DEMO.finditer(line):
            rest = line[mark.end() :]
            following = DEMO.search(rest)
            for english, chinese in CHINESE_HEADING.findall(rest[: following.start() if following else len(rest)]):
                cells = json.loads(_notebook_path(mark.group(1), folder).read_text(encoding="utf-8"))["cells"]
                headings = {
                    re.sub(r"^#{1,6}\s+", "", ln).strip()
                    for c in cells
                    if c["cell_type"] == "markdown"
                    for ln in "".join(c["source"]).splitlines()
                    if ln.startswith("#")
                }
                if chinese not in headings:
                    problems.append(
                        f"demo {mark.group(1)} § {english!r}: the Chinese notebook has no heading {chinese!r}"
                    )
    return problems


def _code_cells_with_headings(number: str, folder: Path = NOTEBOOKS) -> list[tuple[str, list[str]]]:
    """Each code cell's source with the headings it sits under (the latest heading of each level above it)."""
    cells = json.loads(_notebook_path(number, folder).read_text(encoding="utf-8"))["cells"]
    chain: dict[int, str] = {}
    found = []
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            for line in source.splitlines():
                match = re.match(r"^(#{1,6})\s+(.*?)\s*$", line)
                if match:
                    level = len(match.group(1))
                    chain = {k: v for k, v in chain.items() if k < level} | {level: match.group(2)}
        elif cell["cell_type"] == "code":
            found.append((source, list(chain.values())))
    return found


def demo_problems(text: str, folder: Path = NOTEBOOKS) -> list[str]:
    """The demos of ``text`` whose quoted cell line is not the start of a line of a code cell under the quoted
    heading of that notebook."""
    problems = []
    for number, heading, quoted in demo_references(text):
        cells = _code_cells_with_headings(number, folder)
        holding = [heads for source, heads in cells if any(ln.startswith(quoted) for ln in source.splitlines())]
        if not holding:
            problems.append(f"demo {number} § {heading!r}: no code cell has a line starting {quoted!r}")
        elif not any(heading in heads for heads in holding):
            under = "; ".join(" > ".join(heads) for heads in holding)
            problems.append(f"demo {number} § {heading!r}: the cell {quoted!r} sits under {under!r}")
    return problems


def quote_problems(language: str, text: str, folder: Path = NOTEBOOKS, quotes: tuple[Quote, ...] = QUOTES) -> list[str]:
    """The ``quotes`` that the guide ``text`` lacks, or whose quoted output the notebook lacks."""
    problems = []
    for quote in quotes:
        said = quote.en if language == "en" else quote.zh
        if said is not None and " ".join(said.split()) not in " ".join(text.split()):
            problems.append(f"the {language} guide no longer says {said!r}")
        outputs = stored_outputs(quote.notebook, folder)
        problems += [f"notebook {quote.notebook} no longer prints {o!r}" for o in quote.outputs if o not in outputs]
    return problems


# The slide limits as the guides state them, and the projector setting as the lab kit pages state it.
SLIDE_LIMITS_SAID = {
    "en": re.compile(r"No slide holds more than (\d+) words of prose or (\d+) lines"),
    "zh": re.compile(r"每张幻灯片的正文不超过 (\d+) 个词[^，]*，高度不超过 (\d+) 行"),
}
PROJECTOR_SAID = {
    "en": re.compile(r"figures at (\d+) dpi instead of (\d+), with no text smaller than (\d+) points"),
    "zh": re.compile(r"图以 (\d+) dpi 显示（而不是 (\d+) dpi），所有文字不小于 (\d+) 磅"),
}


def settings_problems(language: str, guide: str, lab_kit: str) -> list[str]:
    """Where the guide ``guide`` states other slide limits than tools/slides.py's, or the lab kit page ``lab_kit``
    another projector setting than transformer_course/viz.py's (or either no longer states them)."""
    from tools import slides
    from transformer_course import viz

    problems = []
    said = SLIDE_LIMITS_SAID[language].search(" ".join(guide.split()))
    if said is None:
        problems.append(f"the {language} guide no longer states the slide limits")
    elif (int(said[1]), int(said[2])) != (slides.MAX_SLIDE_WORDS, slides.MAX_SLIDE_LINES):
        problems.append(
            f"the {language} guide says {said[1]} words and {said[2]} lines a slide; tools/slides.py has "
            f"{slides.MAX_SLIDE_WORDS} and {slides.MAX_SLIDE_LINES}"
        )
    said = PROJECTOR_SAID[language].search(" ".join(lab_kit.split()))
    if said is None:
        problems.append(f"the {language} lab kit page no longer states the projector setting")
    elif (int(said[1]), int(said[3])) != (viz.PROJECTOR_DPI, viz.PROJECTOR_MIN_FONT):
        problems.append(
            f"the {language} lab kit page says {said[1]} dpi and {said[3]} points; transformer_course/viz.py has "
            f"{viz.PROJECTOR_DPI} and {viz.PROJECTOR_MIN_FONT:g}"
        )
    notebook_dpi = re.search(r'"figure\.dpi": PROJECTOR_DPI if projector else (\d+)', Path(viz.__file__).read_text())
    if said is not None and (notebook_dpi is None or notebook_dpi[1] != said[2]):
        problems.append(f"the {language} lab kit page says the notebook style draws at {said[2]} dpi; viz.py does not")
    return problems


def six_week_line_problems(language: str, text: str) -> list[str]:
    """The session sheets of :data:`SIX_WEEK_SESSIONS` in the guide ``text`` without their six-week line."""
    sheets, current = {}, None
    for line in text.splitlines():
        heading = SESSION_HEADING.match(line)
        if heading:
            current = heading.group(1) or heading.group(2)
            sheets[current] = ""
        elif line.startswith("#"):
            current = None
        elif current is not None:
            sheets[current] += line + "\n"
    return [
        f"the {language} guide's session {number} has no line {SIX_WEEK_LINE[language]}"
        for number in SIX_WEEK_SESSIONS
        if SIX_WEEK_LINE[language] not in sheets.get(number, "")
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite both guides")
    parser.add_argument("--check", action="store_true", help="exit 1 if a guide is stale or misquotes a notebook")
    args = parser.parse_args()
    if not (args.write or args.check):
        print(size_table("en", notebook_sizes("en")))
        return 0
    stale, problems = [], []
    for language, path in GUIDES.items():
        text = path.read_text(encoding="utf-8")
        new = regenerate(language, text, notebook_sizes(language))
        if new != text:
            stale.append(path.relative_to(ROOT))
            if args.write:
                path.write_text(new, encoding="utf-8")
        problems += quote_problems(language, new) + demo_problems(new) + six_week_line_problems(language, new)
        problems += settings_problems(language, new, LAB_KITS[language].read_text(encoding="utf-8"))
        problems += chinese_heading_problems(new) if language == "zh" else []
    for problem in problems:
        print(problem)
    if args.check and (stale or problems):
        if stale:
            print("stale: " + ", ".join(map(str, stale)) + " (python -m tools.guide_numbers --write)")
        return 1
    for path in stale if args.write else []:
        print(f"rewrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

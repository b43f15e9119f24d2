"""The results table: one row per student, one column per exercise (the checker's verdict), the points nbgrader's
gradebook gives, and the flags (:mod:`tools.grader.flags`). Written as ``results.csv`` and printed; the long form,
with the checker's line behind each verdict, as ``details.csv``."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from tools.grader.flags import FLAG_KINDS, Flag
from tools.grader.verdicts import Verdict


@dataclass
class Row:
    """One student's results over the graded assignments."""

    student: str
    verdicts: dict[str, Verdict] = field(default_factory=dict)  # exercise number -> verdict
    assignments: dict[str, str] = field(default_factory=dict)  # exercise number -> assignment
    points: float = 0.0
    max_points: float = 0.0
    flags: list[Flag] = field(default_factory=list)

    def flag_text(self, kind: str) -> str:
        return "; ".join(str(f) for f in self.flags if f.kind == kind)


def number_key(number: str) -> tuple[int, ...]:
    return tuple(int(part) for part in number.split("."))


def header(numbers: list[str]) -> list[str]:
    return ["student", *numbers, "points", "max_points", *FLAG_KINDS]


def table_rows(rows: list[Row], numbers: list[str]) -> list[list[str]]:
    """The results as rows of strings, header first."""
    out = [header(numbers)]
    for row in rows:
        verdicts = [row.verdicts[n].verdict if n in row.verdicts else "missing" for n in numbers]
        out.append(
            [row.student, *verdicts, f"{row.points:g}", f"{row.max_points:g}", *(row.flag_text(k) for k in FLAG_KINDS)]
        )
    return out


def write_csv(rows: list[Row], numbers: list[str], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(table_rows(rows, numbers))


def write_details(rows: list[Row], numbers: list[str], path: Path) -> None:
    """One line per student and exercise: the verdict and the checker's line (or the error) behind it."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", "assignment", "exercise", "verdict", "detail"])
        for row in rows:
            for number in numbers:
                verdict = row.verdicts.get(number, Verdict("missing", "no submission"))
                writer.writerow([row.student, row.assignments.get(number, ""), number, verdict.verdict, verdict.detail])


def format_table(rows: list[Row], numbers: list[str], width: int = 48) -> str:
    """The results as a plain-text table; a flag column longer than ``width`` characters is cut with "..."."""
    cells = [[c if len(c) <= width else c[: width - 3] + "..." for c in line] for line in table_rows(rows, numbers)]
    widths = [max(len(line[i]) for line in cells) for i in range(len(cells[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)

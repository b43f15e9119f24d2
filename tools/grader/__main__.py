"""The grader's command line (docs/grading.md is the teacher's how-to):

python -m tools.grader pin --ref v2026.12 [--repo URL|origin] [--out class] [--language en|zh|both] [00 01 ...]
python -m tools.grader release 04 06 --ref v2026.12 [--repo URL|origin] [--points 1] [--no-check] [--course grading]
                               [--language zh]
python -m tools.grader collect 04 inbox/ [--course grading] [--language zh]
python -m tools.grader grade [04 06] [--timeout 60] [--teacher-timeout 600] [--jobs 1] [--course grading]
                             [--language zh]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools.course_notebooks import notebook_paths
from tools.grader.assignment import LANGUAGES, assignment_id


def _assignment(name: str, language: str) -> str:
    """The assignment id of a course notebook given by number ("04") or name."""
    return assignment_id(notebook_paths([name])[0], language)


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--course", type=Path, default=Path("grading"), help="the nbgrader course directory")
    common.add_argument("--language", choices=LANGUAGES, default="en", help="zh: the Chinese edition's notebooks")
    parser = argparse.ArgumentParser(prog="python -m tools.grader", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    repo_help = "the GitHub repository to install from: https://github.com/<owner>/<name>, or origin (this clone's)"

    pin = commands.add_parser("pin", help="write a copy of the course notebooks pinned to a tag, for a class")
    pin.add_argument("notebooks", nargs="*", help='course notebooks by number ("04") or file name (default: all)')
    pin.add_argument("--ref", required=True, help="the git tag the notebooks install, e.g. v2026.12")
    pin.add_argument("--repo", help=repo_help + " (default: pyproject.toml's)")
    pin.add_argument("--out", type=Path, default=Path("class"), help="the folder of the copy (default: class)")
    pin.add_argument("--language", choices=("en", "zh", "both"), default="both", help="which edition (default both)")

    release = commands.add_parser("release", parents=[common], help="write the teacher's and the students' versions")
    release.add_argument("notebooks", nargs="+", help='course notebooks by number ("04") or file name')
    release.add_argument("--ref", required=True, help="the git tag the students' notebooks install, e.g. v2026.12")
    release.add_argument("--repo", help=repo_help + " (default: pyproject.toml's)")
    release.add_argument("--points", type=float, default=1.0, help="points of each exercise (default 1)")
    release.add_argument("--no-check", action="store_true", help="skip running the teacher's version first")

    collect = commands.add_parser("collect", parents=[common], help="copy <student>.ipynb files into nbgrader's layout")
    collect.add_argument("notebook", help="the assignment's course notebook, by number or name")
    collect.add_argument("folder", type=Path, help="the folder of <student>.ipynb files")

    grade = commands.add_parser("grade", parents=[common], help="autograde, flag, and write results.csv")
    grade.add_argument("notebooks", nargs="*", help="assignments by notebook number (default: all released)")
    grade.add_argument("--timeout", type=float, default=60.0, help="seconds for a notebook's learner cells in all")
    grade.add_argument("--teacher-timeout", type=float, default=600.0, help="seconds for each setup or context cell")
    grade.add_argument("--jobs", type=int, default=1, help="submissions graded at a time (default 1)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except ValueError as error:  # a wrong value given on the command line, or a file that is not what it should be
        parser.error(str(error))
        return 2


def _run(args: argparse.Namespace) -> int:
    if args.command == "pin":
        from tools.grader.lecture import pin_course, report
        from tools.grader.pinning import resolve_repo

        languages = ("en", "zh") if args.language == "both" else (args.language,)
        repo = resolve_repo(args.repo) if args.repo else None
        done = pin_course(args.ref, args.out, languages, args.notebooks or None, repo)
        print(report(done, args.ref, args.out))
        return 0
    root: Path = args.course
    if args.command == "release":
        from tools.grader.pinning import resolve_repo
        from tools.grader.release import release, report

        repo = resolve_repo(args.repo) if args.repo else None
        done = release(
            args.notebooks, args.ref, root, args.points, check=not args.no_check, language=args.language, repo_url=repo
        )
        print(report(done, args.ref, root, repo))
    elif args.command == "collect":
        from tools.grader.collect import collect

        assignment = _assignment(args.notebook, args.language)
        students = collect(args.folder, root, assignment)
        print(f"collected {len(students)} submissions of {assignment}: {', '.join(students)}")
    else:
        from tools.grader.grading import DETAILS, RESULTS, grade
        from tools.grader.results import format_table

        assignments = [_assignment(name, args.language) for name in args.notebooks] or None
        rows, numbers = grade(root, assignments, args.timeout, args.teacher_timeout, jobs=args.jobs)
        print(format_table(rows, numbers))
        print(f"\nwritten: {root / RESULTS} and {root / DETAILS} (the checker's line behind each verdict)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The classroom grader (tools/grader, docs/grading.md).

The unit tests run no notebook of the course (the release check's test runs two one-cell notebooks). The end-to-end
test releases notebook 04 as an nbgrader assignment pinned to a tag, writes seven synthetic submissions (right,
wrong, crashing, one that runs past a 15-second limit, one that calls the reference solutions, one that calls the
package function the exercise asks for, one that imports teacher material) as a flat folder of ``<student>.ipynb``
files, collects them, grades them with nbgrader's autograde two at a time (``jobs=2``), and compares the results table
with the expected one; one of them is then graded again in this process, as ``jobs=1`` does.
"""

from __future__ import annotations

import ast
import csv
from pathlib import Path

import nbformat
import pytest

from tools.course_notebooks import ROOT, colab_badge, colab_setup_block, notebook_paths, repository_url
from tools.grader import course, throughput
from tools.grader.assignment import Plan, build_source
from tools.grader.budget import KERNEL_START_ATTEMPTS, TimeBudget, budgeted_execute, is_learner_cell
from tools.grader.catalogue import all_checkers, find_exercises
from tools.grader.collect import collect
from tools.grader.flags import is_teacher_path, submission_flags
from tools.grader.forbidden import DROP_IN, FORBIDDEN, resolve
from tools.grader.grading import autograde, check_jobs, grade, points
from tools.grader.lecture import copy_folder, pin_course, pin_notebook
from tools.grader.pinning import (
    check_ref,
    check_repo_url,
    course_setup_block,
    github_url,
    pin_setup_cell,
    pinned_badge,
    pinned_setup_block,
)
from tools.grader.release import check_source, release
from tools.grader.results import format_table, table_rows
from tools.grader.slicing import cell_names, code_hints, needed_cells
from tools.grader.verdicts import Verdict, notebook_verdicts, verdict_of

NOTEBOOK = notebook_paths(["04"])[0]
ASSIGNMENT = NOTEBOOK.stem
REF = "v2026.12"
FORK = "https://github.com/a-teacher/transformer-course"


# ------------------------------------------------------------------------------------------------ the catalogue
def test_every_exercise_of_the_notebooks_is_found_once_and_has_a_forbidden_entry() -> None:
    found = [e.number for path in notebook_paths() for e in find_exercises(nbformat.read(path, as_version=4))]
    assert len(found) == len(set(found))
    assert set(found) == set(all_checkers()) == set(FORBIDDEN)


def test_reference_solutions_are_matched_by_name_and_by_docstring() -> None:
    checkers = all_checkers()
    assert checkers["4.1"].reference == "reference_attention"  # check_attention <-> reference_attention
    assert checkers["13.2"].reference == "reference_merge"  # "Reference solution of exercise 2" in module 13
    assert checkers["0.1"].reference is None


def test_every_forbidden_name_is_a_function_or_class_of_the_package() -> None:
    for number, names in FORBIDDEN.items():
        for dotted in names:
            found = resolve(dotted)
            assert callable(found), (number, dotted)
            assert found.__module__.startswith("transformer_course."), (number, dotted)
    with pytest.raises(ValueError, match="names nothing"):
        resolve("transformer_course.core.masks.no_such_mask")


@pytest.mark.parametrize("number", sorted(DROP_IN))
def test_a_drop_in_package_function_passes_its_exercise_checker(number: str, capsys) -> None:
    checker = all_checkers()[number]
    check = getattr(__import__(checker.module, fromlist=[checker.name]), checker.name)
    assert check(resolve(DROP_IN[number])) is True
    assert "correct" in capsys.readouterr().out


# -------------------------------------------------------------------------------------------------- the slicing
def test_cell_names_reads_only_what_comes_from_earlier_cells() -> None:
    names = cell_names("x += 1\ny = 2\nprint(y)\nW[0] = z\nmodel.eval()\nlst.append(3)\nfor i in range(3):\n    q = i")
    assert names.reads == {"x", "W", "z", "model", "lst"}
    assert names.binds == {"x", "y", "i", "q"}
    assert names.changes == {"W", "model", "lst"}
    assert cell_names("def f(a):\n    return a + g\n").reads == {"g"}  # a global read inside a function
    assert cell_names("print(model.encode(s))").changes == set()  # a call that returns something changes nothing


def test_needed_cells_take_the_last_binding_and_the_changes_after_it() -> None:
    sources = ["import torch", "w = 1", None, "w = torch.zeros(3)", "w[0] = 5", "v = 7", "check(w)"]
    assert needed_cells(sources, {6: set(), 0: set()}) == {0, 3, 4, 6}
    assert needed_cells(sources, {6: {"v"}}) == {0, 3, 4, 5, 6}
    hint = "    # e.g. w_q[features.index('a'), space.index('b')] = w_q.clone()"
    assert code_hints(hint) == {"w_q", "features", "space"}


def test_the_assignment_of_04_keeps_the_cells_its_exercises_use() -> None:
    notebook, plan = build_source(NOTEBOOK, REF)
    # 4.3's stub says `w_q[features.index("..."), space.index("...")]`: the cells that make `features` (with the
    # tokens and X of the worked example) and `space` (with W_Q, W_K, W_V) come along, and nothing else
    course_cells = nbformat.read(NOTEBOOK, as_version=4).cells
    makers = [
        i for i, c in enumerate(course_cells) if c.cell_type == "code" and "features" in cell_names(c.source).binds
    ]
    makers += [i for i, c in enumerate(course_cells) if c.cell_type == "code" and "space" in cell_names(c.source).binds]
    assert plan.context == tuple(makers) and len(makers) == 2
    ids = [cell.metadata["nbgrader"]["grade_id"] for cell in notebook.cells]
    assert ids == [
        "header", "setup", *(f"context-{i}" for i in makers),
        *(f"{kind}-4_{n}" for n in (1, 2, 3) for kind in ("prompt", "answer", "test")),
    ]  # fmt: skip
    text = "\n".join(cell.source for cell in notebook.cells)
    assert "Reference solutions are in" not in text and "The reference solutions are in" not in text
    assert "return reference_attention(q, k, v)" in text  # the teacher's version holds the solution


def test_the_exercises_without_a_reference_solution_are_those_docs_grading_names() -> None:
    assert sorted(n for n, c in all_checkers().items() if c.reference is None) == [
        "0.1", "7.1", "7.2", "7.3", "8.1", "8.2", "8.3"
    ]  # fmt: skip


# -------------------------------------------------------------------------------------------------- the pinning
def test_the_setup_block_and_the_badge_name_the_tag() -> None:
    block = pinned_setup_block(NOTEBOOK.name, REF)
    assert 'package = f"git+{REPO_URL}@v2026.12"' in block
    assert block.replace("@v2026.12", "").replace(" at v2026.12", "") == colab_setup_block(NOTEBOOK.name)
    extra = pinned_setup_block("14_pretrained_encoder.ipynb", REF)
    assert 'f"transformer-course[pretrained] @ git+{REPO_URL}@v2026.12"' in extra
    badge = pinned_badge(NOTEBOOK.name, REF)
    assert f"{repository_url().removeprefix('https://github.com/')}/blob/v2026.12/notebooks/{NOTEBOOK.name}" in badge
    with pytest.raises(ValueError, match="setup block"):
        pin_setup_cell("import torch\n", NOTEBOOK.name, REF)


@pytest.mark.parametrize("ref", ["", "main", "v 1", "-v1", "a..b", "v1/", "tag.lock", "v{1}", 'v"1'])
def test_a_ref_that_is_not_a_usable_tag_is_refused(ref: str) -> None:
    with pytest.raises(ValueError, match="ref"):
        check_ref(ref)


def test_the_defaults_of_the_setup_block_and_the_badge_are_what_the_notebooks_hold() -> None:
    # the optional parameters spelt out give what the notebooks have (tests/test_notebook_conventions.py checks them)
    assert colab_setup_block(NOTEBOOK.name, None, None) == colab_setup_block(NOTEBOOK.name)
    url = repository_url()
    assert colab_badge(NOTEBOOK.name, "main", url, "notebooks") == colab_badge(NOTEBOOK.name)
    assert f"{url.removeprefix('https://github.com/')}/blob/main/notebooks/{NOTEBOOK.name})" in colab_badge(
        NOTEBOOK.name
    )
    with pytest.raises(ValueError, match="ref cannot hold"):
        colab_setup_block(NOTEBOOK.name, ref='v1"; import os')


def test_a_fork_is_pinned_and_a_setup_cell_is_recognised_whatever_it_names() -> None:
    block = pinned_setup_block(NOTEBOOK.name, REF, FORK)
    assert f'REPO_URL = "{FORK}"' in block and 'git+{REPO_URL}@v2026.12"' in block
    assert pinned_badge(NOTEBOOK.name, REF, FORK).endswith(f"/a-teacher/transformer-course/blob/{REF}/notebooks/04_"
                                                           f"{NOTEBOOK.name[3:]})")  # fmt: skip
    cell = nbformat.read(NOTEBOOK, as_version=4).cells[1].source
    assert course_setup_block(cell, NOTEBOOK.name) == (colab_setup_block(NOTEBOOK.name), "en")
    # a clone whose pyproject.toml names a fork (the notebooks name the course's repository): the cell is still
    # recognised, and pinned to the repository asked for
    forked = cell.replace(repository_url(), FORK)
    assert pin_setup_cell(forked, NOTEBOOK.name, REF).startswith(pinned_setup_block(NOTEBOOK.name, REF))
    # a notebook pinned once already (a class copy, a term branch) is pinned again to another tag
    once = pin_setup_cell(cell, NOTEBOOK.name, REF, FORK)
    again = pin_setup_cell(once, NOTEBOOK.name, "v2027.06")
    assert again == pin_setup_cell(cell, NOTEBOOK.name, "v2027.06") and again.endswith(
        cell[len(colab_setup_block(NOTEBOOK.name)) :]
    )
    # the Chinese edition's setup cell, its comments in Chinese, is pinned and keeps them
    chinese = colab_setup_block(NOTEBOOK.name, language="zh") + cell[len(colab_setup_block(NOTEBOOK.name)) :]
    assert course_setup_block(chinese, NOTEBOOK.name) == (colab_setup_block(NOTEBOOK.name, language="zh"), "zh")
    pinned = pin_setup_cell(chinese, NOTEBOOK.name, REF)
    assert pinned.startswith("# 准备工作：在 Colab 上先安装课程包的 v2026.12 版本；")
    assert 'git+{REPO_URL}@v2026.12"' in pinned


@pytest.mark.parametrize(
    "remote",
    [
        "https://github.com/a-teacher/transformer-course",
        "https://github.com/a-teacher/transformer-course.git",
        "git@github.com:a-teacher/transformer-course.git",
        "ssh://git@github.com/a-teacher/transformer-course.git",
        "https://a-teacher:ghp_SECRET@github.com/a-teacher/transformer-course.git\n",
    ],
)
def test_a_github_remote_gives_the_repositorys_https_url(remote: str) -> None:
    assert github_url(remote) == FORK


def test_a_repository_that_is_not_on_github_is_refused_without_its_token() -> None:
    with pytest.raises(ValueError, match="not a GitHub repository") as error:
        github_url("https://me:glpat_SECRET@gitlab.com/me/transformer-course.git")
    assert "SECRET" not in str(error.value)
    for url in (
        "http://github.com/a/b",
        "https://github.com/a",
        "https://github.com/a/b.git",
        "https://github.com/a/{b}",
    ):
        with pytest.raises(ValueError, match="--repo must be a GitHub repository"):
            check_repo_url(url)


# -------------------------------------------------------------------------------------- the lecture notebooks
def test_a_pinned_lecture_notebook_differs_from_the_course_in_its_badge_and_setup_only() -> None:
    for language, source in (("en", NOTEBOOK), ("zh", NOTEBOOK.parent / "zh" / NOTEBOOK.name)):
        course_notebook = nbformat.read(source, as_version=4)
        pinned = pin_notebook(course_notebook, NOTEBOOK.name, REF, FORK, "class", language)
        where = NOTEBOOK.name if language == "en" else f"zh/{NOTEBOOK.name}"
        badge = f"https://colab.research.google.com/github/a-teacher/transformer-course/blob/{REF}/class/{where})"
        assert badge in pinned.cells[0].source and "/blob/main/" not in pinned.cells[0].source
        first = pinned.cells[0].source.replace(pinned_badge(where, REF, FORK, "class"), colab_badge(where))
        assert first == course_notebook.cells[0].source
        block = pinned_setup_block(NOTEBOOK.name, REF, FORK, language)
        setup = pinned.cells[1].source
        assert setup.startswith(block)
        unpinned = colab_setup_block(NOTEBOOK.name, language=language)
        assert unpinned + setup[len(block) :] == course_notebook.cells[1].source
        changed = [i for i, (a, b) in enumerate(zip(course_notebook.cells, pinned.cells)) if a != b]
        assert changed == [0, 1] and len(pinned.cells) == len(course_notebook.cells)
        assert pinned.metadata == course_notebook.metadata


def test_a_class_copy_outside_the_clone_has_both_editions_and_no_badge(tmp_path: Path) -> None:
    done = pin_course(REF, tmp_path / "class", ("en", "zh"), ["04", "14"])
    names = sorted(p.relative_to(tmp_path / "class").as_posix() for p in done.written)
    assert names == sorted([NOTEBOOK.name, "14_pretrained_encoder.ipynb", f"zh/{NOTEBOOK.name}",
                            "zh/14_pretrained_encoder.ipynb"])  # fmt: skip
    assert done.folder is None
    for path in done.written:
        notebook = nbformat.read(path, as_version=4)
        assert "colab-badge" not in notebook.cells[0].source and notebook.cells[0].source.startswith("# ")
        assert "@v2026.12" in notebook.cells[1].source
    assert (
        'transformer-course[pretrained] @ git+{REPO_URL}@v2026.12"'
        in nbformat.read(tmp_path / "class" / "14_pretrained_encoder.ipynb", as_version=4).cells[1].source
    )
    assert copy_folder(ROOT / "class") == "class"  # inside the clone the badges open the copy at the tag
    for wrong in (ROOT, ROOT / "notebooks", ROOT / "notebooks" / "zh"):
        with pytest.raises(ValueError, match="--out"):
            copy_folder(wrong)


def test_the_reports_say_what_is_left_to_do_with_the_tag(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tools.grader import lecture, pinning
    from tools.grader import release as release_module

    copy = lecture.PinnedCopy((tmp_path / "04_x.ipynb",), "class")
    monkeypatch.setattr(lecture, "ref_is_local_tag", lambda ref: False)
    assert "git add class && git commit" in lecture.report(copy, REF, tmp_path)
    monkeypatch.setattr(lecture, "ref_is_local_tag", lambda ref: True)
    monkeypatch.setattr(lecture, "tag_holds", lambda ref, path: path == "class/04_x.ipynb")
    assert "warning" not in lecture.report(copy, REF, tmp_path)
    monkeypatch.setattr(lecture, "tag_holds", lambda ref, path: False)
    assert "does not hold class/04_x.ipynb, so the badges open nothing" in lecture.report(copy, REF, tmp_path)
    assert "no Colab badge" in lecture.report(lecture.PinnedCopy(copy.written, None), REF, tmp_path)

    monkeypatch.setattr(pinning, "origin_url", lambda: FORK)
    monkeypatch.setattr(release_module, "ref_is_local_tag", lambda ref: True)
    notes = release_module.tag_notes(REF, repository_url())
    assert notes[0] == f"pinned to {REF} of {repository_url()}"
    assert notes[1:] == [f"note: the notebooks install from {repository_url()}; this clone's origin is {FORK} "
                         "(give --repo origin to use it)"]  # fmt: skip
    assert release_module.tag_notes(REF, FORK) == [f"pinned to {REF} of {FORK}"]
    assert pinning.resolve_repo("origin") == FORK and pinning.resolve_repo(None) == repository_url()
    assert pinning.resolve_repo(FORK + ".git") == FORK


# --------------------------------------------------------------------------------------------------- the budget
def _cell(**nbgrader: object) -> dict:
    return {"metadata": {"nbgrader": nbgrader}} if nbgrader else {"metadata": {}}


def test_the_learner_cells_share_one_budget_and_the_teacher_cells_have_their_own() -> None:
    now = [0.0]
    budget = TimeBudget(10, 300, clock=lambda: now[0])
    setup, answer, test = _cell(locked=True), _cell(solution=True), _cell(grade=True, locked=True)
    assert not is_learner_cell(setup) and is_learner_cell(answer) and is_learner_cell(test) and is_learner_cell(_cell())
    assert budget(setup) == 300
    now[0] = 100.0  # the setup took 100 s: not the learner's
    assert budget(answer) == 10
    now[0] = 104.0
    assert budget(test) == 6  # 4 s used
    now[0] = 115.0
    assert budget(_cell()) == 1  # spent: one second for each cell left
    with pytest.raises(ValueError, match="seconds > 0, got 0"):
        TimeBudget(0, 300)


def _one_cell_notebook(source: str) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(source)]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return notebook


def test_a_kernel_that_dies_before_it_answers_is_started_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from nbclient.client import NotebookClient

    real_start = NotebookClient.start_new_kernel_client
    starts = []

    def dies_the_first_time(self):  # noqa: ANN001, ANN202 (nbclient's signature)
        starts.append(len(starts) + 1)
        if len(starts) == 1:  # as nbclient does when the kernel dies before its first reply
            self.kc = self.km.client()
            self._cleanup_kernel()
            raise RuntimeError("Kernel died before replying to kernel_info")
        return real_start(self)

    monkeypatch.setattr(NotebookClient, "start_new_kernel_client", dies_the_first_time)
    execute = budgeted_execute()(learner_timeout=30, teacher_timeout=60)
    notebook, _ = execute.preprocess(_one_cell_notebook("print(6 * 7)"), {})
    assert starts == [1, 2]
    assert notebook.cells[0].outputs[0]["text"] == "42\n"


def test_a_kernel_the_learners_code_stops_is_not_started_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from nbclient.client import NotebookClient
    from nbclient.exceptions import DeadKernelError

    real_start = NotebookClient.start_new_kernel_client
    starts = []

    def counted(self):  # noqa: ANN001, ANN202 (nbclient's signature)
        starts.append(1)
        return real_start(self)

    monkeypatch.setattr(NotebookClient, "start_new_kernel_client", counted)
    execute = budgeted_execute()(learner_timeout=30, teacher_timeout=60)
    with pytest.raises(DeadKernelError):
        execute.preprocess(_one_cell_notebook("import os\nos._exit(1)"), {})
    assert len(starts) == 1
    assert KERNEL_START_ATTEMPTS == 3


# ------------------------------------------------------------------------------------------------- the verdicts
def _stream(text: str) -> dict:
    return {"output_type": "stream", "name": "stdout", "text": text}


def _error(name: str, value: str = "") -> dict:
    return {"output_type": "error", "ename": name, "evalue": value, "traceback": []}


def test_the_verdict_comes_from_the_checker_line_and_the_errors() -> None:
    correct = _stream("Exercise 4.1 (attention from scratch): correct!\n")
    assert verdict_of([correct], [], "4.1").verdict == "correct"
    chinese = _stream("练习 4.1（从零实现注意力）：还不对。权重……\n")
    assert verdict_of([chinese, _error("AssertionError")], [], "4.1").verdict == "wrong"
    # a line the learner's code printed, then the checker's own: the last one counts
    fake = _stream("Exercise 4.1 (x): correct!\nExercise 4.1 (attention from scratch): not yet. Divide.\n")
    assert verdict_of([fake, _error("AssertionError")], [], "4.1").verdict == "wrong"
    assert verdict_of([correct, _error("SystemExit")], [], "4.1").verdict == "error"  # printed, but did not pass
    assert verdict_of([_error("NameError", "name 'f'")], [_error("SyntaxError", "bad")], "4.1") == Verdict(
        "error", "NameError: name 'f' (the answer cell raised SyntaxError: bad)"
    )
    assert verdict_of([], [_error("CellTimeoutError")], "4.1").verdict == "timeout"
    assert verdict_of([_stream("Exercise 4.2 (attention entropy): correct!\n")], [], "4.1").verdict == "error"


# ----------------------------------------------------------------------------------------------------- collect
def test_collect_refuses_bad_names_and_files(tmp_path: Path) -> None:
    root, inbox = tmp_path / "course", tmp_path / "inbox"
    (root / "release" / ASSIGNMENT).mkdir(parents=True)
    inbox.mkdir()
    with pytest.raises(ValueError, match="no .ipynb"):
        collect(inbox, root, ASSIGNMENT)
    (inbox / "bad name.ipynb").write_text("{}")
    with pytest.raises(ValueError, match="'bad name'"):
        collect(inbox, root, ASSIGNMENT)
    (inbox / "bad name.ipynb").unlink()
    (inbox / "ann.ipynb").write_text("not json")
    with pytest.raises(ValueError, match="ann.ipynb is not a readable notebook"):
        collect(inbox, root, ASSIGNMENT)
    with pytest.raises(ValueError, match="not released"):
        collect(inbox, root, "06_masks")
    assert not (root / "submitted").exists()


# ------------------------------------------------------------------------------------------------ end to end
RIGHT = throughput.RIGHT  # right answers to 4.1, 4.2 and 4.3, by nbgrader cell id
SUBMISSIONS: dict[str, dict[str, str]] = {
    "ada": RIGHT,  # right
    "ben": {  # wrong: no scaling; the entropy's sign; 4.3 left as released
        "answer-4_1": "def my_attention(q, k, v):\n"
        "    w = torch.softmax(q @ k.transpose(-2, -1), dim=-1)\n"
        "    return w @ v, w",
        "answer-4_2": "def my_attention_entropy(weights):\n    return (weights * torch.log(weights)).nansum(dim=-1)",
    },
    "cy": {  # crashing: in the function (the checker reports it), and in the answer cell itself
        "answer-4_1": "def my_attention(q, k, v):\n    return 1 / 0",
        "answer-4_2": "import entropy_helpers\n\n\n"
        "def my_attention_entropy(weights):\n    return entropy_helpers.h(weights)",
        "answer-4_3": RIGHT["answer-4_3"],
    },
    "dee": {**RIGHT, "answer-4_3": "def my_queries(w_q):\n    while True:\n        pass"},  # runs past the limit
    "eve": {  # the reference solutions, imported under another name and through a module alias
        **RIGHT,
        "answer-4_1": "from transformer_course.exercises.attention import reference_attention as attend\n\n\n"
        "def my_attention(q, k, v):\n    return attend(q, k, v)",
        "answer-4_2": "import transformer_course.exercises.attention as m\n\n\n"
        "def my_attention_entropy(weights):\n    return m.reference_attention_entropy(weights)",
    },
    "fay": {  # the package function 4.1 asks for, imported by the setup cell
        **RIGHT,
        "answer-4_1": "def my_attention(q, k, v):\n    return scaled_dot_product_attention(q, k, v)",
    },
    "gus": {  # teacher material, in a cell of his own
        **RIGHT,
        "added": "try:\n    from teacher.keys import attention_answers\n"
        "except ImportError:\n    attention_answers = None",
    },
}
VERDICTS = {"fay": ("wrong", "correct", "correct", "2")}
FLAGS = {
    "eve": ["answer 4.1: reference_attention; answer 4.2: reference_attention_entropy", "", "", ""],
    "fay": ["", "answer 4.1: scaled_dot_product_attention (asked in 4.1)", "", ""],
    "gus": ["", "", "added cell #4: from teacher.keys import attention_answers", ""],
}
EXPECTED = [
    ["student", "4.1", "4.2", "4.3", "points", "max_points", "reference", "package", "teacher", "checker"],
    ["ada", "correct", "correct", "correct", "3", "3", "", "", "", ""],
    ["ben", "wrong", "wrong", "unanswered", "0", "3", "", "", "", ""],
    ["cy", "error", "error", "correct", "1", "3", "", "", "", ""],
    ["dee", "correct", "correct", "timeout", "2", "3", "", "", "", ""],
    # fay's package attention does not write its own softmax: 4.1's checker refuses it, and the flag says why
    *(
        [student, *VERDICTS.get(student, ("correct", "correct", "correct", "3")), "3", *flags]
        for student, flags in FLAGS.items()
    ),
]


_submission = throughput.synthetic_submission


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A course directory with notebook 04 released at v2026.12. The release check, which runs the teacher's version,
    is left out to save a kernel: ada's right answers below run the same cells (and the check has its own test)."""
    root = tmp_path_factory.mktemp("course")
    (done,) = release(["04"], REF, root, check=False)
    assert done.verdicts == {} and done.plan.assignment == ASSIGNMENT
    return root


def _student_version(root: Path) -> nbformat.NotebookNode:
    return nbformat.read(root / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)


def test_the_student_version_holds_no_solution_and_installs_the_tag(released: Path) -> None:
    notebook = _student_version(released)
    text = "\n".join(cell.source for cell in notebook.cells)
    assert "BEGIN SOLUTION" not in text and "reference_attention" not in text
    assert "/blob/main/" not in text and f"/blob/{REF}/notebooks/{NOTEBOOK.name}" in notebook.cells[0].source
    assert notebook.cells[1].source.startswith(pinned_setup_block(NOTEBOOK.name, REF))
    answers = [cell for cell in notebook.cells if cell.metadata["nbgrader"]["solution"]]
    assert [cell.source.splitlines()[-1] for cell in answers] == ["    raise NotImplementedError"] * 3
    original = nbformat.read(NOTEBOOK, as_version=4)
    first = find_exercises(original)[0]
    stub = "\n".join(original.cells[first.index].source.splitlines()[: first.check_line]).strip()
    assert answers[0].source == stub  # the course's own stub, as the notebook has it
    assert (released / course.CONFIG_FILE).exists()


def test_flags_follow_every_way_of_reaching_a_name(released: Path) -> None:
    student_version = _student_version(released)

    def flags(source: str, where: str = "added") -> list[str]:
        notebook = _submission(student_version, {where: source})
        return [f"{f.kind} {f}" for f in submission_flags(notebook, student_version, ["4.1", "4.2", "4.3"])]

    full_path = (
        "import transformer_course.exercises.attention\nf = transformer_course.exercises.attention.reference_attention"
    )
    assert flags(full_path) == ["reference added cell #4: reference_attention"]
    assert flags("from transformer_course.exercises.attention import *\nreference_query_edit(W_Q)") == [
        "reference added cell #4: reference_query_edit"
    ]
    dynamic = "import importlib\nm = importlib.import_module('transformer_course.exercises.attention')\n"
    assert flags(dynamic + "f = getattr(m, 'reference_attention')") == ["reference added cell #4: reference_attention"]
    assert flags("from transformer_course.core import attention as A\nA.fused_attention(q, k, v)") == [
        "package added cell #4: fused_attention (asked in 4.1)"
    ]
    assert flags("import transformer_course as tc\ntc.scaled_dot_product_attention(q, k, v)") == [
        "package added cell #4: scaled_dot_product_attention (asked in 4.1)"
    ]
    assert flags("causal_mask(3)") == []  # the package function of 6.1 is no business of notebook 04's exercises
    assert flags("%run ../teacher/keys.py") == ["teacher added cell #4: ../teacher/keys.py"]
    assert flags("import transformer_course_teacher.answers as key") == [
        "teacher added cell #4: import transformer_course_teacher.answers"
    ]
    assert flags("check_attention = lambda fn: True") == ["checker added cell #4: rebinds check_attention"]
    assert flags("def check_shape(x):\n    return x.shape") == []  # a helper of one's own is no checker
    assert flags("import transformer_course.exercises._core as core\ncore.report = print") == [
        "checker added cell #4: sets an attribute of transformer_course.exercises._core"
    ]
    assert flags("def my_queries(w_q) return reference_query_edit(w_q)", "answer-4_3") == [
        "reference answer 4.3: reference_query_edit"
    ]  # a cell that does not parse is searched as text
    assert flags("def my_queries(w_q):\n    print('my teacher said.')\n    return w_q") == []
    assert submission_flags(student_version, student_version, ["4.1", "4.2", "4.3"]) == []  # the setup's imports
    assert is_teacher_path("teachers/a.md") and is_teacher_path("x.teacher_keys") and not is_teacher_path("teaching.x")


def test_the_evasions_teacher_grader_limits_lists_go_unflagged(released: Path) -> None:
    """teacher/grader_limits.md says which uses the flags miss; each of them is missed (if one starts being flagged,
    that page is out of date)."""
    import inspect

    from transformer_course.exercises.attention import reference_attention

    student_version = _student_version(released)
    pasted = inspect.getsource(reference_attention).replace("def reference_attention(", "def my_attention(")
    evasions = {
        "a reference solution's body pasted": pasted,
        "a name put together at run time": "import transformer_course.exercises.attention as ex\n\n\n"
        'def my_attention(q, k, v):\n    return getattr(ex, "refer" + "ence_attention")(q, k, v)',
        "torch's softmax, which 4.1's prompt forbids": "def my_attention(q, k, v):\n"
        "    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)\n    return w @ v, w",
        "torch's own attention": "def my_attention(q, k, v):\n"
        "    out = F.scaled_dot_product_attention(q, k, v)\n    return out, None",
    }
    for what, source in evasions.items():
        notebook = _submission(student_version, {"answer-4_1": source})
        assert submission_flags(notebook, student_version, ["4.1", "4.2", "4.3"]) == [], what
    for name in ("grader_limits.md", "grader_limits.zh-CN.md"):
        text = (ROOT / "teacher" / name).read_text(encoding="utf-8")
        assert '"refer" + "ence_attention"' in text and "torch.softmax" in text, name
        assert "F.scaled_dot_product_attention" in text, name


def test_grading_synthetic_submissions_gives_the_expected_table(released: Path, tmp_path: Path, capsys) -> None:
    student_version = _student_version(released)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for student, answers in SUBMISSIONS.items():
        nbformat.write(_submission(student_version, answers), inbox / f"{student}.ipynb")
    assert collect(inbox, released, ASSIGNMENT) == sorted(SUBMISSIONS)

    rows, numbers = grade(released, timeout=15, teacher_timeout=600, jobs=2)

    with capsys.disabled():
        print("\n" + format_table(rows, numbers))
    assert table_rows(rows, numbers) == EXPECTED
    with (released / "results.csv").open(newline="", encoding="utf-8") as handle:
        assert list(csv.reader(handle)) == EXPECTED
    details = {(r["student"], r["exercise"]): r for r in csv.DictReader((released / "details.csv").open())}
    assert details[("ben", "4.1")]["detail"].startswith("Exercise 4.1 (attention from scratch): not yet. The weights")
    assert details[("cy", "4.1")]["detail"].endswith("your code raised ZeroDivisionError: division by zero")
    assert "ModuleNotFoundError" in details[("cy", "4.2")]["detail"]
    assert details[("dee", "4.3")]["detail"] == "the time limit ran out in the test cell (CellTimeoutError)"
    graded = nbformat.read(released / "autograded" / "dee" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    assert any(o.get("ename") == "CellTimeoutError" for c in graded.cells if c.cell_type == "code" for o in c.outputs)

    # teacher/grader_limits.md's search for a torch function that a prompt forbids finds ben's 4.1, and only that
    calls = [p.parts[-3] for p in sorted((released / "autograded").glob(f"*/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"))]
    assert len(calls) == 7
    assert [s for s in calls if "torch.softmax(" in (released / "autograded" / s / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
            .read_text(encoding="utf-8")] == ["ben"]  # fmt: skip

    # one submission graded again as jobs=1 does, in this process: the same verdicts and points
    assert autograde(released, ASSIGNMENT, 15, 600, student="ben")["success"]
    again = nbformat.read(released / "autograded" / "ben" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    ben = next(row for row in rows if row.student == "ben")
    assert notebook_verdicts(again, ["4.1", "4.2", "4.3"]) == {n: ben.verdicts[n] for n in ("4.1", "4.2", "4.3")}
    assert points(released, ASSIGNMENT, "ben") == 0


def test_the_grader_modules_have_docstrings() -> None:
    for path in sorted(Path(course.__file__).parent.glob("*.py")):
        assert ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))), path.name


def test_the_docs_show_the_table_this_test_expects_and_the_forbidden_functions_they_name() -> None:
    lines = "\n".join(",".join(row) for row in EXPECTED)
    assert all("," not in cell and '"' not in cell for row in EXPECTED for cell in row)  # written by csv as they are
    docs = Path(course.__file__).resolve().parents[2] / "docs"
    for name in ("grading.md", "grading.zh-CN.md"):
        assert f"```\n{lines}\n```" in (docs / name).read_text(encoding="utf-8"), name
    short = {number: [dotted.rsplit(".", 1)[1] for dotted in names] for number, names in FORBIDDEN.items()}
    assert short["4.1"] == ["scaled_dot_product_attention", "fused_attention"] and "causal_mask" in short["6.1"]


def test_an_assignment_released_from_a_fork_installs_the_fork() -> None:
    notebook, _ = build_source(NOTEBOOK, REF, repo_url=FORK)
    assert f"github/a-teacher/transformer-course/blob/{REF}/notebooks/{NOTEBOOK.name})" in notebook.cells[0].source
    assert notebook.cells[1].source.startswith(pinned_setup_block(NOTEBOOK.name, REF, FORK))
    assert notebook.metadata["transformer_course_grader"]["repository"] == FORK


def test_the_docs_quote_the_measured_grading_time_and_leave_the_evasions_to_the_teacher_material() -> None:
    data = throughput.load()
    assert [run["jobs"] for run in data["runs"]] == [1, 2] and data["submissions"] >= 10
    assert data["machine"]["nbgrader"] == "0.9.6"
    for name, language in (("grading.md", "en"), ("grading.zh-CN.md", "zh")):
        text = (ROOT / "docs" / name).read_text(encoding="utf-8")
        flat = "".join(text.split())  # lines are wrapped anywhere, Chinese ones between any two characters
        assert "".join(throughput.sentence(data, language).split()) in flat, name
        assert "`teacher/grader_limits" in text and "](../teacher" not in text, name  # named, not linked
        for recipe in ('"refer" + "ence_attention"', "torch.softmax", "model.generate", "torch.special.entr"):
            assert recipe not in text, (name, recipe)


def test_the_chinese_edition_is_released_in_chinese() -> None:
    notebook, plan = build_source(NOTEBOOK, REF, language="zh")
    assert plan.assignment == f"{ASSIGNMENT}_zh"
    header, setup = notebook.cells[0].source, notebook.cells[1].source
    assert header.startswith("# 作业：") and f"/blob/{REF}/notebooks/zh/{NOTEBOOK.name}" in header
    assert 'set_language("zh")' in setup and "@v2026.12" in setup
    text = "\n".join(cell.source for cell in notebook.cells)
    assert "参考答案在" not in text and '"练习 4.1 还不对：上面那一行说明了原因"' in text
    with pytest.raises(ValueError, match="language must be one of"):
        build_source(NOTEBOOK, REF, language="fr")


def test_the_command_line_says_which_value_is_wrong(tmp_path: Path, capsys) -> None:
    from tools.grader.__main__ import main

    with pytest.raises(SystemExit):
        main(["release", "04", "--ref", "main", "--course", str(tmp_path)])
    assert "--ref main is the moving branch" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["grade", "--timeout", "-5", "--course", str(tmp_path)])
    assert "the time limit must be a number of seconds > 0, got -5.0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["grade", "--course", str(tmp_path)])
    assert "nothing is released in" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["grade", "--jobs", "0", "--course", str(tmp_path)])
    assert "--jobs must be a whole number >= 1, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["release", "04", "--ref", REF, "--repo", "https://gitlab.com/me/tc", "--course", str(tmp_path)])
    assert "--repo must be a GitHub repository" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["pin", "--ref", "main", "--out", str(tmp_path / "class")])
    assert "--ref main is the moving branch" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["pin", "--ref", REF, "--out", "notebooks"])
    assert "would overwrite the course's notebooks" in capsys.readouterr().err
    assert main(["pin", "04", "--ref", REF, "--language", "zh", "--out", str(tmp_path / "class")]) == 0
    assert "wrote 1 notebooks" in capsys.readouterr().out
    assert [p.name for p in (tmp_path / "class").rglob("*.ipynb")] == [NOTEBOOK.name]
    assert not (tmp_path / "class" / NOTEBOOK.name).exists()  # only the Chinese edition, in class/zh/
    with pytest.raises(ValueError, match="--jobs must be"):
        check_jobs(True)


def test_the_release_check_passes_the_expected_verdicts_and_fails_on_others() -> None:
    _, plan = build_source(NOTEBOOK, REF)
    first = Plan(plan.assignment, plan.exercises[:1], ())  # 4.1 alone, which has a reference solution

    def notebook(line: str) -> nbformat.NotebookNode:
        cell = nbformat.v4.new_code_cell(f"print({line!r})")
        cell.metadata["nbgrader"] = {"grade_id": "test-4_1"}
        return nbformat.v4.new_notebook(cells=[cell])

    assert check_source(notebook("Exercise 4.1 (attention from scratch): correct!"), first, 120) == {"4.1": "correct"}
    with pytest.raises(RuntimeError, match=r"4\.1: wrong \(Exercise 4\.1 .*\), expected correct"):
        check_source(notebook("Exercise 4.1 (attention from scratch): not yet. Look again."), first, 120)

"""Shared by the exercise tests: a checker's feedback in Chinese (correct, not attempted yet, a named mistake)."""

from __future__ import annotations

from collections.abc import Callable

from transformer_course.exercises import set_language


def _unanswered(*args):
    raise NotImplementedError


def assert_checker_speaks_chinese(number: str, check: Callable, reference: Callable, capsys) -> None:
    """Under set_language("zh") the reference is "正确！" and a stub "尚未作答", both labelled 练习 <number>（…）."""
    set_language("zh")
    assert check(reference)
    out = capsys.readouterr().out
    assert out.startswith(f"练习 {number}（") and out.endswith("正确！\n"), out
    assert not check(_unanswered)
    out = capsys.readouterr().out
    assert out.startswith(f"练习 {number}（") and "尚未作答" in out, out


def assert_mistake_named_in_chinese(check: Callable, wrong: Callable, hint: str, capsys) -> None:
    """Under set_language("zh") the wrong answer gets "还不对。" and the Chinese hint ``hint``."""
    set_language("zh")
    assert not check(wrong)
    out = capsys.readouterr().out
    assert "：还不对。" in out and hint in out, out

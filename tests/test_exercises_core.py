"""The shared feedback line: every hint reads as a sentence, whatever the checker wrote."""

import importlib
import pkgutil
import re

from transformer_course.exercises._core import (
    EXERCISES,
    Exercise,
    ExerciseMistake,
    as_sentence,
    report,
    translate_feedback,
)
from transformer_course.language import set_language, tr


def test_as_sentence_capitalises_words_and_adds_a_full_stop():
    assert as_sentence("these are dot products") == "These are dot products."
    assert as_sentence("Already a sentence.") == "Already a sentence."
    assert as_sentence("is it?") == "Is it?"
    assert as_sentence("close, but: scale by sqrt(d_k)") == "Close, but: scale by sqrt(d_k)."


def test_as_sentence_leaves_code_at_the_start_alone():
    assert as_sentence("k_cache has shape (2, 3)") == "k_cache has shape (2, 3)."
    assert as_sentence("fn(config) returned 3") == "fn(config) returned 3."
    assert as_sentence("w_o.weight is wrong.") == "w_o.weight is wrong."


def test_report_prints_the_hint_as_a_sentence(capsys):
    def wrong() -> None:
        raise ExerciseMistake("you swapped the axes")

    assert not report("Exercise 0.0 (demo)", wrong)
    assert capsys.readouterr().out == "Exercise 0.0 (demo): not yet. You swapped the axes.\n"


def test_report_speaks_chinese(capsys):
    demo = Exercise("0.9", "demo", "演示")
    try:
        set_language("zh")

        def wrong() -> None:
            raise ExerciseMistake(tr("you swapped the axes", "你把两个轴交换了"))

        assert not report(demo, wrong)
        assert capsys.readouterr().out == "练习 0.9（演示）：还不对。你把两个轴交换了。\n"
        assert report(demo, lambda: None)
        assert capsys.readouterr().out == "练习 0.9（演示）：正确！\n"
    finally:
        del EXERCISES["0.9"]


def _exercise_modules() -> list:
    """Every checker module of the package, imported, so that all their exercises are registered."""
    package = importlib.import_module("transformer_course.exercises")
    names = [info.name for info in pkgutil.iter_modules(package.__path__) if not info.name.startswith("_")]
    return [importlib.import_module(f"transformer_course.exercises.{name}") for name in names]


def test_every_module_registers_its_exercises_once():
    for module in _exercise_modules():
        mine = [value for value in vars(module).values() if isinstance(value, Exercise)]
        assert mine, f"{module.__name__} names no Exercise"
        for exercise in mine:
            assert EXERCISES[exercise.number] is exercise, f"{exercise.number} is registered twice"
            assert re.search(r"[\u4e00-\u9fff]", exercise.title_zh), exercise


def _stub() -> None:
    raise NotImplementedError


def test_translate_feedback_renders_every_stored_not_attempted_line_in_chinese(capsys):
    _exercise_modules()
    assert len(EXERCISES) >= 40
    for exercise in EXERCISES.values():
        english = f"{exercise.label('en')}: not attempted yet - replace the `raise NotImplementedError` with your code."
        report(exercise, _stub)  # the stored line is what the checker prints in English
        assert capsys.readouterr().out == english + "\n"
        chinese = translate_feedback(english, "zh")
        assert (
            chinese
            == f"练习 {exercise.number}（{exercise.title_zh}）：尚未作答——把 `raise NotImplementedError` 换成你的代码。"
        )
        set_language("zh")
        report(exercise, _stub)  # and it is what the checker prints in Chinese
        set_language("en")
        assert capsys.readouterr().out == chinese + "\n"
        assert translate_feedback(english, "en") == english

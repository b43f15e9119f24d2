"""The shared feedback line: every hint reads as a sentence, whatever the checker wrote."""

import importlib
import pkgutil
import re

import torch

from transformer_course.exercises._core import (
    EXERCISES,
    Exercise,
    ExerciseMistake,
    as_sentence,
    crash_hint,
    explain_shape_error,
    is_view_of_non_contiguous,
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


def _error_of(fn) -> RuntimeError:
    try:
        fn()
    except RuntimeError as error:
        return error
    raise AssertionError("expected a RuntimeError")


def test_pytorch_shape_errors_are_said_in_chinese():
    broadcast = _error_of(lambda: torch.ones(4, 8) * torch.ones(4))
    matmul = _error_of(lambda: torch.ones(4, 8) @ torch.ones(4, 8))
    view = _error_of(lambda: torch.ones(4, 8).view(3, 5))
    batched = _error_of(lambda: torch.ones(2, 3, 1, 4) @ torch.ones(2, 3, 8, 1))
    not_contiguous = _error_of(lambda: torch.ones(2, 3, 4).permute(0, 2, 1).view(2, 12))
    assert explain_shape_error(broadcast) == "两个张量在 dim=1 上的大小不一致，分别为 8 和 4，无法广播"
    assert explain_shape_error(matmul) == "矩阵乘法的形状 4x8 与 4x8 对不上：前者的列数应等于后者的行数"
    assert explain_shape_error(view) == "32 个元素排不成形状 [3, 5]"
    assert is_view_of_non_contiguous(not_contiguous) and not is_view_of_non_contiguous(batched)
    assert explain_shape_error(not_contiguous).startswith("张量在内存中不再连续") and ".reshape(...)" in (
        explain_shape_error(not_contiguous)
    )
    assert explain_shape_error(batched) == (
        "批量矩阵乘法的形状对不上：把前面的维度合并成一个批次维后，第二个张量的前两维应为 [6, 4]，"
        "实际是 [6, 8]（它的倒数第二维要等于第一个张量的最后一维）"
    )
    cat = _error_of(lambda: torch.cat([torch.ones(2, 5, 8), torch.ones(2, 1, 6)], dim=-1))
    assert explain_shape_error(cat) == (
        "拼接（torch.cat）要求除 dim=2 以外的各维大小都相同，但列表中的第 2 个张量在某一维上的大小是 1，应为 5"
    )
    kept = torch.zeros(12, 2, dtype=torch.bool)
    index_put = _error_of(lambda: kept.__setitem__(torch.arange(24), torch.ones(24, dtype=torch.bool)))
    assert explain_shape_error(index_put) == "赋给索引位置的值的形状是 [24]，无法广播到索引选中部分的形状 [24, 2]"
    other = RuntimeError("something else")
    assert explain_shape_error(other) == "something else"


def test_crash_hint_only_for_the_two_sizes_of_the_slip():
    broadcast = _error_of(lambda: torch.ones(4, 8) * torch.ones(4))
    assert crash_hint(broadcast, (4, 8), "hint", "提示") is not None
    assert crash_hint(broadcast, (8, 4), "hint", "提示") is not None
    assert crash_hint(broadcast, (4, 5), "hint", "提示") is None
    assert crash_hint(_error_of(lambda: torch.ones(4, 8) @ torch.ones(4, 8)), (4, 8), "hint", "提示") is None


def test_a_crash_is_explained_in_chinese(capsys):
    demo = Exercise("0.8", "demo", "演示")
    try:
        set_language("zh")
        assert not report(demo, lambda: torch.ones(4, 8) @ torch.ones(4, 8))
        assert capsys.readouterr().out == (
            "练习 0.8（演示）：你的代码出错了：矩阵乘法的形状 4x8 与 4x8 对不上：前者的列数应等于后者的行数。\n"
        )
        assert not report(demo, lambda: int("x"))
        assert capsys.readouterr().out.startswith("练习 0.8（演示）：你的代码抛出了 ValueError: ")
        set_language("en")
        assert not report(demo, lambda: torch.ones(4, 8) @ torch.ones(4, 8))
        assert capsys.readouterr().out == (
            "Exercise 0.8 (demo): your code raised RuntimeError: mat1 and mat2 shapes cannot be multiplied "
            "(4x8 and 4x8)\n"
        )
    finally:
        set_language("en")
        del EXERCISES["0.8"]


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

"""The shared feedback line: every hint reads as a sentence, whatever the checker wrote."""

from transformer_course.exercises._core import ExerciseMistake, as_sentence, report


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

"""claims.check prints one machine-independent line when a claim holds and raises with the measured value when not."""

from __future__ import annotations

import pytest
import torch

from transformer_course.claims import ClaimFailed, check, observe, within
from transformer_course.language import set_language


def test_a_claim_that_holds_prints_one_stable_line(capsys):
    check(0.9991 > 0.995, "exact match is above 99.5%", measured=0.9991)
    assert capsys.readouterr().out == "holds: exact match is above 99.5%\n"  # the measured value is not printed


def test_a_claim_that_fails_raises_with_the_measured_value(capsys):
    with pytest.raises(ClaimFailed, match=r"exact match is above 99.5% \(measured: 0.98\)"):
        check(0.98 > 0.995, "exact match is above 99.5%", measured=0.98)
    assert capsys.readouterr().out == ""
    with pytest.raises(AssertionError, match="does not hold"):  # a ClaimFailed is an AssertionError
        check(False, "no value given")


def test_tensor_conditions():
    check(torch.tensor(True), "a 0-d tensor works")
    with pytest.raises(ClaimFailed):
        check(torch.tensor([False]), "a one-element tensor works")
    with pytest.raises(ValueError, match="one truth value"):
        check(torch.tensor([True, False]), "two elements are ambiguous")


@pytest.mark.parametrize("claim", ["", "   ", None, 3])
def test_the_claim_must_be_a_sentence(claim):
    with pytest.raises(ValueError, match="claim must be a non-empty sentence"):
        check(True, claim)


def test_within():
    assert within(1.0, 0.9, 1.1) and within(0.9, 0.9, 1.1) and not within(1.2, 0.9, 1.1)
    assert within(torch.tensor(1.0), 0.5, 1.5)
    with pytest.raises(ValueError, match="low must not exceed high"):
        within(1.0, 2.0, 1.0)


def test_observe_reports_without_raising(capsys):
    assert observe(2.0 > 1.0, "the cache is faster", measured=2.0) is True
    assert capsys.readouterr().out == "seen on this run: the cache is faster\n"
    assert observe(0.5 > 1.0, "the cache is faster", measured=0.5) is False  # no exception: only a report
    out = capsys.readouterr().out
    assert out.startswith("not seen on this run: the cache is faster (measured: 0.5).")
    assert "reported, not checked" in out


def test_observe_still_rejects_bad_arguments():
    with pytest.raises(ValueError, match="claim must be a non-empty sentence"):
        observe(True, "")
    with pytest.raises(ValueError, match="one truth value"):
        observe(torch.tensor([True, False]), "two elements are ambiguous")


def test_in_the_chinese_edition_the_claims_speak_chinese(capsys):
    set_language("zh")
    check(0.9991 > 0.995, "精确匹配率高于 99.5%", measured=0.9991)
    assert capsys.readouterr().out == "成立：精确匹配率高于 99.5%\n"
    with pytest.raises(ClaimFailed, match=r"^本次运行中这一结论不成立：精确匹配率高于 99\.5%（测得：0\.9）$"):
        check(0.9 > 0.995, "精确匹配率高于 99.5%", measured=0.9)
    assert observe(True, "缓存更快") is True
    assert capsys.readouterr().out == "本次运行中观察到：缓存更快\n"
    assert observe(False, "缓存更快", measured=0.5) is False
    out = capsys.readouterr().out
    assert out.startswith("本次运行中未观察到：缓存更快（测得：0.5）。这取决于机器") and out.endswith(
        "只报告，不检查。\n"
    )
    set_language("en")
    check(True, "back in English")
    assert capsys.readouterr().out == "holds: back in English\n"


def test_measured_values_are_rounded_to_four_significant_digits():
    with pytest.raises(ClaimFailed, match=r"\(measured: \{128: 1\.45, 256: \(0\.3333, 2\)\}\)$"):
        check(False, "attention is slower", measured={128: 1.4499999999999999, 256: (1 / 3, 2)})

"""The cost counts and timings of notebook 01, section 2 (transformer_course.prelude.serial_cost)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from transformer_course import MultiHeadAttention
from transformer_course.claims import ClaimFailed
from transformer_course.prelude.serial_cost import (
    LayerTimes,
    check_operator_calls,
    count_layer_work,
    report_times,
    time_layers,
)

D, BATCH, LENGTHS = 8, 2, (4, 8, 16)


@pytest.fixture(scope="module")
def layers():
    torch.manual_seed(0)
    return nn.RNN(D, D, batch_first=True), MultiHeadAttention(D, num_heads=2).eval()


@pytest.fixture(scope="module")
def work(layers):
    return count_layer_work(*layers, D, LENGTHS, batch=BATCH)


def test_the_flops_are_those_of_the_formulas(work):
    for n in LENGTHS:
        assert work.flops["RNN", n] == BATCH * 2 * (2 * n * D**2)  # U x_t and W S_{t-1}: 2 n d^2 multiply-adds
        assert work.flops["attention", n] == BATCH * 2 * (4 * n * D**2 + 2 * n**2 * D)


def test_the_rnn_adds_calls_per_step_and_attention_makes_a_fixed_number(work):
    assert work.rnn_calls_per_step >= 1
    for n in LENGTHS:
        assert work.num_calls("RNN", n) == work.num_calls("RNN", 4) + work.rnn_calls_per_step * (n - 4)
    assert len({work.num_calls("attention", n) for n in LENGTHS}) == 1
    assert work.calls["product", 4] == ["mm", "tanh"]
    assert work.products("product", 4) == "1 of them matrix products (mm 1)"


def test_the_flops_table_lists_every_length_with_exact_ratios(work):
    lines = work.flops_table().splitlines()
    assert len(lines) == 2 + len(LENGTHS)
    assert lines[-1].split() == ["16", "8,192", "32,768", "4.00"]  # 2 + n/d = 4 at n = 16, d = 8


def test_check_operator_calls_prints_each_claim_and_fails_on_a_wrong_count(work, capsys):
    check_operator_calls(work)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 4 and all(line.startswith("holds: ") for line in printed)
    calls = dict(work.calls)
    calls["attention", 16] = calls["attention", 16] + ["add"]  # one call more at the longest length
    with pytest.raises(ClaimFailed, match="same number of operator calls at every n"):
        check_operator_calls(dataclasses.replace(work, calls=calls))


def test_bad_arguments_are_named(layers, work):
    rnn, attention = layers
    with pytest.raises(ValueError, match="lengths must be distinct and increasing"):
        count_layer_work(rnn, attention, D, [8, 4])
    with pytest.raises(ValueError, match="at least 2 lengths"):
        count_layer_work(rnn, attention, D, [8])
    with pytest.raises(ValueError, match="d must be a positive int"):
        count_layer_work(rnn, attention, 0, LENGTHS)
    with pytest.raises(ValueError, match="rnn must be a layer"):
        count_layer_work(lambda x: x, attention, D, LENGTHS)
    with pytest.raises(ValueError, match=r"no count for \('RNN', 5\)"):
        work.num_calls("RNN", 5)
    with pytest.raises(ValueError, match="work must be the LayerWork"):
        check_operator_calls({"RNN": 1})
    with pytest.raises(ValueError, match="repeats must be a positive int"):
        time_layers(rnn, attention, work, repeats=0)


def _times(work, rnn_ms: float, attention_ms: dict[int, float]) -> LayerTimes:
    ms = {("product", 4): 0.01}
    for n in LENGTHS:
        ms["RNN", n] = rnn_ms * n
        ms["attention", n] = attention_ms[n]
    return LayerTimes(work=work, ms=ms, repeats=5)


def test_report_times_says_what_the_clock_showed_and_never_raises(work, capsys):
    slower = _times(work, 0.01, {4: 0.04, 8: 0.1, 16: 1.0})  # attention/RNN: 1.0, 1.25, 6.25
    assert report_times(slower, middle=8) == {
        "fixed cost": True,
        "per step": True,
        "grows": True,
        "slower": True,
    }
    assert capsys.readouterr().out.count("seen on this run: ") == 4
    faster = _times(work, 0.01, {4: 0.01, 8: 0.04, 16: 0.1})  # attention/RNN: 0.25, 0.5, 0.625
    seen = report_times(faster, middle=8)
    assert not seen["slower"] and not seen["grows"]
    out = capsys.readouterr().out
    assert "not seen on this run: attention takes longer than the RNN at every n from 16 to 16" in out
    with pytest.raises(ValueError, match="middle must be one of the lengths below the longest"):
        report_times(slower, middle=16)


def test_time_layers_times_every_length_and_the_table_shows_them(layers, work):
    times = time_layers(*layers, work, repeats=1)
    assert set(times.ms) == {("product", 4)} | {(name, n) for name in ("RNN", "attention") for n in LENGTHS}
    assert all(ms >= 0 for ms in times.ms.values())
    table = times.table().splitlines()
    assert len(table) == 2 + len(LENGTHS) + 1
    assert [line.split()[0] for line in table[2:-1]] == [str(n) for n in LENGTHS]
    assert table[-1].startswith("n = 4: the RNN's multiply-adds as one matrix product and tanh: ")


def test_the_calls_table_lists_every_length_and_what_the_calls_are(work):
    lines = work.calls_table().splitlines()
    assert len(lines) == 2 + len(LENGTHS) + 4
    attention = work.num_calls("attention", 4)
    for line, n in zip(lines[2:], LENGTHS):
        assert line.split() == [str(n), str(work.num_calls("RNN", n)), str(attention)]
    assert lines[-4] == "n = 4: the RNN's multiply-adds as one matrix product and tanh: 2 operator calls"
    assert lines[-3].startswith(f"attention at every n: {attention} operator calls, ")
    assert lines[-1] == f"RNN: each further step adds {work.rnn_calls_per_step:g} operator calls"

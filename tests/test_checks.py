"""checks.py: each check accepts good values and raises a ValueError that names the argument and the bad value."""

from __future__ import annotations

import re

import pytest
import torch

from transformer_course import checks


def raises(message: str):
    """pytest.raises for a ValueError whose message is exactly ``message``."""
    return pytest.raises(ValueError, match=f"^{re.escape(message)}$")


# ---- ints ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [1, 2, 512])
def test_positive_int_accepts_positive_ints(value):
    assert checks.positive_int("d_model", value) is None


@pytest.mark.parametrize("value", [True, False, 0, -1, 1.0, 2.5, "3", None])
def test_positive_int_rejects_bools_zero_negatives_and_non_ints(value):
    with raises(f"d_model must be a positive int, got {value!r}"):
        checks.positive_int("d_model", value)


@pytest.mark.parametrize("value", [0, 1, 7])
def test_non_negative_int_accepts_zero_and_positive_ints(value):
    assert checks.non_negative_int("offset", value) is None


@pytest.mark.parametrize("value", [True, False, -1, 0.0, 1.5, "0", None])
def test_non_negative_int_rejects_bools_negatives_and_non_ints(value):
    with raises(f"offset must be a non-negative int, got {value!r}"):
        checks.non_negative_int("offset", value)


# the checks read the traced sizes once, as intended; torch.jit.trace is what the ONNX exporter runs
@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning", "ignore:.*torch.jit.trace.*:DeprecationWarning")
def test_a_size_traced_by_torch_jit_passes_as_an_int_only_while_tracing():
    """tools/export_onnx.py traces the model; the tracer hands on sizes read from shapes as 0-dim integer tensors."""
    for check in (checks.positive_int, checks.non_negative_int):
        with pytest.raises(ValueError, match="int, got tensor"):
            check("len_q", torch.tensor(3))  # outside a trace, a tensor is no int

    def causal_rows(x: torch.Tensor) -> torch.Tensor:
        length = x.shape[1]  # a tensor while tracing
        checks.positive_int("length", length)
        checks.non_negative_int("length", length - 1)
        return torch.ones(length, length).tril().sum(dim=1) + x[0]

    traced = torch.jit.trace(causal_rows, torch.zeros(1, 3))
    assert traced(torch.zeros(1, 5)).tolist() == [1.0, 2.0, 3.0, 4.0, 5.0], "the traced length stays variable"
    with raises("length must be a positive int, got 0"):
        checks.positive_int("length", 0)
    with pytest.raises(ValueError, match="got tensor"):
        torch.jit.trace(lambda x: checks.positive_int("n", x.sum()) or x, torch.zeros(2))  # a float is no size


def test_positive_ints_checks_every_keyword_in_order():
    assert checks.positive_ints(d_model=8, num_heads=2, d_ff=1) is None
    assert checks.positive_ints() is None
    with raises("num_heads must be a positive int, got 0"):
        checks.positive_ints(d_model=8, num_heads=0, d_ff=-1)  # the first bad one is named
    with raises("d_ff must be a positive int, got True"):
        checks.positive_ints(d_model=8, num_heads=2, d_ff=True)


# ---- numbers -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 0.0, 0.1, 0.5, 0.999])
def test_probability_accepts_values_in_zero_one(value):
    assert checks.probability("dropout", value) is None


@pytest.mark.parametrize("value", [1.0, 1, -0.1, 1.5, True, False, "0.1", None, float("nan")])
def test_probability_rejects_one_negatives_bools_and_non_numbers(value):
    with raises(f"dropout must be in [0, 1), got {value!r}"):
        checks.probability("dropout", value)


@pytest.mark.parametrize("value", [1e-12, 1, 2.5, 10000.0])
def test_positive_number_accepts_positive_numbers(value):
    assert checks.positive_number("eps", value) is None


@pytest.mark.parametrize("value", [0, 0.0, -1e-5, True, "1e-5", None, float("nan")])
def test_positive_number_rejects_zero_negatives_bools_and_non_numbers(value):
    with raises(f"eps must be a positive number, got {value!r}"):
        checks.positive_number("eps", value)


# ---- choices and divisibility --------------------------------------------------------------------------


def test_one_of_accepts_a_listed_value_from_any_iterable():
    assert checks.one_of("norm", "rms", ("layer", "rms")) is None
    assert checks.one_of("norm", "layer", (n for n in ["layer", "rms"])) is None  # a generator is read once
    assert checks.one_of("num_kv_heads", None, [None, 4]) is None


@pytest.mark.parametrize("value", ["batch", "Layer", None, 1])
def test_one_of_rejects_other_values_and_lists_the_choices(value):
    with raises(f"norm must be one of ('layer', 'rms'), got {value!r}"):
        checks.one_of("norm", value, ["layer", "rms"])


@pytest.mark.parametrize(("value", "by"), [(8, 4), (8, 8), (8, 1), (0, 3)])
def test_divisible_accepts_multiples(value, by):
    assert checks.divisible("d_model", value, "num_heads", by) is None


def test_divisible_names_both_arguments_and_the_reason():
    with raises("d_model (30) must be divisible by num_heads (4)"):
        checks.divisible("d_model", 30, "num_heads", 4)
    with raises("num_heads (8) must be divisible by num_kv_heads (3); each K/V head serves a group"):
        checks.divisible("num_heads", 8, "num_kv_heads", 3, "each K/V head serves a group")


# ---- token ids -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.long, torch.int32, torch.int16, torch.uint8])
def test_token_ids_accepts_integer_batches_in_range(dtype):
    ids = torch.tensor([[0, 3, 9], [9, 9, 0]], dtype=dtype)
    assert checks.token_ids("src", ids, vocab_size=10, max_len=3) is None  # both ends of the range, len == max_len
    assert checks.token_ids("src", ids) is None


def test_token_ids_without_vocab_size_skips_the_range_check():
    assert checks.token_ids("src", torch.tensor([[-5, 10**6]])) is None
    with raises("src must hold ids in [0, 10), got values in [-5, 1000000]"):
        checks.token_ids("src", torch.tensor([[-5, 10**6]]), vocab_size=10)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bool, torch.complex64])
def test_token_ids_rejects_non_integer_dtypes(dtype):
    with raises(f"tgt must be an integer tensor, got dtype {dtype}"):
        checks.token_ids("tgt", torch.ones(2, 3, dtype=dtype), vocab_size=10)


@pytest.mark.parametrize("shape", [(3,), (2, 3, 1), ()])
def test_token_ids_must_be_two_dimensional(shape):
    with raises(f"src must have shape (batch, len) of token ids, got {shape}"):
        checks.token_ids("src", torch.ones(shape, dtype=torch.long))


def test_token_ids_must_be_a_tensor():
    with raises("src must be a torch.Tensor of token ids, got list"):
        checks.token_ids("src", [[1, 2, 3]])


def test_token_ids_of_length_zero_only_with_allow_empty():
    empty = torch.zeros(2, 0, dtype=torch.long)
    with raises("src has length 0; it must hold at least one token per row, got (2, 0)"):
        checks.token_ids("src", empty, vocab_size=10)
    assert checks.token_ids("src", empty, vocab_size=10, allow_empty=True) is None


def test_token_ids_longer_than_max_len():
    with raises("src has length 5, longer than the model's max_len=4"):
        checks.token_ids("src", torch.ones(1, 5, dtype=torch.long), max_len=4)


@pytest.mark.parametrize(
    ("ids", "values"),
    [([[1, 2, 10]], "[1, 10]"), ([[-1, 2, 3]], "[-1, 3]"), ([[-2], [12]], "[-2, 12]")],
)
def test_token_ids_out_of_range_names_the_range_and_the_values(ids, values):
    with raises(f"src must hold ids in [0, 10), got values in {values}"):
        checks.token_ids("src", torch.tensor(ids), vocab_size=10)


# ---- sequences and attention inputs --------------------------------------------------------------------


def test_sequence_accepts_batch_len_d_model():
    assert checks.sequence("x", torch.zeros(2, 3, 8), 8) is None
    assert checks.sequence("x", torch.zeros(1, 1, 1), 1) is None


@pytest.mark.parametrize(
    ("x", "got"),
    [(torch.zeros(2, 3, 4), "(2, 3, 4)"), (torch.zeros(3, 8), "(3, 8)"), (torch.zeros(1, 2, 3, 8), "(1, 2, 3, 8)")],
)
def test_sequence_rejects_other_shapes(x, got):
    with raises(f"x must have shape (batch, len, d_model=8), got {got}"):
        checks.sequence("x", x, 8)


def test_sequence_rejects_non_tensors():
    with raises("memory must have shape (batch, len, d_model=8), got list"):
        checks.sequence("memory", [[0.0] * 8], 8)


def test_attention_inputs_accepts_self_and_cross_attention():
    x = torch.zeros(2, 3, 8)
    assert checks.attention_inputs(x, x, x, 8) is None
    memory = torch.zeros(2, 5, 8)
    assert checks.attention_inputs(x, memory, memory, 8) is None


def test_attention_inputs_names_the_bad_tensor():
    x, memory = torch.zeros(2, 3, 8), torch.zeros(2, 5, 8)
    with raises("query must have shape (batch, len, d_model=8), got (2, 3, 4)"):
        checks.attention_inputs(torch.zeros(2, 3, 4), memory, memory, 8)
    with raises("key must have shape (batch, len, d_model=8), got (2, 5)"):
        checks.attention_inputs(x, torch.zeros(2, 5), memory, 8)
    with raises("value must have shape (batch, len, d_model=8), got (2, 5, 6)"):
        checks.attention_inputs(x, memory, torch.zeros(2, 5, 6), 8)


def test_attention_inputs_batch_and_length_mismatches():
    x, memory = torch.zeros(2, 3, 8), torch.zeros(2, 5, 8)
    with raises("query, key and value must share the batch size, got 2, 3, 3"):
        checks.attention_inputs(x, torch.zeros(3, 5, 8), torch.zeros(3, 5, 8), 8)
    with raises("query, key and value must share the batch size, got 2, 2, 1"):
        checks.attention_inputs(x, memory, torch.zeros(1, 5, 8), 8)
    with raises("key and value must have the same length, got 5 and 4"):
        checks.attention_inputs(x, memory, torch.zeros(2, 4, 8), 8)


@pytest.mark.parametrize(("len_q", "len_k", "first"), [(3, 3, 0), (2, 5, 3), (1, 7, 6)])
def test_queries_last_gives_the_first_querys_position(len_q, len_k, first):
    assert checks.queries_last(len_q, len_k) == first


def test_queries_last_rejects_more_queries_than_keys():
    with pytest.raises(ValueError, match=r"len_q=4 > len_k=3 \(use rope only in self-attention\)"):
        checks.queries_last(4, 3)


def test_qkv_accepts_broadcasting_leading_dimensions_and_another_d_v():
    assert checks.qkv(torch.zeros(3, 4), torch.zeros(5, 4), torch.zeros(5, 6)) is None
    assert checks.qkv(torch.zeros(2, 1, 3, 4), torch.zeros(1, 4, 5, 4), torch.zeros(2, 4, 5, 6)) is None


def test_qkv_rejects_bad_shapes():
    shapes = "must share a shape (..., len, head_dim) with the same number of dimensions, got (4,), (4,), (4,)"
    with raises(f"q, k, v {shapes}"):
        checks.qkv(torch.zeros(4), torch.zeros(4), torch.zeros(4))
    with pytest.raises(ValueError, match=r"same number of dimensions, got \(2, 3, 4\), \(3, 4\), \(2, 3, 4\)"):
        checks.qkv(torch.zeros(2, 3, 4), torch.zeros(3, 4), torch.zeros(2, 3, 4))
    with pytest.raises(ValueError, match=r"same number of dimensions, got \(3, 4\), \(3, 4\), \(1, 3, 4\)"):
        checks.qkv(torch.zeros(3, 4), torch.zeros(3, 4), torch.zeros(1, 3, 4))
    with raises("q and k must share the last dimension d_k, got 4 and 5"):
        checks.qkv(torch.zeros(3, 4), torch.zeros(3, 5), torch.zeros(3, 5))
    with raises("k and v must have the same length len_k, got 5 and 6"):
        checks.qkv(torch.zeros(3, 4), torch.zeros(5, 4), torch.zeros(6, 4))
    with pytest.raises(ValueError, match=r"leading dimensions of q, k, v must broadcast, got \(2, 3, 4\), \(3, 5, 4\)"):
        checks.qkv(torch.zeros(2, 3, 4), torch.zeros(3, 5, 4), torch.zeros(3, 5, 4))

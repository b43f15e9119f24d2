"""The checkers of notebook 08 accept the reference solutions and reject typical mistakes."""

import math

import pytest
import torch
import torch.nn.functional as F

from tests.chinese_feedback import assert_checker_speaks_chinese, assert_mistake_named_in_chinese
from transformer_course.exercises import encoder_decoder as ex
from transformer_course.language import set_language


def test_shift_right_checker(capsys):
    assert ex.check_shift_right(ex.shift_right_reference)
    assert "Exercise 8.1 (shift the target right): correct" in capsys.readouterr().out

    def stub(t, bos, pad, eos):
        raise NotImplementedError

    assert not ex.check_shift_right(stub)
    assert "not attempted yet" in capsys.readouterr().out

    def keeps_eos(t, bos, pad, eos):
        return torch.cat([torch.full_like(t[:, :1], bos), t[:, :-1]], 1)

    def no_drop(t, bos, pad, eos):
        return torch.cat([torch.full_like(t[:, :1], bos), t], 1)

    def left(t, bos, pad, eos):
        out = torch.cat([t[:, 1:], torch.full_like(t[:, :1], pad)], 1)
        out[:, 0] = bos
        return out

    def in_place(t, bos, pad, eos):
        t[t == eos] = pad
        return torch.cat([torch.full_like(t[:, :1], bos), t[:, :-1]], 1)

    def as_float(t, bos, pad, eos):
        return ex.shift_right_reference(t, bos, pad, eos).float()

    mistakes = {"never an input": keeps_eos, "drop the last column": no_drop, "wrong way": left,
                "in place": in_place, "integers": as_float}  # fmt: skip
    for hint, wrong in mistakes.items():
        assert not ex.check_shift_right(wrong)
        assert hint in capsys.readouterr().out


def test_cross_attention_checker(capsys):
    assert ex.check_cross_attention(ex.cross_attention_reference)
    assert "Exercise 8.2 (cross-attention, one head): correct" in capsys.readouterr().out

    def stub(*args):
        raise NotImplementedError

    assert not ex.check_cross_attention(stub)
    assert "not attempted yet" in capsys.readouterr().out

    def swapped(y, m, wq, wk, wv, mask):  # queries from the encoder, keys and values from the decoder
        return F.softmax((m @ wq) @ (y @ wk).transpose(-2, -1) / 2.0, -1) @ (y @ wv)

    def unscaled(y, m, wq, wk, wv, mask):
        s = ((y @ wq) @ (m @ wk).transpose(-2, -1)).masked_fill(~mask[:, None], float("-inf"))
        return F.softmax(s, -1) @ (m @ wv)

    def unmasked(y, m, wq, wk, wv, mask):
        return F.softmax((y @ wq) @ (m @ wk).transpose(-2, -1) / math.sqrt(wq.shape[1]), -1) @ (m @ wv)

    def wrong_axis(y, m, wq, wk, wv, mask):
        s = ((y @ wq) @ (m @ wk).transpose(-2, -1) / 2.0).masked_fill(~mask[:, None], -1e9)
        return F.softmax(s, 1) @ (m @ wv)

    def swapped_masked(y, m, wq, wk, wv, mask):  # the same slip with the mask applied: the shapes clash
        s = (m @ wq) @ (y @ wk).transpose(-2, -1) / 2.0
        return F.softmax(s.masked_fill(~mask[:, None], float("-inf")), -1) @ (y @ wv)

    def inverted_mask(y, m, wq, wk, wv, mask):
        s = ((y @ wq) @ (m @ wk).transpose(-2, -1) / 2.0).masked_fill(mask[:, None], float("-inf"))
        return F.softmax(s, -1) @ (m @ wv)

    def no_query_axis(y, m, wq, wk, wv, mask):  # the mask (batch, len_s) used as it is: it cannot broadcast
        s = ((y @ wq) @ (m @ wk).transpose(-2, -1) / 2.0).masked_fill(~mask, float("-inf"))
        return F.softmax(s, -1) @ (m @ wv)

    mistakes = {"queries must come from the decoder": swapped, "sqrt(d_k)": unscaled, "src_mask": unmasked,
                "Take the softmax over the source positions": wrong_axis,
                "queries come from y (the decoder)": swapped_masked,
                "src_mask is True at real tokens": inverted_mask,
                "give the mask a query axis": no_query_axis}  # fmt: skip
    for hint, wrong in mistakes.items():
        assert not ex.check_cross_attention(wrong)
        assert hint in capsys.readouterr().out


def test_parameter_formula_checker(capsys):
    assert ex.check_parameter_formula(ex.parameter_formula_reference)
    assert "Exercise 8.3 (parameters by formula): correct" in capsys.readouterr().out

    def stub(*args):
        raise NotImplementedError

    assert not ex.check_parameter_formula(stub)
    assert "not attempted yet" in capsys.readouterr().out

    def make(attn_dec=2, norm=True, emb_times=1, out_bias=True, attn_bias=True, ffn_bias=True, norm_size=2):
        def formula(d_model, d_ff, num_encoder_layers, num_decoder_layers, vocab_size):
            a = 4 * (d_model * d_model + (d_model if attn_bias else 0))
            f = 2 * d_model * d_ff + (d_ff + d_model if ffn_bias else 0)
            n = norm_size * d_model if norm else 0
            enc = a + f + 2 * n
            dec = attn_dec * a + f + 3 * n
            total = num_encoder_layers * enc + num_decoder_layers * dec + emb_times * vocab_size * d_model
            return total + (vocab_size if out_bias else 0)

        return formula

    mistakes = {
        "cross-attention": make(attn_dec=1),
        "LayerNorm": make(norm=False),
        "count it once": make(emb_times=2),
        "embedding table (vocab_size x d_model) is missing": make(emb_times=0),
        "own bias": make(out_bias=False),
        "the attention blocks' biases are missing": make(attn_bias=False),
        "the feed-forward biases are missing": make(ffn_bias=False),
        "each LayerNorm has a bias as well as a gain": make(norm_size=1),
        "the biases and the LayerNorms are missing": _weights_only,
        "the biases are missing": _no_biases,
        "a decoder layer is not an encoder layer": _decoder_layers_as_encoder_layers,
    }
    for hint, wrong in mistakes.items():
        assert not ex.check_parameter_formula(wrong)
        assert hint in capsys.readouterr().out
    assert not ex.check_parameter_formula(lambda *args: 12345)
    assert "expected" in capsys.readouterr().out
    assert not ex.check_parameter_formula(lambda *args: 1.5)
    assert "should return an int" in capsys.readouterr().out


# ---- the feedback in Chinese, on mistakes of the tests above ------------------------------------------------


def _keeps_eos(t, bos, pad, eos):
    return torch.cat([torch.full_like(t[:, :1], bos), t[:, :-1]], 1)


def _shifted_left(t, bos, pad, eos):
    out = torch.cat([t[:, 1:], torch.full_like(t[:, :1], pad)], 1)
    out[:, 0] = bos
    return out


def _queries_from_memory(y, m, wq, wk, wv, mask):
    return F.softmax((m @ wq) @ (y @ wk).transpose(-2, -1) / 2.0, -1) @ (y @ wv)


def _inverted_mask(y, m, wq, wk, wv, mask):
    s = ((y @ wq) @ (m @ wk).transpose(-2, -1) / 2.0).masked_fill(mask[:, None], float("-inf"))
    return F.softmax(s, -1) @ (m @ wv)


def _no_query_axis(y, m, wq, wk, wv, mask):
    s = ((y @ wq) @ (m @ wk).transpose(-2, -1) / 2.0).masked_fill(~mask, float("-inf"))
    return F.softmax(s, -1) @ (m @ wv)


def _no_attention_biases(d_model, d_ff, num_encoder_layers, num_decoder_layers, vocab_size):
    a = 4 * d_model * d_model  # the slip: W_Q, W_K, W_V, W_O without their biases
    f = 2 * d_model * d_ff + d_ff + d_model
    n = 2 * d_model
    enc, dec = a + f + 2 * n, 2 * a + f + 3 * n
    return num_encoder_layers * enc + num_decoder_layers * dec + vocab_size * d_model + vocab_size


def _no_cross_attention(d_model, d_ff, num_encoder_layers, num_decoder_layers, vocab_size):
    a = 4 * (d_model * d_model + d_model)
    f = 2 * d_model * d_ff + d_ff + d_model
    n = 2 * d_model
    enc, dec = a + f + 2 * n, a + f + 3 * n
    return num_encoder_layers * enc + num_decoder_layers * dec + vocab_size * d_model + vocab_size


def _decoder_layers_as_encoder_layers(d_model, d_ff, num_encoder_layers, num_decoder_layers, vocab_size):
    a = 4 * (d_model * d_model + d_model)
    layer = a + 2 * d_model * d_ff + d_ff + d_model + 2 * 2 * d_model  # an encoder layer, counted for both stacks
    return (num_encoder_layers + num_decoder_layers) * layer + vocab_size * d_model + vocab_size


def _weights_only(d_model, d_ff, num_encoder_layers, num_decoder_layers, vocab_size):
    """The commonest miss: only the weight matrices, no bias and no LayerNorm anywhere."""
    ffn = 2 * d_model * d_ff
    encoder_layer, decoder_layer = 4 * d_model * d_model + ffn, 8 * d_model * d_model + ffn
    return num_encoder_layers * encoder_layer + num_decoder_layers * decoder_layer + vocab_size * d_model


def _no_biases(d_model, d_ff, num_encoder_layers, num_decoder_layers, vocab_size):
    norms = 2 * d_model * (2 * num_encoder_layers + 3 * num_decoder_layers)
    return _weights_only(d_model, d_ff, num_encoder_layers, num_decoder_layers, vocab_size) + norms


CHECKERS = {
    "8.1": (ex.check_shift_right, ex.shift_right_reference),
    "8.2": (ex.check_cross_attention, ex.cross_attention_reference),
    "8.3": (ex.check_parameter_formula, ex.parameter_formula_reference),
}


@pytest.mark.parametrize("number", list(CHECKERS))
def test_checkers_speak_chinese(number, capsys):
    assert_checker_speaks_chinese(number, *CHECKERS[number], capsys)


@pytest.mark.parametrize(
    "check, wrong, hint",
    [
        (ex.check_shift_right, _keeps_eos, "绝不会是输入"),
        (ex.check_shift_right, _shifted_left, "方向移反了"),
        (ex.check_cross_attention, _queries_from_memory, "查询必须来自解码器（y）"),
        (ex.check_cross_attention, _inverted_mask, "掩码反了"),
        (ex.check_cross_attention, _no_query_axis, "要给掩码加上查询轴"),
        (ex.check_parameter_formula, _no_cross_attention, "每个解码器层还有第二个注意力块"),
        (ex.check_parameter_formula, _no_attention_biases, "漏掉了注意力块的偏置"),
        (ex.check_parameter_formula, _decoder_layers_as_encoder_layers, "解码器层不等于编码器层"),
        (ex.check_parameter_formula, lambda *args: 12345, "应为 20,610 个参数"),
        (ex.check_parameter_formula, _weights_only, "漏掉了偏置和层归一化：每个线性层都有偏置"),
        (ex.check_parameter_formula, _no_biases, "漏掉了偏置：每个线性层都有偏置"),
    ],
)
def test_checkers_explain_mistakes_in_chinese(check, wrong, hint, capsys):
    assert_mistake_named_in_chinese(check, wrong, hint, capsys)


def test_cross_attention_checker_names_a_mask_multiplied_into_the_scores(capsys):
    def multiplied(y, memory, w_q, w_k, w_v, src_mask):
        q, k, v = y @ w_q, memory @ w_k, memory @ w_v
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        return torch.softmax(scores * src_mask[:, None], dim=-1) @ v

    assert not ex.check_cross_attention(multiplied)
    assert "not be multiplied by the mask" in capsys.readouterr().out
    set_language("zh")
    try:
        assert not ex.check_cross_attention(multiplied)
        assert "不能乘以掩码" in capsys.readouterr().out
    finally:
        set_language("en")


@pytest.mark.parametrize(
    "slip, hint",
    [
        ("d_model", "divide by sqrt(d_k) = sqrt(4)"),
        ("inverted, -1e9", "you masked the real tokens"),
    ],
)
def test_cross_attention_checker_names_two_more_slips(slip, hint, capsys):
    def answer(y, memory, w_q, w_k, w_v, src_mask):
        q, k, v = y @ w_q, memory @ w_k, memory @ w_v
        if slip == "d_model":
            scores = (q @ k.transpose(-2, -1) / math.sqrt(y.shape[-1])).masked_fill(~src_mask[:, None], float("-inf"))
        else:
            scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(src_mask[:, None], -1e9)
        return torch.softmax(scores, dim=-1) @ v

    assert not ex.check_cross_attention(answer)
    assert hint in capsys.readouterr().out

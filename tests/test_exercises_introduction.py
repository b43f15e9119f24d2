"""The checker of notebook 00 accepts the reference, which matches the model's real weights, and rejects the
likely mistakes with a hint."""

from __future__ import annotations

import pytest
import torch

from transformer_course import Transformer, TransformerConfig
from transformer_course.exercises.introduction import (
    check_cross_attention_shape,
    cross_attention_shape_reference,
)
from transformer_course.language import set_language


def test_the_reference_is_the_shape_the_model_stores():
    config = TransformerConfig.preset("tiny", src_vocab_size=20, tgt_vocab_size=20)
    model = Transformer(config).eval()
    src, tgt = torch.randint(1, 20, (3, 7)), torch.randint(1, 20, (3, 5))
    with torch.no_grad():
        model(src, tgt)
    for layer in model.decoder.layers:
        stored = layer.cross_attention.attention_weights
        assert tuple(stored.shape) == cross_attention_shape_reference(config, 3, 7, 5)


def test_accepts_the_reference(capsys):
    assert check_cross_attention_shape(cross_attention_shape_reference)
    assert capsys.readouterr().out.startswith("Exercise 0.1 (the shape of cross-attention weights): correct")


def test_a_stub_is_not_attempted(capsys):
    def stub(config, batch, n_src, n_tgt):
        raise NotImplementedError

    assert not check_cross_attention_shape(stub)
    assert "not attempted yet" in capsys.readouterr().out


MISTAKES = {
    "queries and keys swapped": (lambda c, b, s, t: (b, c.num_heads, s, t), "swapped"),
    "self-attention on the target": (lambda c, b, s, t: (b, c.num_heads, t, t), "self-attention"),
    "self-attention on the source": (lambda c, b, s, t: (b, c.num_heads, s, s), "self-attention"),
    "no heads axis": (lambda c, b, s, t: (b, t, s), "heads axis"),
    "the output's shape": (lambda c, b, s, t: (b, t, c.d_model), "width"),
    "with d_k": (lambda c, b, s, t: (b, c.num_heads, t, c.d_model // c.num_heads), "width"),
    "a list": (lambda c, b, s, t: [b, c.num_heads, t, s], "a tuple of ints, got list."),
    "a tensor's shape of floats": (lambda c, b, s, t: (float(b), c.num_heads, t, s), "tuple of ints"),
    "heads first": (lambda c, b, s, t: (c.num_heads, b, t, s), "not (B, h, n_q, n_k)"),
}


@pytest.mark.parametrize("name", list(MISTAKES))
def test_rejects_typical_mistakes_with_a_hint(name, capsys):
    mistake, hint = MISTAKES[name]
    assert not check_cross_attention_shape(mistake)
    out = capsys.readouterr().out
    assert "not yet" in out and hint.lower() in out.lower()


# ---- the feedback in Chinese ---------------------------------------------------------------------------------


def test_the_checker_speaks_chinese(capsys):
    set_language("zh")
    assert check_cross_attention_shape(cross_attention_shape_reference)
    out = capsys.readouterr().out
    assert out.startswith("练习 0.1（") and out.endswith("正确！\n")

    def stub(config, batch, n_src, n_tgt):
        raise NotImplementedError

    assert not check_cross_attention_shape(stub)
    out = capsys.readouterr().out
    assert out.startswith("练习 0.1（") and "尚未作答" in out


ZH_MISTAKES = {
    "queries and keys swapped": "你把最后两个轴交换了",
    "self-attention on the target": "你给出的是自注意力的形状",
    "no heads axis": "缺少头这个轴",
    "the output's shape": "你的形状里含有向量的维度",
    "a list": "形状应以整数元组的形式返回，而你返回的是 list",
    "heads first": "而交叉注意力权重的形状应为 (B, h, n_q, n_k)",
}


@pytest.mark.parametrize("name", list(ZH_MISTAKES))
def test_the_checker_explains_mistakes_in_chinese(name, capsys):
    set_language("zh")
    mistake, _ = MISTAKES[name]
    assert not check_cross_attention_shape(mistake)
    out = capsys.readouterr().out
    assert out.startswith("练习 0.1（") and "：还不对。" in out and ZH_MISTAKES[name] in out

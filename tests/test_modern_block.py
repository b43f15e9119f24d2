"""The modern decoder block and language model: parts, causality, cache, parameter count vs published models."""

from __future__ import annotations

import pytest
import torch

from transformer_course.attention import KVCache
from transformer_course.layers import SwiGLUFeedForward
from transformer_course.modern_block import ModernDecoderBlock, ModernDecoderLM, llama_parameter_count
from transformer_course.norms import RMSNorm
from transformer_course.utils import count_parameters


def test_block_is_built_from_the_course_parts():
    block = ModernDecoderBlock(64, num_heads=8, num_kv_heads=2)
    assert isinstance(block.self_attention_residual.norm, RMSNorm) and isinstance(
        block.feed_forward_residual.norm, RMSNorm
    )
    assert isinstance(block.feed_forward, SwiGLUFeedForward)
    assert block.feed_forward.d_ff == SwiGLUFeedForward.matched_d_ff(256)
    assert block.self_attention.num_kv_heads == 2 and block.self_attention.rope is not None


def test_block_equals_its_written_out_pre_norm_formula():
    torch.manual_seed(0)
    block = ModernDecoderBlock(32, num_heads=4, num_kv_heads=2).eval()
    x = torch.randn(2, 7, 32)
    h = x + block.self_attention(block.self_attention_residual.norm(x), causal=True)
    expected = h + block.feed_forward(block.feed_forward_residual.norm(h))
    torch.testing.assert_close(block(x), expected)
    post = ModernDecoderBlock(32, num_heads=4, norm_first=False).eval()
    h = post.self_attention_residual.norm(x + post.self_attention(x, causal=True))
    torch.testing.assert_close(post(x), post.feed_forward_residual.norm(h + post.feed_forward(h)))


def test_block_is_causal():
    torch.manual_seed(1)
    block = ModernDecoderBlock(32, num_heads=4, num_kv_heads=1).eval()
    x = torch.randn(1, 8, 32)
    changed = x.clone()
    changed[:, 5:] = torch.randn(1, 3, 32)
    torch.testing.assert_close(block(x)[:, :5], block(changed)[:, :5])


def test_lm_incremental_decoding_equals_full_pass():
    torch.manual_seed(2)
    model = ModernDecoderLM(50, 32, num_layers=2, num_heads=4, num_kv_heads=2).eval()
    ids = torch.randint(0, 50, (2, 10))
    full = model(ids)
    caches = [KVCache() for _ in model.blocks]
    steps = [model(ids[:, :3], caches)] + [model(ids[:, i : i + 1], caches) for i in range(3, 10)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full)


@pytest.mark.parametrize("tie", [False, True])
def test_parameter_count_formula_matches_the_module(tie):
    model = ModernDecoderLM(97, 48, num_layers=3, num_heads=6, num_kv_heads=2, d_ff=80, tie_embeddings=tie)
    assert count_parameters(model) == llama_parameter_count(97, 48, 3, 6, 2, 80, tie_embeddings=tie)


def test_parameter_counts_of_published_models():
    assert llama_parameter_count(32000, 4096, 32, 32, 32, 11008) == 6_738_415_616  # Llama-2-7B
    assert llama_parameter_count(128256, 4096, 32, 32, 8, 14336) == 8_030_261_248  # Llama-3-8B
    assert llama_parameter_count(32000, 4096, 32, 32, 8, 14336) == 7_241_732_096  # Mistral-7B


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: ModernDecoderBlock(0, 4), "d_model"),
        (lambda: ModernDecoderBlock(32, 4, 3), "divisible by num_kv_heads"),
        (lambda: ModernDecoderLM(0, 32, 1, 4), "vocab_size"),
        (lambda: ModernDecoderLM(10, 32, 0, 4), "num_layers"),
        (lambda: ModernDecoderLM(10, 32, 1, 4)(torch.tensor([[1, 10]])), "token_ids must hold ids"),
        (lambda: ModernDecoderLM(10, 32, 1, 4)(torch.zeros(1, 3)), "integer tensor"),
        (
            lambda: ModernDecoderLM(10, 32, 2, 4)(torch.zeros(1, 3, dtype=torch.long), [KVCache()]),
            "one cache per block",
        ),
        (lambda: llama_parameter_count(100, 64, 2, 4, 0, 128), "num_kv_heads"),
    ],
)
def test_bad_input_raises_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()

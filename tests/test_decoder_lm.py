"""decoder_lm.py: the one decoder-only model on its two block presets (GPT-2, LLaMA): parts, causality, the KV
cache with learned and rotary positions, PyTorch parity, the padding mask, parameter counts, bad input."""

from __future__ import annotations

import pytest
import torch

from transformer_course.core.attention import KVCache
from transformer_course.core.decoding import generate
from transformer_course.core.interop import encoder_layer_to_torch
from transformer_course.core.layers import EncoderLayer, SwiGLUFeedForward
from transformer_course.core.masks import to_torch_blocking_mask
from transformer_course.core.norms import RMSNorm
from transformer_course.core.positional import LearnedPositionalEncoding, NoPositionalEncoding
from transformer_course.families.decoder_lm import (
    DecoderLM,
    gpt2_block_config,
    llama_block_config,
    llama_parameter_count,
)
from transformer_course.utils import count_parameters

VOCAB = 40
PRESETS = {
    "gpt2": lambda: gpt2_block_config(16, 2, 32, max_len=24),
    "llama": lambda: llama_block_config(16, 4, num_kv_heads=2, max_len=24),
}


def _lm(preset: str, seed: int = 0, **kwargs) -> DecoderLM:
    torch.manual_seed(seed)
    return DecoderLM(PRESETS[preset](), VOCAB, num_layers=2, **kwargs).eval()


def _ids(batch: int = 2, length: int = 10, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


# ---- the two presets ------------------------------------------------------------------------------------


def test_presets_are_two_settings_of_the_one_block():
    gpt2, llama = gpt2_block_config(64, 8), llama_block_config(64, 8, 2)
    assert (gpt2.norm, gpt2.norm_first, gpt2.activation, gpt2.rope, gpt2.bias, gpt2.d_ff) == (
        "layer",
        True,
        "gelu",
        False,
        True,
        256,
    )
    assert (llama.norm, llama.norm_first, llama.activation, llama.rope, llama.bias, llama.num_kv_heads) == (
        "rms",
        True,
        "swiglu",
        True,
        False,
        2,
    )
    assert llama.d_ff == SwiGLUFeedForward.matched_d_ff(256)
    block = EncoderLayer(llama)  # a decoder-only block is an EncoderLayer run with causal=True
    assert isinstance(block.self_attention_residual.norm, RMSNorm) and isinstance(block.feed_forward, SwiGLUFeedForward)
    assert block.self_attention.num_kv_heads == 2 and block.self_attention.rope is not None


def test_llama_block_equals_its_written_out_pre_norm_formula():
    torch.manual_seed(0)
    block = EncoderLayer(llama_block_config(32, 4, 2)).eval()
    x = torch.randn(2, 7, 32)
    h = x + block.self_attention(block.self_attention_residual.norm(x), causal=True)
    expected = h + block.feed_forward(block.feed_forward_residual.norm(h))
    torch.testing.assert_close(block(x, causal=True), expected)
    post = EncoderLayer(llama_block_config(32, 4, norm_first=False)).eval()
    h = post.self_attention_residual.norm(x + post.self_attention(x, causal=True))
    torch.testing.assert_close(post(x, causal=True), post.feed_forward_residual.norm(h + post.feed_forward(h)))


def test_positions_follow_the_block_learned_without_rope_none_with_it():
    gpt2, llama = _lm("gpt2"), _lm("llama")
    assert isinstance(gpt2.positional, LearnedPositionalEncoding) and gpt2.positional.max_len == 24
    assert isinstance(llama.positional, NoPositionalEncoding)
    assert gpt2.max_len == llama.max_len == 24  # from the block config
    assert isinstance(DecoderLM(PRESETS["gpt2"](), VOCAB, 1, positional="none").positional, NoPositionalEncoding)
    assert gpt2.head is None and not [n for n in dict(gpt2.named_parameters()) if n.startswith("head")]
    untied = DecoderLM(PRESETS["llama"](), VOCAB, 1, tie_output=False)
    assert untied.head.weight is not untied.token_embedding.weight


# ---- causality, cache, parity ---------------------------------------------------------------------------


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_the_causal_mask_is_always_applied(preset):
    model = _lm(preset)
    ids = _ids(2, 10)
    changed = ids.clone()
    changed[:, 6:] = (ids[:, 6:] + 1) % VOCAB
    with torch.no_grad():
        a, b = model(ids), model(changed)
    assert a.shape == (2, 10, VOCAB)
    torch.testing.assert_close(a[:, :6], b[:, :6])
    assert not torch.allclose(a[:, 6:], b[:, 6:])


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_incremental_decoding_with_a_cache_equals_the_full_pass(preset):
    model = _lm(preset, seed=2)
    ids = _ids(2, 10)
    with torch.no_grad():
        full = model(ids)
        caches = model.new_cache()
        steps = [model(ids[:, :3], caches)] + [model(ids[:, i : i + 1], caches) for i in range(3, 10)]
    assert len(caches) == 2 and len(caches[0]) == 10
    torch.testing.assert_close(torch.cat(steps, dim=1), full)


def test_learned_positions_start_after_the_cached_ones():
    model = _lm("gpt2")
    ids = _ids(1, 6)
    with torch.no_grad():
        caches = model.new_cache()
        model(ids[:, :5], caches)
        last = model(ids[:, 5:], caches)[:, 0]
        as_position_0 = model(ids[:, 5:])[:, 0]  # the same token without the cache sits at position 0
    torch.testing.assert_close(last, model(ids)[:, 5])
    assert not torch.allclose(last, as_position_0)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_cached_generation_equals_uncached_generation(preset):
    model = _lm(preset, seed=3).double()  # float64: the two ways of summing cannot swap two nearly tied tokens
    prompt = _ids(3, 5)
    plain = generate(model, prompt, 19, greedy=True)
    torch.testing.assert_close(generate(model, prompt, 19, greedy=True, use_cache=True), plain)
    sampled = [
        generate(model, prompt, 19, top_p=0.9, generator=torch.Generator().manual_seed(3), use_cache=cached)
        for cached in (True, False)
    ]
    torch.testing.assert_close(*sampled)
    calls = []
    model.register_forward_pre_hook(lambda module, args: calls.append(args[0].shape[1]))
    generate(model, prompt, 4, greedy=True, use_cache=True)
    assert calls == [5, 1, 1, 1]  # the prompt once, then one token per step
    with pytest.raises(ValueError, match=r"the prompt \(5\) plus max_new_tokens \(20\) exceed its max_len=24"):
        generate(model, prompt, 20, use_cache=True)


def test_gpt2_preset_equals_a_pytorch_encoder_stack_with_a_causal_mask():
    model = _lm("gpt2")
    ids = _ids(2, 10)
    x = model.positional(model.token_embedding(ids))
    blocked = to_torch_blocking_mask(torch.ones(10, 10, dtype=torch.bool).tril())
    with torch.no_grad():
        for layer in model.blocks:
            x = encoder_layer_to_torch(layer).eval()(x, src_mask=blocked)
        logits = model.decoder.norm(x) @ model.token_embedding.weight.T
        torch.testing.assert_close(model(ids), logits, atol=1e-5, rtol=1e-4)


def test_pad_id_hides_padding_and_cannot_go_through_the_cache():
    model = _lm("gpt2", pad_id=0)
    ids = torch.randint(1, VOCAB, (1, 6), generator=torch.Generator().manual_seed(0))
    padded = ids.clone()
    padded[0, 2] = 0
    with torch.no_grad():
        masked = model(padded)
        by_hand = model.decoder(
            model.positional(model.token_embedding(padded)), (padded != 0)[:, None, None, :], causal=True
        )
    torch.testing.assert_close(masked, by_hand @ model.token_embedding.weight.T)
    assert torch.equal(model.token_embedding.weight[0], torch.zeros(16))  # the padding row starts at zero
    with pytest.raises(ValueError, match="ids fed with caches must not contain pad_id=0"):
        model(padded, model.new_cache())


# ---- sizes ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tie", [False, True])
def test_parameter_count_formula_matches_the_module(tie):
    model = DecoderLM(llama_block_config(48, 6, 2, d_ff=80), 97, num_layers=3, tie_output=tie)
    assert count_parameters(model) == llama_parameter_count(97, 48, 3, 6, 2, 80, tie_embeddings=tie)


def test_parameter_counts_of_published_models():
    assert llama_parameter_count(32000, 4096, 32, 32, 32, 11008) == 6_738_415_616  # Llama-2-7B
    assert llama_parameter_count(128256, 4096, 32, 32, 8, 14336) == 8_030_261_248  # Llama-3-8B
    assert llama_parameter_count(32000, 4096, 32, 32, 8, 14336) == 7_241_732_096  # Mistral-7B


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: llama_block_config(0, 4), "d_model"),
        (lambda: llama_block_config(32, 4, 3), "divisible by num_kv_heads"),
        (lambda: gpt2_block_config(30, 4), "divisible by num_heads"),
        (lambda: DecoderLM(llama_block_config(32, 4), 0, 1), "vocab_size"),
        (lambda: DecoderLM(llama_block_config(32, 4), 10, 0), "num_layers"),
        (lambda: DecoderLM({"d_model": 32}, 10, 1), "config must be a BlockConfig"),
        (lambda: DecoderLM(llama_block_config(32, 4), 10, 1, positional="rope"), "positional must be one of"),
        (lambda: _lm("llama")(torch.tensor([[1, VOCAB]])), f"token id {VOCAB} is outside the vocabulary"),
        (lambda: _lm("llama")(torch.zeros(1, 3)), "integer tensor"),
        (lambda: _lm("gpt2")(torch.zeros(1, 25, dtype=torch.long)), "longer than the model's max_len=24"),
        (lambda: _lm("llama")(torch.zeros(1, 3, dtype=torch.long), [KVCache()]), "one KVCache per block"),
        (lambda: llama_parameter_count(100, 64, 2, 4, 0, 128), "num_kv_heads"),
    ],
)
def test_bad_input_raises_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_cache_overflow_names_the_positions():
    model = _lm("gpt2")
    caches = model.new_cache()
    model(_ids(1, 20), caches)
    with pytest.raises(ValueError, match=r"20 cached \+ 5 new positions exceed the model's max_len=24"):
        model(_ids(1, 5), caches)


def test_xavier_switch_sets_the_blocks_initial_range():
    """xavier=True draws the block matrices from Xavier's wider range; False keeps nn.Linear's 1/sqrt(fan_in)."""
    config = llama_block_config(64, 4)
    torch.manual_seed(0)
    wide = DecoderLM(config, 50, 2, xavier=True).blocks[0].self_attention.w_q.weight
    torch.manual_seed(0)
    narrow = DecoderLM(config, 50, 2, xavier=False).blocks[0].self_attention.w_q.weight
    assert wide.abs().max() > (6 / 128) ** 0.5 * 0.9  # Xavier-uniform bound sqrt(6 / (fan_in + fan_out))
    assert narrow.abs().max() <= 64**-0.5  # nn.Linear's default bound 1 / sqrt(fan_in)
    with pytest.raises(ValueError, match="xavier"):
        DecoderLM(config, 50, 2, xavier=1)


def test_language_model_styles_keep_their_initialisation():
    from transformer_course.families.language_model import LMConfig, build_language_model

    torch.manual_seed(0)
    llama = build_language_model(LMConfig(style="llama", d_model=64, num_heads=4, num_layers=1), 50)
    torch.manual_seed(0)
    gpt2 = build_language_model(LMConfig(style="gpt2", d_model=64, num_heads=4, num_layers=1), 50)
    assert llama.blocks[0].self_attention.w_q.weight.abs().max() <= 64**-0.5
    assert gpt2.blocks[0].self_attention.w_q.weight.abs().max() > 64**-0.5

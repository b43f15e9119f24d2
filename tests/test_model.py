"""model.py: TransformerConfig's switches reach every layer; the stacks; checks at the model's edge."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer_course import Transformer, TransformerConfig
from transformer_course.model import Decoder, Encoder
from transformer_course.norms import RMSNorm
from transformer_course.positional import NoPositionalEncoding, SinusoidalPositionalEncoding

TINY = TransformerConfig.preset("tiny", src_vocab_size=20, tgt_vocab_size=20, dropout=0.0)


def _norms(module: nn.Module) -> list[nn.Module]:
    return [m for m in module.modules() if isinstance(m, (nn.LayerNorm, RMSNorm))]


def test_rms_norm_everywhere_is_one_field():
    model = Transformer(TINY.replace(norm="rms", norm_first=True))
    norms = _norms(model)
    # 2 per encoder layer, 3 per decoder layer, and the two final norms of Pre-LN
    assert len(norms) == 2 * 2 + 3 * 2 + 2 and all(isinstance(m, RMSNorm) for m in norms)
    assert all(isinstance(m, nn.LayerNorm) for m in _norms(Transformer(TINY)))


def test_rope_in_the_papers_decoder_is_one_field():
    model = Transformer(TINY.replace(positional="rope")).eval()
    assert isinstance(model.positional, NoPositionalEncoding)
    assert all(layer.self_attention.rope is not None for layer in model.decoder.layers)
    assert all(layer.cross_attention.rope is None for layer in model.decoder.layers)
    assert isinstance(Transformer(TINY).positional, SinusoidalPositionalEncoding)
    src, tgt = torch.randint(1, 20, (2, 6)), torch.randint(1, 20, (2, 5))
    full = model(src, tgt)
    memory = model.encode(src)
    cache, steps = model.new_cache(), []
    for t in range(5):  # incremental decoding: RoPE positions follow the cache
        steps.append(model.output_projection(model.decode(tgt[:, t : t + 1], memory, cache=cache, offset=t)))
    torch.testing.assert_close(torch.cat(steps, dim=1), full)


def test_grouped_query_attention_and_swiglu_in_the_paper_model():
    model = Transformer(TINY.replace(num_kv_heads=1, activation="swiglu", bias=False))
    attention = model.decoder.layers[0].cross_attention
    assert attention.num_kv_heads == 1 and attention.w_k.out_features == TINY.d_model // TINY.num_heads
    logits = model(torch.randint(1, 20, (2, 4)), torch.randint(1, 20, (2, 3)))
    assert logits.shape == (2, 3, 20)


def test_output_projection_is_named_for_what_it_does():
    model = Transformer(TINY.replace(tie_output=True))
    assert model.output_projection.weight is model.tgt_embedding.embedding.weight
    assert not hasattr(model, "generator")


def test_stacks_take_a_block_config_or_its_fields():
    encoder = Encoder(2, TINY.block)
    assert len(encoder.layers) == 2 and encoder.norm is None
    assert isinstance(Encoder(1, d_model=8, num_heads=2, d_ff=16, norm_first=True).norm, nn.LayerNorm)
    assert isinstance(Decoder(1, TINY.block, norm="rms", final_norm=True).norm, RMSNorm)


def test_old_config_dicts_load_with_the_new_fields_at_their_defaults():
    old = {k: v for k, v in TINY.to_dict().items() if k not in ("norm", "num_kv_heads", "rope_base", "bias")}
    assert TransformerConfig(**old) == TINY


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda m: m(torch.zeros(2, 0, dtype=torch.long), torch.ones(2, 3, dtype=torch.long)), "src has length 0"),
        (lambda m: m.encode(torch.zeros(1, 0, dtype=torch.long)), "src has length 0"),
        (lambda m: m(torch.ones(2, 3), torch.ones(2, 3, dtype=torch.long)), "integer tensor"),
        (lambda m: m.decode(torch.ones(1, 2, dtype=torch.long), torch.zeros(1, 3, 64), offset=-1), "offset"),
        (lambda m: m.decode(torch.ones(1, 2, dtype=torch.long), torch.zeros(1, 3, 64), offset=511), "max_len=512"),
        (lambda m: m.decode(torch.ones(2, 2, dtype=torch.long), torch.zeros(1, 3, 64)), "memory must have shape"),
    ],
)
def test_bad_input_at_the_edge(call, match):
    with pytest.raises(ValueError, match=match):
        call(Transformer(TINY))


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        (dict(positional="alibi"), "positional must be one of"),
        (dict(norm="batch"), "norm must be one of"),
        (dict(num_kv_heads=3), "divisible by num_kv_heads"),
        (dict(num_encoder_layers=-1), "num_encoder_layers must be a non-negative int"),
    ],
)
def test_bad_config_raises_value_error(fields, match):
    with pytest.raises(ValueError, match=match):
        TINY.replace(**fields)

from __future__ import annotations

import torch

from transformer_course import Transformer, TransformerConfig, count_parameters, get_device, seed_everything


def test_seed_everything_repeats_random_draws():
    seed_everything(3)
    first = torch.randn(4)
    seed_everything(3)
    assert torch.equal(first, torch.randn(4))


def test_get_device_falls_back_to_an_available_one():
    assert get_device().type in {"cpu", "cuda", "mps"}
    assert get_device("cpu").type == "cpu"


def test_presets_and_replace():
    base = TransformerConfig.preset("base", src_vocab_size=100, tgt_vocab_size=100)
    assert (base.d_model, base.num_heads, base.d_ff, base.num_encoder_layers, base.dropout) == (512, 8, 2048, 6, 0.1)
    tiny = TransformerConfig.preset("tiny", src_vocab_size=100, tgt_vocab_size=100, num_heads=2)
    assert (tiny.d_model, tiny.num_heads) == (64, 2)
    assert tiny.replace(d_model=32).d_model == 32
    assert tiny.to_dict()["d_ff"] == 256


def test_shared_and_tied_embeddings_are_one_tensor():
    config = TransformerConfig.preset(
        "tiny", src_vocab_size=30, tgt_vocab_size=30, share_embeddings=True, tie_output=True
    )
    model = Transformer(config)
    assert model.src_embedding is model.tgt_embedding
    assert model.output_projection.weight is model.tgt_embedding.weight
    untied = Transformer(config.replace(share_embeddings=False, tie_output=False))
    assert count_parameters(untied) - count_parameters(model) == 2 * 30 * 64


def test_embedding_init_keeps_positions_visible():
    model = Transformer(TransformerConfig.preset("tiny", src_vocab_size=500, tgt_vocab_size=500))
    scaled = model.src_embedding(torch.arange(1, 500)[None])
    assert 0.8 < scaled.std().item() < 1.2  # the same scale as the sinusoidal table's entries
    assert torch.equal(model.src_embedding.weight[0], torch.zeros(64))  # the pad row


def test_learned_positions_and_no_pad_id():
    config = TransformerConfig.preset("tiny", src_vocab_size=9, tgt_vocab_size=9, positional="learned", pad_id=None)
    model = Transformer(config).eval()
    logits = model(torch.randint(0, 9, (2, 5)), torch.randint(0, 9, (2, 4)))
    assert logits.shape == (2, 4, 9)

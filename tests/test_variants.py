"""BERT-, GPT- and ViT-style models of transformer_course.families.vit: data helpers, model properties, PyTorch
parity."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer_course.core.attention import attention_maps, set_attention_backend
from transformer_course.core.decoding import generate
from transformer_course.core.layers import BlockConfig
from transformer_course.families.bert import (
    CLS_ID,
    FIRST_WORD_ID,
    MASK_ID,
    SEP_ID,
    MaskedLanguageModel,
    corrupt_for_mlm,
    mask_tokens,
    pair_inputs,
    segment_ids,
    split_sentences,
    text_vocabulary,
)
from transformer_course.families.decoder_lm import DecoderLM, gpt2_block_config
from transformer_course.families.vit import VisionTransformer, patchify
from transformer_course.text.tasks import PAD_ID, TextToTextTask
from transformer_course.training.trainers import TrainConfig, train

VOCAB = 40


def _ids(batch=3, length=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(FIRST_WORD_ID, VOCAB, (batch, length), generator=g)


# ---- text helpers ---------------------------------------------------------------------------------------


def test_split_sentences_cuts_after_sentence_ends_and_at_blank_lines():
    text = "Return the value.  It may be None!\nIs it?\n\nA new\nparagraph without end"
    assert split_sentences(text) == ["Return the value.", "It may be None!", "Is it?", "A new paragraph without end"]
    assert split_sentences("") == []
    assert split_sentences("os.path.join keeps dots inside words.") == ["os.path.join keeps dots inside words."]
    with pytest.raises(ValueError, match="passage must be a str"):
        split_sentences(3)


def test_text_vocabulary_puts_bert_tokens_after_the_course_specials():
    vocab = text_vocabulary(["the", "a"])
    assert vocab.tokens[:FIRST_WORD_ID] == ["<pad>", "<bos>", "<eos>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert (vocab.index["[CLS]"], vocab.index["[SEP]"], vocab.index["[MASK]"]) == (CLS_ID, SEP_ID, MASK_ID)
    assert vocab.encode(["the", "zebra"]) == [FIRST_WORD_ID, 3]
    with pytest.raises(ValueError, match=r"\[MASK\]"):
        text_vocabulary(["the", "[MASK]"])


# ---- masking --------------------------------------------------------------------------------------------


def test_corrupt_for_mlm_follows_the_80_10_10_rule_exactly():
    ids = torch.tensor([[10, 11, 12, 13, 14]])
    chosen = torch.tensor([[True, True, True, False, False]])
    action = torch.tensor([[0.10, 0.85, 0.95, 0.10, 0.85]])
    random_ids = torch.tensor([[20, 21, 22, 23, 24]])
    inputs, labels = corrupt_for_mlm(ids, chosen, action, random_ids)
    assert inputs.tolist() == [[MASK_ID, 21, 12, 13, 14]]
    assert labels.tolist() == [[10, 11, 12, PAD_ID, PAD_ID]]


def test_corrupt_for_mlm_rejects_bad_arguments():
    ids = torch.tensor([[10, 11]])
    good = dict(chosen=torch.tensor([[True, False]]), action=torch.zeros(1, 2), random_ids=ids.clone())
    with pytest.raises(ValueError, match="chosen must be a tensor of the shape of ids"):
        corrupt_for_mlm(ids, **{**good, "chosen": torch.tensor([True, False])})
    with pytest.raises(ValueError, match="chosen must be a bool tensor"):
        corrupt_for_mlm(ids, **{**good, "chosen": torch.tensor([[1, 0]])})
    with pytest.raises(ValueError, match="ids must be an integer tensor"):
        corrupt_for_mlm(ids.float(), **good)


def test_mask_tokens_equals_corrupt_for_mlm_with_the_documented_draws():
    ids = _ids(4, 20)
    ids[:, 0], ids[:, -1] = CLS_ID, SEP_ID
    inputs, labels = mask_tokens(ids, VOCAB, torch.Generator().manual_seed(5), mask_prob=0.3)
    g = torch.Generator().manual_seed(5)
    chosen = (torch.rand(ids.shape, generator=g) < 0.3) & (ids >= FIRST_WORD_ID)
    action = torch.rand(ids.shape, generator=g)
    random_ids = torch.randint(FIRST_WORD_ID, VOCAB, ids.shape, generator=g)
    expected = corrupt_for_mlm(ids, chosen, action, random_ids)
    torch.testing.assert_close(inputs, expected[0])
    torch.testing.assert_close(labels, expected[1])


def test_mask_tokens_statistics_and_special_tokens():
    ids = torch.randint(FIRST_WORD_ID, 1000, (200, 100), generator=torch.Generator().manual_seed(0))
    ids[:, 0], ids[:, 50], ids[:, -10:] = CLS_ID, SEP_ID, PAD_ID
    inputs, labels = mask_tokens(ids, 1000, torch.Generator().manual_seed(1))
    chosen = labels != PAD_ID
    words = ids >= FIRST_WORD_ID
    assert not chosen[~words].any(), "special tokens and padding must never be chosen"
    assert (inputs[~words] == ids[~words]).all()
    assert (inputs[~chosen] == ids[~chosen]).all(), "unchosen positions must not change"
    n = chosen.sum().item()
    assert abs(n / words.sum().item() - 0.15) < 0.01
    masked = (inputs[chosen] == MASK_ID).float().mean().item()
    kept = (inputs[chosen] == ids[chosen]).float().mean().item()
    replaced = 1.0 - masked - kept
    assert abs(masked - 0.8) < 0.02 and abs(kept - 0.1) < 0.02 and abs(replaced - 0.1) < 0.02
    assert (inputs[chosen & (inputs != MASK_ID)] >= FIRST_WORD_ID).all(), "replacements must be ordinary words"


def test_mask_tokens_rejects_bad_settings():
    with pytest.raises(ValueError, match="mask_prob must be in"):
        mask_tokens(_ids(), VOCAB, mask_prob=1.5)
    with pytest.raises(ValueError, match="first_word_id must be in"):
        mask_tokens(_ids(), VOCAB, first_word_id=VOCAB)
    with pytest.raises(ValueError, match=r"ids must have shape \(batch, len\)"):
        mask_tokens(torch.tensor([8, 9]), VOCAB)


# ---- sentence pairs and segments ------------------------------------------------------------------------


def test_pair_inputs_layout_segments_and_padding():
    ids, segments = pair_inputs([[10, 11], [12]], [[20], [21, 22, 23]])
    assert ids.tolist() == [
        [CLS_ID, 10, 11, SEP_ID, 20, SEP_ID, PAD_ID],
        [CLS_ID, 12, SEP_ID, 21, 22, 23, SEP_ID],
    ]
    assert segments.tolist() == [[0, 0, 0, 0, 1, 1, 0], [0, 0, 0, 1, 1, 1, 1]]
    single, seg = pair_inputs([[10, 11, 12]])
    assert single.tolist() == [[CLS_ID, 10, 11, 12, SEP_ID]] and seg.tolist() == [[0] * 5]


def test_pair_inputs_truncates_the_longer_segment_first():
    ids, _ = pair_inputs([list(range(10, 20))], [[30, 31]], max_len=8)
    assert ids.tolist() == [[CLS_ID, 10, 11, 12, SEP_ID, 30, 31, SEP_ID]]
    ids, _ = pair_inputs([[10]], [list(range(30, 40))], max_len=6)
    assert ids.tolist() == [[CLS_ID, 10, SEP_ID, 30, 31, SEP_ID]]


def test_pair_inputs_rejects_bad_arguments():
    with pytest.raises(ValueError, match="same number of segments"):
        pair_inputs([[10]], [[11], [12]])
    with pytest.raises(ValueError, match="at least one segment"):
        pair_inputs([])
    with pytest.raises(ValueError, match="max_len must leave room"):
        pair_inputs([[10]], [[11]], max_len=3)


def test_segment_ids_recovers_pair_inputs_segments():
    g = torch.Generator().manual_seed(3)
    first = [list(range(10, 10 + int(n))) for n in torch.randint(1, 8, (6,), generator=g)]
    second = [list(range(30, 30 + int(n))) for n in torch.randint(1, 8, (6,), generator=g)]
    ids, segments = pair_inputs(first, second)
    torch.testing.assert_close(segment_ids(ids), segments)
    ids, segments = pair_inputs(first)
    torch.testing.assert_close(segment_ids(ids), segments)


# ---- encoder-only ---------------------------------------------------------------------------------------


def _mlm(**kwargs):
    torch.manual_seed(0)
    block = BlockConfig(d_model=16, num_heads=2, d_ff=32, dropout=0.0, activation="gelu", max_len=16, **kwargs)
    return MaskedLanguageModel(block, VOCAB, num_layers=2)


def test_mlm_shapes_weight_tying_and_scored_positions():
    model = _mlm().eval()
    ids, segments = pair_inputs([[10, 11, 12]], [[13, 14]])
    logits = model(ids, segments)
    assert logits.shape == (1, ids.shape[1], VOCAB)
    assert model.encode(ids, segments).shape == (1, ids.shape[1], 16)
    where = torch.zeros_like(ids, dtype=torch.bool)
    where[0, 2] = where[0, 5] = True
    torch.testing.assert_close(model(ids, segments, where), logits[where])
    assert sum(p.numel() for p in model.parameters() if p is model.embeddings.token.weight) == VOCAB * 16


def test_mlm_sees_both_sides_and_ignores_padding():
    model = _mlm().eval()
    ids = _ids(1, 8)
    changed = ids.clone()
    changed[0, -1] = FIRST_WORD_ID if ids[0, -1] != FIRST_WORD_ID else FIRST_WORD_ID + 1
    with torch.no_grad():
        first = model(ids)[0, 0]
        assert not torch.allclose(first, model(changed)[0, 0]), "position 0 must see the last token"
        padded = torch.cat([ids, torch.full((1, 3), PAD_ID)], dim=1)
        torch.testing.assert_close(model(padded)[:, :8], model(ids), atol=1e-5, rtol=1e-5)


def test_mlm_segments_matter_and_pre_ln_option_builds():
    model = _mlm().eval()
    ids = _ids(1, 6)
    with torch.no_grad():
        a = model(ids, torch.zeros_like(ids))
        b = model(ids, torch.ones_like(ids))
    assert not torch.allclose(a, b)
    assert _mlm(norm_first=True).encoder.norm is not None


def test_mlm_rejects_bad_input():
    model = _mlm()
    with pytest.raises(ValueError, match="token_type_ids must have the shape of input_ids"):
        model(_ids(2, 5), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="where must be a bool tensor"):
        model(_ids(2, 5), where=torch.ones(2, 5))
    with pytest.raises(ValueError, match="token id 99 is outside the vocabulary"):
        model(torch.tensor([[99]]))
    with pytest.raises(ValueError, match="config must be a BlockConfig"):
        MaskedLanguageModel(VOCAB, 16, 2)
    with pytest.raises(ValueError, match="num_layers must be a positive int"):
        MaskedLanguageModel(BlockConfig(d_model=16, num_heads=2), VOCAB, 0)


# ---- generation (decoder-only models themselves: test_decoder_lm.py) ------------------------------------


def _gpt():
    torch.manual_seed(0)
    return DecoderLM(gpt2_block_config(16, 2, 32, max_len=12), VOCAB, num_layers=2, pad_id=PAD_ID)


def test_generate_greedy_matches_step_by_step_argmax_and_each_row_alone():
    model = _gpt().eval()
    prompt = _ids(3, 4)
    out = generate(model, prompt, 10, greedy=True)
    assert out.shape == (3, 14) and torch.equal(out[:, :4], prompt)
    tokens = prompt
    with torch.no_grad():
        for _ in range(10):
            nxt = model(tokens[:, -12:])[:, -1].argmax(-1)
            tokens = torch.cat([tokens, nxt[:, None]], 1)
    torch.testing.assert_close(out, tokens)
    for row in range(3):
        torch.testing.assert_close(generate(model, prompt[row : row + 1], 10, greedy=True), out[row : row + 1])


def test_generate_sampling_is_reproducible_filtered_and_respects_bans():
    model = _gpt().eval()
    prompt = _ids(4, 3)
    a = generate(model, prompt, 12, temperature=1.5, generator=torch.Generator().manual_seed(0))
    b = generate(model, prompt, 12, temperature=1.5, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(a, b)
    banned = list(range(FIRST_WORD_ID)) + [FIRST_WORD_ID + 1]
    c = generate(model, prompt, 12, temperature=3.0, banned=banned, generator=torch.Generator().manual_seed(1))
    assert not torch.isin(c[:, 3:], torch.tensor(banned)).any()
    greedy = generate(model, prompt, 6, greedy=True)
    top1 = generate(model, prompt, 6, top_k=1, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(top1, greedy)


def test_generate_with_a_cache_needs_a_model_that_has_one():
    with pytest.raises(ValueError, match="use_cache needs a model with a new_cache"):
        generate(nn.Sequential(nn.Embedding(VOCAB, 4), nn.Linear(4, VOCAB)), _ids(1, 2), 3, use_cache=True)


def test_generate_rejects_bad_arguments():
    model = _gpt()
    with pytest.raises(ValueError, match="model must be a language model"):
        generate(object(), _ids(1, 2), 3)
    with pytest.raises(ValueError, match="max_new_tokens must be a non-negative int"):
        generate(model, _ids(1, 2), -1)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        generate(model, _ids(1, 2), 3, temperature=0.0)
    with pytest.raises(ValueError, match="prompt has length 0"):
        generate(model, torch.zeros(2, 0, dtype=torch.long), 3)


# ---- vision ---------------------------------------------------------------------------------------------


def _patchify_by_loops(images, p):
    batch, channels, h, w = images.shape
    out = []
    for i in range(h // p):
        for j in range(w // p):
            out.append(images[:, :, i * p : (i + 1) * p, j * p : (j + 1) * p].reshape(batch, -1))
    return torch.stack(out, dim=1)


@pytest.mark.parametrize("shape,p", [((2, 1, 8, 8), 2), ((3, 3, 6, 9), 3), ((1, 2, 4, 4), 4), ((2, 1, 5, 5), 1)])
def test_patchify_equals_cutting_patches_one_by_one(shape, p):
    images = torch.randn(shape)
    torch.testing.assert_close(patchify(images, p), _patchify_by_loops(images, p))
    if shape[1] == 1:
        torch.testing.assert_close(patchify(images[:, 0], p), _patchify_by_loops(images, p))


def test_patchify_rejects_bad_input():
    with pytest.raises(ValueError, match="not a multiple of patch_size=3"):
        patchify(torch.zeros(1, 8, 8), 3)
    with pytest.raises(ValueError, match="patch_size must be a positive int"):
        patchify(torch.zeros(1, 8, 8), 0)
    with pytest.raises(ValueError, match=r"images must be \(batch, H, W\)"):
        patchify(torch.zeros(8, 8), 2)


def test_vit_shapes_cls_token_and_attention_maps():
    torch.manual_seed(0)
    vit = VisionTransformer(gpt2_block_config(16, 2, 32), 8, 2, 10, num_layers=3).eval()
    images = torch.randn(5, 8, 8)
    assert vit(images).shape == (5, 10)
    assert vit.encode(images).shape == (5, 17, 16)
    maps = attention_maps(vit)
    assert maps.shape == (3, 5, 2, 17, 17)
    torch.testing.assert_close(maps.sum(-1), torch.ones(3, 5, 2, 17))
    with pytest.raises(ValueError, match=r"images must be \(batch, 1, 8, 8\)"):
        vit(torch.randn(5, 7, 7))
    with pytest.raises(ValueError, match="must be a multiple of patch_size"):
        VisionTransformer(gpt2_block_config(16, 2), 8, 3, 10, num_layers=1)
    with pytest.raises(ValueError, match="config must be a BlockConfig"):
        VisionTransformer(8, 2, 10, 16, 2)


def test_attention_maps_needs_an_encoder_and_stored_weights():
    with pytest.raises(ValueError, match="has no MultiHeadAttention named"):
        attention_maps(nn.Linear(2, 2))
    vit = set_attention_backend(VisionTransformer(gpt2_block_config(8, 2, 8), 8, 4, 3, num_layers=2), "fused")
    vit(torch.randn(1, 8, 8))
    with pytest.raises(ValueError, match="no attention weights stored"):
        attention_maps(vit)


# ---- text-to-text ---------------------------------------------------------------------------------------


def test_text_to_text_task_pairs_and_vocabulary():
    task = TextToTextTask(length=5)
    pairs = task.sample_pairs(30, torch.Generator().manual_seed(0))
    for source, target in pairs:
        name, colon, *symbols = source
        assert colon == ":" and len(symbols) == 5
        expected = {"copy": symbols, "reverse": symbols[::-1], "sort": sorted(symbols)}[name]
        assert target == expected
    assert {s[0] for s, _ in pairs} == {"copy", "reverse", "sort"}
    assert task.eval_pairs(10) == task.eval_pairs(10)
    batch = task.train_batch(8, torch.Generator().manual_seed(0))
    assert batch.src.shape == (8, 7) and batch.tgt_in.shape == (8, 6)
    assert TextToTextTask(**task.to_dict()).to_dict() == task.to_dict()


def test_text_to_text_task_trains_with_the_package_loop():
    from transformer_course.core.model import Transformer
    from transformer_course.training.recipes import recipe_model_config

    task = TextToTextTask(length=3)
    torch.manual_seed(0)
    model = Transformer(recipe_model_config(task, d_model=16, d_ff=32, num_heads=2, max_len=8))
    history = train(model, task, TrainConfig(steps=3, batch_size=4, warmup=1), progress=False)
    assert len(history.loss) == 3


def test_text_to_text_task_rejects_bad_settings():
    with pytest.raises(ValueError, match="tasks must be a non-empty list"):
        TextToTextTask(tasks=("copy", "translate"))
    with pytest.raises(ValueError, match="length must be a positive int"):
        TextToTextTask(length=0)
    with pytest.raises(ValueError, match="num_symbols must be an int in"):
        TextToTextTask(num_symbols=12)

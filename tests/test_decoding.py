"""Decoding: greedy (batched, per-row <eos>), beam search, sampling, and the KV cache."""

from __future__ import annotations

import pytest
import torch

from transformer_course import Transformer, TransformerConfig
from transformer_course.core.attention import KVCache, MultiHeadAttention
from transformer_course.core.decoding import (
    StepDecoder,
    beam_search,
    cross_attention_maps,
    filter_logits,
    greedy_decode,
    next_token_probs,
    sample_decode,
    sequence_score,
)
from transformer_course.text.tasks import BOS_ID, EOS_ID, PAD_ID, Vocabulary, make_batch
from transformer_course.training.trainers import TrainConfig, train


class VariableCopy:
    """Copy 1-6 symbols: outputs of different lengths, so rows of a batch stop at different steps."""

    def __init__(self) -> None:
        self.src_vocab = self.tgt_vocab = Vocabulary("abcdef")

    def pairs(self, n: int, generator: torch.Generator) -> list[tuple[str, str]]:
        lengths = torch.randint(1, 7, (n,), generator=generator).tolist()
        out = []
        for length in lengths:
            text = "".join("abcdef"[i] for i in torch.randint(0, 6, (length,), generator=generator).tolist())
            out.append((text, text))
        return out

    def train_batch(self, batch_size: int, generator: torch.Generator):
        return make_batch(self.pairs(batch_size, generator), self.src_vocab, self.tgt_vocab)


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def trained(one_thread):
    """A small model trained for a few seconds to copy variable-length strings (imperfect on purpose: beams
    then have real choices to make)."""
    torch.manual_seed(0)
    task = VariableCopy()
    config = TransformerConfig(
        src_vocab_size=len(task.src_vocab),
        tgt_vocab_size=len(task.tgt_vocab),
        d_model=32,
        num_heads=4,
        d_ff=64,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dropout=0.0,
        max_len=24,
    )
    model = Transformer(config)
    train(model, task, TrainConfig(steps=120, batch_size=32, lr=3e-3, warmup=10), progress=False)
    batch = make_batch(task.pairs(24, torch.Generator().manual_seed(5)), task.src_vocab, task.tgt_vocab)
    return model.eval(), batch.src


def _untrained(seed: int = 0, layers: int = 2) -> Transformer:
    torch.manual_seed(seed)
    config = TransformerConfig(
        src_vocab_size=11,
        tgt_vocab_size=9,
        d_model=32,
        num_heads=4,
        d_ff=64,
        num_encoder_layers=layers,
        num_decoder_layers=layers,
        dropout=0.0,
        max_len=40,
    )
    return Transformer(config).eval()


def test_greedy_rows_stop_at_their_own_eos(trained):
    model, src = trained
    out = greedy_decode(model, src, max_len=12)
    assert out.finished.any() and len(set(out.lengths.tolist())) > 1, "the fixture should give varied lengths"
    for row, length, done in zip(out.tokens, out.lengths.tolist(), out.finished.tolist()):
        if done:
            assert row[length - 1] == EOS_ID
            assert (row[length:] == PAD_ID).all()
            assert not (row[: length - 1] == EOS_ID).any()
    assert out.tokens.shape[1] == int(out.lengths.max())  # stops as soon as every row is done


def test_batched_greedy_equals_one_row_at_a_time(trained):
    model, src = trained
    out = greedy_decode(model, src, max_len=12)
    for i in range(src.shape[0]):
        single = greedy_decode(model, src[i : i + 1], max_len=12)
        n = int(single.lengths[0])
        assert out.tokens[i, :n].tolist() == single.tokens[0, :n].tolist()
        torch.testing.assert_close(out.log_probs[i], single.log_probs[0], atol=1e-4, rtol=1e-4)


def test_greedy_respects_max_len():
    model = _untrained()
    src = torch.randint(4, 11, (5, 6))
    with torch.no_grad():
        model.output_projection.bias[EOS_ID] = -100.0  # never stop on its own
    out = greedy_decode(model, src, max_len=7)
    assert out.tokens.shape == (5, 7)
    assert out.lengths.tolist() == [7] * 5 and not out.finished.any()
    with pytest.raises(ValueError, match="max_len"):
        greedy_decode(model, src, max_len=40)
    with pytest.raises(ValueError, match="max_len"):
        greedy_decode(model, src, max_len=0)


def test_greedy_log_probs_are_the_models_own(trained):
    model, src = trained
    out = greedy_decode(model, src[:4], max_len=12)
    tgt_in = torch.cat([torch.full((4, 1), 1), out.tokens[:, :-1]], dim=1)
    with torch.no_grad():
        logp = model(src[:4], tgt_in).log_softmax(-1)  # (4, steps, vocab)
    chosen = logp.gather(-1, out.tokens[..., None])[..., 0]
    mask = torch.arange(out.tokens.shape[1])[None] < out.lengths[:, None]
    torch.testing.assert_close(out.log_probs, (chosen * mask).sum(1), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("use_cache", [True, False])
def test_cached_and_uncached_decoding_agree(trained, use_cache):
    model, src = trained
    cached = greedy_decode(model, src, max_len=12, use_cache=True)
    plain = greedy_decode(model, src, max_len=12, use_cache=use_cache)
    assert torch.equal(cached.tokens, plain.tokens)
    torch.testing.assert_close(cached.log_probs, plain.log_probs, atol=1e-5, rtol=1e-5)


def test_cached_step_logits_equal_a_full_pass():
    model = _untrained(seed=3)
    src = torch.randint(4, 11, (3, 8))
    src[1, 5:] = PAD_ID
    steps = torch.randint(4, 9, (3, 6))
    cached, plain = StepDecoder(model, src, use_cache=True), StepDecoder(model, src, use_cache=False)
    with torch.no_grad():
        for t in range(steps.shape[1]):
            torch.testing.assert_close(cached.next_logits(), plain.next_logits(), atol=1e-5, rtol=1e-5)
            cached.append(steps[:, t])
            plain.append(steps[:, t])
    assert len(cached.cache[0][0]) == steps.shape[1]  # self-attention cache grew by one per step
    assert len(cached.cache[0][1]) == src.shape[1]  # cross-attention cache holds the source once


def test_multi_head_attention_with_a_cache_equals_without():
    torch.manual_seed(0)
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 5, 16)
    full = mha(x, mask=torch.ones(5, 5, dtype=torch.bool).tril())
    cache = KVCache()
    steps = [mha(x[:, t : t + 1], cache=cache) for t in range(5)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-6, rtol=1e-5)
    # a static cache computes the keys once and ignores later keys
    cross, memory = KVCache(static=True), torch.randn(2, 7, 16)
    first = mha(x[:, :1], memory, memory, cache=cross)
    again = mha(x[:, :1], torch.zeros_like(memory), cache=cross)
    torch.testing.assert_close(first, again)


def test_decode_with_cache_and_prefill_several_tokens_at_once():
    model = _untrained(seed=4)
    src = torch.randint(4, 11, (2, 6))
    tgt = torch.randint(4, 9, (2, 5))
    tgt[:, 0] = 1
    with torch.no_grad():
        memory = model.encode(src)
        full = model.decode(tgt, memory, model.source_mask(src))
        cache = model.new_cache()
        first = model.decode(tgt[:, :3], memory, model.source_mask(src), cache=cache)
        rest = model.decode(tgt[:, 3:], memory, model.source_mask(src), cache=cache, offset=3)
    torch.testing.assert_close(torch.cat([first, rest], dim=1), full, atol=1e-5, rtol=1e-5)


def test_beam_size_one_equals_greedy(trained):
    model, src = trained
    for i in range(8):
        greedy = greedy_decode(model, src[i : i + 1], max_len=12)
        n = int(greedy.lengths[0])
        (best,) = beam_search(model, src[i], beam_size=1, max_len=12)
        assert best.tokens == greedy.tokens[0, :n].tolist()
        assert best.log_prob == pytest.approx(float(greedy.log_probs[0]), abs=1e-4)
        assert best.score == pytest.approx(float(greedy.scores(1.0)[0]), abs=1e-4)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_beam_hypotheses_are_sorted_and_scored_like_greedy(trained, alpha):
    model, src = trained
    for i in range(8):
        hyps = beam_search(model, src[i], beam_size=4, max_len=12, alpha=alpha)
        assert len(hyps) == 4
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        for h in hyps:
            assert h.score == pytest.approx(float(sequence_score(h.log_prob, len(h.tokens), alpha)), abs=1e-5)
            assert h.finished == (h.tokens[-1] == EOS_ID)


def test_beam_log_probs_are_the_models_own(trained):
    model, src = trained
    for h in beam_search(model, src[0], beam_size=3, max_len=12):
        tgt_in = torch.tensor([[1, *h.tokens[:-1]]])
        with torch.no_grad():
            logp = model(src[:1], tgt_in).log_softmax(-1)[0]
        total = logp.gather(-1, torch.tensor(h.tokens)[:, None]).sum()
        assert h.log_prob == pytest.approx(float(total), abs=1e-4)


def test_beam_search_cached_equals_uncached(trained):
    model, src = trained
    a = beam_search(model, src[2], beam_size=3, max_len=12, use_cache=True)
    b = beam_search(model, src[2], beam_size=3, max_len=12, use_cache=False)
    assert [h.tokens for h in a] == [h.tokens for h in b]


def test_beam_search_rejects_bad_arguments(trained):
    model, src = trained
    with pytest.raises(ValueError, match="one source"):
        beam_search(model, src[:2], max_len=12)
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(model, src[0], max_len=12, beam_size=0)
    with pytest.raises(ValueError, match="alpha"):
        beam_search(model, src[0], max_len=12, alpha=-1.0)


def test_filter_logits_top_k_and_top_p():
    logits = torch.log(torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05]))
    kept = filter_logits(logits, top_k=2).isfinite()
    assert kept.tolist() == [True, True, False, False, False]
    # top-p = 0.6: 0.5 alone is not enough, 0.5 + 0.2 = 0.7 is
    assert filter_logits(logits, top_p=0.6).isfinite().tolist() == [True, True, False, False, False]
    assert filter_logits(logits, top_p=0.5).isfinite().tolist() == [True, False, False, False, False]
    assert filter_logits(logits, top_p=1.0).isfinite().all()
    # works on a shuffled order too
    perm = torch.tensor([3, 0, 4, 2, 1])
    assert torch.equal(
        filter_logits(logits[perm], top_p=0.6).isfinite(), filter_logits(logits, top_p=0.6).isfinite()[perm]
    )
    probs = next_token_probs(logits, temperature=1.0, top_k=3)
    torch.testing.assert_close(probs, torch.tensor([0.5, 0.2, 0.15, 0, 0]) / 0.85)
    with pytest.raises(ValueError, match="temperature"):
        next_token_probs(logits, temperature=0.0)
    with pytest.raises(ValueError, match="top_k"):
        filter_logits(logits, top_k=0)
    with pytest.raises(ValueError, match="top_p"):
        filter_logits(logits, top_p=0.0)


def test_temperature_sharpens_and_flattens():
    logits = torch.tensor([2.0, 1.0, 0.0])
    cold, warm = next_token_probs(logits, 0.5), next_token_probs(logits, 2.0)
    assert cold[0] > next_token_probs(logits)[0] > warm[0]


def test_sampling_is_reproducible_and_low_temperature_is_greedy(trained):
    model, src = trained
    a = sample_decode(model, src, max_len=12, generator=torch.Generator().manual_seed(0))
    b = sample_decode(model, src, max_len=12, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a.tokens, b.tokens)
    cold = sample_decode(model, src, max_len=12, temperature=1e-4, generator=torch.Generator().manual_seed(1))
    greedy = greedy_decode(model, src, max_len=12)
    assert torch.equal(cold.tokens, greedy.tokens)
    top1 = sample_decode(model, src, max_len=12, top_k=1, generator=torch.Generator().manual_seed(2))
    assert torch.equal(top1.tokens, greedy.tokens)


def _tempted_by_pad_and_bos() -> Transformer:
    """An untrained model whose output layer favours <pad> and <bos>: unbanned, sampling draws them often."""
    model = _untrained(seed=5)
    with torch.no_grad():
        model.output_projection.bias[PAD_ID] = 3.0
        model.output_projection.bias[BOS_ID] = 3.0
    return model


@pytest.mark.parametrize("settings", [{}, {"temperature": 3.0}, {"top_k": 3}, {"top_p": 0.9}])
def test_sampling_never_draws_pad_or_bos_by_default(settings):
    model = _tempted_by_pad_and_bos()
    src = torch.randint(4, 11, (16, 6))
    out = sample_decode(model, src, max_len=20, generator=torch.Generator().manual_seed(0), **settings)
    produced = torch.arange(out.tokens.shape[1])[None] < out.lengths[:, None]  # each row's tokens, <eos> included
    assert not torch.isin(out.tokens[produced], torch.tensor([PAD_ID, BOS_ID])).any()
    # so decoding to text keeps every generated token (the <eos> aside): the lengths agree with the strings
    vocab = Vocabulary("abcde")  # 4 special tokens + 5 = the model's 9 output ids
    for row, length, done in zip(out.tokens, out.lengths.tolist(), out.finished.tolist()):
        assert len(vocab.decode_tokens(row.tolist())) == length - int(done)


def test_sampling_bans_what_it_is_told():
    model = _tempted_by_pad_and_bos()
    src = torch.randint(4, 11, (16, 6))
    free = sample_decode(model, src, max_len=20, banned=(), generator=torch.Generator().manual_seed(0))
    assert (free.tokens[:, 0] == PAD_ID).any()  # with nothing banned, the tempting tokens do get drawn
    no_fives = sample_decode(
        model, src, max_len=20, banned=(PAD_ID, BOS_ID, 5), generator=torch.Generator().manual_seed(0)
    )
    produced = torch.arange(no_fives.tokens.shape[1])[None] < no_fives.lengths[:, None]
    assert not torch.isin(no_fives.tokens[produced], torch.tensor([PAD_ID, BOS_ID, 5])).any()
    with pytest.raises(ValueError, match="banned"):
        sample_decode(model, src, banned=(9,))


def test_cross_attention_maps_shape_and_rows(trained):
    model, src = trained
    out = greedy_decode(model, src[:3], max_len=12)
    tgt_in = torch.cat([torch.full((3, 1), 1), out.tokens[:, :-1]], dim=1)
    maps = cross_attention_maps(model, src[:3], tgt_in)
    assert maps.shape == (1, 3, 4, tgt_in.shape[1], src.shape[1])
    torch.testing.assert_close(maps.sum(-1), torch.ones(maps.shape[:-1]))
    pad = (src[:3] == PAD_ID)[None, :, None, None, :].expand_as(maps)
    assert pad.any() and (maps[pad] == 0).all()  # padded source positions get no attention


def test_decoding_rejects_bad_inputs():
    model = _untrained()
    with pytest.raises(ValueError, match="src"):
        greedy_decode(model, torch.randint(4, 11, (6,)))
    with pytest.raises(ValueError, match="Transformer"):
        greedy_decode(torch.nn.Linear(2, 2), torch.randint(4, 11, (2, 6)))
    with pytest.raises(ValueError, match="alpha"):
        sequence_score(-1.0, 3, alpha=-0.5)

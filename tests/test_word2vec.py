"""word2vec: the losses are the formulas, pairs and windows are built right without loops over pairs,
training is reproducible, and on the standard library's prose it finds the neighbours one would expect."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from transformer_course.prelude.word2vec import (
    Word2Vec,
    Word2VecConfig,
    analogy,
    cbow_windows,
    cosine_similarities,
    keep_probabilities,
    nearest_neighbours,
    sample_negatives,
    skipgram_pairs,
    subsample,
    train_word2vec,
    unigram_distribution,
)
from transformer_course.text.corpus import WordVocabulary, load_stdlib_text, tokenize

pytestmark = pytest.mark.usefixtures("one_thread")


def _model() -> Word2Vec:
    g = torch.Generator().manual_seed(0)
    model = Word2Vec(10, 4, generator=g)
    with torch.no_grad():
        model.output_vectors.weight.normal_(generator=g)
    return model


def test_skipgram_loss_is_the_negative_sampling_formula():
    model = _model()
    centers, contexts = torch.tensor([1, 2, 3]), torch.tensor([4, 5, 6])
    negatives = torch.tensor([[7, 8], [9, 0], [1, 1]])
    loss = model.skipgram_loss(centers, contexts, negatives)
    v, u = model.input_vectors.weight, model.output_vectors.weight
    for b in range(3):
        expected = -F.logsigmoid(u[contexts[b]] @ v[centers[b]])
        expected = expected - sum(F.logsigmoid(-u[n] @ v[centers[b]]) for n in negatives[b])
        torch.testing.assert_close(loss[b], expected)


def test_cbow_loss_averages_only_the_real_context_words():
    model = _model()
    contexts = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
    mask = torch.tensor([[True, True, False, False], [True, True, True, True]])
    centers, negatives = torch.tensor([0, 9]), torch.tensor([[3], [4]])
    loss = model.cbow_loss(contexts, mask, centers, negatives)
    v, u = model.input_vectors.weight, model.output_vectors.weight
    v_avg = torch.stack([v[[1, 2]].mean(0), v[[5, 6, 7, 8]].mean(0)])
    expected = -F.logsigmoid((u[centers] * v_avg).sum(-1)) - F.logsigmoid(-(u[negatives[:, 0]] * v_avg).sum(-1))
    torch.testing.assert_close(loss, expected)


def test_softmax_loss_is_cross_entropy_over_the_vocabulary():
    model = _model()
    centers, contexts = torch.tensor([1, 2]), torch.tensor([3, 4])
    scores = model.input_vectors.weight[centers] @ model.output_vectors.weight.T
    torch.testing.assert_close(model.softmax_skipgram_loss(centers, contexts), -scores.log_softmax(-1)[[0, 1], [3, 4]])


def test_initial_loss_is_k_plus_one_times_log_two():
    model = Word2Vec(50, 8)  # output vectors start at zero: every score is 0 and sigmoid(0) = 1/2
    loss = model.skipgram_loss(torch.tensor([1, 2]), torch.tensor([3, 4]), torch.tensor([[5] * 5, [6] * 5]))
    torch.testing.assert_close(loss, torch.full((2,), 6 * math.log(2)))


def test_skipgram_pairs_match_a_plain_python_enumeration():
    ids = torch.arange(100, 112)
    g = torch.Generator().manual_seed(0)
    centers, contexts = skipgram_pairs(ids, 3, g)
    reach = torch.randint(1, 4, (12,), generator=torch.Generator().manual_seed(0))  # same draws as inside
    expected = sorted(
        (int(ids[i]), int(ids[j]))
        for i in range(12)
        for j in range(max(0, i - int(reach[i])), min(12, i + int(reach[i]) + 1))
        if j != i
    )
    assert sorted(zip(centers.tolist(), contexts.tolist())) == expected


def test_cbow_windows_match_the_skipgram_pairs():
    ids = torch.arange(20, 29)
    contexts, mask, centers = cbow_windows(ids, 2, torch.Generator().manual_seed(5))
    assert contexts.shape == mask.shape == (9, 4) and torch.equal(centers, ids)
    pairs = sorted((int(c), int(w)) for c, row, m in zip(centers, contexts, mask) for w, ok in zip(row, m) if ok)
    sg_centers, sg_contexts = skipgram_pairs(ids, 2, torch.Generator().manual_seed(5))
    assert pairs == sorted(zip(sg_centers.tolist(), sg_contexts.tolist()))


def test_noise_distribution_subsampling_and_negative_samples():
    counts = torch.tensor([1000, 100, 10, 1])
    noise = unigram_distribution(counts)
    torch.testing.assert_close(noise, (counts**0.75 / (counts**0.75).sum()).float())
    draws = sample_negatives(noise, (20000,), torch.Generator().manual_seed(0))
    frequencies = torch.bincount(draws, minlength=4).float() / 20000
    torch.testing.assert_close(frequencies, noise, atol=0.01, rtol=0)
    keep = keep_probabilities(counts, threshold=0.01)
    assert keep[0] < keep[1] < 1.0 and keep[3] == 1.0
    ids = torch.tensor([0] * 1000 + [3] * 10)
    kept = subsample(ids, keep, torch.Generator().manual_seed(0))
    assert (kept == 3).sum() == 10 and (kept == 0).sum() < 300


def test_training_is_reproducible_and_lowers_the_loss_on_a_two_topic_text():
    g = torch.Generator().manual_seed(0)
    # words 0-49 only ever appear among themselves, words 50-99 likewise
    ids = torch.cat([torch.randint(0, 50, (100,), generator=g) + 50 * (i % 2) for i in range(24)])
    counts = torch.bincount(ids, minlength=100)
    config = Word2VecConfig(dim=16, window=3, epochs=4, batch_size=128, subsample=1.0, lr=0.1)
    run = train_word2vec(ids, counts, config)
    again = train_word2vec(ids, counts, config)
    torch.testing.assert_close(run.model.vectors, again.model.vectors, rtol=0, atol=0)
    assert sum(run.losses[-10:]) < sum(run.losses[:10])
    vectors = run.model.vectors
    same = F.cosine_similarity(vectors[:50, None], vectors[None, :50], dim=-1).mean()
    across = F.cosine_similarity(vectors[:50, None], vectors[None, 50:], dim=-1).mean()
    assert same > across + 0.3
    cbow = Word2VecConfig(mode="cbow", dim=16, window=3, epochs=4, batch_size=128, subsample=1.0, lr=0.1)
    cbow_run = train_word2vec(ids, counts, cbow)
    for r in (run, cbow_run):  # one loss per batch of at most 128 examples, every example counted once
        assert r.pairs_seen / 128 <= len(r.losses) <= r.pairs_seen / 128 + r.config.epochs
    assert sum(cbow_run.losses[-5:]) < sum(cbow_run.losses[:5])
    assert torch.isfinite(cbow_run.model.vectors).all()


def test_neighbours_and_analogy_helpers():
    vocab = WordVocabulary("a a b b c c d d".split(), min_count=2)
    vectors = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [-1.0, 0.0]])
    assert [w for w, _ in nearest_neighbours(vectors, vocab, "a", 2)] == ["b", "c"]
    torch.testing.assert_close(cosine_similarities(vectors, vectors[0])[3], torch.tensor(-1.0))
    assert analogy(vectors, vocab, "a", "b", "c", 1)[0][0] == "d"
    with pytest.raises(ValueError, match="'zebra' is not in the vocabulary"):
        nearest_neighbours(vectors, vocab, "zebra")
    with pytest.raises(ValueError, match="rows"):
        nearest_neighbours(vectors[:3], vocab, "a")


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: Word2Vec(1, 4), "vocab_size"),
        (lambda: Word2Vec(5, 0), "dim"),
        (lambda: Word2Vec(5, 2).skipgram_loss(torch.tensor([7]), torch.tensor([1]), torch.tensor([[1]])), "id 7"),
        (lambda: Word2Vec(5, 2).skipgram_loss(torch.tensor([1]), torch.tensor([1]), torch.tensor([1])), "negatives"),
        (lambda: Word2Vec(5, 2).skipgram_loss(torch.tensor([1.0]), torch.tensor([1]), torch.tensor([[1]])), "integer"),
        (lambda: Word2VecConfig(mode="glove"), "mode"),
        (lambda: Word2VecConfig(window=0), "window"),
        (lambda: Word2VecConfig(lr=-1.0), "lr"),
        (lambda: skipgram_pairs(torch.arange(5), 0), "window"),
        (lambda: keep_probabilities(torch.tensor([1, 2]), 0.0), "threshold"),
        (lambda: unigram_distribution(torch.tensor([-1, 2])), "counts"),
        (lambda: train_word2vec(torch.tensor([0, 5]), torch.tensor([1, 1])), r"\[0, 2\)"),
    ],
)
def test_bad_input_raises_a_clear_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_on_the_standard_library_the_expected_neighbours_rank_high():
    """The notebook's settings on the real corpus. Neighbour lists differ between Python versions, so the
    check is loose: each expected word is among the closest few."""
    words = tokenize(load_stdlib_text().text)
    vocab = WordVocabulary(words, min_count=5)
    ids = torch.tensor(vocab.encode(words))
    run = train_word2vec(ids, torch.tensor(vocab.counts), Word2VecConfig())
    vectors = run.model.vectors
    assert "false" in [w for w, _ in nearest_neighbours(vectors, vocab, "true", 3)]
    pairs = [("year", "month"), ("bytes", "bytearray"), ("encode", "decode"), ("thread", "threads"), ("int", "str")]
    close = sum(expected in [w for w, _ in nearest_neighbours(vectors, vocab, word, 10)] for word, expected in pairs)
    assert close >= 4

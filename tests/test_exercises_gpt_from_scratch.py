"""Notebook 15's checkers accept the reference solutions and name the likeliest mistakes."""

import math
from collections import Counter

import pytest
import torch

from transformer_course.core.decoding import generate
from transformer_course.exercises import gpt_from_scratch as ex
from transformer_course.exercises import set_language
from transformer_course.families.decoder_lm import DecoderLM, llama_block_config
from transformer_course.text.bpe import train_bpe


def test_reference_merge_step_agrees_with_the_package_trainer():
    text = "low low low lower lowest newer newer wider"
    first_merge = train_bpe(text, 1 + len(set(text)) + 1, special_tokens=("<unk>",)).merges[0]
    words = Counter(tuple(w) for w in ["low", " low", " low", " lower", " lowest", " newer", " newer", " wider"])
    assert ex.reference_merge_step(words)[0] == first_merge


def test_merge_checker_accepts_the_reference(capsys):
    assert ex.check_merge_step(ex.reference_merge_step)
    assert capsys.readouterr().out == "Exercise 15.1 (one BPE merge): correct!\n"


def _weighted_pairs(word_counts):
    pairs = Counter()
    for word, count in word_counts.items():
        for pair in zip(word, word[1:]):
            pairs[pair] += count
    return pairs


def _unweighted(word_counts):
    pairs = Counter(pair for word in word_counts for pair in zip(word, word[1:]))  # each word counted once
    return min(pairs, key=lambda pair: (-pairs[pair], pair)), ex.reference_merge_step(word_counts)[1]


def _most_common_tie(word_counts):
    best = _weighted_pairs(word_counts).most_common(1)[0][0]  # among tied pairs, the first one inserted
    return best, ex.reference_merge_step(word_counts)[1]


def _right_to_left_merge(word_counts):
    best, _ = ex.reference_merge_step(word_counts)
    merged = {}
    for word, count in word_counts.items():
        out, i = [], len(word) - 1
        while i >= 0:
            if i > 0 and (word[i - 1], word[i]) == best:
                out.insert(0, best[0] + best[1])
                i -= 2
            else:
                out.insert(0, word[i])
                i -= 1
        merged[tuple(out)] = merged.get(tuple(out), 0) + count
    return best, merged


def _drops_duplicates(word_counts):
    best, merged = ex.reference_merge_step(word_counts)
    return best, {w: 1 for w in merged}


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_unweighted, "with its word's frequency"),
        (_most_common_tie, "ties go to the smaller pair"),
        (_right_to_left_merge, "scan left to right"),
        (_drops_duplicates, "never how often the word occurs"),
        (lambda wc: ex.reference_merge_step(wc)[0], "Return a tuple (pair, merged_counts)"),
        (lambda wc: (ex.reference_merge_step(wc)[0][::-1], ex.reference_merge_step(wc)[1]), "reversed"),
        (
            lambda wc: ("".join(ex.reference_merge_step(wc)[0]), ex.reference_merge_step(wc)[1]),
            "a tuple of two symbols",
        ),
    ],
)
def test_merge_checker_names_the_mistake(wrong, hint, capsys):
    assert not ex.check_merge_step(wrong)
    out = capsys.readouterr().out
    assert out.startswith("Exercise 15.1 (one BPE merge): not yet.") and hint in out, out


def test_merge_checker_says_not_attempted(capsys):
    def stub(word_counts):
        raise NotImplementedError

    assert not ex.check_merge_step(stub)
    assert "not attempted yet" in capsys.readouterr().out


def test_bits_checker_accepts_the_reference_and_names_mistakes(capsys):
    assert ex.check_bits_per_character(ex.reference_bits_per_character)
    assert "correct!" in capsys.readouterr().out
    mistakes = {
        "divide by ln 2": lambda n, t, c: n * t / c,
        "bits per token": lambda n, t, c: n / math.log(2),
        "upside down": lambda n, t, c: n * c / t / math.log(2),
        "a bit is ln 2 nats": lambda n, t, c: n * t / c / math.log(10),
        "Return a Python float": lambda n, t, c: str(n),
        "the answer is": lambda n, t, c: 1.0,
    }
    for hint, wrong in mistakes.items():
        assert not ex.check_bits_per_character(wrong)
        out = capsys.readouterr().out
        assert out.startswith("Exercise 15.2 (bits per character): not yet.") and hint in out, (hint, out)


def _greedy_without_cache(model, prompt, new):
    return generate(model, prompt, new, greedy=True)


def _cache_fed_everything(model, prompt, new):
    caches, tokens = model.new_cache(), prompt
    for _ in range(new):
        tokens = torch.cat([tokens, model(tokens, caches)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return tokens


def _new_cache_every_step(model, prompt, new):
    tokens = prompt
    for _ in range(new):
        tokens = torch.cat([tokens, model(tokens, model.new_cache())[:, -1].argmax(-1, keepdim=True)], dim=1)
    return tokens


def _sampled(model, prompt, new):
    caches, tokens = model.new_cache(), prompt
    logits = model(prompt, caches)[:, -1]
    for step in range(new):
        token = torch.multinomial(logits.softmax(-1), 1, generator=torch.Generator().manual_seed(step))
        tokens = torch.cat([tokens, token], dim=1)
        if step + 1 < new:
            logits = model(token, caches)[:, -1]
    return tokens


def _one_call_too_many(model, prompt, new):
    caches, tokens = model.new_cache(), prompt
    logits = model(prompt, caches)[:, -1]
    for _ in range(new):
        token = logits.argmax(-1, keepdim=True)
        tokens = torch.cat([tokens, token], dim=1)
        logits = model(token, caches)[:, -1]
    return tokens


def _prompt_one_token_at_a_time(model, prompt, new):
    caches = model.new_cache()
    for t in range(prompt.shape[1]):
        logits = model(prompt[:, t : t + 1], caches)[:, -1]
    tokens = prompt
    for step in range(new):
        token = logits.argmax(-1, keepdim=True)
        tokens = torch.cat([tokens, token], dim=1)
        if step + 1 < new:
            logits = model(token, caches)[:, -1]
    return tokens


def _argmax_without_keepdim(model, prompt, new):
    caches, tokens = model.new_cache(), prompt
    logits = model(prompt, caches)[:, -1]
    for step in range(new):
        token = logits.argmax(-1)  # (batch,): one dimension short
        tokens = torch.cat([tokens, token], dim=1)
        if step + 1 < new:
            logits = model(token[:, None], caches)[:, -1]
    return tokens


def test_cache_checker_accepts_the_reference(capsys):
    assert ex.check_cached_generation(ex.reference_cached_generation)
    assert capsys.readouterr().out == "Exercise 15.3 (a KV cache for generation): correct!\n"


def test_reference_cached_generation_equals_the_package_generate_with_its_cache():
    model = DecoderLM(llama_block_config(16, 4, max_len=40), 31, num_layers=2).eval()
    prompt = torch.tensor([[1, 2, 3], [4, 5, 6]])
    with torch.no_grad():
        ours = ex.reference_cached_generation(model, prompt, 12)
        assert torch.equal(ours, generate(model, prompt, 12, greedy=True, use_cache=True))


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_greedy_without_cache, "never given a cache"),
        (_cache_fed_everything, "feed only the newest token"),
        (_new_cache_every_step, "make one cache before the loop"),
        (_sampled, "differ from uncached greedy generation"),
        (_one_call_too_many, "calls are enough"),
        (_prompt_one_token_at_a_time, "feed the whole prompt"),
        (lambda model, prompt, new: ex.reference_cached_generation(model, prompt, new)[:, prompt.shape[1] :], "shape"),
        (_argmax_without_keepdim, "keepdim=True"),
    ],
)
def test_cache_checker_names_the_mistake(wrong, hint, capsys):
    assert not ex.check_cached_generation(wrong)
    out = capsys.readouterr().out
    assert out.startswith("Exercise 15.3 (a KV cache for generation): not yet.") and hint in out, out


@pytest.fixture
def chinese():
    set_language("zh")
    yield
    set_language("en")


def test_checkers_speak_chinese(chinese, capsys):
    assert ex.check_merge_step(ex.reference_merge_step)
    assert ex.check_bits_per_character(ex.reference_bits_per_character)
    assert ex.check_cached_generation(ex.reference_cached_generation)
    assert capsys.readouterr().out.splitlines() == [
        "练习 15.1（一次 BPE 合并）：正确！",
        "练习 15.2（每字符比特数）：正确！",
        "练习 15.3（生成时的 KV 缓存）：正确！",
    ]
    for checker, wrong, hint in [
        (ex.check_merge_step, _unweighted, "乘以所在词的频次"),
        (ex.check_cached_generation, _cache_fed_everything, "每次只输入最新的词元"),
        (ex.check_bits_per_character, lambda n, t, c: n * t / c, "除以 ln 2 才是比特"),
    ]:
        assert not checker(wrong)
        out = capsys.readouterr().out
        assert "：还不对。" in out and hint in out, out

    def stub(*args):
        raise NotImplementedError

    assert not ex.check_cached_generation(stub)
    assert "练习 15.3（生成时的 KV 缓存）：尚未作答" in capsys.readouterr().out

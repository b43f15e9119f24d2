"""Notebook 15's checkers accept the reference solutions and name the likeliest mistakes."""

import math

import pytest
import torch

from transformer_course.core.decoding import generate
from transformer_course.exercises import gpt_from_scratch as ex
from transformer_course.exercises import set_language
from transformer_course.families.decoder_lm import DecoderLM, llama_block_config
from transformer_course.text.bpe import BPETokenizer, train_bpe


def test_reference_encoding_agrees_with_the_package_tokenizer():
    text = "low low low lower lowest newer newer wider widest"
    trained = train_bpe(text, 1 + len(set(text)) + 12, special_tokens=("<unk>",))
    tokenizer = BPETokenizer(trained.tokens, trained.merges)
    for word in (" lowest", " newer", "low", " wider", " slower", "aaaa"):
        symbols = ex.reference_encode_word(word, trained.merges)
        assert "".join(symbols) == word
        expected = [tokenizer.tokens[i] for i in tokenizer.encode(word)]
        if all(symbol in tokenizer.tokens for symbol in symbols):
            assert symbols == expected, word


def test_encode_checker_accepts_the_reference(capsys):
    assert ex.check_encode_word(ex.reference_encode_word)
    assert capsys.readouterr().out == "Exercise 15.1 (encoding with learned merges): correct!\n"


def _first_occurrence_only(word, merges):
    symbols = list(word)
    for left, right in merges:
        for i in range(len(symbols) - 1):
            if (symbols[i], symbols[i + 1]) == (left, right):
                symbols[i : i + 2] = [left + right]
                break
    return symbols


def _on_the_joined_string(word, merges):
    """Matches each merge on the text rather than on the symbols: ("ab", "c") then applies to "a", "b", "c"."""
    pieces = [word]
    for left, right in merges:
        pieces = [
            p for piece in pieces for p in piece.replace(left + right, "\0" + left + right + "\0").split("\0") if p
        ]
    return [p for piece in pieces for p in ([piece] if len(piece) > 1 else list(piece))]


def _right_to_left(word, merges):
    symbols = list(word)
    for left, right in merges:
        out, i = [], len(symbols) - 1
        while i >= 0:
            if i > 0 and (symbols[i - 1], symbols[i]) == (left, right):
                out.insert(0, left + right)
                i -= 2
            else:
                out.insert(0, symbols[i])
                i -= 1
        symbols = out
    return symbols


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_first_occurrence_only, "every occurrence, left to right"),
        (lambda word, merges: ex.reference_encode_word(word, merges[::-1]), "in the order they were learned"),
        (_right_to_left, "should be"),
        (ex._leftmost_pair_with_a_merge, "the order of the merges decides"),  # what the checker recognises
        (_on_the_joined_string, "not yet"),
        (lambda word, merges: list(word), "should be"),
        (lambda word, merges: [s.strip() for s in ex.reference_encode_word(word, merges)], "never adds or drops"),
        (lambda word, merges: "".join(ex.reference_encode_word(word, merges)), "a list of strings"),
        (lambda word, merges: [1, 2], "a list of strings"),
    ],
)
def test_encode_checker_names_the_mistake(wrong, hint, capsys):
    assert not ex.check_encode_word(wrong)
    out = capsys.readouterr().out
    assert out.startswith("Exercise 15.1 (encoding with learned merges): not yet.") and hint in out, out


def test_encode_checker_says_not_attempted(capsys):
    def stub(word, merges):
        raise NotImplementedError

    assert not ex.check_encode_word(stub)
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
        (_cache_fed_everything, "feed only the token just chosen"),
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
    assert ex.check_encode_word(ex.reference_encode_word)
    assert ex.check_bits_per_character(ex.reference_bits_per_character)
    assert ex.check_cached_generation(ex.reference_cached_generation)
    assert capsys.readouterr().out.splitlines() == [
        "练习 15.1（用学到的合并规则编码）：正确！",
        "练习 15.2（每字符比特数）：正确！",
        "练习 15.3（生成时的 KV 缓存）：正确！",
    ]
    for checker, wrong, hint in [
        (ex.check_encode_word, _first_occurrence_only, "从左到右作用于该符号对出现的每一处"),
        (ex.check_cached_generation, _cache_fed_everything, "每次只输入刚选出的词元"),
        (ex.check_bits_per_character, lambda n, t, c: n * t / c, "除以 ln 2 才是比特"),
    ]:
        assert not checker(wrong)
        out = capsys.readouterr().out
        assert "：还不对。" in out and hint in out, out

    def stub(*args):
        raise NotImplementedError

    assert not ex.check_cached_generation(stub)
    assert "练习 15.3（生成时的 KV 缓存）：尚未作答" in capsys.readouterr().out

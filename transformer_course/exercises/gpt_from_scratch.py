"""Exercises of notebook 15 (a GPT from scratch): their checkers and reference solutions.

15.1 ``check_encode_word(fn)``: ``fn(word, merges)`` encodes one pre-token (a string) with merges learned by BPE
     training (a list of pairs of strings, in the order they were learned): start from the characters, apply
     each merge in order to every occurrence of its pair, left to right, and return the symbols.
15.2 ``check_bits_per_character(fn)``: ``fn(nats_per_token, num_tokens, num_characters)`` returns the same loss
     in bits per character of the text.
15.3 ``check_cached_generation(fn)``: ``fn(model, prompt, max_new_tokens)`` continues ``prompt`` (batch, len_p)
     greedily with a KV cache: the whole prompt once, then only the newest token per step, the same tokens as
     uncached greedy generation.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from ..text.bpe import merge_pair
from ._core import Exercise, ExerciseMistake, expect, expect_tensor, report, tr

ENCODE_WORD = Exercise("15.1", "encoding with learned merges", "用学到的合并规则编码")
BITS_PER_CHARACTER = Exercise("15.2", "bits per character", "每字符比特数")
CACHED_GENERATION = Exercise("15.3", "a KV cache for generation", "生成时的 KV 缓存")


def reference_encode_word(word: str, merges: Sequence[tuple[str, str]]) -> list[str]:
    """Reference solution of exercise 15.1: one pre-token encoded with learned merges.

    Start from the characters and apply the merges in the order they were learned, each to every occurrence of its
    pair, left to right. Returns the symbols (strings) that the word ends up as.
    """
    symbols = list(word)
    for left, right in merges:
        symbols = merge_pair(symbols, (left, right), left + right)  # every occurrence, left to right
    return symbols


# Each case targets one mistake: ("l", "o") before ("o", "w") makes the order decide; "aaaa" needs every occurrence
# merged, left to right; ("ab", "c") can only apply after ("a", "b") has made "ab" (and never to the characters
# "a", "b", "c"); in "abc" with ("b", "c") learned first, the order of the merges beats the position of the pair;
# "xyz" meets no merge at all.
_ENCODE_CASES: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    (" lower", ((" ", "l"), ("o", "w"), (" l", "ow"), ("e", "r"), (" low", "er"))),
    ("low", (("l", "o"), ("o", "w"), ("lo", "w"))),
    ("aaaa", (("a", "a"),)),
    ("aaa", (("a", "a"),)),
    ("abcabc", (("a", "b"), ("ab", "c"), ("abc", "abc"))),
    ("abc", (("b", "c"), ("a", "b"))),
    ("abc", (("ab", "c"),)),
    ("xyz", (("a", "b"),)),
)


def _first_occurrence_only(word: str, merges: Sequence[tuple[str, str]]) -> list[str]:
    """A wrong answer: each merge applied only at its first occurrence."""
    symbols = list(word)
    for left, right in merges:
        for i in range(len(symbols) - 1):
            if symbols[i] == left and symbols[i + 1] == right:
                symbols[i : i + 2] = [left + right]
                break
    return symbols


def _leftmost_pair_with_a_merge(word: str, merges: Sequence[tuple[str, str]]) -> list[str]:
    """A wrong answer: repeatedly merge the leftmost adjacent pair that has a merge, whatever its place in the list."""
    symbols, known = list(word), set(merges)
    while True:
        at = next((i for i in range(len(symbols) - 1) if (symbols[i], symbols[i + 1]) in known), None)
        if at is None:
            return symbols
        symbols[at : at + 2] = [symbols[at] + symbols[at + 1]]


def _check_encode_word(fn: Callable[[str, Sequence[tuple[str, str]]], list[str]]) -> None:
    for word, merges in _ENCODE_CASES:
        answer = fn(word, list(merges))
        expect(
            isinstance(answer, list | tuple) and all(isinstance(symbol, str) for symbol in answer),
            tr(
                f"return the symbols as a list of strings, such as ['l', 'ow'], got {answer!r:.60}",
                f"应以字符串列表返回符号，例如 ['l', 'ow']，得到的是 {answer!r:.60}",
            ),
        )
        answer = list(answer)
        expected = reference_encode_word(word, merges)
        if answer == expected:
            continue
        if "".join(answer) != word:
            raise ExerciseMistake(
                tr(
                    f"for {word!r} your symbols {answer} do not spell the word again: a merge joins two neighbours "
                    "into one symbol and never adds or drops a character",
                    f"对 {word!r}，你的符号 {answer} 拼起来不再是原词：合并只是把相邻的两个符号连成一个，"
                    "不会增加或丢掉字符",
                )
            )
        if answer == _first_occurrence_only(word, merges):
            raise ExerciseMistake(
                tr(
                    f"for {word!r} with merges {list(merges)} you merged only the first occurrence of a pair; "
                    f"each merge applies to every occurrence, left to right: {expected}",
                    f"对 {word!r}，合并规则为 {list(merges)}，你只合并了符号对的第一次出现；每条合并规则都要"
                    f"从左到右作用于该符号对出现的每一处，正确结果是 {expected}",
                )
            )
        if answer == _leftmost_pair_with_a_merge(word, merges):
            raise ExerciseMistake(
                tr(
                    f"for {word!r} with merges {list(merges)} you merged the leftmost pair that has a merge; the "
                    f"order of the merges decides, not the position of the pair: apply the first learned merge "
                    f"everywhere, then the second, and so on: {expected}",
                    f"对 {word!r}，合并规则为 {list(merges)}，你合并的是最左边一个有合并规则的符号对；决定先后的是"
                    f"合并规则的顺序，而不是符号对的位置：先把第一条学到的规则用到所有地方，再用第二条，依此类推。"
                    f"正确结果是 {expected}",
                )
            )
        if answer == reference_encode_word(word, merges[::-1]):
            raise ExerciseMistake(
                tr(
                    f"for {word!r} with merges {list(merges)} you applied the merges from the last learned to the "
                    f"first; apply them in the order they were learned: {expected}",
                    f"对 {word!r}，合并规则为 {list(merges)}，你从最后学到的规则往前应用；应按学到的先后顺序应用，"
                    f"正确结果是 {expected}",
                )
            )
        raise ExerciseMistake(
            tr(
                f"for {word!r} with merges {list(merges)} the symbols should be {expected}, got {answer}",
                f"对 {word!r}，合并规则为 {list(merges)}，符号应为 {expected}，得到的是 {answer}",
            )
        )


def check_encode_word(fn: Callable[[str, Sequence[tuple[str, str]]], list[str]]) -> bool:
    """Exercise 15.1: ``fn(word, merges)`` must return the word's symbols after the learned merges, in order."""
    return report(ENCODE_WORD, lambda: _check_encode_word(fn))


def reference_bits_per_character(nats_per_token: float, num_tokens: int, num_characters: int) -> float:
    """Reference solution of exercise 15.2: nats per token -> bits per character."""
    return nats_per_token * num_tokens / num_characters / math.log(2)


_BPC_CASES = ((1.2, 1000, 4000), (0.9, 700, 700), (3.5, 250, 1000))


def _check_bits_per_character(fn: Callable[[float, int, int], float]) -> None:
    for nats, tokens, characters in _BPC_CASES:
        answer = fn(nats, tokens, characters)
        got = type(answer).__name__
        expect(
            isinstance(answer, int | float),
            tr(f"return a Python float, got {got}", f"应返回 Python float，得到的是 {got}"),
        )
        expected = reference_bits_per_character(nats, tokens, characters)
        if math.isclose(answer, expected, rel_tol=1e-6):
            continue
        what = tr(
            f"for {nats} nats/token over {tokens} tokens and {characters} characters",
            f"对 {tokens} 个词元、{characters} 个字符、每词元 {nats} 奈特的情况，",
        )
        if math.isclose(answer, nats * tokens / characters, rel_tol=1e-6):
            raise ExerciseMistake(
                tr(
                    f"{what} you gave nats per character: divide by ln 2 to get bits",
                    f"{what}你给出的是每字符奈特数：除以 ln 2 才是比特",
                )
            )
        if math.isclose(answer, nats / math.log(2), rel_tol=1e-6):
            raise ExerciseMistake(
                tr(
                    f"{what} you gave bits per token: a token covers {characters / tokens:g} characters here, so "
                    "multiply by the number of tokens and divide by the number of characters",
                    f"{what}你给出的是每词元比特数：这里一个词元覆盖 {characters / tokens:g} 个字符，"
                    "所以要乘以词元数、再除以字符数",
                )
            )
        if math.isclose(answer, nats * characters / tokens / math.log(2), rel_tol=1e-6):
            raise ExerciseMistake(
                tr(
                    f"{what} the ratio is upside down: the total loss is nats_per_token * num_tokens",
                    f"{what}比例倒过来了：总损失是 nats_per_token * num_tokens",
                )
            )
        if math.isclose(answer, nats * tokens / characters / math.log(10), rel_tol=1e-6) or math.isclose(
            answer, nats * tokens / characters * math.log(2), rel_tol=1e-6
        ):
            raise ExerciseMistake(
                tr(
                    f"{what} a bit is ln 2 nats: divide the nats by math.log(2)",
                    f"{what}1 比特等于 ln 2 奈特：用奈特数除以 math.log(2)",
                )
            )
        raise ExerciseMistake(
            tr(
                f"{what} the answer is {expected:.4f} bits per character, you gave {answer:.4f}",
                f"{what}答案是每字符 {expected:.4f} 比特，你给出的是 {answer:.4f}",
            )
        )


def check_bits_per_character(fn: Callable[[float, int, int], float]) -> bool:
    """Exercise 15.2: ``fn(nats_per_token, num_tokens, num_characters)`` must return bits per character."""
    return report(BITS_PER_CHARACTER, lambda: _check_bits_per_character(fn))


@torch.no_grad()
def reference_cached_generation(model: nn.Module, prompt: Tensor, max_new_tokens: int) -> Tensor:
    """Reference solution of exercise 15.3: greedy generation with a KV cache.

    prompt (batch, len_p) -> (batch, len_p + max_new_tokens): the whole prompt is fed once, then each step feeds
    only the token it just chose; the cache holds the keys and values of everything before.
    """
    caches = model.new_cache()
    tokens = prompt
    logits = model(prompt, caches)[:, -1]  # (batch, vocab) for the first new position
    for step in range(max_new_tokens):
        next_token = logits.argmax(dim=-1, keepdim=True)  # (batch, 1)
        tokens = torch.cat([tokens, next_token], dim=1)
        if step + 1 < max_new_tokens:
            logits = model(next_token, caches)[:, -1]
    return tokens


class _RecordingModel(nn.Module):
    """Wraps a cached language model and records what each call fed it."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.max_len = model.max_len
        self.caches_made: list[list] = []
        self.calls: list[tuple[int, bool]] = []  # (positions fed, whether the cache made by new_cache() came too)
        self._used: list = []  # the caches passed so far, one per call

    def new_cache(self) -> list:
        self.caches_made.append(self.model.new_cache())
        return self.caches_made[-1]

    def forward(self, token_ids: Tensor, caches: list | None = None) -> Tensor:
        ours = any(caches is made for made in self.caches_made)
        used_before = caches is not None and any(caches is used for used in self._used)
        self.calls.append((token_ids.shape[1], ours))
        self._used.append(caches)
        call, positions = len(self.calls), token_ids.shape[1]
        if used_before and positions != 1:  # stop before the model itself fails on the doubled positions
            raise ExerciseMistake(
                tr(
                    f"call {call} fed {positions} positions; after the prompt feed only the token just chosen, "
                    "next_token of shape (batch, 1) (the cache holds the keys and values of the rest)",
                    f"第 {call} 次调用输入了 {positions} 个位置；提示词之后每次只输入刚选出的词元，"
                    "即形状为 (batch, 1) 的 next_token（其余位置的键和值都在缓存里）",
                )
            )
        return self.model(token_ids, caches)


def _cache_test_model() -> nn.Module:
    from ..families.decoder_lm import DecoderLM, llama_block_config

    torch.manual_seed(15)
    # float64, so that cached and uncached logits cannot swap the order of two nearly tied tokens
    model = DecoderLM(llama_block_config(16, 4, num_kv_heads=2, max_len=24), 23, num_layers=2).double().eval()
    nn.init.normal_(model.token_embedding.weight, std=0.3)  # flat next-token distributions: sampling would not pass
    return model


def _check_cached_generation(fn: Callable[[nn.Module, Tensor, int], Tensor]) -> None:
    from ..core.decoding import generate

    model = _cache_test_model()
    for prompt, new in ((torch.tensor([[3, 1, 4, 1, 5]]), 8), (torch.tensor([[2, 7, 1], [8, 2, 8]]), 6)):
        recorder = _RecordingModel(model)
        with torch.no_grad():
            expected = generate(model, prompt, new, greedy=True)  # uncached: the whole prefix at every step
            try:
                answer = fn(recorder, prompt.clone(), new)
            except RuntimeError as error:
                if "same number of dimensions" not in str(error):
                    raise
                raise ExerciseMistake(
                    tr(
                        "torch.cat got tensors of different ranks: logits.argmax(dim=-1) gives (batch,); "
                        "argmax(dim=-1, keepdim=True) keeps the (batch, 1) shape that tokens and the model expect",
                        "torch.cat 收到了维数不同的张量：logits.argmax(dim=-1) 的形状是 (batch,)；"
                        "argmax(dim=-1, keepdim=True) 才保留词元序列和模型需要的 (batch, 1) 形状",
                    )
                ) from None
        batch, length = prompt.shape
        expect_tensor(
            answer, tr("the returned tensor", "返回的张量"), (batch, length + new), "(batch, len_p + max_new_tokens)"
        )
        expect(
            bool(recorder.caches_made),
            tr(
                "the model was never given a cache: make one with caches = model.new_cache() and pass it to every "
                "call, model(ids, caches)",
                "模型从未拿到缓存：用 caches = model.new_cache() 建一个，并在每次调用时传入，即 model(ids, caches)",
            ),
        )
        expect(
            len(recorder.caches_made) == 1,
            tr(
                f"model.new_cache() was called {len(recorder.caches_made)} times: make one cache before the loop "
                "and pass the same one to every call",
                f"model.new_cache() 被调用了 {len(recorder.caches_made)} 次：在循环之前建一个缓存，每次调用都传同一个",
            ),
        )
        expect(
            all(ours for _, ours in recorder.calls),
            tr(
                "the model was called without the cache: pass the list from model.new_cache() as its second "
                "argument, model(ids, caches)",
                "调用模型时没有传缓存：把 model.new_cache() 返回的列表作为第二个参数传入，即 model(ids, caches)",
            ),
        )
        fed = [positions for positions, _ in recorder.calls]
        first = fed[0] if fed else 0
        expect(
            bool(fed) and fed[0] == length,
            tr(
                f"the first call fed {first} position{'' if first == 1 else 's'}; "
                f"feed the whole prompt ({length}) once",
                f"第一次调用输入了 {first} 个位置；应一次输入整个提示词（{length} 个位置）",
            ),
        )
        expect(
            torch.equal(answer[:, :length], prompt),
            tr("the returned tokens must start with the prompt", "返回的词元应以提示词开头"),
        )
        if not torch.equal(answer, expected):
            where = (answer != expected).any(dim=0).nonzero()[0].item()
            raise ExerciseMistake(
                tr(
                    f"your tokens differ from uncached greedy generation from position {where} on: each step "
                    "appends the argmax of the last position's logits",
                    f"你的词元从位置 {where} 起与不带缓存的贪心生成不同：每一步都应追加最后一个位置 logits 的 argmax",
                )
            )
        expect(
            len(fed) <= new,
            tr(
                f"the model was called {len(fed)} times for {new} new tokens; {new} calls are enough: the last "
                "token needs no call after it, and a prompt that fills the context to the last new token leaves no "
                "room in the cache for one more position",
                f"为 {new} 个新词元调用了模型 {len(fed)} 次；{new} 次就够了：最后一个词元之后不必再调用；"
                "如果提示词加上新词元正好填满上下文，缓存里也放不下多出的那一个位置",
            ),
        )


def check_cached_generation(fn: Callable[[nn.Module, Tensor, int], Tensor]) -> bool:
    """Exercise 15.3: ``fn(model, prompt, max_new_tokens)`` must generate greedily with one KV cache."""
    return report(CACHED_GENERATION, lambda: _check_cached_generation(fn))

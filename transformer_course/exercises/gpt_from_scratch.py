"""Exercises of notebook 15 (a GPT from scratch): their checkers and reference solutions.

15.1 ``check_merge_step(fn)``: ``fn(word_counts)`` takes pre-tokens as tuples of symbols with their counts,
     ``{("l", "o", "w"): 5, ...}``, and returns ``(pair, merged_counts)``: the most frequent adjacent pair
     (counted with the words' frequencies; a tie goes to the smaller pair) and the counts with every occurrence
     of that pair merged, left to right, into one symbol.
15.2 ``check_bits_per_character(fn)``: ``fn(nats_per_token, num_tokens, num_characters)`` returns the same loss
     in bits per character of the text.
15.3 ``check_cached_generation(fn)``: ``fn(model, prompt, max_new_tokens)`` continues ``prompt`` (batch, len_p)
     greedily with a KV cache: the whole prompt once, then only the newest token per step, the same tokens as
     uncached greedy generation.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping

import torch
from torch import Tensor, nn

from ._core import Exercise, ExerciseMistake, expect, expect_tensor, report, tr

Word = tuple[str, ...]

MERGE_STEP = Exercise("15.1", "one BPE merge", "一次 BPE 合并")
BITS_PER_CHARACTER = Exercise("15.2", "bits per character", "每字符比特数")
CACHED_GENERATION = Exercise("15.3", "a KV cache for generation", "生成时的 KV 缓存")


def reference_merge_step(word_counts: Mapping[Word, int]) -> tuple[tuple[str, str], dict[Word, int]]:
    """Reference solution of exercise 15.1: one step of BPE training."""
    pairs: Counter[tuple[str, str]] = Counter()
    for word, count in word_counts.items():
        for pair in zip(word, word[1:]):
            pairs[pair] += count
    best = min(pairs, key=lambda pair: (-pairs[pair], pair))  # most frequent; ties: the smaller pair
    merged: dict[Word, int] = {}
    for word, count in word_counts.items():
        out: list[str] = []
        i = 0
        while i < len(word):
            if word[i : i + 2] == best:
                out.append(best[0] + best[1])
                i += 2
            else:
                out.append(word[i])
                i += 1
        merged[tuple(out)] = merged.get(tuple(out), 0) + count
    return best, merged


def reference_bits_per_character(nats_per_token: float, num_tokens: int, num_characters: int) -> float:
    """Reference solution of exercise 15.2: nats per token -> bits per character."""
    return nats_per_token * num_tokens / num_characters / math.log(2)


# The frequency of "ab" (3 words x 1) loses to "cd" (1 word x 5) only when counts are weighted; "aaa" tests the
# left-to-right merge; ("x", "y") and ("y", "z") tie on purpose.
_MERGE_CASES: tuple[dict[Word, int], ...] = (
    {("a", "a", "a"): 4, ("b", "a"): 1},
    {("a", "b", "x"): 1, ("a", "b", "y"): 1, ("a", "b", "z"): 1, ("c", "d"): 5},
    {("y", "z"): 2, ("x", "y"): 2},
    {(" ", "t", "h", "e"): 10, ("t", "h", "e", "n"): 3, (" ", "t", "o"): 4},
)


def _unweighted_best(word_counts: Mapping[Word, int]) -> tuple[str, str]:
    pairs = Counter(pair for word in word_counts for pair in zip(word, word[1:]))
    return min(pairs, key=lambda pair: (-pairs[pair], pair))


def _check_merge_step(fn: Callable[[Mapping[Word, int]], tuple[tuple[str, str], dict[Word, int]]]) -> None:
    for case in _MERGE_CASES:
        answer = fn(dict(case))
        expect(
            isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[1], dict),
            tr(
                f"return a tuple (pair, merged_counts) with merged_counts a dict, got {answer!r:.60}",
                f"应返回元组 (pair, merged_counts)，其中 merged_counts 是 dict，得到的是 {answer!r:.60}",
            ),
        )
        pair, merged = answer
        expect(
            isinstance(pair, tuple | list) and len(pair) == 2,
            tr(
                f"return the pair as a tuple of two symbols, such as ('a', 'b'), got {pair!r:.40}",
                f"符号对应以两个符号的元组返回，例如 ('a', 'b')，得到的是 {pair!r:.40}",
            ),
        )
        best, expected = reference_merge_step(case)
        pair = tuple(pair) if isinstance(pair, list | tuple) else pair
        if pair != best:
            if pair == _unweighted_best(case):
                raise ExerciseMistake(
                    tr(
                        f"for {case} you picked {pair}, the pair found in the most words; count each occurrence "
                        f"with its word's frequency, which makes {best} the most frequent",
                        f"对 {case} 你选了 {pair}，它出现在最多的词里；但每次出现都要乘以所在词的频次，"
                        f"这样最频繁的是 {best}",
                    )
                )
            if isinstance(pair, tuple) and pair == best[::-1]:
                raise ExerciseMistake(
                    tr(
                        f"for {case} you returned {pair} reversed: a pair is (left symbol, right symbol)",
                        f"对 {case} 你返回的 {pair} 顺序反了：一个符号对是（左符号, 右符号）",
                    )
                )
            raise ExerciseMistake(
                tr(
                    f"for {case} the most frequent pair is {best} (ties go to the smaller pair), you returned {pair}",
                    f"对 {case} 最频繁的符号对是 {best}（平局时取较小的那对），你返回的是 {pair}",
                )
            )
        if merged != expected:
            total = sum(case.values())
            if sum(merged.values()) != total:
                raise ExerciseMistake(
                    tr(
                        f"for {case} your merged counts add up to {sum(merged.values())}, not {total}: merging "
                        "changes the symbols of a word, never how often the word occurs",
                        f"对 {case} 你合并后的计数之和是 {sum(merged.values())}，而不是 {total}：合并只改变词的符号，"
                        "从不改变词出现的次数",
                    )
                )
            if ("a", "a", "a") in case:
                raise ExerciseMistake(
                    tr(
                        f"merging {best} in ('a', 'a', 'a') gives ('aa', 'a'): scan left to right and skip past "
                        f"each merge; you returned {merged}",
                        f"在 ('a', 'a', 'a') 中合并 {best} 得到 ('aa', 'a')：从左到右扫描，每合并一次就跳过合并掉的"
                        f"两个符号；你返回的是 {merged}",
                    )
                )
            raise ExerciseMistake(
                tr(
                    f"for {case} the merged counts should be {expected}, got {merged}",
                    f"对 {case} 合并后的计数应为 {expected}，得到的是 {merged}",
                )
            )


def check_merge_step(fn: Callable[[Mapping[Word, int]], tuple[tuple[str, str], dict[Word, int]]]) -> bool:
    """Exercise 15.1: ``fn(word_counts)`` must return (the most frequent pair, the counts with it merged)."""
    return report(MERGE_STEP, lambda: _check_merge_step(fn))


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
                    f"call {call} fed {positions} positions; after the prompt feed only the newest token, "
                    "tokens[:, -1:] (the cache holds the keys and values of the rest)",
                    f"第 {call} 次调用输入了 {positions} 个位置；提示词之后每次只输入最新的词元 tokens[:, -1:]"
                    "（其余位置的键和值都在缓存里）",
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
                f"the model was called {len(fed)} times for {new} new tokens; {new} calls are enough (the last "
                "token needs no call after it)",
                f"为 {new} 个新词元调用了模型 {len(fed)} 次；{new} 次就够了（最后一个词元之后不必再调用）",
            ),
        )


def check_cached_generation(fn: Callable[[nn.Module, Tensor, int], Tensor]) -> bool:
    """Exercise 15.3: ``fn(model, prompt, max_new_tokens)`` must generate greedily with one KV cache."""
    return report(CACHED_GENERATION, lambda: _check_cached_generation(fn))

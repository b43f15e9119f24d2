"""Exercises of notebook 10 (decoding): their checkers and reference solutions.

1. ``check_top_k(fn)``: ``fn(logits, k)`` keeps the k largest logits of each row and sets the rest to -inf.
2. ``check_top_p(fn)``: ``fn(logits, p)`` keeps the nucleus: the fewest most-likely tokens whose probabilities
   reach p (the most likely token always stays), the rest -inf.
3. ``check_cached_attention(fn)``: ``fn(q, k, v, cache)`` is one decoding step of self-attention with a KV cache:
   append the newest position's key and value to the cache, attend over everything cached, and return
   ``(output, (keys, values))``. Step by step it must equal attention over the whole sequence with a causal mask.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import torch
from torch import Tensor

from ._core import (
    Exercise,
    ExerciseMistake,
    crash_hint,
    expect,
    expect_tensor,
    explain_shape_error,
    is_batched_matmul_mismatch,
    report,
    tr,
)

TOP_K = Exercise("10.1", "top-k filtering", "top-k 过滤")
TOP_P = Exercise("10.2", "top-p / nucleus filtering", "top-p / 核过滤")
CACHED_ATTENTION = Exercise("10.3", "attention with a KV cache", "带 KV 缓存的注意力")


def reference_top_k(logits: Tensor, k: int) -> Tensor:
    """Reference solution of exercise 10.1. logits: (..., V). Returns (..., V) with all but the top k at -inf."""
    kth_largest = logits.topk(k, dim=-1).values[..., -1:]  # (..., 1)
    return logits.masked_fill(logits < kth_largest, float("-inf"))


def reference_top_p(logits: Tensor, p: float) -> Tensor:
    """Reference solution of exercise 10.2. logits: (..., V). Returns (..., V), tokens outside the nucleus at -inf."""
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    probs = sorted_logits.softmax(dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs  # probability of every token ranked above this one
    drop_sorted = mass_before >= p  # p was already reached without this token
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


Cache = tuple[Tensor, Tensor]


def reference_cached_attention(q: Tensor, k: Tensor, v: Tensor, cache: Cache) -> tuple[Tensor, Cache]:
    """Reference solution of exercise 10.3: one step of self-attention with a KV cache.

    q, k, v: (batch, heads, 1, d_k), the newest position's query, key and value. cache: (keys, values), each
    (batch, heads, t, d_k), the keys and values of the t earlier positions (t = 0 at the first step). Returns
    (output (batch, heads, 1, d_k), (keys, values) each (batch, heads, t + 1, d_k)). No mask is needed: the cache
    holds only earlier positions and the newest one, exactly what the causal mask would let it see.
    """
    keys = torch.cat([cache[0], k], dim=2)  # (batch, heads, t + 1, d_k): the cache grows along the positions
    values = torch.cat([cache[1], v], dim=2)
    scores = q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (batch, heads, 1, t + 1)
    return scores.softmax(dim=-1) @ values, (keys, values)


# ----------------------------------------------------------------------------------------------- exercises 1, 2
def _logits() -> Tensor:
    g = torch.Generator().manual_seed(11)
    return torch.randn(4, 9, generator=g) * 2


def _kept(x: Tensor) -> Tensor:
    return torch.isfinite(x)


def _check_filter(name: str, fn: Callable[[Tensor, float], Tensor], reference, settings) -> None:
    logits = _logits()
    for s in settings:
        try:
            result = fn(logits.clone(), s)
        except RuntimeError as error:
            if "must match the size of tensor" in str(error):
                raise ExerciseMistake(
                    tr(
                        f"{name}={s}: compare each row with its own threshold, a (rows, 1) tensor that broadcasts over "
                        f"the row: keep the last dimension, values[..., -1:] rather than values[..., -1]. ({error})",
                        f"{name}={s}：每一行要和它自己的阈值比较，阈值是一个形状为 (rows, 1)、能在这一行上广播的张量，"
                        "所以要保留最后一维，用 values[..., -1:] 而不是 values[..., -1]。"
                        f"出错的地方：{explain_shape_error(error)}。",
                    )
                ) from error
            raise
        expected = reference(logits, s)
        type_name = type(result).__name__
        expect(
            isinstance(result, Tensor),
            tr(f"return a torch.Tensor, got {type_name}", f"应返回 torch.Tensor，得到的是 {type_name}"),
        )
        expect(
            tuple(result.shape) == tuple(logits.shape),
            tr(
                f"{name}={s}: the result has shape {tuple(result.shape)}, expected the logits' shape "
                f"{tuple(logits.shape)}",
                f"{name}={s}：结果的形状是 {tuple(result.shape)}，应与 logits 的形状 {tuple(logits.shape)} 相同",
            ),
        )
        got, want = _kept(result), _kept(expected)
        expect(
            not bool(torch.isnan(result).any()),
            tr(
                f"{name}={s}: the result has NaN; use float('-inf') for removed tokens",
                f"{name}={s}：结果中有 NaN；被去掉的词元要用 float('-inf')。",
            ),
        )
        if bool((got & ~want).any()) or bool((~got & want).any()):
            counts, wanted = got.sum(-1).tolist(), want.sum(-1).tolist()
            removed = ~want & got  # tokens that should be gone but are still finite
            if bool((result[removed] == 0).all()) and torch.equal(result[want], logits[want]):
                raise ExerciseMistake(
                    tr(
                        f"{name}={s}: the removed tokens hold 0; set them to float('-inf'), not 0. A logit of 0 is not "
                        "a probability of 0: softmax gives it exp(0) / sum > 0, so the token could still be drawn.",
                        f"{name}={s}：被去掉的词元的值是 0；要设为 float('-inf')，而不是 0。logit 为 0 并不等于概率为 "
                        "0：softmax 给它的是 exp(0) / sum > 0，这个词元仍可能被采样到。",
                    )
                )
            if bool((result[removed] < -1e3).all()) and torch.equal(result[want], logits[want]):
                raise ExerciseMistake(
                    tr(
                        f"{name}={s}: the removed tokens hold a large negative number; use float('-inf'), which "
                        "softmax turns into exactly 0 whatever the other logits and the temperature are.",
                        f"{name}={s}：被去掉的词元的值是一个很大的负数；要用 float('-inf')，因为无论其他 logit "
                        "和温度是多少，softmax 都会把它变成恰好 0。",
                    )
                )
            if name == "k" and all(c == s - 1 for c in counts):
                raise ExerciseMistake(
                    tr(
                        f"k={s}: you kept {s - 1} tokens per row; keep the k largest (ties aside).",
                        f"k={s}：你每行保留了 {s - 1} 个词元；要保留最大的 k 个（出现平局时除外）。",
                    )
                )
            sorted_logits = logits.sort(dim=-1, descending=True).values
            in_sorted_order = reference(sorted_logits, s)
            if torch.equal(got, _kept(in_sorted_order)) and torch.equal(
                result[got], in_sorted_order[_kept(in_sorted_order)]
            ):
                raise ExerciseMistake(
                    tr(
                        f"{name}={s}: the right values, but returned in sorted order; put every logit back at its "
                        "token's place in the vocabulary (scatter with the indices that sort returned)",
                        f"{name}={s}：保留的值对了，但返回的是排序后的顺序；要把每个 logit 放回它的词元在词表中的位置"
                        "（用 sort 返回的索引做 scatter）。",
                    )
                )
            if name == "p" and counts == wanted:
                raise ExerciseMistake(
                    tr(
                        f"p={s}: the right number of tokens per row, but not the right ones: the mask you computed on "
                        "the sorted row must go back to vocabulary order, "
                        "torch.zeros_like(mask_sorted).scatter(-1, order, mask_sorted) "
                        "(gather with the sort indices applies the sorting again instead of undoing it)",
                        f"p={s}：每行保留的词元个数对了，但保留的不是正确的那些。你在排序后的行上算出的掩码必须回到"
                        "词表顺序，即 torch.zeros_like(mask_sorted).scatter(-1, order, mask_sorted)"
                        "（用排序的索引做 gather 会把排序再做一遍，而不是撤销它）。",
                    )
                )
            if name == "k":
                flat_top = torch.zeros(logits.numel(), dtype=torch.bool)
                flat_top[logits.flatten().topk(s).indices] = True  # the k largest of the whole batch, not of each row
                if torch.equal(got.flatten(), flat_top):
                    raise ExerciseMistake(
                        tr(
                            f"k={s}: you kept the k largest logits of the whole tensor; each row (one sequence) keeps "
                            "its own k largest: topk along the last dimension, logits.topk(k, dim=-1).",
                            f"k={s}：你保留的是整个张量中最大的 k 个 logit；"
                            "每一行（一个序列）要分别保留自己最大的 k 个，"
                            "即沿最后一维取 topk：logits.topk(k, dim=-1)。",
                        )
                    )
            if not bool(got.any(-1).all()):
                raise ExerciseMistake(
                    tr(f"{name}={s}: some rows keep no token at all; ", f"{name}={s}：有些行一个词元也没保留；")
                    + (
                        tr("keep the k largest logits.", "要保留最大的 k 个 logit。")
                        if name == "k"
                        else tr("the most likely token always stays.", "最可能的词元总是要保留。")
                    )
                )
            if not bool((got & want).any()):
                raise ExerciseMistake(
                    tr(
                        f"{name}={s}: you kept the least likely tokens; keep the most likely ones.",
                        f"{name}={s}：你保留的是最不可能的词元；要保留最可能的那些。",
                    )
                )
            raise ExerciseMistake(
                tr(
                    f"{name}={s}: you kept {counts} tokens per row, expected {wanted}",
                    f"{name}={s}：你每行保留的词元个数是 {counts}，应为 {wanted}",
                )
                + (
                    tr(
                        " (keep the token that makes the running total reach p, and always the most likely one)",
                        "（要保留使累计概率达到 p 的那个词元，而且总要保留最可能的那个）。",
                    )
                    if name == "p"
                    else ""
                )
            )
        expect(
            torch.equal(result[got], logits[got]),
            tr(
                f"{name}={s}: the kept logits must be unchanged (only the others become -inf)",
                f"{name}={s}：保留下来的 logit 必须保持不变（只有其余的变成 -inf）。",
            ),
        )


def check_top_k(fn: Callable[[Tensor, int], Tensor]) -> bool:
    """Exercise 10.1: ``fn(logits, k)`` returns the logits with all but the k largest of each row set to -inf."""
    return report(TOP_K, lambda: _check_filter("k", fn, reference_top_k, (1, 3, 9)))


def check_top_p(fn: Callable[[Tensor, float], Tensor]) -> bool:
    """Exercise 10.2: ``fn(logits, p)`` returns the logits with every token outside the top-p nucleus set to -inf."""
    return report(
        TOP_P,
        lambda: _check_filter("p", fn, reference_top_p, (0.3, 0.6, 0.9, 1.0)),
    )


# ----------------------------------------------------------------------------------------------- exercise 3
BATCH, HEADS, STEPS, D_K = 2, 3, 5, 4


def _sequence() -> tuple[Tensor, Tensor, Tensor]:
    """Queries, keys and values of a whole sequence: each (batch, heads, steps, d_k)."""
    g = torch.Generator().manual_seed(7)
    return tuple(torch.randn(BATCH, HEADS, STEPS, D_K, generator=g) for _ in range(3))  # type: ignore[return-value]


def _causal_attention(q: Tensor, k: Tensor, v: Tensor, scale: bool = True) -> Tensor:
    """Uncached attention over the whole sequence with a causal mask: (batch, heads, steps, d_k)."""
    scores = q @ k.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if scale else 1.0)
    n = q.shape[-2]
    allowed = torch.ones(n, n, dtype=torch.bool).tril()
    return scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1) @ v


def _excluding_self(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """What a step gives if it attends over the earlier positions only (step 0, with nothing cached, gives 0)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    n = q.shape[-2]
    earlier = torch.ones(n, n, dtype=torch.bool).tril(-1)
    weights = scores.masked_fill(~earlier, float("-inf")).softmax(dim=-1).nan_to_num(0.0)
    return weights @ v


def _cat_dimension(error: Exception) -> int | None:
    """The dimension torch.cat complained about ("Sizes of tensors must match except in dimension 3"), if any."""
    found = re.search(r"except in dimension (-?\d+)", str(error))
    return int(found.group(1)) if found else None


def _wrong_dimension_hint(dim: int) -> str:
    return tr(
        f"the new key and value were concatenated along dimension {dim}; the cache grows along the positions, "
        "dim=2 of (batch, heads, positions, d_k): torch.cat([cache_k, k], dim=2)",
        f"新的键和值是沿 dim={dim} 拼接的；缓存沿位置增长，也就是 (batch, heads, positions, d_k) 的 dim=2："
        "torch.cat([cache_k, k], dim=2)",
    )


def _check_cached_attention(fn: Callable[[Tensor, Tensor, Tensor, Cache], tuple[Tensor, Cache]]) -> None:
    q, k, v = _sequence()
    expected = _causal_attention(q, k, v)  # (batch, heads, steps, d_k): the uncached answer
    cache: Cache = (torch.zeros(BATCH, HEADS, 0, D_K), torch.zeros(BATCH, HEADS, 0, D_K))
    outputs = []
    for t in range(STEPS):
        new = (q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1])  # (batch, heads, 1, d_k) each
        try:
            result = fn(*(x.clone() for x in new), (cache[0].clone(), cache[1].clone()))
        except RuntimeError as error:
            dim = _cat_dimension(error)
            if dim is not None and dim not in (2, -2):
                hint = _wrong_dimension_hint(dim)
                raise ExerciseMistake(
                    tr(f"step {t}: {hint}. ({error})", f"第 {t} 步：{hint}。出错的地方：{explain_shape_error(error)}。")
                ) from error
            if t > 0 and is_batched_matmul_mismatch(error):  # step 0 worked, so the cache grew the wrong way
                raise ExerciseMistake(
                    tr(
                        f"step {t}: the keys no longer line up with the query; the cache must grow along the "
                        "positions, dim=2 of (batch, heads, positions, d_k): torch.cat([cache_k, k], dim=2). "
                        f"({error})",
                        f"第 {t} 步：键和查询的形状对不上了；缓存要沿位置增长，"
                        "也就是 (batch, heads, positions, d_k) 的 dim=2：torch.cat([cache_k, k], dim=2)。"
                        f"出错的地方：{explain_shape_error(error)}。",
                    )
                ) from error
            # keys.T on (batch, heads, t + 1, d_k) reverses all four dimensions, so batch (2) meets d_k (4)
            transposed = crash_hint(
                error,
                (BATCH, D_K),
                "If you wrote keys.T: .T reverses all four dimensions of (batch, heads, positions, d_k). Swap only "
                "the last two: keys.transpose(-2, -1) (or keys.mT)",
                "如果你写的是 keys.T：.T 会把 (batch, heads, positions, d_k) 的四个维度全部反转。"
                "只交换最后两个维度：keys.transpose(-2, -1)（或 keys.mT）",
            )
            if transposed is not None:
                raise transposed from error
            raise
        type_name = type(result).__name__
        expect(
            isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], tuple) and len(result[1]) == 2,
            tr(
                f"return (output, (keys, values)), got {type_name}",
                f"应返回 (output, (keys, values))，得到的是 {type_name}",
            ),
        )
        out, (keys, values) = result
        shape = (BATCH, HEADS, t + 1, D_K)
        for name, got in (("keys", keys), ("values", values)):
            name_zh = "键" if name == "keys" else "值"
            expect(
                isinstance(got, Tensor),
                tr(f"step {t}: the returned {name} should be a tensor", f"第 {t} 步：返回的{name_zh}应是张量"),
            )
            newest = (k if name == "keys" else v)[:, :, t : t + 1]
            if t > 0 and tuple(got.shape) == tuple(newest.shape) and torch.allclose(got, newest):
                raise ExerciseMistake(
                    tr(
                        f"step {t}: the returned {name} hold only the newest position; keep the earlier ones too: "
                        "concatenate the cache and the new one",
                        f"第 {t} 步：返回的{name_zh}只含最新的位置；之前的也要保留，即把缓存和新的{name_zh}拼接起来",
                    )
                )
            if tuple(got.shape) == (BATCH, HEADS, t, D_K):
                raise ExerciseMistake(
                    tr(
                        f"step {t}: the cache you return still holds {t} position{'s' if t != 1 else ''}; append the "
                        f"new {name[:-1]} to it (torch.cat along dim=2), so that the next step sees this position too",
                        f"第 {t} 步：你返回的缓存仍然只有 {t} 个位置；要把新的{name_zh}追加进去（沿 dim=2 做 "
                        "torch.cat），这样下一步也能看到这个位置",
                    )
                )
            expect_tensor(
                got,
                tr(f"step {t}: the returned {name}", f"第 {t} 步：返回的{name_zh}"),
                shape,
                tr("(batch, heads, positions so far, d_k)", "(batch, heads, 目前为止的位置数, d_k)"),
            )
        expect(
            torch.allclose(keys, k[:, :, : t + 1]) and torch.allclose(values, v[:, :, : t + 1]),
            tr(
                f"step {t}: the cache must hold the keys and values of positions 0..{t} in order, old ones first",
                f"第 {t} 步：缓存必须按顺序保存位置 0..{t} 的键和值，旧的在前",
            ),
        )
        expect_tensor(
            out, tr(f"step {t}: the output", f"第 {t} 步：输出"), (BATCH, HEADS, 1, D_K), "(batch, heads, 1, d_k)"
        )
        outputs.append(out)
        cache = (keys.detach(), values.detach())
    got = torch.cat(outputs, dim=2)
    if torch.allclose(got, expected, atol=1e-5, rtol=1e-4):
        return
    if torch.allclose(got, _causal_attention(q, k, v, scale=False), atol=1e-5, rtol=1e-4):
        raise ExerciseMistake(
            tr(
                "the outputs match attention without the 1/sqrt(d_k) scale; divide the scores by it",
                "输出与没有 1/sqrt(d_k) 缩放的注意力一致；要把分数除以 sqrt(d_k)。",
            )
        )
    # step 0 has nothing cached before it: whatever it returned, the later steps tell the slip
    if torch.allclose(got[:, :, 1:], _excluding_self(q, k, v)[:, :, 1:], atol=1e-5, rtol=1e-4):
        raise ExerciseMistake(
            tr(
                "each step attended over the earlier positions only; the newest position attends to itself too: "
                "append its key and value first, then attend over the whole cache",
                "每一步都只关注了之前的位置；最新的位置也要关注它自己：先追加它的键和值，再在整个缓存上做注意力",
            )
        )
    weights_over_query = v.cumsum(dim=2)  # softmax over the single query gives weight 1 to every key
    if torch.allclose(got, weights_over_query, atol=1e-5, rtol=1e-4):
        raise ExerciseMistake(
            tr(
                "take the softmax over the keys (the last dimension of the scores), not over the query",
                "要在键上做 softmax（分数的最后一维），而不是在查询上",
            )
        )
    worst = (got - expected).abs().max().item()
    raise ExerciseMistake(
        tr(
            f"the outputs differ from uncached causal attention over the whole sequence (largest difference "
            f"{worst:.3g})",
            f"输出与不用缓存、在整个序列上做的因果注意力不同（最大差 {worst:.3g}）。",
        )
    )


def check_cached_attention(fn: Callable[[Tensor, Tensor, Tensor, Cache], tuple[Tensor, Cache]]) -> bool:
    """Exercise 10.3: ``fn(q, k, v, cache)`` is one step of self-attention with a KV cache; step by step its outputs
    must equal causal attention over the whole sequence."""
    return report(CACHED_ATTENTION, lambda: _check_cached_attention(fn))

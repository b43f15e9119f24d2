"""Exercises of notebook 11 (BERT, GPT and ViT): their checkers and reference solutions.

1. ``check_span_corruption(fn)``: ``fn(words, dropped)`` turns a sentence and a mask of dropped words into T5's
   span-corruption pair: each run of dropped words becomes one sentinel ``<extra_id_k>`` in the input, and the target
   lists the spans after their sentinels, closed by one more sentinel.
2. ``check_segment_ids(fn)``: ``fn(ids, sep_id, pad_id)`` gives the segment ids of ``[CLS] A [SEP] B [SEP] <pad>...``
   (0 up to and including the first ``[SEP]``, 1 after it, 0 on padding), with no loop over rows.
3. ``check_patchify(fn)``: ``fn(images, patch_size)`` cuts (batch, H, W) images into (batch, num_patches,
   patch_size**2), patches numbered row by row, each flattened row by row.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from ..families.bert import SEP_ID, pair_inputs, segment_ids
from ..families.vit import patchify
from ..text.tasks import PAD_ID
from ._core import Exercise, ExerciseMistake, _then, expect, expect_close, expect_tensor, report, tr

SPAN_CORRUPTION = Exercise("11.1", "span corruption", "片段破坏")
SEGMENT_IDS = Exercise("11.2", "segment ids", "分段 id")
PATCHIFY = Exercise("11.3", "patchify", "切分图像块")


def _same(a: Tensor, b: Tensor) -> bool:
    return tuple(a.shape) == tuple(b.shape) and bool((a.detach().long() == b.long()).all())


# ----------------------------------------------------------------------------------------------- exercise 1
def sentinel(k: int) -> str:
    """T5's k-th sentinel token, which stands for the k-th dropped span: ``<extra_id_k>``."""
    return f"<extra_id_{k}>"


def reference_span_corruption(words: list[str], dropped: list[bool]) -> tuple[list[str], list[str]]:
    """Reference solution of exercise 11.1: T5's span corruption from a mask of dropped words.

    Each run of consecutive dropped words is one span. In the input a span is replaced by one sentinel
    (``<extra_id_0>``, ``<extra_id_1>``, ... in order); the target lists each span after its sentinel and ends with
    one more sentinel. Returns (input words, target words).
    """
    source: list[str] = []
    target: list[str] = []
    spans = 0
    for i, (word, gone) in enumerate(zip(words, dropped)):
        if not gone:
            source.append(word)
            continue
        if i == 0 or not dropped[i - 1]:  # the first word of a new span
            source.append(sentinel(spans))
            target.append(sentinel(spans))
            spans += 1
        target.append(word)
    target.append(sentinel(spans))  # closes the last span
    return source, target


def _span_cases() -> list[tuple[list[str], list[bool]]]:
    sentence = "return the number of items in the queue if it is not empty".split()
    n = len(sentence)
    marks = [
        [i in (2, 3, 8) for i in range(n)],  # two spans: "number of", "if"
        [i in (0, 1, 5, 6, 7, 12) for i in range(n)],  # spans at the start and at the end
        [i in (3, 5) for i in range(n)],  # two one-word spans with one word between them
        [False] * n,  # nothing dropped
        [i in (4, 5, 6, 7) for i in range(n)],  # one long span
    ]
    return [(sentence, m) for m in marks]


def _span_mistakes(words: list[str], dropped: list[bool]) -> dict[str, tuple[list[str], list[str]]]:
    source, target = reference_span_corruption(words, dropped)
    per_word_source, per_word_target = [], []
    for k, (word, gone) in enumerate((w, g) for w, g in zip(words, dropped)):
        if gone:
            marker = sentinel(sum(dropped[:k]))
            per_word_source.append(marker)
            per_word_target += [marker, word]
        else:
            per_word_source.append(word)
    per_word_target.append(sentinel(sum(dropped)))
    same_number = (
        [sentinel(0) if w.startswith("<extra_id_") else w for w in source],
        [sentinel(0) if w.startswith("<extra_id_") else w for w in target],
    )

    def shift(w: str) -> str:
        return sentinel(int(w[len("<extra_id_") : -1]) + 1) if w.startswith("<extra_id_") else w

    from_one = ([shift(w) for w in source], [shift(w) for w in target])
    return {
        tr(
            "consecutive dropped words form ONE span and share one sentinel; you gave every dropped word its own",
            "连续被丢弃的几个词合起来只算一个片段，共用一个哨兵词元；你却给每个被丢弃的词各配了一个",
        ): (per_word_source, per_word_target),
        (
            tr(
                "the target ends with one more sentinel after the last span (it marks where that span ends)",
                "目标序列在最后一个片段之后还要再跟一个哨兵词元（它标出这个片段在哪里结束）",
            )
            if any(dropped)
            else tr(
                "with no span at all, the target is still one sentinel, ['<extra_id_0>']: it says nothing is missing",
                "没有任何片段时，目标序列也要有一个哨兵词元，即 ['<extra_id_0>']：它表示没有缺少任何内容",
            )
        ): (source, target[:-1]),
        tr(
            "number the sentinels in order, <extra_id_0>, <extra_id_1>, ...: each span gets the next number",
            "哨兵词元要按 <extra_id_0>、<extra_id_1>……的顺序编号，每个片段取下一个编号",
        ): same_number,
        tr(
            "the first sentinel is <extra_id_0>: number the spans from 0, as Python counts",
            "第一个哨兵词元是 <extra_id_0>，片段要像 Python 计数那样从 0 开始编号",
        ): from_one,
        tr(
            "each span in the target starts with its sentinel, so the decoder knows which gap it is filling",
            "目标序列中的每个片段都以它的哨兵词元开头，这样解码器才知道自己在填哪个空",
        ): (source, [w for w in target if not w.startswith("<extra_id_")] + [target[-1]]),
    }


def _check_span_corruption(fn: Callable[[list[str], list[bool]], tuple[list[str], list[str]]]) -> None:
    for words, dropped in _span_cases():
        result = fn(list(words), list(dropped))
        got = type(result).__name__  # for a tuple also what it holds: "tuple(str, str)" names the slip
        if isinstance(result, tuple):
            got += f"({', '.join(type(r).__name__ for r in result)})"
        expect(
            isinstance(result, tuple) and len(result) == 2 and all(isinstance(r, list) for r in result),
            tr(
                f"return a tuple (input words, target words) of two lists, got {got}",
                f"应返回一个元组（输入词列表，目标词列表），其中两个元素都必须是列表；得到的是 {got}",
            ),
        )
        source, target = (list(map(str, r)) for r in result)
        want_source, want_target = reference_span_corruption(words, dropped)
        if source == want_source and target == want_target:
            continue
        gone = ", ".join(repr(w) for w, d in zip(words, dropped) if d)
        what = (
            tr(f"dropping {gone}", f"丢弃 {gone} 时")
            if any(dropped)
            else tr("dropping no word at all", "一个词也不丢弃时")
        )
        for hint, (wrong_source, wrong_target) in _span_mistakes(words, dropped).items():
            if source == wrong_source and target == wrong_target:
                raise ExerciseMistake(tr(f"{what}: {hint}.", f"{what}：{hint}。"))
        kept = [w for w, d in zip(words, dropped) if not d]
        if [w for w in source if not w.startswith("<extra_id_")] != kept:
            raise ExerciseMistake(
                tr(
                    f"{what}: the input must keep every word that was not dropped, in order, and lose the dropped "
                    f"ones; got {' '.join(source)}",
                    f"{what}：输入必须按原来的顺序保留每个没被丢弃的词，并去掉被丢弃的词；得到的是 {' '.join(source)}",
                )
            )
        raise ExerciseMistake(
            tr(
                f"{what}: expected input {' '.join(want_source)!r} and target {' '.join(want_target)!r}, "
                f"got {' '.join(source)!r} and {' '.join(target)!r}",
                f"{what}：输入应为 {' '.join(want_source)!r}，目标应为 {' '.join(want_target)!r}，"
                f"得到的却是 {' '.join(source)!r} 和 {' '.join(target)!r}",
            )
        )


def check_span_corruption(fn: Callable[[list[str], list[bool]], tuple[list[str], list[str]]]) -> bool:
    """Exercise 11.1: ``fn(words, dropped)`` must return T5's (input, target) for the spans that ``dropped`` marks."""
    return report(SPAN_CORRUPTION, lambda: _check_span_corruption(fn))


# ----------------------------------------------------------------------------------------------- exercise 2
def reference_segment_ids(ids: Tensor, sep_id: int = SEP_ID, pad_id: int = PAD_ID) -> Tensor:
    """Reference solution of exercise 11.2: count the [SEP]s strictly before each position, cap at 1, zero the
    padding."""
    is_sep = (ids == sep_id).long()
    before = is_sep.cumsum(dim=1) - is_sep
    return before.clamp(max=1).masked_fill(ids == pad_id, 0)


def _segment_cases() -> list[Tensor]:
    g = torch.Generator().manual_seed(11)
    cases = []
    for batch in (3, 5):
        first = [list(range(10, 10 + int(n))) for n in torch.randint(1, 7, (batch,), generator=g)]
        second = [list(range(30, 30 + int(n))) for n in torch.randint(1, 7, (batch,), generator=g)]
        cases.append(pair_inputs(first, second)[0])
    cases.append(pair_inputs([[10, 11, 12], [13]])[0])  # single segments: everything after [SEP] is padding
    return cases


def _segment_mistakes(ids: Tensor) -> dict[str, Tensor]:
    is_sep = (ids == SEP_ID).long()
    inclusive = is_sep.cumsum(dim=1)
    return {
        tr(
            "the first [SEP] closes segment A, so it belongs to segment 0; count the [SEP]s strictly BEFORE each "
            "position (subtract the position's own)",
            "第一个 [SEP] 是分段 A 的结尾，所以它属于分段 0；只数每个位置之前的 [SEP]，不算该位置本身",
        ): inclusive.clamp(max=1).masked_fill(ids == PAD_ID, 0),
        tr(
            "the first [SEP] closes segment A, so it belongs to segment 0: count the [SEP]s strictly BEFORE each "
            "position (subtract the position's own); and the padding must get segment 0 (set ids == pad_id to 0)",
            "第一个 [SEP] 是分段 A 的结尾，所以它属于分段 0：只数每个位置之前的 [SEP]，不算该位置本身；"
            "另外，填充必须属于分段 0（把 ids == pad_id 的位置设为 0）",
        ): inclusive.clamp(max=1),
        tr(
            "padding must get segment 0, and no position may get a segment above 1: yours gives the padding after B "
            "segment 2 (it counts two [SEP]s before it). Cap the count at 1 and set the padding to 0",
            "填充必须属于分段 0，而且任何位置的分段 id 都不能大于 1；你的答案让 B 之后的填充属于分段 2"
            "（它前面数到了两个 [SEP]）。把计数的上限定为 1，并把填充设为 0",
        ): is_sep.cumsum(dim=1) - is_sep,
        tr(
            "padding must get segment 0 (as pair_inputs gives); yours gives the padding after B segment 1: set the "
            "positions where ids == pad_id to 0",
            "填充必须属于分段 0（与 pair_inputs 给出的一致）；你的答案让 B 之后的填充属于分段 1。要把 ids == pad_id "
            "的位置设为 0",
        ): (is_sep.cumsum(dim=1) - is_sep).clamp(max=1),
    }


def _check_segments(fn: Callable[[Tensor, int, int], Tensor]) -> None:
    for ids in _segment_cases():
        what = tr(
            f"your segment ids for a batch of shape {tuple(ids.shape)}",
            f"对形状为 {tuple(ids.shape)} 的输入批次，你给出的分段 id",
        )
        out = fn(ids.clone(), SEP_ID, PAD_ID)
        expected = segment_ids(ids)
        got = type(out).__name__
        expect(
            isinstance(out, Tensor),
            tr(f"{what} should be a torch.Tensor, got {got}", f"{_then(what)}应是 torch.Tensor，得到的是 {got}"),
        )
        expect(
            not out.dtype.is_floating_point and out.dtype != torch.bool,
            tr(
                f"{what} should hold integers (they index an nn.Embedding), got dtype {out.dtype}",
                f"{_then(what)}应是整数（它们用作 nn.Embedding 的索引），得到的 dtype 是 {out.dtype}",
            ),
        )
        expect(
            tuple(out.shape) == tuple(ids.shape),
            tr(
                f"{what} has shape {tuple(out.shape)}, expected {tuple(ids.shape)}",
                f"{_then(what)}的形状是 {tuple(out.shape)}，应为 {tuple(ids.shape)}。",
            ),
        )
        if _same(out, expected):
            continue
        for hint, wrong in _segment_mistakes(ids).items():
            if _same(out, wrong):
                raise ExerciseMistake(tr(f"{what}: {hint}.", f"{_then(what)}不对：{hint}。"))
        wrong_count = (out.long() != expected).sum().item()
        raise ExerciseMistake(
            tr(
                f"{what} differ from the expected ones at {wrong_count} positions",
                f"{_then(what)}有 {wrong_count} 个位置与正确结果不同",
            )
        )


def check_segment_ids(fn: Callable[[Tensor, int, int], Tensor]) -> bool:
    """Exercise 11.2: ``fn(ids, sep_id, pad_id)`` must give 0 up to the first [SEP] (included), 1 after, 0 on
    padding."""
    return report(SEGMENT_IDS, lambda: _check_segments(fn))


# ----------------------------------------------------------------------------------------------- exercise 3
def reference_patchify(images: Tensor, patch_size: int) -> Tensor:
    """Reference solution of exercise 11.3: (batch, H, W) -> (batch, (H/p) * (W/p), p * p)."""
    batch, height, width = images.shape
    p = patch_size
    x = images.reshape(batch, height // p, p, width // p, p)  # (batch, row, y, col, x)
    x = x.permute(0, 1, 3, 2, 4)  # (batch, row, col, y, x)
    return x.reshape(batch, (height // p) * (width // p), p * p)


def _patch_mistakes(images: Tensor, p: int) -> dict[str, Tensor]:
    batch, height, width = images.shape
    grid = images.reshape(batch, height // p, p, width // p, p)
    return {
        tr(
            "a plain reshape cuts the image into runs of consecutive pixels of one row, not into square patches; "
            "reshape to (batch, H/p, p, W/p, p) and permute the two patch-grid axes next to each other first",
            "直接 reshape 会把图像切成同一行里一段段连续的像素，而不是正方形的图像块；要先 reshape 成 "
            "(batch, H/p, p, W/p, p)，再用 permute 把图像块网格的两个轴排到一起",
        ): images.reshape(batch, -1, p * p),
        tr(
            "your patches are numbered column by column; number them row by row (left to right, then the next row)",
            "你的图像块是按列编号的；要按行编号（从左到右，再到下一行）",
        ): grid.permute(0, 3, 1, 2, 4).reshape(batch, -1, p * p),
        tr(
            "the pixels inside each patch come out column by column; flatten each patch row by row",
            "每个图像块里的像素是按列排出来的；要按行展平每个图像块",
        ): grid.permute(0, 1, 3, 4, 2).reshape(batch, -1, p * p),
    }


def _check_patchify(fn: Callable[[Tensor, int], Tensor]) -> None:
    g = torch.Generator().manual_seed(3)
    for shape, p in (((2, 8, 8), 2), ((3, 8, 8), 4), ((1, 6, 9), 3)):
        images = torch.randn(*shape, generator=g)
        what = tr(
            f"your patches of images {shape} with patch_size={p}",
            f"对形状为 {shape} 的图像取 patch_size={p} 时，你切出的图像块",
        )
        out = fn(images.clone(), p)
        expected = patchify(images, p)
        expect_tensor(out, what, expected.shape, tr("(batch, num_patches, p * p)", "(batch, 图像块数, p * p)"))
        if torch.allclose(out.detach().float(), expected):
            continue
        for hint, wrong in _patch_mistakes(images, p).items():
            if torch.allclose(out.detach().float(), wrong):
                raise ExerciseMistake(tr(f"{what}: {hint}.", f"{what}不对：{hint}。"))
        expect_close(out, expected, what)


def check_patchify(fn: Callable[[Tensor, int], Tensor]) -> bool:
    """Exercise 11.3: ``fn(images, patch_size)`` must cut (batch, H, W) images into flattened patches, row by row."""
    return report(PATCHIFY, lambda: _check_patchify(fn))

"""Exercises of notebook 11 (BERT, GPT and ViT): their checkers and reference solutions.

1. ``check_mlm_corruption(fn)``: ``fn(ids, chosen, action, random_ids, mask_id)`` applies BERT's 80/10/10 rule and
   returns ``(inputs, labels)`` (labels: the original id where chosen, ``<pad>`` = 0 elsewhere).
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

from ..bert import CLS_ID, FIRST_WORD_ID, MASK_ID, SEP_ID, corrupt_for_mlm, pair_inputs, segment_ids
from ..data import PAD_ID
from ..variants import patchify
from ._core import ExerciseMistake, expect, expect_close, expect_tensor, report


def _same(a: Tensor, b: Tensor) -> bool:
    return tuple(a.shape) == tuple(b.shape) and bool((a.detach().long() == b.long()).all())


# ----------------------------------------------------------------------------------------------- exercise 1
def reference_mlm_corruption(
    ids: Tensor, chosen: Tensor, action: Tensor, random_ids: Tensor, mask_id: int = MASK_ID
) -> tuple[Tensor, Tensor]:
    """Reference solution of exercise 1: chosen and action < 0.8 -> [MASK]; chosen and 0.8 <= action < 0.9 -> the
    random word; everything else unchanged. Labels: the original id where chosen, <pad> (0) elsewhere."""
    inputs = ids.clone()
    inputs[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    inputs[swap] = random_ids[swap]
    labels = torch.where(chosen, ids, torch.zeros_like(ids))
    return inputs, labels


def _mlm_case(seed: int, batch: int, length: int, vocab: int = 50) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(FIRST_WORD_ID, vocab, (batch, length), generator=g)
    ids[:, 0] = CLS_ID
    ids[:, -1] = SEP_ID
    chosen = (torch.rand(batch, length, generator=g) < 0.4) & (ids >= FIRST_WORD_ID)
    action = torch.rand(batch, length, generator=g)
    random_ids = torch.randint(FIRST_WORD_ID, vocab, (batch, length), generator=g)
    return ids, chosen, action, random_ids


def _mlm_mistakes(ids: Tensor, chosen: Tensor, action: Tensor, random_ids: Tensor) -> dict[str, tuple[Tensor, Tensor]]:
    right_inputs, right_labels = corrupt_for_mlm(ids, chosen, action, random_ids)
    all_masked = torch.where(chosen, torch.full_like(ids, MASK_ID), ids)
    swapped_inputs = torch.where(chosen & (action < 0.8), torch.full_like(ids, MASK_ID), ids)
    swapped_inputs = torch.where(chosen & (action >= 0.9), random_ids, swapped_inputs)
    everywhere = torch.ones_like(chosen)
    unchosen_inputs, _ = corrupt_for_mlm(ids, everywhere, action, random_ids)
    return {
        "labels: only the chosen positions get a label; the others must be <pad> = 0, which the loss ignores (you "
        "labelled every position)": (right_inputs, ids.clone()),
        "labels: this course marks 'no label' with <pad> = 0 (as the seq2seq labels do), not -100": (
            right_inputs,
            torch.where(chosen, ids, torch.full_like(ids, -100)),
        ),
        "labels must hold the ORIGINAL ids of the chosen positions, not the corrupted inputs": (
            right_inputs,
            torch.where(chosen, right_inputs, torch.zeros_like(ids)),
        ),
        "inputs: you replaced every chosen token by [MASK]; only those with action < 0.8 get [MASK], 0.8 <= action "
        "< 0.9 get the random word, and the rest stay as they are": (all_masked, right_labels),
        "inputs: the 10% bands are swapped: the random word goes where 0.8 <= action < 0.9, and tokens with "
        "action >= 0.9 stay unchanged": (swapped_inputs, right_labels),
        "inputs: positions that were NOT chosen must never change; combine the action test with `chosen`": (
            unchosen_inputs,
            right_labels,
        ),
    }


def _check_mlm(fn: Callable[..., tuple[Tensor, Tensor]]) -> None:
    for seed, batch, length in ((0, 2, 12), (1, 4, 30), (2, 1, 5)):
        ids, chosen, action, random_ids = _mlm_case(seed, batch, length)
        what = f"for a batch of shape {(batch, length)}"
        result = fn(ids.clone(), chosen.clone(), action.clone(), random_ids.clone(), MASK_ID)
        expect(
            isinstance(result, tuple) and len(result) == 2 and all(isinstance(t, Tensor) for t in result),
            f"return a tuple (inputs, labels) of two tensors, got {type(result).__name__}",
        )
        inputs, labels = result
        expected_inputs, expected_labels = corrupt_for_mlm(ids, chosen, action, random_ids)
        for name, got, want in (("inputs", inputs, expected_inputs), ("labels", labels, expected_labels)):
            expect(
                tuple(got.shape) == tuple(want.shape),
                f"{name} {what} has shape {tuple(got.shape)}, expected {tuple(want.shape)}",
            )
        if _same(inputs, expected_inputs) and _same(labels, expected_labels):
            continue
        for hint, (wrong_inputs, wrong_labels) in _mlm_mistakes(ids, chosen, action, random_ids).items():
            if _same(inputs, wrong_inputs) and _same(labels, wrong_labels):
                raise ExerciseMistake(f"{what}: {hint}.")
        for name, got, want in (("inputs", inputs, expected_inputs), ("labels", labels, expected_labels)):
            wrong = (got.detach().long() != want).sum().item()
            expect(wrong == 0, f"{name} {what} differ from the expected ones at {wrong} positions")


def check_mlm_corruption(fn: Callable[..., tuple[Tensor, Tensor]]) -> bool:
    """Exercise 1: ``fn(ids, chosen, action, random_ids, mask_id)`` must apply BERT's 80/10/10 rule."""
    return report("Exercise 1 (80/10/10 masking)", lambda: _check_mlm(fn))


# ----------------------------------------------------------------------------------------------- exercise 2
def reference_segment_ids(ids: Tensor, sep_id: int = SEP_ID, pad_id: int = PAD_ID) -> Tensor:
    """Reference solution of exercise 2: count the [SEP]s strictly before each position, cap at 1, zero the padding."""
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
        "the first [SEP] closes segment A, so it belongs to segment 0; count the [SEP]s strictly BEFORE each "
        "position (subtract the position's own)": inclusive.clamp(max=1).masked_fill(ids == PAD_ID, 0),
        "padding must get segment 0 (as pair_inputs gives); yours gives the padding after B a non-zero segment": (
            is_sep.cumsum(dim=1) - is_sep
        ),
        "padding must get segment 0, and no position may get a segment above 1": (is_sep.cumsum(dim=1) - is_sep).clamp(
            max=1
        ),
    }


def _check_segments(fn: Callable[[Tensor, int, int], Tensor]) -> None:
    for ids in _segment_cases():
        what = f"your segment ids for a batch of shape {tuple(ids.shape)}"
        out = fn(ids.clone(), SEP_ID, PAD_ID)
        expected = segment_ids(ids)
        expect(isinstance(out, Tensor), f"{what} should be a torch.Tensor, got {type(out).__name__}")
        expect(
            not out.dtype.is_floating_point and out.dtype != torch.bool,
            f"{what} should hold integers (they index an nn.Embedding), got dtype {out.dtype}",
        )
        expect(
            tuple(out.shape) == tuple(ids.shape), f"{what} has shape {tuple(out.shape)}, expected {tuple(ids.shape)}"
        )
        if _same(out, expected):
            continue
        for hint, wrong in _segment_mistakes(ids).items():
            if _same(out, wrong):
                raise ExerciseMistake(f"{what}: {hint}.")
        wrong_count = (out.long() != expected).sum().item()
        raise ExerciseMistake(f"{what} differ from the expected ones at {wrong_count} positions")


def check_segment_ids(fn: Callable[[Tensor, int, int], Tensor]) -> bool:
    """Exercise 2: ``fn(ids, sep_id, pad_id)`` must give 0 up to the first [SEP] (included), 1 after, 0 on padding."""
    return report("Exercise 2 (segment ids)", lambda: _check_segments(fn))


# ----------------------------------------------------------------------------------------------- exercise 3
def reference_patchify(images: Tensor, patch_size: int) -> Tensor:
    """Reference solution of exercise 3: (batch, H, W) -> (batch, (H/p) * (W/p), p * p)."""
    batch, height, width = images.shape
    p = patch_size
    x = images.reshape(batch, height // p, p, width // p, p)  # (batch, row, y, col, x)
    x = x.permute(0, 1, 3, 2, 4)  # (batch, row, col, y, x)
    return x.reshape(batch, (height // p) * (width // p), p * p)


def _patch_mistakes(images: Tensor, p: int) -> dict[str, Tensor]:
    batch, height, width = images.shape
    grid = images.reshape(batch, height // p, p, width // p, p)
    return {
        "a plain reshape cuts the image into runs of consecutive pixels of one row, not into square patches; "
        "reshape to (batch, H/p, p, W/p, p) and permute the two patch-grid axes next to each other first": (
            images.reshape(batch, -1, p * p)
        ),
        "your patches are numbered column by column; number them row by row (left to right, then the next row)": (
            grid.permute(0, 3, 1, 2, 4).reshape(batch, -1, p * p)
        ),
        "the pixels inside each patch come out column by column; flatten each patch row by row": grid.permute(
            0, 1, 3, 4, 2
        ).reshape(batch, -1, p * p),
    }


def _check_patchify(fn: Callable[[Tensor, int], Tensor]) -> None:
    g = torch.Generator().manual_seed(3)
    for shape, p in (((2, 8, 8), 2), ((3, 8, 8), 4), ((1, 6, 9), 3)):
        images = torch.randn(*shape, generator=g)
        what = f"your patches of images {shape} with patch_size={p}"
        out = fn(images.clone(), p)
        expected = patchify(images, p)
        expect_tensor(out, what, expected.shape, "(batch, num_patches, p * p)")
        if torch.allclose(out.detach().float(), expected):
            continue
        for hint, wrong in _patch_mistakes(images, p).items():
            if torch.allclose(out.detach().float(), wrong):
                raise ExerciseMistake(f"{what}: {hint}.")
        expect_close(out, expected, what)


def check_patchify(fn: Callable[[Tensor, int], Tensor]) -> bool:
    """Exercise 3: ``fn(images, patch_size)`` must cut (batch, H, W) images into flattened patches, row by row."""
    return report("Exercise 3 (patchify)", lambda: _check_patchify(fn))

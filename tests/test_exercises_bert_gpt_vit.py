"""The checkers of notebook 11 accept the reference solutions and reject typical mistakes."""

from __future__ import annotations

import pytest
import torch

from transformer_course.exercises import bert_gpt_vit as ex
from transformer_course.variants import corrupt_for_mlm, patchify, segment_ids


def _stub(*args):
    raise NotImplementedError


# ---- exercise 1: 80/10/10 -------------------------------------------------------------------------------


def test_reference_mlm_corruption_equals_the_package():
    ids, chosen, action, random_ids = ex._mlm_case(5, 3, 20)
    for got, want in zip(
        ex.reference_mlm_corruption(ids, chosen, action, random_ids), corrupt_for_mlm(ids, chosen, action, random_ids)
    ):
        torch.testing.assert_close(got, want)


def test_mlm_checker_accepts_the_reference_and_the_package(capsys):
    assert ex.check_mlm_corruption(ex.reference_mlm_corruption)
    assert ex.check_mlm_corruption(corrupt_for_mlm)
    assert "correct" in capsys.readouterr().out


def test_mlm_checker_says_not_attempted(capsys):
    assert not ex.check_mlm_corruption(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def _labels_everywhere(ids, chosen, action, random_ids, mask_id):
    return corrupt_for_mlm(ids, chosen, action, random_ids, mask_id)[0], ids.clone()


def _labels_minus_100(ids, chosen, action, random_ids, mask_id):
    inputs, labels = corrupt_for_mlm(ids, chosen, action, random_ids, mask_id)
    return inputs, torch.where(chosen, labels, torch.full_like(labels, -100))


def _labels_from_inputs(ids, chosen, action, random_ids, mask_id):
    inputs, _ = corrupt_for_mlm(ids, chosen, action, random_ids, mask_id)
    return inputs, torch.where(chosen, inputs, torch.zeros_like(ids))


def _all_masked(ids, chosen, action, random_ids, mask_id):
    return torch.where(chosen, torch.full_like(ids, mask_id), ids), torch.where(chosen, ids, torch.zeros_like(ids))


def _swapped_bands(ids, chosen, action, random_ids, mask_id):
    inputs = torch.where(chosen & (action < 0.8), torch.full_like(ids, mask_id), ids)
    inputs = torch.where(chosen & (action >= 0.9), random_ids, inputs)
    return inputs, torch.where(chosen, ids, torch.zeros_like(ids))


def _ignores_chosen(ids, chosen, action, random_ids, mask_id):
    inputs = ids.clone()
    inputs[action < 0.8] = mask_id
    band = (action >= 0.8) & (action < 0.9)
    inputs[band] = random_ids[band]
    return inputs, torch.where(chosen, ids, torch.zeros_like(ids))


def _in_place(ids, chosen, action, random_ids, mask_id):  # correct, even though it overwrites its input
    labels = torch.where(chosen, ids, torch.zeros_like(ids))
    ids[chosen & (action < 0.8)] = mask_id
    band = chosen & (action >= 0.8) & (action < 0.9)
    ids[band] = random_ids[band]
    return ids, labels


@pytest.mark.parametrize(
    "wrong,hint",
    [
        (_labels_everywhere, "only the chosen positions get a label"),
        (_labels_minus_100, "not -100"),
        (_labels_from_inputs, "ORIGINAL ids"),
        (_all_masked, "replaced every chosen token by [MASK]"),
        (_swapped_bands, "bands are swapped"),
        (_ignores_chosen, "NOT chosen must never change"),
        (lambda *a: corrupt_for_mlm(*a)[0], "return a tuple (inputs, labels)"),
        (lambda ids, *a: (ids[:, 1:], ids[:, 1:]), "has shape"),
    ],
)
def test_mlm_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_mlm_corruption(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out


def test_mlm_checker_accepts_an_in_place_solution():
    assert ex.check_mlm_corruption(_in_place)


# ---- exercise 2: segment ids ----------------------------------------------------------------------------


def test_reference_segment_ids_equals_the_package():
    for ids in ex._segment_cases():
        torch.testing.assert_close(ex.reference_segment_ids(ids), segment_ids(ids))


def test_segment_checker_accepts_the_reference_and_the_package(capsys):
    assert ex.check_segment_ids(ex.reference_segment_ids)
    assert ex.check_segment_ids(segment_ids)
    assert "correct" in capsys.readouterr().out


def test_segment_checker_says_not_attempted(capsys):
    assert not ex.check_segment_ids(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def _inclusive(ids, sep_id, pad_id):
    return (ids == sep_id).long().cumsum(1).clamp(max=1).masked_fill(ids == pad_id, 0)


def _padding_not_zeroed(ids, sep_id, pad_id):
    is_sep = (ids == sep_id).long()
    return (is_sep.cumsum(1) - is_sep).clamp(max=1)


def _no_clamp(ids, sep_id, pad_id):
    is_sep = (ids == sep_id).long()
    return is_sep.cumsum(1) - is_sep


@pytest.mark.parametrize(
    "wrong,hint",
    [
        (_inclusive, "strictly BEFORE"),
        (_padding_not_zeroed, "padding must get segment 0"),
        (_no_clamp, "padding must get segment 0"),
        (lambda ids, s, p: segment_ids(ids, s, p).float(), "should hold integers"),
        (lambda ids, s, p: segment_ids(ids, s, p)[:, :-1], "has shape"),
        (lambda ids, s, p: torch.zeros_like(ids), "differ from the expected ones"),
    ],
)
def test_segment_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_segment_ids(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out


# ---- exercise 3: patchify -------------------------------------------------------------------------------


def test_reference_patchify_equals_the_package():
    images = torch.randn(4, 8, 12)
    for p in (1, 2, 4):
        torch.testing.assert_close(ex.reference_patchify(images, p), patchify(images, p))


def test_patchify_checker_accepts_the_reference_and_the_package(capsys):
    assert ex.check_patchify(ex.reference_patchify)
    assert ex.check_patchify(patchify)
    assert "correct" in capsys.readouterr().out


def test_patchify_checker_says_not_attempted(capsys):
    assert not ex.check_patchify(_stub)
    assert "not attempted yet" in capsys.readouterr().out


def _plain_reshape(images, p):
    return images.reshape(images.shape[0], -1, p * p)


def _column_order(images, p):
    b, h, w = images.shape
    return images.reshape(b, h // p, p, w // p, p).permute(0, 3, 1, 2, 4).reshape(b, -1, p * p)


def _transposed_patch(images, p):
    b, h, w = images.shape
    return images.reshape(b, h // p, p, w // p, p).permute(0, 1, 3, 4, 2).reshape(b, -1, p * p)


@pytest.mark.parametrize(
    "wrong,hint",
    [
        (_plain_reshape, "plain reshape"),
        (_column_order, "column by column; number them row by row"),
        (_transposed_patch, "inside each patch come out column by column"),
        (lambda images, p: patchify(images, p).transpose(1, 2), "(batch, num_patches, p * p)"),
        (lambda images, p: patchify(images, p) * 2, "differs from the expected values"),
        (lambda images, p: images.numpy(), "should be a torch.Tensor"),
    ],
)
def test_patchify_checker_rejects_typical_mistakes(wrong, hint, capsys):
    assert not ex.check_patchify(wrong)
    out = capsys.readouterr().out
    assert "not yet" in out and hint in out


def test_checkers_report_crashes_as_feedback(capsys):
    assert not ex.check_patchify(lambda images, p: images.view(-1, 7))
    assert "your code raised RuntimeError" in capsys.readouterr().out

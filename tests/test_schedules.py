"""Learning-rate schedules (the paper's, warm-up + linear decay, warm-up + cosine), the paper's Adam settings, the
weight-decay groups and the one update step."""

from __future__ import annotations

import math

import pytest
import torch

from transformer_course.training.schedules import (
    make_optimizer,
    noam_lr,
    optimizer_update,
    warmup_cosine_lr,
    warmup_linear_lr,
)


def test_noam_schedule_peaks_at_warmup():
    d_model, warmup = 512, 4000
    rates = [noam_lr(s, d_model, warmup) for s in range(1, 20001)]
    assert max(range(len(rates)), key=rates.__getitem__) + 1 == warmup
    assert rates[warmup - 1] == pytest.approx((d_model * warmup) ** -0.5)
    assert rates[99] == pytest.approx(d_model**-0.5 * 100 * warmup**-1.5)  # linear rise
    assert rates[15999] == pytest.approx(d_model**-0.5 * 16000**-0.5)  # 1 / sqrt(step) decay
    with pytest.raises(ValueError, match="step"):
        noam_lr(0, d_model, warmup)


def test_warmup_linear_schedule():
    assert warmup_linear_lr(50, 2e-3, 100, 1500) == pytest.approx(1e-3)
    assert warmup_linear_lr(100, 2e-3, 100, 1500) == pytest.approx(2e-3)
    assert warmup_linear_lr(800, 2e-3, 100, 1500) == pytest.approx(2e-3 * (1 - 0.9 * 0.5))
    assert warmup_linear_lr(1500, 2e-3, 100, 1500) == pytest.approx(2e-4)
    assert warmup_linear_lr(3000, 2e-3, 100, 1500) == pytest.approx(2e-4)
    with pytest.raises(ValueError):
        warmup_linear_lr(10, 2e-3, 100, 100)


def test_warmup_cosine_schedule():
    assert warmup_cosine_lr(5, 1e-3, 10, 110, 1e-4) == pytest.approx(5e-4)
    assert warmup_cosine_lr(10, 1e-3, 10, 110, 1e-4) == pytest.approx(1e-3)
    assert warmup_cosine_lr(60, 1e-3, 10, 110, 1e-4) == pytest.approx(0.55e-3)  # half way: the mean of peak and floor
    assert warmup_cosine_lr(110, 1e-3, 10, 110, 1e-4) == pytest.approx(1e-4)
    assert warmup_cosine_lr(500, 1e-3, 10, 110, 1e-4) == pytest.approx(1e-4)
    rates = [warmup_cosine_lr(s, 1.0, 10, 110) for s in range(10, 111)]
    assert all(a >= b for a, b in zip(rates, rates[1:]))  # never rises after the warm-up
    assert warmup_cosine_lr(35, 1.0, 10, 110) == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))
    with pytest.raises(ValueError, match="step counts optimizer updates from 1"):
        warmup_cosine_lr(0, 1.0, 10, 110)
    with pytest.raises(ValueError, match="need 0 <= warmup < decay_steps"):
        warmup_cosine_lr(1, 1.0, 10, 10)
    with pytest.raises(ValueError, match="need 0 <= final_lr <= peak_lr"):
        warmup_cosine_lr(1, 1.0, 10, 110, final_lr=2.0)


def test_optimizer_is_adam_with_the_papers_settings():
    model = torch.nn.Linear(2, 2)
    opt = make_optimizer(model)
    assert isinstance(opt, torch.optim.Adam)
    group = opt.param_groups[0]
    assert group["betas"] == (0.9, 0.98) and group["eps"] == 1e-9
    assert isinstance(make_optimizer(model, weight_decay=0.01), torch.optim.AdamW)
    with pytest.raises(ValueError):
        make_optimizer(model, weight_decay=-1.0)


def test_decay_on_the_weight_matrices_only_counts_a_tied_weight_once():
    model = torch.nn.Sequential(torch.nn.Embedding(5, 4), torch.nn.LayerNorm(4), torch.nn.Linear(4, 5))
    model[2].weight = model[0].weight  # tied, as a language model's embedding and output layer
    opt = make_optimizer(model, 1e-3, (0.9, 0.99), 1e-8, weight_decay=0.1, decay_matrices_only=True)
    assert isinstance(opt, torch.optim.AdamW)
    decay, no_decay = opt.param_groups
    assert [p is model[0].weight for p in decay["params"]] == [True] and decay["weight_decay"] == 0.1
    assert [p.dim() for p in no_decay["params"]] == [1, 1, 1] and no_decay["weight_decay"] == 0.0
    assert decay["betas"] == (0.9, 0.99) and decay["eps"] == 1e-8 and decay["lr"] == 1e-3
    with pytest.raises(ValueError, match="weight_decay must be >= 0, got -0.1"):
        make_optimizer(model, weight_decay=-0.1, decay_matrices_only=True)


def test_optimizer_update_clips_sets_the_rate_and_steps():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    before = model.weight.detach().clone()
    opt = torch.optim.SGD(model.parameters(), lr=123.0)
    norm = optimizer_update(opt, model(torch.ones(4, 3)).pow(2).sum() * 100, 0.1, clip_norm=1.0)
    assert norm > 1.0 and opt.param_groups[0]["lr"] == 0.1
    clipped = torch.cat([p.grad.flatten() for p in model.parameters()]).norm()
    assert clipped == pytest.approx(1.0, rel=1e-4)  # the step used the clipped gradient ...
    torch.testing.assert_close(model.weight, before - 0.1 * model.weight.grad)  # ... at the rate given
    assert optimizer_update(opt, model(torch.ones(1, 3)).sum(), 0.1, clip_norm=None) is None  # no clip, no norm

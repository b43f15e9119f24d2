"""Learning-rate schedules (the paper's and warm-up + linear decay) and the paper's Adam settings."""

from __future__ import annotations

import pytest
import torch

from transformer_course.schedules import make_optimizer, noam_lr, warmup_linear_lr


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


def test_optimizer_is_adam_with_the_papers_settings():
    model = torch.nn.Linear(2, 2)
    opt = make_optimizer(model)
    assert isinstance(opt, torch.optim.Adam)
    group = opt.param_groups[0]
    assert group["betas"] == (0.9, 0.98) and group["eps"] == 1e-9
    assert isinstance(make_optimizer(model, weight_decay=0.01), torch.optim.AdamW)
    with pytest.raises(ValueError):
        make_optimizer(model, weight_decay=-1.0)

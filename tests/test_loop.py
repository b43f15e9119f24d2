"""The one training loop: what it records, how it stops, what it clips, its progress line, bad settings, and that it
holds the package's only backward pass of training."""

from __future__ import annotations

import ast
import io
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import transformer_course
from transformer_course.training.loop import BatchLoss, History, ProgressLine, constant_lr, run_training
from transformer_course.training.schedules import make_optimizer, optimizer_update

pytestmark = pytest.mark.usefixtures("one_thread")


def _problem(seed: int = 0):
    """A small classifier, its data and a batch function drawing 8 rows with a seeded generator."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Linear(8, 3))
    x, y = torch.randn(64, 4), torch.randint(0, 3, (64,))
    generator = torch.Generator().manual_seed(seed)

    def batch_loss() -> BatchLoss:
        rows = torch.randint(0, 64, (8,), generator=generator)
        logits = model(x[rows])
        accuracy = (logits.argmax(-1) == y[rows]).float().mean()
        return BatchLoss(F.cross_entropy(logits, y[rows], reduction="sum"), logits.new_zeros(()) + 1.5, accuracy, 8)

    return model, batch_loss, x, y


def test_the_loop_records_one_entry_per_update_and_equals_the_plain_loop():
    model, batch_loss, x, y = _problem()
    by_hand = nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Linear(8, 3))
    by_hand.load_state_dict(model.state_dict())
    optimizer = make_optimizer(model, 1e-2, weight_decay=0.1, decay_matrices_only=True)
    history = run_training(model, optimizer, batch_loss, lambda step: 1e-2 / step, 7, clip_norm=0.5, progress=False)
    assert isinstance(history, History) and history.steps == 7
    assert history.lr == [1e-2 / step for step in range(1, 8)]
    assert history.loss == [1.5] * 7  # ``recorded``, not the loss that was back-propagated
    assert len(history.grad_norm) == len(history.batch_accuracy) == 7 and history.tokens_seen == 56
    assert history.seconds > 0 and history.eval_steps == [] and not model.training

    optimizer = make_optimizer(by_hand, 1e-2, weight_decay=0.1, decay_matrices_only=True)
    generator = torch.Generator().manual_seed(0)
    norms = []
    for step in range(1, 8):
        rows = torch.randint(0, 64, (8,), generator=generator)
        loss = F.cross_entropy(by_hand(x[rows]), y[rows], reduction="sum")
        norms.append(optimizer_update(optimizer, loss, 1e-2 / step, 0.5, list(by_hand.parameters())).item())
    assert norms == history.grad_norm
    for a, b in zip(model.parameters(), by_hand.parameters()):
        assert torch.equal(a, b)


def test_the_gradient_norm_is_summed_in_the_models_order_whatever_the_optimizers_groups(monkeypatch):
    model, batch_loss, _, _ = _problem()
    optimizer = make_optimizer(model, weight_decay=0.1, decay_matrices_only=True)
    grouped = [p for group in optimizer.param_groups for p in group["params"]]
    assert [id(p) for p in grouped] != [id(p) for p in model.parameters()]  # the groups reorder them
    seen = []
    clip = torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda ps, n: seen.append(list(ps)) or clip(ps, n))
    run_training(model, optimizer, batch_loss, constant_lr(1e-3), 2, clip_norm=1.0, progress=False)
    assert [[id(p) for p in ps] for ps in seen] == [[id(p) for p in model.parameters()]] * 2


def test_no_clipping_records_no_norm_and_a_frozen_parameter_is_left_alone():
    model, batch_loss, _, _ = _problem()
    model[0].weight.requires_grad_(False)
    frozen = model[0].weight.clone()
    optimizer = make_optimizer(nn.ParameterList(p for p in model.parameters() if p.requires_grad), 1e-2)
    history = run_training(model, optimizer, batch_loss, constant_lr(1e-2), 3, progress=False)
    assert history.grad_norm == [] and history.steps == 3
    assert torch.equal(model[0].weight, frozen)


def test_the_stops_steps_a_time_budget_or_the_callers_word_and_the_held_out_evaluations():
    model, batch_loss, _, _ = _problem()
    optimizer = make_optimizer(model, 1e-3)
    calls = []

    def held_out() -> float:
        calls.append(model.training)
        return 2.0

    history = run_training(
        model, optimizer, batch_loss, constant_lr(1e-3), 5, held_out=held_out, eval_every=2, progress=False
    )
    assert history.eval_steps == [2, 4, 5] and history.eval_loss == [2.0] * 3 and calls == [True] * 3
    history = run_training(model, optimizer, batch_loss, constant_lr(1e-3), 10_000, seconds=0.0, held_out=held_out)
    assert history.steps == 1 and history.eval_steps == [1]
    history = run_training(model, optimizer, batch_loss, constant_lr(1e-3), 10, stop=lambda step, loss: step == 3)
    assert history.steps == 3 and history.eval_steps == []


def test_the_progress_line_shows_the_callers_text_every_log_every_steps_and_at_the_end(capsys):
    model, batch_loss, _, _ = _problem()
    optimizer = make_optimizer(model, 1e-3)
    texts = []

    def text(recent, lr):
        texts.append((len(recent), lr))
        return f"{len(recent)} losses"

    run_training(model, optimizer, batch_loss, constant_lr(1e-3), 5, log_every=2, progress_text=text)
    assert texts == [(2, 1e-3), (2, 1e-3), (2, 1e-3)]  # steps 2, 4 and the last: the last log_every losses
    out = capsys.readouterr().out
    assert out.count("\r") == 3 and out.split("\r")[-1] == "step 5/5 [####################] 2 losses\n"
    run_training(model, optimizer, batch_loss, constant_lr(1e-3), 5, progress=False)
    assert capsys.readouterr().out == ""


def test_progress_line_is_one_rewritten_line():
    stream = io.StringIO()
    line = ProgressLine(100, stream=stream, width=10)
    line.update(50, "loss 1.0000")
    line.update(100, "loss 0.5000")
    line.close()
    text = stream.getvalue()
    assert text.count("\r") == 2 and text.endswith("\n")
    assert text.split("\r")[-1] == "step 100/100 [##########] loss 0.5000\n"
    silent = io.StringIO()
    ProgressLine(10, enabled=False, stream=silent).update(5, "x")
    assert silent.getvalue() == ""


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(steps=0), "steps must be a positive int"),
        (dict(log_every=0), "log_every must be a positive int"),
        (dict(eval_every=-1), "eval_every"),
        (dict(seconds=-1.0), r"seconds must be >= 0 or None, got -1.0"),
        (dict(clip_norm=0.0), r"clip_norm must be > 0 or None, got 0.0"),
    ],
)
def test_bad_settings_are_named(kwargs, message):
    model, batch_loss, _, _ = _problem()
    settings = {"steps": 3, **kwargs}
    with pytest.raises(ValueError, match=message):
        run_training(model, make_optimizer(model), batch_loss, constant_lr(1e-3), progress=False, **settings)


def test_constant_lr():
    assert [constant_lr(0.5)(step) for step in (1, 100)] == [0.5, 0.5]
    with pytest.raises(ValueError, match="lr must be a finite number > 0, got 0"):
        constant_lr(0)


def test_the_package_trains_through_one_backward_call():
    """Every loop of the package (the exercises' reference solutions aside) goes through optimizer_update."""
    package = Path(transformer_course.__file__).parent
    calls = []
    for path in sorted(package.rglob("*.py")):
        if "exercises" in path.relative_to(package).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "backward":
                calls.append(path.name)
    assert calls == ["schedules.py"]

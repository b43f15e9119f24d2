"""The sequence-to-sequence training (the config; deterministic, clipped, stoppable, one plain step per update), the
training of the BERT/GPT/ViT models, evaluation; both trainings are setups of the one loop (tests/test_loop.py)."""

from __future__ import annotations

import ast
import math
from functools import partial
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import transformer_course
from transformer_course import Transformer
from transformer_course.text.tasks import CopyTask
from transformer_course.training.loop import History
from transformer_course.training.recipes import recipe_model_config, train_task_model
from transformer_course.training.schedules import make_optimizer
from transformer_course.training.trainers import (
    TrainConfig,
    evaluate,
    teacher_forced_loss,
    train,
    train_steps,
    training_step,
)

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize(
    "kwargs",
    [dict(steps=0), dict(schedule="cosine"), dict(lr=0.0), dict(clip_norm=0.0), dict(steps=50, warmup=50)],
)
def test_train_config_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        TrainConfig(**kwargs)


def _small_config(task):
    return recipe_model_config(task, d_model=32, d_ff=64, num_encoder_layers=1, num_decoder_layers=1)


def test_training_is_deterministic_and_learns():
    task = CopyTask(num_symbols=5, length=4)
    config = TrainConfig(steps=30, batch_size=16, warmup=5, log_every=10)
    model_a, hist_a = train_task_model(task, _small_config(task), config, progress=False)
    model_b, hist_b = train_task_model(task, _small_config(task), config, progress=False)
    assert hist_a.loss == hist_b.loss
    for (name, a), b in zip(model_a.state_dict().items(), model_b.state_dict().values()):
        assert torch.equal(a, b), name
    assert len(hist_a.loss) == len(hist_a.lr) == len(hist_a.grad_norm) == 30
    assert hist_a.loss[-1] < hist_a.loss[0]
    assert hist_a.lr[4] == pytest.approx(config.lr)  # end of warm-up
    assert not model_a.training  # left in eval mode


def test_the_loop_is_one_plain_training_step_per_update():
    task = CopyTask(num_symbols=5, length=4)
    config = TrainConfig(steps=4, batch_size=8, warmup=2, label_smoothing=0.1)
    torch.manual_seed(0)
    model = Transformer(_small_config(task))
    by_hand = Transformer(model.config)
    by_hand.load_state_dict(model.state_dict())
    history = train(model, task, config, progress=False)
    optimizer = make_optimizer(by_hand, config.lr, config.betas, config.adam_eps, config.weight_decay)
    generator = torch.Generator().manual_seed(config.seed)
    by_hand.train()
    losses = []
    for step in range(1, config.steps + 1):
        batch = task.train_batch(config.batch_size, generator)
        lr = config.lr_at(step, by_hand.config.d_model)
        result = training_step(
            by_hand, optimizer, batch, lr, config.clip_norm, partial(teacher_forced_loss, smoothing=0.1)
        )
        losses.append(result.loss.item())
    assert losses == history.loss
    for a, b in zip(model.parameters(), by_hand.parameters()):
        assert torch.equal(a, b)


def test_clipping_bounds_the_update():
    task = CopyTask(num_symbols=5, length=4)
    torch.manual_seed(0)
    model = Transformer(_small_config(task))
    seen = []

    def watch(step, loss):
        total = math.sqrt(sum(float(p.grad.pow(2).sum()) for p in model.parameters() if p.grad is not None))
        seen.append(total)

    history = train(model, task, TrainConfig(steps=5, batch_size=8, warmup=1, clip_norm=0.01), False, callback=watch)
    assert all(g > 0.01 for g in history.grad_norm)  # the raw norms are larger ...
    assert all(s == pytest.approx(0.01, rel=1e-3) for s in seen)  # ... and the applied ones are clipped


def test_callback_can_stop_training_early():
    task = CopyTask()
    config = recipe_model_config(task, num_encoder_layers=1, num_decoder_layers=1)
    history = train(Transformer(config), task, TrainConfig(steps=10, warmup=2, batch_size=8), progress=False,
                    callback=lambda step, loss: step == 3)  # fmt: skip
    assert len(history.loss) == 3


def test_without_clipping_no_gradient_norm_is_recorded_and_the_progress_line_shows_the_rate(capsys):
    task = CopyTask(num_symbols=5, length=4)
    torch.manual_seed(0)
    config = TrainConfig(steps=6, batch_size=8, warmup=2, clip_norm=None, log_every=3)
    history = train(Transformer(_small_config(task)), task, config)
    assert isinstance(history, History)
    assert history.grad_norm == [] and len(history.loss) == len(history.batch_accuracy) == 6
    assert all(0.0 <= a <= 1.0 for a in history.batch_accuracy)
    final = capsys.readouterr().out.split("\r")[-1]
    mean = sum(history.loss[3:]) / 3
    assert final == f"step 6/6 [####################] loss {mean:.4f}  lr {history.lr[-1]:.2e}\n"


def test_evaluate_scores_tokens_and_exact_matches():
    task = CopyTask(num_symbols=4, length=3)
    torch.manual_seed(0)
    model = Transformer(_small_config(task))
    train(model, task, TrainConfig(steps=150, batch_size=32, lr=3e-3, warmup=10), progress=False)
    pairs = task.eval_pairs(200)
    result = evaluate(model, task, pairs, batch_size=64)
    mistakes = result.mistakes()
    assert result.exact_match == pytest.approx(1 - len(mistakes) / len(pairs))
    assert 0.0 <= result.token_accuracy <= 1.0 and result.token_accuracy >= result.exact_match
    # a hand count of correct tokens (<eos> included) agrees
    correct = total = 0
    for target, prediction in zip(result.targets, result.predictions):
        t, p = target.split(" ") + ["<eos>"], prediction.split(" ") + ["<eos>"]
        correct += sum(a == b for a, b in zip(t, p))
        total += len(t)
    assert result.token_accuracy == pytest.approx(correct / total)
    with pytest.raises(ValueError):
        evaluate(model, task, [])


# ---- the generic loop -----------------------------------------------------------------------------------


def test_train_steps_learns_and_leaves_frozen_parameters_alone():  # and records the gradient norm it clips
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    model[0].weight.requires_grad_(False)
    frozen = model[0].weight.clone()
    x = torch.randn(64, 4)
    y = (x[:, 0] > 0).long()
    history = train_steps(model, lambda g: F.cross_entropy(model(x), y), steps=100, lr=3e-2, warmup=5, progress=False)
    assert len(history.loss) == len(history.lr) == len(history.grad_norm) == 100
    assert history.loss[-1] < 0.5 * history.loss[0] and history.batch_accuracy == []
    torch.testing.assert_close(model[0].weight, frozen)
    assert not model.training


def test_train_steps_prints_one_progress_line(capsys):
    model = nn.Linear(2, 1)
    train_steps(model, lambda g: model(torch.ones(1, 2)).pow(2).sum(), steps=4, warmup=1, log_every=2)
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.split("\r")[-1].startswith("step 4/4 [####################] loss ")


def test_train_steps_rejects_bad_settings():
    model = nn.Linear(2, 1)
    with pytest.raises(ValueError, match="warmup must be in"):
        train_steps(model, lambda g: model(torch.ones(1, 2)).sum(), steps=5, warmup=5)
    with pytest.raises(ValueError, match="steps must be a positive int"):
        train_steps(model, lambda g: model(torch.ones(1, 2)).sum(), steps=0)
    model.requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        train_steps(model, lambda g: model(torch.ones(1, 2)).sum(), steps=5, warmup=1)


# ---- where things live ----------------------------------------------------------------------------------


def _imported_modules(module: str) -> set[str]:
    tree = ast.parse((Path(transformer_course.__file__).parent / f"{module}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_the_models_and_the_pieces_of_training_do_not_import_the_trainers():
    for module in ("families/vit", "training/losses", "training/schedules", "training/checkpoints", "training/loop"):
        imported = _imported_modules(module)
        assert not {".trainers", "..training.trainers", "transformer_course.training.trainers"} & imported, module

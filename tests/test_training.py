"""Training: label smoothing, schedules, the loop (deterministic), evaluation, checkpoints, the shell command."""

from __future__ import annotations

import io
import math

import pytest
import torch
import torch.nn.functional as F

from transformer_course import Transformer, TransformerConfig
from transformer_course.data import PAD_ID, CopyTask, Vocabulary
from transformer_course.training import (
    CheckpointError,
    ProgressLine,
    TrainConfig,
    evaluate,
    label_smoothing_loss,
    load_checkpoint,
    load_or_train,
    make_optimizer,
    noam_lr,
    recipe_model_config,
    save_checkpoint,
    smoothed_targets,
    train,
    train_task_model,
    warmup_linear_lr,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def _logits_and_target(seed: int = 0, vocab: int = 7):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, 5, vocab, generator=g)
    target = torch.randint(1, vocab, (3, 5), generator=g)
    target[0, 3:] = PAD_ID
    target[2, 1:] = PAD_ID
    return logits, target


def test_label_smoothing_with_eps_zero_is_cross_entropy():
    logits, target = _logits_and_target()
    ours = label_smoothing_loss(logits, target, smoothing=0.0, pad_id=PAD_ID)
    theirs = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=PAD_ID)
    torch.testing.assert_close(ours, theirs)
    for spread in ("uniform", "others"):
        torch.testing.assert_close(label_smoothing_loss(logits, target, 0.0, PAD_ID, spread), theirs)


def test_uniform_spread_equals_torch_label_smoothing():
    logits, target = _logits_and_target(1)
    ours = label_smoothing_loss(logits, target, smoothing=0.1, pad_id=PAD_ID)
    theirs = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=PAD_ID, label_smoothing=0.1)
    torch.testing.assert_close(ours, theirs)


def test_the_two_spreads_differ_as_documented():
    eps, vocab = 0.1, 5
    target = torch.tensor([2])
    uniform = smoothed_targets(target, vocab, eps, "uniform")[0]
    others = smoothed_targets(target, vocab, eps, "others")[0]
    assert uniform[2].item() == pytest.approx(1 - eps + eps / vocab)
    assert uniform[0].item() == pytest.approx(eps / vocab)
    assert others[2].item() == pytest.approx(1 - eps)
    assert others[0].item() == pytest.approx(eps / (vocab - 1))
    assert uniform.sum().item() == pytest.approx(1.0) and others.sum().item() == pytest.approx(1.0)


def test_padding_positions_do_not_count():
    logits, target = _logits_and_target(2)
    changed = logits.clone()
    changed[target == PAD_ID] = 100.0 * torch.randn_like(changed[target == PAD_ID])
    for eps in (0.0, 0.1):
        torch.testing.assert_close(
            label_smoothing_loss(logits, target, eps, PAD_ID), label_smoothing_loss(changed, target, eps, PAD_ID)
        )
    # the mean is over real tokens only
    per_token = F.cross_entropy(logits.flatten(0, 1), target.flatten(), reduction="none")
    real = target.flatten() != PAD_ID
    torch.testing.assert_close(label_smoothing_loss(logits, target, 0.0), per_token[real].sum() / real.sum())


def test_label_smoothing_rejects_bad_input():
    logits, target = _logits_and_target()
    with pytest.raises(ValueError, match="smoothing"):
        label_smoothing_loss(logits, target, smoothing=1.0)
    with pytest.raises(ValueError, match="spread"):
        label_smoothing_loss(logits, target, spread="even")
    with pytest.raises(ValueError, match="leading dimensions"):
        label_smoothing_loss(logits, target[:, :3])
    with pytest.raises(ValueError, match="padding"):
        label_smoothing_loss(logits, torch.zeros_like(target))


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


@pytest.mark.parametrize(
    "kwargs",
    [dict(steps=0), dict(schedule="cosine"), dict(lr=0.0), dict(clip_norm=0.0), dict(steps=50, warmup=50)],
)
def test_train_config_rejects_bad_values(kwargs):
    with pytest.raises(ValueError):
        TrainConfig(**kwargs)


def _small_config(task) -> TransformerConfig:
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


def _model_and_vocabs(tie: bool = False):
    vocab = Vocabulary("abcdef")
    torch.manual_seed(1)
    config = TransformerConfig(
        src_vocab_size=len(vocab),
        tgt_vocab_size=len(vocab),
        d_model=16,
        num_heads=2,
        d_ff=32,
        num_encoder_layers=1,
        num_decoder_layers=1,
        max_len=20,
        share_embeddings=tie,
        tie_output=tie,
    )
    return Transformer(config).eval(), vocab


@pytest.mark.parametrize("tie", [False, True])
def test_checkpoint_round_trip_is_exact(tmp_path, tie):
    model, vocab = _model_and_vocabs(tie)
    path = save_checkpoint(tmp_path / "m.safetensors", model, vocab, vocab, {"note": "hello", "steps": 3})
    loaded = load_checkpoint(path)
    assert loaded.config == model.config
    assert loaded.src_vocab == vocab and loaded.tgt_vocab == vocab
    assert loaded.extra == {"note": "hello", "steps": 3}
    assert not loaded.model.training
    state, again = model.state_dict(), loaded.model.state_dict()
    assert state.keys() == again.keys()
    for key in state:
        assert torch.equal(state[key], again[key]), key
    if tie:
        assert loaded.model.generator.weight is loaded.model.tgt_embedding.embedding.weight
        assert loaded.model.src_embedding is loaded.model.tgt_embedding
    src, tgt = torch.randint(4, 10, (2, 5)), torch.randint(4, 10, (2, 4))
    with torch.no_grad():
        assert torch.equal(model(src, tgt), loaded.model(src, tgt))


def test_checkpoint_into_a_given_model_checks_the_config(tmp_path):
    model, vocab = _model_and_vocabs()
    path = save_checkpoint(tmp_path / "m.safetensors", model, vocab, vocab)
    same = Transformer(model.config)
    load_checkpoint(path, model=same)
    assert torch.equal(same.generator.weight, model.generator.weight)
    other = Transformer(model.config.replace(d_ff=48))
    with pytest.raises(CheckpointError, match="d_ff: 32 vs 48"):
        load_checkpoint(path, model=other)


def test_corrupt_or_foreign_checkpoints_give_clear_errors(tmp_path):
    model, vocab = _model_and_vocabs()
    path = save_checkpoint(tmp_path / "m.safetensors", model, vocab, vocab)
    with pytest.raises(CheckpointError, match="no checkpoint file"):
        load_checkpoint(tmp_path / "missing.safetensors")
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(path.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="not a readable"):
        load_checkpoint(truncated)
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"this is not a checkpoint at all")
    with pytest.raises(CheckpointError, match="not a readable"):
        load_checkpoint(garbage)
    from safetensors.torch import save_file

    foreign = tmp_path / "foreign.safetensors"
    save_file({"w": torch.zeros(2)}, str(foreign))
    with pytest.raises(CheckpointError, match="not a transformer-course checkpoint"):
        load_checkpoint(foreign)
    # right metadata, wrong weights: a checkpoint whose tensors do not match its config
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        metadata = f.metadata()
    bad = tmp_path / "bad.safetensors"
    save_file({"generator.weight": torch.zeros(3, 3)}, str(bad), metadata=metadata)
    with pytest.raises(CheckpointError, match="do not fit its config"):
        load_checkpoint(bad)
    assert issubclass(CheckpointError, ValueError)


def test_save_checkpoint_checks_the_vocabularies(tmp_path):
    model, vocab = _model_and_vocabs()
    with pytest.raises(ValueError, match="vocabularies"):
        save_checkpoint(tmp_path / "m.safetensors", model, Vocabulary("ab"), vocab)


def test_load_or_train_trains_once_then_loads(tmp_path):
    task = CopyTask(num_symbols=4, length=3)
    config = TrainConfig(steps=5, batch_size=8, warmup=1)
    path = tmp_path / "cache" / "copy.safetensors"
    first = load_or_train(path, task, _small_config(task), config, progress=False)
    assert path.is_file()
    mtime = path.stat().st_mtime_ns
    second = load_or_train(path, task, _small_config(task), config, progress=False)
    assert path.stat().st_mtime_ns == mtime  # loaded, not retrained
    for a, b in zip(first.model.state_dict().values(), second.model.state_dict().values()):
        assert torch.equal(a, b)
    # other settings: retrain and overwrite
    load_or_train(path, task, _small_config(task), TrainConfig(steps=6, batch_size=8, warmup=1), progress=False)
    assert load_checkpoint(path).extra["train_config"]["steps"] == 6
    # a corrupt file is replaced, not trusted
    path.write_bytes(b"junk")
    load_or_train(path, task, _small_config(task), config, progress=False)
    assert load_checkpoint(path).extra["train_config"]["steps"] == 5


def test_shell_entry_point_runs_the_same_training(tmp_path, capsys):
    from transformer_course.train import main

    out = tmp_path / "copy.safetensors"
    metrics = main(
        ["--task", "copy", "--steps", "20", "--warmup", "5", "--d-model", "32", "--d-ff", "64", "--layers", "1"]
        + ["--eval-size", "50", "--out", str(out), "--quiet"]
    )
    text = capsys.readouterr().out
    assert "held-out token accuracy" in text and "checkpoint saved" in text
    assert set(metrics) == {"token_accuracy", "exact_match"}
    loaded = load_checkpoint(out)
    assert loaded.config.d_model == 32 and loaded.extra["train_config"]["steps"] == 20


def test_callback_can_stop_training_early_and_time_to_accuracy_reports_misses():
    from transformer_course.model import Transformer
    from transformer_course.training import TrainConfig, make_task, recipe_model_config, time_to_accuracy, train

    task = make_task("copy")
    config = recipe_model_config(task, num_encoder_layers=1, num_decoder_layers=1)
    history = train(Transformer(config), task, TrainConfig(steps=10, warmup=2, batch_size=8), progress=False,
                    callback=lambda step, loss: step == 3)  # fmt: skip
    assert len(history.loss) == 3
    missed = time_to_accuracy(task, config, TrainConfig(steps=4, warmup=2, batch_size=8), target=1.0, every=2)
    assert not missed.reached and missed.steps is None and missed.seconds is None
    assert 0.0 <= missed.exact_match < 1.0
    with pytest.raises(ValueError, match="target must be in"):
        time_to_accuracy(task, config, TrainConfig(steps=4, warmup=2), target=0.0)

"""The recipe: tasks by name, the course's model config, train once then load, the shell command, time to
accuracy."""

from __future__ import annotations

import pytest

from transformer_course.text.tasks import CopyTask, DateTask
from transformer_course.training.checkpoints import load_checkpoint
from transformer_course.training.recipes import load_or_train, make_task, recipe_model_config, time_to_accuracy
from transformer_course.training.trainers import TrainConfig

pytestmark = pytest.mark.usefixtures("one_thread")


def _small_config(task):
    return recipe_model_config(task, d_model=32, d_ff=64, num_encoder_layers=1, num_decoder_layers=1)


def test_make_task_and_the_recipe_config():
    assert isinstance(make_task("date", seed=3), DateTask) and isinstance(make_task("copy"), CopyTask)
    with pytest.raises(ValueError, match="task must be one of"):
        make_task("sort")
    task = make_task("copy")
    config = recipe_model_config(task, d_model=32)
    assert (config.src_vocab_size, config.tgt_vocab_size) == (len(task.src_vocab), len(task.tgt_vocab))
    assert config.d_model == 32 and config.dropout == 0.0 and config.max_len == 64


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
        assert a.equal(b)
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


def test_shell_entry_point_trains_a_language_model(tmp_path, capsys):
    from transformer_course.families.language_model import load_language_model
    from transformer_course.train import main

    out = tmp_path / "lm.safetensors"
    metrics = main(
        ["--task", "lm", "--style", "llama", "--kv-heads", "2", "--tokenizer", "bpe", "--vocab-size", "150"]
        + ["--steps", "20", "--warmup", "5", "--d-model", "32", "--layers", "1", "--context", "16"]
        + ["--corpus-chars", "20000", "--out", str(out), "--quiet"]
    )
    text = capsys.readouterr().out
    assert "bits/character" in text and "model saved" in text
    assert "task lm: 20,000 characters (2,000 held out), 150 bpe tokens" in text  # encode_corpus's split
    assert set(metrics) == {"held_out_nats_per_token", "bits_per_character"}
    model, tokenizer, config, extra = load_language_model(out)
    assert config.style == "llama" and config.num_kv_heads == 2 and tokenizer.vocab_size == 150
    assert extra["bits_per_character"] == metrics["bits_per_character"]


def test_shell_entry_point_speaks_chinese_when_asked(capsys):
    from transformer_course.language import get_language
    from transformer_course.train import main

    common = ["--steps", "20", "--warmup", "5", "--d-model", "32", "--d-ff", "64", "--layers", "1", "--quiet"]
    main(["--task", "copy", "--eval-size", "50", "--language", "zh", *common])
    text = capsys.readouterr().out
    assert "留出集上的词元准确率" in text and "精确匹配率" in text and "总用时" in text
    assert "held-out" not in text and "parameters" not in text
    main(["--task", "lm", "--corpus-chars", "20000", "--context", "16", "--language", "zh", *common])
    text = capsys.readouterr().out
    assert "任务 lm：20,000 个字符（其中留出 2,000 个）" in text and "每字符" in text and "bits" not in text
    assert get_language() == "en"  # the caller's language is left as it was
    with pytest.raises(SystemExit):
        main(["--language", "fr"])


def test_time_to_accuracy_reports_misses():
    task = make_task("copy")
    config = recipe_model_config(task, num_encoder_layers=1, num_decoder_layers=1)
    missed = time_to_accuracy(task, config, TrainConfig(steps=4, warmup=2, batch_size=8), target=1.0, every=2)
    assert not missed.reached and missed.steps is None and missed.seconds is None
    assert 0.0 <= missed.exact_match < 1.0
    with pytest.raises(ValueError, match="target must be in"):
        time_to_accuracy(task, config, TrainConfig(steps=4, warmup=2), target=0.0)

"""The date model that ships with the package: it loads, it is notebook 09's recipe, and it is accurate."""

from __future__ import annotations

import json

import pytest

from transformer_course.text.tasks import DateTask
from transformer_course.training.checkpoints import SHIPPED_CHECKPOINTS, Checkpoint, load_shipped_checkpoint
from transformer_course.training.recipes import recipe_model_config
from transformer_course.training.trainers import TrainConfig, evaluate

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def task() -> DateTask:
    return DateTask(seed=0)


@pytest.fixture(scope="module")
def shipped() -> Checkpoint:
    return load_shipped_checkpoint()


def test_the_shipped_file_is_small_and_loads_in_eval_mode(shipped):
    path = SHIPPED_CHECKPOINTS / "date_model.safetensors"
    assert path.is_file()
    assert path.stat().st_size < 1_000_000
    assert isinstance(shipped, Checkpoint)
    assert not shipped.model.training
    assert load_shipped_checkpoint("date_model").config == shipped.config  # the default name is "date_model"


def test_its_weights_have_the_models_current_names(shipped):
    from safetensors import safe_open

    with safe_open(str(SHIPPED_CHECKPOINTS / "date_model.safetensors"), framework="pt") as f:
        names = set(f.keys())
    assert names == set(shipped.model.state_dict())  # no tied weights here, so every weight is in the file
    assert "output_projection.weight" in names and not any(name.startswith("generator.") for name in names)


def test_its_config_was_saved_with_the_old_field_names_and_loads(shipped):
    from safetensors import safe_open

    with safe_open(str(SHIPPED_CHECKPOINTS / "date_model.safetensors"), framework="pt") as f:
        stored = json.loads(f.metadata()["config"])
    assert stored["layer_norm_eps"] == 1e-5 and "norm_eps" not in stored  # written before the rename
    assert shipped.config.norm_eps == 1e-5 and shipped.config.block.norm_eps == 1e-5
    assert not shipped.config.rope and shipped.config.positional == "sinusoidal"


def test_it_was_trained_with_notebook_09s_recipe(shipped, task):
    assert shipped.config == recipe_model_config(task)
    assert shipped.src_vocab == task.src_vocab
    assert shipped.tgt_vocab == task.tgt_vocab
    assert shipped.extra["task"] == "DateTask"
    assert shipped.extra["task_args"] == json.loads(json.dumps(task.to_dict()))
    assert shipped.extra["train_config"] == json.loads(json.dumps(TrainConfig().to_dict()))
    assert isinstance(shipped.extra["torch"], str) and shipped.extra["torch"]
    assert isinstance(shipped.extra["python"], str) and shipped.extra["python"].startswith("3.")


def test_it_is_above_99_5_percent_exact_match_on_held_out_dates(shipped, task):
    result = evaluate(shipped.model, task, task.eval_pairs(2000))
    assert result.exact_match > 0.995, result.exact_match
    assert result.token_accuracy > 0.995, result.token_accuracy


def test_an_unknown_name_is_a_clear_error():
    with pytest.raises(ValueError, match=r"no shipped checkpoint named 'date-model'; available: 'date_model'"):
        load_shipped_checkpoint("date-model")

"""The course's recipe: one call that builds, seeds, trains and saves a model, for the notebooks and the shell.

* :func:`make_task` and :func:`recipe_model_config`: the task by name, and the small model used for it.
* :func:`train_task_model`: seed, build and train; the same call gives the same model every time.
* :func:`train_and_save` and :func:`load_or_train`: train once and keep the checkpoint; later calls with the same
  settings load it instead of training again.
* :func:`time_to_accuracy`: how many updates and seconds until greedy exact match reaches a target.

``python -m transformer_course.train`` runs the same recipe from the shell.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..core.model import Transformer, TransformerConfig
from ..text.tasks import CopyTask, DateTask
from ..utils import seed_everything
from .checkpoints import Checkpoint, CheckpointError, load_checkpoint, save_checkpoint
from .distributed import DistributedContext
from .loop import History
from .trainers import Task, TrainConfig, evaluate, train

TASKS = {"date": DateTask, "copy": CopyTask}


def make_task(name: str, **kwargs: Any) -> DateTask | CopyTask:
    """A task by name: "date" or "copy"."""
    if name not in TASKS:
        raise ValueError(f"task must be one of {sorted(TASKS)}, got {name!r}")
    return TASKS[name](**kwargs)


def recipe_model_config(task: Task, **overrides: Any) -> TransformerConfig:
    """The small model used for the course's tasks: d_model 64, 4 heads, 2 + 2 layers, d_ff 256 (the "tiny"
    preset) with the task's vocabulary sizes; any field can be overridden."""
    fields_ = dict(
        src_vocab_size=len(task.src_vocab),
        tgt_vocab_size=len(task.tgt_vocab),
        max_len=64,
        dropout=0.0,
    )
    fields_.update(overrides)
    return TransformerConfig.preset("tiny", **fields_)


def train_task_model(
    task: Task,
    model_config: TransformerConfig | None = None,
    train_config: TrainConfig | None = None,
    progress: bool = True,
    device: torch.device | str = "cpu",
    init: Callable[[Transformer], None] | None = None,
    distributed: DistributedContext | None = None,
    amp: bool = False,
) -> tuple[Transformer, History]:
    """Seed everything with ``train_config.seed``, build the model (``init(model)`` may change its starting
    weights) and train it. The same call gives the same model every time. ``distributed`` and ``amp`` as in
    :func:`~transformer_course.training.trainers.train`."""
    train_config = TrainConfig() if train_config is None else train_config
    model_config = recipe_model_config(task) if model_config is None else model_config
    seed_everything(train_config.seed)
    model = Transformer(model_config)
    if init is not None:
        init(model)
    history = train(
        model.to(device), task, train_config, progress=progress, device=device, distributed=distributed, amp=amp
    )
    return model, history


@dataclass
class TimeToAccuracy:
    """When greedy exact match first reached the target: after ``steps`` updates and ``seconds`` of training
    (evaluation time excluded); ``exact_match`` is the last measured value."""

    reached: bool
    steps: int | None
    seconds: float | None
    exact_match: float


def time_to_accuracy(
    task: Task,
    model_config: TransformerConfig,
    train_config: TrainConfig,
    target: float = 0.99,
    every: int = 10,
    eval_size: int = 500,
    device: torch.device | str = "cpu",
) -> TimeToAccuracy:
    """Train as :func:`train_task_model` does, evaluating greedy exact match on ``eval_size`` held-out pairs
    every ``every`` updates, and stop as soon as it reaches ``target`` (or after ``train_config.steps``)."""
    if not 0.0 < target <= 1.0:
        raise ValueError(f"target must be in (0, 1], got {target}")
    seed_everything(train_config.seed)
    model = Transformer(model_config).to(device)
    pairs = task.eval_pairs(eval_size)
    state: dict[str, Any] = {"seconds": 0.0, "mark": time.perf_counter(), "steps": None, "accuracy": 0.0}

    def after_step(step: int, loss: float) -> bool:
        state["seconds"] += time.perf_counter() - state["mark"]
        if step % every == 0:
            state["accuracy"] = evaluate(model, task, pairs).exact_match
            model.train()
            if state["accuracy"] >= target:
                state["steps"] = step
        state["mark"] = time.perf_counter()
        return state["steps"] is not None

    train(model, task, train_config, progress=False, device=device, callback=after_step)
    reached = state["steps"] is not None
    return TimeToAccuracy(reached, state["steps"], state["seconds"] if reached else None, state["accuracy"])


def _run_description(task: Task, train_config: TrainConfig) -> dict[str, Any]:
    """What a checkpoint's ``extra`` records about how it was trained (JSON types, as read back from a file)."""
    description = {"task": type(task).__name__, "task_args": task.to_dict(), "train_config": train_config.to_dict()}
    return json.loads(json.dumps(description))


def train_and_save(
    path: str | os.PathLike,
    task: Task,
    model_config: TransformerConfig | None = None,
    train_config: TrainConfig | None = None,
    progress: bool = True,
    device: torch.device | str = "cpu",
) -> tuple[Checkpoint, History]:
    """:func:`train_task_model`, then :func:`~transformer_course.training.checkpoints.save_checkpoint` to ``path``
    with the task and the training settings recorded, so :func:`load_or_train` can recognise the file later. Returns the
    checkpoint and the history."""
    train_config = TrainConfig() if train_config is None else train_config
    model, history = train_task_model(task, model_config, train_config, progress, device)
    extra = {**_run_description(task, train_config), "train_seconds": history.seconds, "final_loss": history.loss[-1]}
    save_checkpoint(path, model, task.src_vocab, task.tgt_vocab, extra)
    return Checkpoint(model.eval(), task.src_vocab, task.tgt_vocab, extra), history


def load_or_train(
    path: str | os.PathLike,
    task: Task,
    model_config: TransformerConfig | None = None,
    train_config: TrainConfig | None = None,
    progress: bool = True,
    device: torch.device | str = "cpu",
) -> Checkpoint:
    """Load the checkpoint at ``path`` if it exists and was trained with these settings; otherwise train with
    :func:`train_and_save` (which writes ``path``) and return the result."""
    train_config = TrainConfig() if train_config is None else train_config
    model_config = recipe_model_config(task) if model_config is None else model_config
    wanted = _run_description(task, train_config)
    path = Path(path)
    if path.is_file():
        try:
            checkpoint = load_checkpoint(path, device=device)
        except CheckpointError:
            checkpoint = None
        if (
            checkpoint is not None
            and checkpoint.config == model_config
            and all(checkpoint.extra.get(k) == v for k, v in wanted.items())
        ):
            return checkpoint
    return train_and_save(path, task, model_config, train_config, progress, device)[0]


__all__ = [
    "TASKS",
    "TimeToAccuracy",
    "load_or_train",
    "make_task",
    "recipe_model_config",
    "time_to_accuracy",
    "train_and_save",
    "train_task_model",
]

"""Training a sequence-to-sequence Transformer: the loss, the learning-rate schedules, the loop, evaluation and
checkpoints.

The pieces, in the order a run uses them:

* :func:`label_smoothing_loss`: cross-entropy against smoothed targets, padding positions excluded.
* :func:`noam_lr` (the paper's warm-up schedule) and :func:`warmup_linear_lr` (warm-up then linear decay).
* :func:`make_optimizer`: Adam with the paper's betas (0.9, 0.98) and eps 1e-9.
* :func:`train`: the loop with teacher forcing, gradient clipping and a progress line that works in a
  terminal, in JupyterLab and under nbval (one line rewritten with ``\\r``, deterministic text).
* :func:`evaluate`: greedy decoding of a held-out set; token accuracy and exact-match accuracy.
* :func:`save_checkpoint` / :func:`load_checkpoint`: weights in safetensors, with the model config and the
  vocabularies in the same file, so a checkpoint alone rebuilds the model.
* :func:`train_task_model` and :func:`load_or_train`: the whole recipe, used by the notebooks and by
  ``python -m transformer_course.train``.
* :func:`load_shipped_checkpoint`: the date model trained by that recipe, shipped with the package
  (built by ``tools/build_checkpoints.py``), so every machine decodes with the same weights.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from .data import PAD_ID, Batch, CopyTask, DateTask, Vocabulary, make_batch
from .decoding import greedy_decode
from .distributed import DistributedContext, autocast_context, mean_across_processes, shard_batch
from .model import Transformer, TransformerConfig
from .utils import seed_everything

# --------------------------------------------------------------------------------------------------------
# Loss
# --------------------------------------------------------------------------------------------------------

SPREADS = ("uniform", "others")


def smoothed_targets(target: Tensor, num_classes: int, smoothing: float, spread: str = "uniform") -> Tensor:
    """The smoothed target distribution q for each position.

    target: (...,) class ids. Returns (..., num_classes), each row summing to 1.
    spread="uniform" (PyTorch's ``label_smoothing``): q = (1 - eps) one_hot + eps / V, so the target gets
    1 - eps + eps / V and every other class eps / V. spread="others" (the Annotated Transformer and the course's
    source text): the target gets exactly 1 - eps and the other V - 1 classes share eps, eps / (V - 1) each.
    """
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
    if spread not in SPREADS:
        raise ValueError(f"spread must be one of {SPREADS}, got {spread!r}")
    if num_classes < 2:
        raise ValueError(f"num_classes must be >= 2, got {num_classes}")
    one_hot = F.one_hot(target, num_classes).float()
    if spread == "uniform":
        return (1.0 - smoothing) * one_hot + smoothing / num_classes
    return (1.0 - smoothing) * one_hot + smoothing / (num_classes - 1) * (1.0 - one_hot)


def label_smoothing_loss(
    logits: Tensor,
    target: Tensor,
    smoothing: float = 0.1,
    pad_id: int | None = PAD_ID,
    spread: str = "uniform",
) -> Tensor:
    """Cross-entropy of the model's distribution against smoothed targets, averaged over non-padding positions.

    logits: (..., vocab), target: (...,) ids. Positions where ``target == pad_id`` contribute nothing and are
    not counted in the mean. With spread="uniform" this equals
    ``F.cross_entropy(logits, target, label_smoothing=smoothing, ignore_index=pad_id)``; with smoothing=0 it
    is the plain cross-entropy. Returns a scalar.
    """
    if logits.shape[:-1] != target.shape:
        raise ValueError(
            f"logits (..., vocab) and target (...) must agree on the leading dimensions, got "
            f"{tuple(logits.shape)} and {tuple(target.shape)}"
        )
    log_probs = F.log_softmax(logits.float(), dim=-1)  # (..., vocab)
    q = smoothed_targets(target, logits.shape[-1], smoothing, spread)  # (..., vocab)
    per_position = -(q * log_probs).sum(dim=-1)  # (...,)
    if pad_id is None:
        return per_position.mean()
    real = target != pad_id
    if not bool(real.any()):
        raise ValueError(f"every target position is padding (pad_id={pad_id}); nothing to average")
    return per_position[real].mean()


# --------------------------------------------------------------------------------------------------------
# Learning-rate schedules and the optimizer
# --------------------------------------------------------------------------------------------------------


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The paper's schedule: factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), for step >= 1.

    It rises linearly for ``warmup`` steps, peaks at factor * (d_model * warmup)^-0.5, then decays as 1/sqrt(step).
    """
    if step < 1:
        raise ValueError(f"step counts optimizer updates from 1, got {step}")
    if warmup < 1 or d_model < 1:
        raise ValueError(f"warmup and d_model must be >= 1, got warmup={warmup}, d_model={d_model}")
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def warmup_linear_lr(step: int, peak_lr: float, warmup: int, decay_steps: int, final_fraction: float = 0.1) -> float:
    """Linear warm-up from 0 to ``peak_lr`` over ``warmup`` steps, then linear decay to ``final_fraction`` *
    peak_lr at step ``decay_steps``, then constant. step >= 1."""
    if step < 1:
        raise ValueError(f"step counts optimizer updates from 1, got {step}")
    if warmup < 0 or decay_steps <= warmup:
        raise ValueError(f"need 0 <= warmup < decay_steps, got warmup={warmup}, decay_steps={decay_steps}")
    if step <= warmup:
        return peak_lr * step / warmup
    progress = min(1.0, (step - warmup) / (decay_steps - warmup))
    return peak_lr * (1.0 - (1.0 - final_fraction) * progress)


def make_optimizer(
    model: nn.Module,
    lr: float = 1.0,
    betas: tuple[float, float] = (0.9, 0.98),
    eps: float = 1e-9,
    weight_decay: float = 0.0,
) -> torch.optim.Optimizer:
    """Adam with the paper's betas and eps (AdamW, decoupled, when weight_decay > 0).

    ``lr`` is the base rate the schedule multiplies; the training loop sets the real rate every step.
    """
    if weight_decay < 0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
    if weight_decay > 0:
        return torch.optim.AdamW(model.parameters(), lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    return torch.optim.Adam(model.parameters(), lr=lr, betas=betas, eps=eps)


# --------------------------------------------------------------------------------------------------------
# The training loop
# --------------------------------------------------------------------------------------------------------

SCHEDULES = ("linear", "noam", "constant")


@dataclass
class TrainConfig:
    """Everything about a training run that is not the model.

    schedule "linear": :func:`warmup_linear_lr` with peak ``lr``, ``warmup`` steps, decay to
    ``final_lr_fraction`` * lr at ``decay_steps`` (default: the last step). "noam": :func:`noam_lr` with
    factor ``lr``. "constant": ``lr`` throughout.
    """

    steps: int = 1000
    batch_size: int = 64
    lr: float = 2e-3
    schedule: str = "linear"
    warmup: int = 100
    decay_steps: int | None = None
    final_lr_fraction: float = 0.1
    betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    clip_norm: float | None = 1.0
    label_smoothing: float = 0.0
    seed: int = 0
    log_every: int = 50

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "log_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.clip_norm is not None and not self.clip_norm > 0:
            raise ValueError(f"clip_norm must be > 0 or None, got {self.clip_norm}")
        if self.schedule == "linear" and self.decay_at <= self.warmup:
            raise ValueError(f"decay_steps ({self.decay_at}) must be larger than warmup ({self.warmup})")
        self.betas = tuple(self.betas)

    @property
    def decay_at(self) -> int:
        return self.steps if self.decay_steps is None else self.decay_steps

    def lr_at(self, step: int, d_model: int) -> float:
        """The learning rate of update number ``step`` (from 1)."""
        if self.schedule == "noam":
            return noam_lr(step, d_model, self.warmup, self.lr)
        if self.schedule == "linear":
            return warmup_linear_lr(step, self.lr, self.warmup, self.decay_at, self.final_lr_fraction)
        return self.lr

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class History:
    """What happened during training: one entry per update (loss, learning rate, gradient norm before
    clipping, teacher-forced token accuracy of the batch) and the wall-clock seconds."""

    loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    batch_accuracy: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ProgressLine:
    """One status line, rewritten in place with a carriage return: a terminal, JupyterLab and nbval all show
    (and nbval compares) only its final state. The text holds no times, so it is the same on every run."""

    def __init__(self, total: int, enabled: bool = True, stream=None, width: int = 20) -> None:
        self.total, self.enabled, self.width = total, enabled, width
        self.stream = sys.stdout if stream is None else stream

    def update(self, step: int, text: str) -> None:
        if self.enabled:
            filled = round(self.width * step / self.total)
            bar = "#" * filled + "." * (self.width - filled)
            self.stream.write(f"\rstep {step:>{len(str(self.total))}}/{self.total} [{bar}] {text}")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


class Task(Protocol):
    src_vocab: Vocabulary
    tgt_vocab: Vocabulary

    def train_batch(self, batch_size: int, generator: torch.Generator) -> Batch: ...

    def eval_pairs(self, n: int = ..., seed: int = ...) -> list: ...


def train(
    model: Transformer,
    task: Task,
    config: TrainConfig,
    progress: bool = True,
    device: torch.device | str | None = None,
    callback: Callable[[int, float], bool | None] | None = None,
    distributed: DistributedContext | None = None,
    amp: bool = False,
) -> History:
    """Train ``model`` in place on batches drawn from ``task`` for exactly ``config.steps`` updates.

    Each update: draw a batch (with a generator seeded by ``config.seed``, so the data order is fixed), run the
    model with teacher forcing (decoder input = target shifted right), compute :func:`label_smoothing_loss`
    over the non-padding positions, back-propagate, clip the gradient norm, set the scheduled learning rate and
    step Adam. ``callback(step, loss)`` runs after every update; if it returns True, training stops there.
    Returns the :class:`History`.

    ``distributed`` (see :mod:`transformer_course.distributed`): this process trains on its slice of each
    global batch of ``config.batch_size`` rows through DistributedDataParallel, and the history records losses
    averaged over the processes. ``amp``: bfloat16 autocast for the forward pass and the loss.
    """
    device = next(model.parameters()).device if device is None else torch.device(device)
    model.to(device).train()
    d_model = model.config.d_model
    step_model = model if distributed is None else DistributedDataParallel(model)
    optimizer = make_optimizer(model, config.lr, config.betas, config.adam_eps, config.weight_decay)
    generator = torch.Generator().manual_seed(config.seed)
    history = History()
    line = ProgressLine(config.steps, progress)
    start = time.perf_counter()
    for step in range(1, config.steps + 1):
        batch = task.train_batch(config.batch_size, generator)
        if distributed is not None:
            batch = shard_batch(batch, distributed.rank, distributed.world_size)
        batch = batch.to(device)
        with autocast_context(device, amp):
            logits = step_model(batch.src, batch.tgt_in)  # (batch, len_t, vocab): teacher forcing
            loss = label_smoothing_loss(logits, batch.tgt_out, config.label_smoothing, PAD_ID)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        max_norm = math.inf if config.clip_norm is None else config.clip_norm
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        lr = config.lr_at(step, d_model)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.step()
        with torch.no_grad():
            real = batch.tgt_out != PAD_ID
            accuracy = ((logits.argmax(-1) == batch.tgt_out) & real).sum() / real.sum()
        history.loss.append(mean_across_processes(loss, distributed).item())
        history.lr.append(lr)
        history.grad_norm.append(grad_norm.item())
        history.batch_accuracy.append(mean_across_processes(accuracy, distributed).item())
        stop = callback is not None and callback(step, history.loss[-1]) is True
        if step % config.log_every == 0 or step == config.steps or stop:
            recent = history.loss[-config.log_every :]
            line.update(step, f"loss {sum(recent) / len(recent):.4f}  lr {lr:.2e}")
        if stop:
            break
    line.close()
    history.seconds = time.perf_counter() - start
    model.eval()
    return history


# --------------------------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------------------------


@dataclass
class EvalResult:
    """Greedy-decoding results on an evaluation set.

    token_accuracy: fraction of target positions (<eos> included) where the output has the right token.
    exact_match: fraction of examples whose whole output equals the target.
    """

    token_accuracy: float
    exact_match: float
    sources: list[str]
    targets: list[str]
    predictions: list[str]

    def mistakes(self) -> list[tuple[str, str, str]]:
        """(source, target, prediction) for every example the model got wrong."""
        return [(s, t, p) for s, t, p in zip(self.sources, self.targets, self.predictions) if t != p]


def _as_text(tokens: Sequence[str]) -> str:
    return tokens if isinstance(tokens, str) else " ".join(tokens)


@torch.no_grad()
def evaluate(
    model: Transformer,
    task: Task,
    pairs: Sequence[tuple[Sequence[str], Sequence[str]]],
    batch_size: int = 500,
    max_len: int = 32,
) -> EvalResult:
    """Greedy-decode every source in ``pairs`` (batched) and score the outputs against the targets."""
    if not pairs:
        raise ValueError("evaluate needs at least one (source, target) pair, got none")
    model.eval()
    device = next(model.parameters()).device
    correct_tokens = total_tokens = exact = 0
    predictions: list[str] = []
    sep = "" if isinstance(pairs[0][1], str) else " "
    for i in range(0, len(pairs), batch_size):
        chunk = pairs[i : i + batch_size]
        batch = make_batch(chunk, task.src_vocab, task.tgt_vocab).to(device)
        out = greedy_decode(model, batch.src, max_len=max_len)
        target = batch.tgt_out  # (batch, len_t) with <eos>
        steps = min(out.tokens.shape[1], target.shape[1])
        padded = torch.full_like(target, PAD_ID)
        padded[:, :steps] = out.tokens[:, :steps]
        real = target != PAD_ID
        same = (padded == target) & real
        correct_tokens += int(same.sum())
        total_tokens += int(real.sum())
        row_ok = same.sum(dim=1) == real.sum(dim=1)
        # a row is exact only if it also stopped right after its <eos> (nothing extra can follow an <eos>)
        exact += int(row_ok.sum())
        predictions += [task.tgt_vocab.decode(row.tolist(), sep=sep) for row in out.tokens]
    return EvalResult(
        token_accuracy=correct_tokens / total_tokens,
        exact_match=exact / len(pairs),
        sources=[_as_text(s) for s, _ in pairs],
        targets=[_as_text(t) for _, t in pairs],
        predictions=predictions,
    )


# --------------------------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------------------------

CHECKPOINT_FORMAT = "transformer-course-checkpoint/1"


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read, or that does not fit the model it is loaded into."""


@dataclass
class Checkpoint:
    """A rebuilt model (in eval mode) with the vocabularies and extra information saved beside its weights."""

    model: Transformer
    src_vocab: Vocabulary
    tgt_vocab: Vocabulary
    extra: dict[str, Any]

    @property
    def config(self) -> TransformerConfig:
        return self.model.config


def save_checkpoint(
    path: str | os.PathLike,
    model: Transformer,
    src_vocab: Vocabulary,
    tgt_vocab: Vocabulary,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write the weights to a safetensors file, with the model config, both vocabularies and ``extra``
    (JSON-serialisable) in its metadata. Tied weights are stored once. Returns the path."""
    from safetensors.torch import save_model

    if len(src_vocab) != model.config.src_vocab_size or len(tgt_vocab) != model.config.tgt_vocab_size:
        raise ValueError(
            f"the vocabularies ({len(src_vocab)}, {len(tgt_vocab)} tokens) do not match the model's "
            f"src_vocab_size={model.config.src_vocab_size}, tgt_vocab_size={model.config.tgt_vocab_size}"
        )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = {
        "format": CHECKPOINT_FORMAT,
        "config": json.dumps(model.config.to_dict()),
        "src_vocab": json.dumps(src_vocab.to_list()),
        "tgt_vocab": json.dumps(tgt_vocab.to_list()),
        "extra": json.dumps(extra or {}),
    }
    tmp = path.with_name(path.name + ".tmp")
    save_model(model, str(tmp), metadata=metadata)
    tmp.replace(path)  # a crash while writing never leaves a half-written file under the real name
    return path


def _config_differences(a: TransformerConfig, b: TransformerConfig) -> list[str]:
    return [
        f"{f.name}: {getattr(a, f.name)!r} vs {getattr(b, f.name)!r}"
        for f in fields(a)
        if getattr(a, f.name) != getattr(b, f.name)
    ]


def load_checkpoint(
    path: str | os.PathLike, model: Transformer | None = None, device: torch.device | str = "cpu"
) -> Checkpoint:
    """Rebuild a model from a checkpoint written by :func:`save_checkpoint`.

    With ``model`` given, its config must equal the saved one and the weights are loaded into it.
    Raises :class:`CheckpointError` (a ``ValueError``) for a missing, corrupt or foreign file, or for weights
    that do not fit the config, with a message saying which.
    """
    from safetensors import safe_open
    from safetensors.torch import load_model

    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"no checkpoint file at {path}")
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
    except Exception as error:  # safetensors raises its own error types for truncated or garbled files
        raise CheckpointError(f"{path} is not a readable safetensors checkpoint ({error})") from error
    if metadata.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(
            f"{path} is a safetensors file but not a transformer-course checkpoint "
            f"(format {metadata.get('format')!r}, expected {CHECKPOINT_FORMAT!r})"
        )
    try:
        config = TransformerConfig(**json.loads(metadata["config"]))
        src_vocab = Vocabulary(json.loads(metadata["src_vocab"]))
        tgt_vocab = Vocabulary(json.loads(metadata["tgt_vocab"]))
        extra = json.loads(metadata.get("extra", "{}"))
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{path} has broken metadata ({type(error).__name__}: {error})") from error
    if model is None:
        model = Transformer(config)
    elif model.config != config:
        diff = "; ".join(_config_differences(config, model.config))
        raise CheckpointError(f"{path} was saved for a different model (checkpoint vs given: {diff})")
    try:
        load_model(model, str(path), strict=True, device=str(device))
    except Exception as error:
        raise CheckpointError(f"the weights in {path} do not fit its config ({error})") from error
    return Checkpoint(model.to(device).eval(), src_vocab, tgt_vocab, extra)


# --------------------------------------------------------------------------------------------------------
# The recipe: one function for the notebooks and the command line
# --------------------------------------------------------------------------------------------------------

TASKS = {"date": DateTask, "copy": CopyTask}


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
    :func:`train`."""
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
    """:func:`train_task_model`, then :func:`save_checkpoint` to ``path`` with the task and the training settings
    recorded, so :func:`load_or_train` can recognise the file later. Returns the checkpoint and the history."""
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


SHIPPED_CHECKPOINTS = Path(__file__).resolve().parent / "checkpoints"
"""The directory of the checkpoints that ship with the package (``<name>.safetensors``)."""


def load_shipped_checkpoint(name: str = "date_model") -> Checkpoint:
    """Load a trained model that ships with the package, on the CPU.

    ``"date_model"`` is the date model of notebook 09's recipe (``DateTask(seed=0)``, ``recipe_model_config``,
    ``TrainConfig()``), trained once by ``tools/build_checkpoints.py``: the same file, so the same weights, on
    every machine. Returns a :class:`Checkpoint`: the rebuilt model in eval mode, its source and target
    vocabularies, and ``extra``, which records the task, the training settings and the torch and Python versions
    that produced it. Raises ``ValueError`` naming the available checkpoints for an unknown ``name``.
    """
    available = sorted(path.name.removesuffix(".safetensors") for path in SHIPPED_CHECKPOINTS.glob("*.safetensors"))
    if name not in available:
        raise ValueError(
            f"no shipped checkpoint named {name!r}; available: {', '.join(map(repr, available)) or 'none'} "
            f"(in {SHIPPED_CHECKPOINTS})"
        )
    return load_checkpoint(SHIPPED_CHECKPOINTS / f"{name}.safetensors")


def make_task(name: str, **kwargs: Any) -> DateTask | CopyTask:
    """A task by name: "date" or "copy"."""
    if name not in TASKS:
        raise ValueError(f"task must be one of {sorted(TASKS)}, got {name!r}")
    return TASKS[name](**kwargs)


__all__ = [
    "Checkpoint",
    "CheckpointError",
    "EvalResult",
    "History",
    "ProgressLine",
    "TrainConfig",
    "evaluate",
    "label_smoothing_loss",
    "load_checkpoint",
    "load_or_train",
    "load_shipped_checkpoint",
    "make_optimizer",
    "make_task",
    "noam_lr",
    "recipe_model_config",
    "save_checkpoint",
    "SHIPPED_CHECKPOINTS",
    "smoothed_targets",
    "train",
    "train_and_save",
    "TimeToAccuracy",
    "time_to_accuracy",
    "train_task_model",
    "warmup_linear_lr",
]

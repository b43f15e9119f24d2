"""Train a decoder-only language model on one long text, as small GPTs are trained on a CPU.

* :class:`LMConfig`: the model, in one of two settings of the course's one block: ``"gpt2"`` (learned
  positions, LayerNorm, GELU: :class:`~transformer_course.variants.CausalLanguageModel`) or ``"llama"`` (RoPE,
  RMSNorm, SwiGLU, grouped K/V heads: :class:`~transformer_course.modern_block.ModernDecoderLM`).
* :class:`LMTrainConfig`: AdamW over random windows, a linear warm-up then a cosine decay, gradient clipping.
* :func:`train_language_model` runs a fixed number of steps (what a notebook does, so its run repeats) or stops
  at a wall-clock budget (what a benchmark does); :func:`held_out_loss` scores the held-out tail.
* :func:`save_language_model` / :func:`load_language_model`: weights, config and tokenizer in one safetensors file.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import checks
from .bpe import BPETokenizer
from .lm_data import random_windows
from .modern_block import ModernDecoderLM
from .schedules import warmup_cosine_lr
from .training import ProgressLine
from .variants import CausalLanguageModel

STYLES = ("gpt2", "llama")
# the model notebook 15 loads: trained in the shell with the lm task (the command is in its extra metadata)
SHIPPED_LANGUAGE_MODEL = Path(__file__).resolve().parent / "trained_models" / "gpt_stdlib.safetensors"


class LSTMLanguageModel(nn.Module):
    """The recurrent baseline: embedding, ``num_layers`` LSTM layers (notebook 01's cell, run by PyTorch's fused
    ``nn.LSTM``), and an output layer tied to the embedding. ids (batch, len) -> logits (batch, len, vocab_size).

    Its state carries the past, so it has no context limit; it is trained on the same windows as the Transformers.
    """

    def __init__(self, vocab_size: int, hidden_size: int, num_layers: int = 1) -> None:
        super().__init__()
        checks.positive_ints(vocab_size=vocab_size, hidden_size=hidden_size, num_layers=num_layers)
        self.embedding = nn.Embedding(vocab_size, hidden_size)
        nn.init.normal_(self.embedding.weight, std=hidden_size**-0.5)  # near-uniform first predictions, as above
        self.lstm = nn.LSTM(hidden_size, hidden_size, num_layers=num_layers, batch_first=True)
        self.head = nn.Linear(hidden_size, vocab_size, bias=False)
        self.head.weight = self.embedding.weight

    def forward(self, token_ids: Tensor) -> Tensor:
        """token_ids: (batch, len) -> logits (batch, len, vocab_size)."""
        checks.token_ids("token_ids", token_ids)
        hidden, _ = self.lstm(self.embedding(token_ids))  # (batch, len, hidden): all steps in one fused call
        return self.head(hidden)


@dataclass(frozen=True)
class LMConfig:
    """The shape of a decoder-only model. ``d_ff`` None: 4 * d_model (GPT-2) or the matched SwiGLU width (LLaMA);
    ``num_kv_heads`` (LLaMA only) None: one K/V head per query head."""

    style: str = "gpt2"
    d_model: int = 128
    num_layers: int = 4
    num_heads: int = 4
    num_kv_heads: int | None = None
    d_ff: int | None = None
    context: int = 64
    dropout: float = 0.0

    def __post_init__(self) -> None:
        checks.one_of("style", self.style, STYLES)
        checks.positive_ints(
            d_model=self.d_model, num_layers=self.num_layers, num_heads=self.num_heads, context=self.context
        )
        checks.probability("dropout", self.dropout)
        if self.style == "gpt2" and self.num_kv_heads not in (None, self.num_heads):
            raise ValueError(f"num_kv_heads={self.num_kv_heads} needs style='llama'; the GPT-2 style has none")


@dataclass(frozen=True)
class LMTrainConfig:
    """AdamW on random windows: ``lr`` peaks after ``warmup`` steps and decays along a cosine to ``min_lr`` at
    ``steps``; gradients clipped to ``clip_norm`` (None: off)."""

    steps: int = 2000
    batch_size: int = 12
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup: int = 100
    betas: tuple[float, float] = (0.9, 0.99)
    weight_decay: float = 0.1
    clip_norm: float | None = 1.0
    seed: int = 0
    eval_every: int = 0  # 0: evaluate the held-out loss only at the end

    def __post_init__(self) -> None:
        checks.positive_ints(steps=self.steps, batch_size=self.batch_size)
        checks.non_negative_int("warmup", self.warmup)
        checks.non_negative_int("eval_every", self.eval_every)
        if self.warmup >= self.steps:
            raise ValueError(f"warmup={self.warmup} must be smaller than steps={self.steps}")
        if not 0 <= self.min_lr <= self.lr:
            raise ValueError(f"need 0 <= min_lr <= lr, got min_lr={self.min_lr}, lr={self.lr}")


@dataclass
class LMHistory:
    """What a run measured: the training loss per step (nats/token), held-out losses at ``eval_steps``, time."""

    loss: list[float] = field(default_factory=list)
    eval_steps: list[int] = field(default_factory=list)
    eval_loss: list[float] = field(default_factory=list)
    seconds: float = 0.0
    tokens_seen: int = 0

    @property
    def steps(self) -> int:
        return len(self.loss)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens_seen / self.seconds if self.seconds > 0 else float("nan")


def build_language_model(config: LMConfig, vocab_size: int) -> nn.Module:
    """An untrained model of ``config``'s style: ids (batch, len <= context) -> logits (batch, len, vocab_size).

    Both tie the output layer to the token embedding, so an untrained model predicts close to uniformly.
    """
    checks.positive_int("vocab_size", vocab_size)
    if config.style == "gpt2":
        return CausalLanguageModel(
            vocab_size,
            d_model=config.d_model,
            num_heads=config.num_heads,
            d_ff=4 * config.d_model if config.d_ff is None else config.d_ff,
            num_layers=config.num_layers,
            max_len=config.context,
            dropout=config.dropout,
            pad_id=None,
        )
    model = ModernDecoderLM(
        vocab_size,
        config.d_model,
        config.num_layers,
        config.num_heads,
        num_kv_heads=config.num_kv_heads,
        tie_embeddings=True,
        d_ff=config.d_ff,
        max_len=config.context,
        dropout=config.dropout,
    )
    # nn.Embedding's N(0, 1) rows, tied to the head, would give logits of std sqrt(d_model) against unit-RMS
    # hidden states: start near uniform predictions instead, as GPT-2 does, with rows of length about 1
    nn.init.normal_(model.embedding.weight, std=config.d_model**-0.5)
    model.max_len = config.context  # decoding.generate feeds at most this many tokens
    return model


@torch.no_grad()
def held_out_loss(model: nn.Module, ids: Tensor, context: int, max_windows: int | None = None) -> float:
    """Mean next-token loss (nats/token) over consecutive, non-overlapping windows of ``ids`` (n,).

    Every window is scored at all its positions, so early positions see little context, as in training.
    """
    checks.positive_int("context", context)
    windows = (len(ids) - 1) // context
    if windows < 1:
        raise ValueError(f"{len(ids)} held-out ids are fewer than one window of context={context} plus one")
    if max_windows is not None:
        windows = min(windows, max_windows)
    x = ids[: windows * context].view(windows, context)
    y = ids[1 : windows * context + 1].view(windows, context)
    was_training = model.training
    model.eval()
    total = 0.0
    for start in range(0, windows, 64):  # batches of windows, to bound memory
        logits = model(x[start : start + 64])
        total += F.cross_entropy(logits.flatten(0, 1), y[start : start + 64].flatten(), reduction="sum").item()
    model.train(was_training)
    return total / (windows * context)


def train_language_model(
    model: nn.Module,
    train_ids: Tensor,
    held_out_ids: Tensor,
    context: int,
    config: LMTrainConfig,
    seconds: float | None = None,
    progress: bool = False,
    eval_windows: int | None = 200,
) -> LMHistory:
    """Train ``model`` on random windows of ``train_ids`` for ``config.steps`` updates, or until ``seconds`` of
    training have passed (a benchmark's budget; the schedule still spans ``config.steps``).

    The held-out loss (at most ``eval_windows`` windows) is measured every ``config.eval_every`` steps and at the
    end; evaluation time is not counted in ``history.seconds``.
    """
    generator = torch.Generator().manual_seed(config.seed)
    decay, no_decay = [], []
    for parameter in {id(p): p for p in model.parameters()}.values():  # tied weights once
        (decay if parameter.dim() >= 2 else no_decay).append(parameter)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.lr,
        betas=config.betas,
    )
    history = LMHistory()
    line = ProgressLine(config.steps, enabled=progress)
    model.train()
    elapsed = 0.0
    for step in range(1, config.steps + 1):
        started = time.perf_counter()
        x, y = random_windows(train_ids, config.batch_size, context, generator)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm)
        for group in optimizer.param_groups:
            group["lr"] = warmup_cosine_lr(step, config.lr, config.warmup, config.steps, config.min_lr)
        optimizer.step()
        elapsed += time.perf_counter() - started
        history.loss.append(loss.item())
        history.tokens_seen += x.numel()
        last = step == config.steps or (seconds is not None and elapsed >= seconds)
        if last or (config.eval_every and step % config.eval_every == 0):
            history.eval_steps.append(step)
            history.eval_loss.append(held_out_loss(model, held_out_ids, context, eval_windows))
        if step % 50 == 0 or last:
            recent = history.loss[-50:]
            line.update(step, f"train loss {sum(recent) / len(recent):.3f} (mean of the last {len(recent)})")
        if last:
            break
    line.close()
    history.seconds = elapsed
    model.eval()
    return history


def save_language_model(
    path: str | os.PathLike, model: nn.Module, config: LMConfig, tokenizer: BPETokenizer, extra: dict | None = None
) -> Path:
    """Weights, the model's config and the tokenizer's tokens and merges in one safetensors file."""
    from safetensors.torch import save_model

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    metadata = {
        "format": "transformer-course language model",
        "lm_config": json.dumps(asdict(config)),
        "tokens": json.dumps(tokenizer.tokens),
        "merges": json.dumps(tokenizer.merges),
        "extra": json.dumps(extra or {}),
    }
    save_model(model, str(path), metadata=metadata)
    return path


def load_language_model(path: str | os.PathLike) -> tuple[nn.Module, BPETokenizer, LMConfig, dict]:
    """The model (in eval mode), tokenizer, config and ``extra`` saved by :func:`save_language_model`."""
    from safetensors import safe_open
    from safetensors.torch import load_model

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no language-model file at {os.fspath(path)!r}")
    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata() or {}
    if metadata.get("format") != "transformer-course language model":
        raise ValueError(f"{os.fspath(path)!r} is not a language model saved by save_language_model")
    config = LMConfig(**json.loads(metadata["lm_config"]))
    tokenizer = BPETokenizer(json.loads(metadata["tokens"]), [tuple(m) for m in json.loads(metadata["merges"])])
    model = build_language_model(config, tokenizer.vocab_size)
    load_model(model, str(path))
    return model.eval(), tokenizer, config, json.loads(metadata["extra"])


def load_shipped_language_model() -> tuple[nn.Module, BPETokenizer, LMConfig, dict]:
    """The language model that ships with the package (:data:`SHIPPED_LANGUAGE_MODEL`), as
    :func:`load_language_model` returns it."""
    return load_language_model(SHIPPED_LANGUAGE_MODEL)

"""A decoder-only language model trained on one long text: its shape, how it is built, saved and loaded.

* :class:`LMConfig`: the model, in one of two settings of the course's one block: ``"gpt2"`` (learned
  positions, LayerNorm, GELU) or ``"llama"`` (RoPE, RMSNorm, SwiGLU, grouped K/V heads).
* :func:`build_language_model`: an untrained model of a config; :class:`LSTMLanguageModel`, the recurrent baseline.
* :func:`save_language_model` / :func:`load_language_model`: weights, config and tokenizer in one safetensors file.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from torch import Tensor, nn

from . import checks
from .bpe import BPETokenizer
from .modern_block import ModernDecoderLM
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

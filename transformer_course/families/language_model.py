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

from .. import checks
from ..text.bpe import BPETokenizer
from ..utils import rename_weights
from .decoder_lm import DecoderLM, gpt2_block_config, llama_block_config

STYLES = ("gpt2", "llama")
# the model notebook 15 loads: trained in the shell with the lm task (the command is in its extra metadata)
SHIPPED_LANGUAGE_MODEL = Path(__file__).resolve().parent.parent / "trained_models" / "gpt_stdlib.safetensors"

# benchmark section 8 as the package ships it (benchmarks/ is not installed): notebook 15's recipe against nanoGPT's
ANCHOR_COMPARISON = SHIPPED_LANGUAGE_MODEL.parent / "anchor_comparison.json"

RENAMED_WEIGHTS = {"embedding.": "token_embedding.embedding."}
"""Old name prefix -> new name prefix of weights renamed since language models were first saved (files written by
the LLaMA-style model class that :class:`~transformer_course.families.decoder_lm.DecoderLM` replaced)."""


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


def build_language_model(config: LMConfig, vocab_size: int) -> DecoderLM:
    """An untrained :class:`~transformer_course.families.decoder_lm.DecoderLM` of ``config``'s style, its block from
    :func:`~transformer_course.families.decoder_lm.gpt2_block_config` or
    :func:`~transformer_course.families.decoder_lm.llama_block_config`: ids (batch, len <= context) -> logits
    (batch, len, vocab_size).

    Both tie the output layer to the token embedding, whose rows start at a standard deviation of 1/sqrt(d_model),
    so an untrained model predicts close to uniformly. The GPT-2 style's blocks start Xavier-uniform (as notebook
    11's GPT); the LLaMA style's keep PyTorch's default ``nn.Linear`` init, the recipe of the shipped model.
    """
    checks.positive_int("vocab_size", vocab_size)
    c = config
    if c.style == "gpt2":
        block = gpt2_block_config(c.d_model, c.num_heads, c.d_ff, dropout=c.dropout, max_len=c.context)
    else:
        block = llama_block_config(c.d_model, c.num_heads, c.num_kv_heads, c.d_ff, max_len=c.context, dropout=c.dropout)
    # the LLaMA style keeps PyTorch's default init in its blocks: the recipe the shipped model was trained with
    return DecoderLM(block, vocab_size, c.num_layers, xavier=c.style == "gpt2")


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


def load_language_model(path: str | os.PathLike) -> tuple[DecoderLM, BPETokenizer, LMConfig, dict]:
    """The model (in eval mode), tokenizer, config and ``extra`` saved by :func:`save_language_model`.

    Weights under old names (:data:`RENAMED_WEIGHTS`) load under the new ones. A missing, truncated or garbled
    file, or one whose weights do not fit its config, raises ``ValueError`` saying which.
    """
    from safetensors import safe_open
    from safetensors.torch import load_file

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no language-model file at {os.fspath(path)!r}")
    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = handle.metadata() or {}
        weights = load_file(str(path))
    except Exception as error:  # safetensors raises its own error types for truncated or garbled files
        raise ValueError(f"{os.fspath(path)!r} is not a readable safetensors file ({error})") from error
    if metadata.get("format") != "transformer-course language model":
        raise ValueError(f"{os.fspath(path)!r} is not a language model saved by save_language_model")
    try:
        config = LMConfig(**json.loads(metadata["lm_config"]))
        tokenizer = BPETokenizer(json.loads(metadata["tokens"]), [tuple(m) for m in json.loads(metadata["merges"])])
        extra = json.loads(metadata["extra"])
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{os.fspath(path)!r} has broken metadata ({type(error).__name__}: {error})") from error
    model = build_language_model(config, tokenizer.vocab_size)
    try:  # strict: every weight of the model from the file, no tensor left over, every shape right
        model.load_state_dict(rename_weights(RENAMED_WEIGHTS, weights, set(model.state_dict())))
    except RuntimeError as error:
        raise ValueError(f"the weights in {os.fspath(path)!r} do not fit its config ({error})") from error
    return model.eval(), tokenizer, config, extra


def load_shipped_language_model() -> tuple[DecoderLM, BPETokenizer, LMConfig, dict]:
    """The language model that ships with the package (:data:`SHIPPED_LANGUAGE_MODEL`), as
    :func:`load_language_model` returns it."""
    return load_language_model(SHIPPED_LANGUAGE_MODEL)


def load_anchor_comparison() -> dict:
    """Section 8 of benchmarks/results.json as shipped with the package (:data:`ANCHOR_COMPARISON`, written by
    ``python -m benchmarks.run --only 8``): ``"language_model"``, one row per recipe and wall-clock budget (held-out
    nats and bits per character, steps, throughput), and ``"language_model_notes"``, the caveats and how nanoGPT's own
    code was run."""
    return json.loads(ANCHOR_COMPARISON.read_text())

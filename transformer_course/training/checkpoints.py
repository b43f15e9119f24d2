"""Checkpoints: a trained :class:`~transformer_course.core.model.Transformer` in one safetensors file.

* :func:`save_checkpoint`: the weights (tied weights stored once), with the model config, both vocabularies
  and any JSON-serialisable ``extra`` in the file's metadata, so the file alone rebuilds the model.
* :func:`load_checkpoint`: rebuild the model (or fill a given one) and the vocabularies; a missing, corrupt or
  foreign file, or weights that do not fit, raise :class:`CheckpointError` saying which. Files from older
  versions of the package load too: config fields added since take their defaults, renamed ones are read by
  :meth:`TransformerConfig.from_dict <transformer_course.core.model.TransformerConfig.from_dict>` (``layer_norm_eps``,
  ``positional="rope"``), and the output projection's old name (``generator``) is read as ``output_projection``.
* :func:`load_shipped_checkpoint`: the trained date model that ships with the package
  (built by ``tools/build_checkpoints.py``), so every machine decodes with the same weights.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import torch

from ..core.model import Transformer, TransformerConfig
from ..language import tr
from ..text.tasks import Vocabulary
from ..utils import rename_weights

CHECKPOINT_FORMAT = "transformer-course-checkpoint/1"

RENAMED_WEIGHTS = {"generator.": "output_projection."}
"""Old name prefix -> new name prefix of weights renamed since checkpoints were first written."""


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
    """``"name: a vs b"`` for every field where the two configs differ (none for two equal configs, so none for
    a field an old checkpoint lacks and the other config leaves at its default); in Chinese ``"name a 与 b"``."""
    return [
        tr(
            f"{f.name}: {getattr(a, f.name)!r} vs {getattr(b, f.name)!r}",
            f"{f.name} {getattr(a, f.name)!r} 与 {getattr(b, f.name)!r}",
        )
        for f in fields(a)
        if getattr(a, f.name) != getattr(b, f.name)
    ]


def _load_weights(model: Transformer, path: Path, device: torch.device | str) -> None:
    """Load the file's tensors into ``model`` (old names renamed). Every weight of the model must come from the
    file, except those tied to one that does (stored once); extra tensors are an error."""
    from safetensors.torch import load_file

    own = model.state_dict()
    weights = rename_weights(RENAMED_WEIGHTS, load_file(str(path), device=str(device)), set(own))
    missing, unexpected = model.load_state_dict(weights, strict=False)
    loaded = {own[name].data_ptr() for name in weights if name in own}
    missing = [name for name in missing if own[name].data_ptr() not in loaded]  # tied to a loaded weight
    if missing or unexpected:
        raise RuntimeError(f"missing weights {sorted(missing)}, unexpected weights {sorted(unexpected)}")


def load_checkpoint(
    path: str | os.PathLike, model: Transformer | None = None, device: torch.device | str = "cpu"
) -> Checkpoint:
    """Rebuild a model from a checkpoint written by :func:`save_checkpoint`.

    With ``model`` given, its config must equal the saved one and the weights are loaded into it.
    Raises :class:`CheckpointError` (a ``ValueError``) for a missing, corrupt or foreign file, or for weights
    that do not fit the config, with a message saying which. Checkpoints written before a config field existed
    load with that field's default, old field names as :meth:`TransformerConfig.from_dict` reads them; weights
    named ``generator.*`` (the output projection's old name) load into ``output_projection.*``.
    """
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise CheckpointError(tr(f"no checkpoint file at {path}", f"{path} 处没有检查点文件"))
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
    except Exception as error:  # safetensors raises its own error types for truncated or garbled files
        raise CheckpointError(
            tr(
                f"{path} is not a readable safetensors checkpoint ({error})",
                f"{path} 不是可读的 safetensors 检查点 ({error})",  # " (": where a reader may cut the library's words
            )
        ) from error
    if metadata.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(
            f"{path} is a safetensors file but not a transformer-course checkpoint "
            f"(format {metadata.get('format')!r}, expected {CHECKPOINT_FORMAT!r})"
        )
    try:
        config = TransformerConfig.from_dict(json.loads(metadata["config"]))  # old names, missing fields: see there
        src_vocab = Vocabulary(json.loads(metadata["src_vocab"]))
        tgt_vocab = Vocabulary(json.loads(metadata["tgt_vocab"]))
        extra = json.loads(metadata.get("extra", "{}"))
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{path} has broken metadata ({type(error).__name__}: {error})") from error
    if model is None:
        model = Transformer(config)
    elif model.config != config:
        diff = tr("; ", "；").join(_config_differences(config, model.config))
        raise CheckpointError(
            tr(
                f"{path} was saved for a different model (checkpoint vs given: {diff})",
                f"{path} 是为另一个模型保存的（检查点与给定模型的差别：{diff}）",
            )
        )
    try:
        _load_weights(model, path, device)
    except Exception as error:
        raise CheckpointError(f"the weights in {path} do not fit its config ({error})") from error
    return Checkpoint(model.to(device).eval(), src_vocab, tgt_vocab, extra)


SHIPPED_CHECKPOINTS = Path(__file__).resolve().parent.parent / "trained_models"
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


__all__ = [
    "CHECKPOINT_FORMAT",
    "Checkpoint",
    "CheckpointError",
    "RENAMED_WEIGHTS",
    "SHIPPED_CHECKPOINTS",
    "load_checkpoint",
    "load_shipped_checkpoint",
    "save_checkpoint",
]

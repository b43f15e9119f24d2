"""The Vision Transformer (notebook 11): an image cut into patches by :func:`patchify`, each patch a token, a learned
``[CLS]`` token in front, learned positions, the package's encoder stack, a classifier on the ``[CLS]`` state.

Its siblings of notebook 11 live beside it: encoder-only BERT in :mod:`transformer_course.families.bert`, the
decoder-only GPT (:class:`~transformer_course.families.decoder_lm.DecoderLM` with
:func:`~transformer_course.families.decoder_lm.gpt2_block_config`) in :mod:`transformer_course.families.decoder_lm`.
Each takes a :class:`~transformer_course.core.layers.BlockConfig` for its layers, plus its own sizes.

The models here are plain ``nn.Module``: they train with :func:`transformer_course.training.trainers.train_steps`, and
:func:`transformer_course.core.attention.attention_maps` reads their attention weights. The T5-style
:class:`~transformer_course.text.tasks.TextToTextTask` lives with the other data sets.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .. import checks
from ..core.layers import BlockConfig
from ..core.model import Encoder
from ..core.positional import LearnedPositionalEncoding
from ..utils import xavier_init_

# --------------------------------------------------------------------------------------------------------
# Vision Transformer
# --------------------------------------------------------------------------------------------------------


def patchify(images: Tensor, patch_size: int) -> Tensor:
    """Cut images into non-overlapping square patches and flatten each one.

    images: (batch, height, width) or (batch, channels, height, width), height and width multiples of
    ``patch_size``. Returns (batch, num_patches, channels * patch_size**2); patches are numbered row by row
    (left to right, then top to bottom), and inside a patch the values are ordered channel, row, column.
    """
    checks.positive_int("patch_size", patch_size)
    if images.dim() == 3:
        images = images[:, None]
    if images.dim() != 4:
        raise ValueError(f"images must be (batch, H, W) or (batch, C, H, W), got shape {tuple(images.shape)}")
    batch, channels, height, width = images.shape
    if height % patch_size or width % patch_size:
        raise ValueError(f"image size {height}x{width} is not a multiple of patch_size={patch_size}")
    rows, cols = height // patch_size, width // patch_size
    x = images.reshape(batch, channels, rows, patch_size, cols, patch_size)
    x = x.permute(0, 2, 4, 1, 3, 5)  # (batch, rows, cols, channels, p, p)
    return x.reshape(batch, rows * cols, channels * patch_size * patch_size)


class VisionTransformer(nn.Module):
    """A small ViT: patches as tokens, a learned ``[CLS]`` token in front, learned positions, the package's
    :class:`~transformer_course.core.model.Encoder` of ``num_layers`` layers of ``config`` (the ViT paper's block is
    GPT-2's: Pre-LN, GELU, with a final LayerNorm; see
    :func:`~transformer_course.families.decoder_lm.gpt2_block_config`), and a linear classifier on the ``[CLS]`` state.

    ``forward(images)``: (batch, H, W) or (batch, C, H, W) -> class logits (batch, num_classes).
    """

    def __init__(
        self,
        config: BlockConfig,
        image_size: int,
        patch_size: int,
        num_classes: int,
        num_layers: int,
        channels: int = 1,
    ) -> None:
        super().__init__()
        if not isinstance(config, BlockConfig):
            raise ValueError(f"config must be a BlockConfig (e.g. gpt2_block_config(...)), got {config!r}")
        checks.positive_ints(image_size=image_size, patch_size=patch_size, num_classes=num_classes, channels=channels)
        checks.positive_int("num_layers", num_layers)
        if image_size % patch_size:
            raise ValueError(f"image_size={image_size} must be a multiple of patch_size={patch_size}")
        d_model = config.d_model
        self.image_size, self.patch_size, self.channels = image_size, patch_size, channels
        self.num_patches = (image_size // patch_size) ** 2
        self.patch_embedding = nn.Linear(channels * patch_size**2, d_model)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d_model))
        self.positional = LearnedPositionalEncoding(d_model, self.num_patches + 1, config.dropout)
        self.encoder = Encoder(num_layers, config)
        self.head = nn.Linear(d_model, num_classes)
        xavier_init_(self.encoder)
        nn.init.normal_(self.cls_token, std=0.02)

    def encode(self, images: Tensor) -> Tensor:
        """images -> hidden states (batch, 1 + num_patches, d_model); position 0 is the [CLS] token."""
        if images.dim() == 3:
            images = images[:, None]
        expected = (self.channels, self.image_size, self.image_size)
        if images.dim() != 4 or tuple(images.shape[1:]) != expected:
            raise ValueError(f"images must be (batch, {', '.join(map(str, expected))}), got {tuple(images.shape)}")
        tokens = self.patch_embedding(patchify(images, self.patch_size))  # (batch, num_patches, d_model)
        cls = self.cls_token.expand(tokens.shape[0], -1, -1)
        return self.encoder(self.positional(torch.cat([cls, tokens], dim=1)))

    def forward(self, images: Tensor) -> Tensor:
        """images: (batch, [C,] H, W) -> logits (batch, num_classes)."""
        return self.head(self.encode(images)[:, 0])


__all__ = ["VisionTransformer", "patchify"]

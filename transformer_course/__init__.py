"""transformer_course: the Transformer, built step by step. The notebooks build each piece in the open and
check it against this package; later notebooks import it from here."""

from .core.attention import MultiHeadAttention, scaled_dot_product_attention
from .core.layers import BlockConfig, DecoderLayer, EncoderLayer, FeedForward, Residual, SwiGLUFeedForward
from .core.masks import causal_mask, combine_masks, decoder_self_mask, padding_mask, to_torch_blocking_mask
from .core.model import PRESETS, Decoder, Encoder, Transformer, TransformerConfig
from .core.norms import RMSNorm
from .core.positional import (
    LearnedPositionalEncoding,
    SinusoidalPositionalEncoding,
    TokenEmbedding,
    sinusoidal_table,
)
from .utils import count_parameters, get_device, seed_everything

__version__ = "0.1.0"

__all__ = [
    "PRESETS",
    "BlockConfig",
    "RMSNorm",
    "SwiGLUFeedForward",
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "FeedForward",
    "LearnedPositionalEncoding",
    "MultiHeadAttention",
    "Residual",
    "SinusoidalPositionalEncoding",
    "TokenEmbedding",
    "Transformer",
    "TransformerConfig",
    "causal_mask",
    "combine_masks",
    "count_parameters",
    "decoder_self_mask",
    "get_device",
    "padding_mask",
    "scaled_dot_product_attention",
    "seed_everything",
    "sinusoidal_table",
    "to_torch_blocking_mask",
]

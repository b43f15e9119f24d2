"""transformer_course: the Transformer, built step by step. The notebooks build each piece in the open and
check it against this package; later notebooks import it from here.

Its folders follow the course: ``prelude`` (RNNs, word2vec: 01-02), ``core`` (masks, attention, positions, norms,
layers, the model, decoding: 03-10), ``efficient`` (cheaper attention: 12-13), ``text`` (tasks, corpus, tokenizers,
language-model data), ``training`` (the one loop and what it needs: 09, 11, 15) and ``families`` (BERT, ViT, the
decoder-only language model in its GPT-2 and LLaMA styles, the pre-trained encoder: 11-15). The notebooks' everyday
helpers (``utils``, ``viz``, ``claims``, ``timing``, ``memory_tracker``, ``exercises``) sit at the top. The names
below are the most used ones of ``core``."""

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

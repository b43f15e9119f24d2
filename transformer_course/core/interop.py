"""Copy weights between the course's modules and PyTorch's, so that the two can be compared number for number.

PyTorch packs W_Q, W_K, W_V into one ``in_proj_weight`` (3 d_model, d_model); ours keeps them apart. PyTorch's
masks use the opposite convention (``True`` = blocked); see
:func:`transformer_course.core.masks.to_torch_blocking_mask`.

Every PyTorch module made here is ``batch_first=True`` and starts in the same train/eval mode as the source.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import MultiHeadAttention
from .layers import BlockConfig, DecoderLayer, EncoderLayer
from .model import Transformer

_PROJECTIONS = ("w_q", "w_k", "w_v")


def _mha_to_torch_state(state: dict[str, Tensor], ours: str, theirs: str) -> dict[str, Tensor]:
    out = {f"{theirs}in_proj_weight": torch.cat([state[f"{ours}{w}.weight"] for w in _PROJECTIONS])}
    if f"{ours}w_q.bias" in state:
        out[f"{theirs}in_proj_bias"] = torch.cat([state[f"{ours}{w}.bias"] for w in _PROJECTIONS])
        out[f"{theirs}out_proj.bias"] = state[f"{ours}w_o.bias"]
    out[f"{theirs}out_proj.weight"] = state[f"{ours}w_o.weight"]
    return out


def _mha_from_torch_state(state: dict[str, Tensor], theirs: str, ours: str) -> dict[str, Tensor]:
    out = dict(zip((f"{ours}{w}.weight" for w in _PROJECTIONS), state[f"{theirs}in_proj_weight"].chunk(3)))
    if f"{theirs}in_proj_bias" in state:
        out.update(zip((f"{ours}{w}.bias" for w in _PROJECTIONS), state[f"{theirs}in_proj_bias"].chunk(3)))
        out[f"{ours}w_o.bias"] = state[f"{theirs}out_proj.bias"]
    out[f"{ours}w_o.weight"] = state[f"{theirs}out_proj.weight"]
    return out


# Our name -> PyTorch's name, for everything but the attention projections.
_ENCODER_NAMES = {
    "feed_forward.linear1.": "linear1.",
    "feed_forward.linear2.": "linear2.",
    "self_attention_residual.norm.": "norm1.",
    "feed_forward_residual.norm.": "norm2.",
}
_ENCODER_ATTENTION = {"self_attention.": "self_attn."}
_DECODER_NAMES = {
    "feed_forward.linear1.": "linear1.",
    "feed_forward.linear2.": "linear2.",
    "self_attention_residual.norm.": "norm1.",
    "cross_attention_residual.norm.": "norm2.",
    "feed_forward_residual.norm.": "norm3.",
}
_DECODER_ATTENTION = {"self_attention.": "self_attn.", "cross_attention.": "multihead_attn."}


def _layer_to_torch_state(
    state: dict[str, Tensor], names: dict[str, str], attention: dict[str, str], ours: str = "", theirs: str = ""
) -> dict[str, Tensor]:
    out: dict[str, Tensor] = {}
    for our_att, their_att in attention.items():
        out.update(_mha_to_torch_state(state, ours + our_att, theirs + their_att))
    for key, value in state.items():
        for our_name, their_name in names.items():
            if key.startswith(ours + our_name):
                out[theirs + their_name + key[len(ours + our_name) :]] = value
    return out


def _layer_from_torch_state(
    state: dict[str, Tensor], names: dict[str, str], attention: dict[str, str], theirs: str = "", ours: str = ""
) -> dict[str, Tensor]:
    out: dict[str, Tensor] = {}
    for our_att, their_att in attention.items():
        out.update(_mha_from_torch_state(state, theirs + their_att, ours + our_att))
    for key, value in state.items():
        for our_name, their_name in names.items():
            if key.startswith(theirs + their_name):
                out[ours + our_name + key[len(theirs + their_name) :]] = value
    return out


def _activation_name(layer: nn.Module) -> str:
    activation = layer.activation
    if activation is F.relu or isinstance(activation, nn.ReLU):
        return "relu"
    if activation is F.gelu or (isinstance(activation, nn.GELU) and activation.approximate == "none"):
        return "gelu"
    raise ValueError(f"unsupported activation {activation!r}; expected ReLU or exact GELU")


def _check_batch_first(module: nn.Module) -> None:
    batch_first = getattr(module, "batch_first", None)
    if batch_first is None:
        batch_first = module.self_attn.batch_first
    if not batch_first:
        raise ValueError("the PyTorch module must be built with batch_first=True (the course is batch-first)")


# ---- multi-head attention ----------------------------------------------------------------------------


def mha_to_torch(mha: MultiHeadAttention) -> nn.MultiheadAttention:
    """A ``nn.MultiheadAttention(batch_first=True)`` with our module's weights (plain multi-head attention only:
    PyTorch's module has no rotary positions and as many K/V heads as query heads)."""
    if mha.rope is not None or mha.num_kv_heads != mha.num_heads or mha.d_k * mha.num_heads != mha.d_model:
        raise ValueError(
            "nn.MultiheadAttention has no rope, num_kv_heads < num_heads or head_dim * num_heads != d_model; got "
            f"rope={mha.rope is not None}, num_kv_heads={mha.num_kv_heads}, num_heads={mha.num_heads}, "
            f"head_dim={mha.d_k}, d_model={mha.d_model}"
        )
    bias = mha.w_q.bias is not None
    theirs = nn.MultiheadAttention(mha.d_model, mha.num_heads, dropout=mha.dropout, bias=bias, batch_first=True)
    theirs.load_state_dict(_mha_to_torch_state(mha.state_dict(), "", ""))
    return theirs.train(mha.training).to(mha.w_q.weight.device)


def mha_from_torch(theirs: nn.MultiheadAttention) -> MultiHeadAttention:
    """Our :class:`MultiHeadAttention` with the weights of a ``nn.MultiheadAttention`` (same dims for Q, K, V)."""
    if not theirs._qkv_same_embed_dim:
        raise ValueError("only nn.MultiheadAttention with kdim == vdim == embed_dim can be copied")
    ours = MultiHeadAttention(theirs.embed_dim, theirs.num_heads, theirs.dropout, bias=theirs.in_proj_bias is not None)
    ours.load_state_dict(_mha_from_torch_state(theirs.state_dict(), "", ""))
    return ours.train(theirs.training).to(theirs.in_proj_weight.device)


# ---- encoder and decoder layers ---------------------------------------------------------------------


def _check_torch_has(config: BlockConfig) -> None:
    """PyTorch's layers have LayerNorm, ReLU/GELU, biases, as many K/V heads as query heads and no RoPE."""
    differences = {
        "norm": (config.norm, "layer"),
        "activation": (config.activation, ("relu", "gelu")),
        "num_kv_heads": (config.num_kv_heads, (None, config.num_heads)),
        "rope": (config.rope, False),
        "bias": (config.bias, True),
    }
    for name, (value, allowed) in differences.items():
        if value not in (allowed if isinstance(allowed, tuple) else (allowed,)):
            raise ValueError(f"PyTorch's Transformer layers have no {name}={value!r} (they allow {allowed!r})")


def _layer_to_torch(layer: EncoderLayer | DecoderLayer, torch_cls: type, names: dict, attention: dict) -> nn.Module:
    _check_torch_has(layer.config)
    mha, ff, norm = layer.self_attention, layer.feed_forward, layer.self_attention_residual
    theirs = torch_cls(
        mha.d_model,
        mha.num_heads,
        ff.linear1.out_features,
        dropout=ff.dropout.p,
        activation=ff.activation,
        layer_norm_eps=norm.norm.eps,
        batch_first=True,
        norm_first=norm.norm_first,
    )
    theirs.load_state_dict(_layer_to_torch_state(layer.state_dict(), names, attention))
    return theirs.train(layer.training).to(mha.w_q.weight.device)


def _layer_from_torch(theirs: nn.Module, our_cls: type, names: dict, attention: dict) -> EncoderLayer | DecoderLayer:
    _check_batch_first(theirs)
    if theirs.linear1.bias is None:
        raise ValueError(
            "the PyTorch layer was built with bias=False, which also drops its LayerNorm biases; the course's "
            "layers keep the norms' biases (BlockConfig.bias=False removes only those of the linear maps)"
        )
    ours = our_cls(
        d_model=theirs.self_attn.embed_dim,
        num_heads=theirs.self_attn.num_heads,
        d_ff=theirs.linear1.out_features,
        dropout=theirs.dropout.p,
        activation=_activation_name(theirs),
        norm_first=theirs.norm_first,
        norm_eps=theirs.norm1.eps,
    )
    ours.load_state_dict(_layer_from_torch_state(theirs.state_dict(), names, attention))
    return ours.train(theirs.training).to(theirs.linear1.weight.device)


def encoder_layer_to_torch(layer: EncoderLayer) -> nn.TransformerEncoderLayer:
    """A ``nn.TransformerEncoderLayer(batch_first=True)`` with our layer's weights and settings."""
    return _layer_to_torch(layer, nn.TransformerEncoderLayer, _ENCODER_NAMES, _ENCODER_ATTENTION)


def encoder_layer_from_torch(theirs: nn.TransformerEncoderLayer) -> EncoderLayer:
    """Our :class:`EncoderLayer` with the weights and settings of a ``nn.TransformerEncoderLayer``."""
    return _layer_from_torch(theirs, EncoderLayer, _ENCODER_NAMES, _ENCODER_ATTENTION)


def decoder_layer_to_torch(layer: DecoderLayer) -> nn.TransformerDecoderLayer:
    """A ``nn.TransformerDecoderLayer(batch_first=True)`` with our layer's weights and settings."""
    return _layer_to_torch(layer, nn.TransformerDecoderLayer, _DECODER_NAMES, _DECODER_ATTENTION)


def decoder_layer_from_torch(theirs: nn.TransformerDecoderLayer) -> DecoderLayer:
    """Our :class:`DecoderLayer` with the weights and settings of a ``nn.TransformerDecoderLayer``."""
    return _layer_from_torch(theirs, DecoderLayer, _DECODER_NAMES, _DECODER_ATTENTION)


# ---- the whole model ---------------------------------------------------------------------------------


def _stacks_state(state: dict[str, Tensor], num_encoder: int, num_decoder: int, to_torch: bool) -> dict[str, Tensor]:
    """Translate the encoder and decoder stacks' weights between our names and nn.Transformer's."""
    convert = _layer_to_torch_state if to_torch else _layer_from_torch_state
    out: dict[str, Tensor] = {}
    for stack, count, names, attention in (
        ("encoder", num_encoder, _ENCODER_NAMES, _ENCODER_ATTENTION),
        ("decoder", num_decoder, _DECODER_NAMES, _DECODER_ATTENTION),
    ):
        for i in range(count):
            prefix = f"{stack}.layers.{i}."
            out.update(convert(state, names, attention, prefix, prefix))
        for p in ("weight", "bias"):  # the optional final LayerNorm has the same name on both sides
            if f"{stack}.norm.{p}" in state:
                out[f"{stack}.norm.{p}"] = state[f"{stack}.norm.{p}"]
    return out


def transformer_to_torch(model: Transformer) -> nn.Transformer:
    """A ``nn.Transformer(batch_first=True)`` holding our encoder and decoder stacks' weights.

    ``nn.Transformer`` has no embeddings or output layer: feed it our embedded inputs, e.g.
    ``model.positional(model.src_embedding(src))``, and compare with ``model.encoder``/``model.decoder``.
    Where our model has no final LayerNorm (Post-LN, the paper's default), the PyTorch stack's is removed.
    """
    c = model.config
    _check_torch_has(c.block)
    with warnings.catch_warnings():
        # PyTorch warns that its nested-tensor fast path is off for Pre-LN; that changes speed, not results
        warnings.filterwarnings("ignore", message="enable_nested_tensor is True")
        theirs = nn.Transformer(
            c.d_model,
            c.num_heads,
            c.num_encoder_layers,
            c.num_decoder_layers,
            c.d_ff,
            c.dropout,
            activation=c.activation,
            layer_norm_eps=c.norm_eps,
            batch_first=True,
            norm_first=c.norm_first,
        )
    # PyTorch's nested-tensor fast path returns zeros at padded positions (ours computes them) and warns; off
    theirs.encoder.use_nested_tensor = False
    if model.encoder.norm is None:
        theirs.encoder.norm = None
    if model.decoder.norm is None:
        theirs.decoder.norm = None
    theirs.load_state_dict(_stacks_state(model.state_dict(), c.num_encoder_layers, c.num_decoder_layers, to_torch=True))
    return theirs.train(model.training).to(model.output_projection.weight.device)


def load_torch_transformer(model: Transformer, theirs: nn.Transformer) -> Transformer:
    """Copy the stacks of a ``nn.Transformer`` into our ``model`` (in place; embeddings and output layer are
    left alone). The two must have the same sizes; returns ``model``."""
    _check_batch_first(theirs.encoder.layers[0])
    layer = theirs.encoder.layers[0] if len(theirs.encoder.layers) else theirs.decoder.layers[0]
    c = model.config
    settings = {
        "norm_first": (c.norm_first, layer.norm_first),
        "activation": (c.activation, _activation_name(layer)),
        "norm_eps": (c.norm_eps, layer.norm1.eps),
    }
    for name, (ours_value, theirs_value) in settings.items():
        if ours_value != theirs_value:
            raise ValueError(f"the two models differ in {name}: ours {ours_value!r}, theirs {theirs_value!r}")
    out = _stacks_state(theirs.state_dict(), len(theirs.encoder.layers), len(theirs.decoder.layers), to_torch=False)
    ours_stacks = {k: v for k, v in model.state_dict().items() if k.startswith(("encoder.", "decoder."))}
    missing = sorted(set(ours_stacks) - set(out))
    extra = sorted(set(out) - set(ours_stacks))
    if missing or extra:
        raise ValueError(f"the two models differ in structure: missing {missing[:3]}, unexpected {extra[:3]}")
    for key, value in out.items():
        if ours_stacks[key].shape != value.shape:
            ours_shape, their_shape = tuple(ours_stacks[key].shape), tuple(value.shape)
            raise ValueError(f"shape mismatch at {key}: ours {ours_shape}, theirs {their_shape}")
    model.load_state_dict(out, strict=False)
    return model

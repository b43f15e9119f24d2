"""Normalisation, written out: LayerNorm as a plain function, and RMSNorm (the LayerNorm of LLaMA-style models).

Both normalise each position's vector on its own, over the last dimension (the features). Nothing is shared
between positions or between the sequences of a batch, which is why padding cannot move their statistics
(unlike BatchNorm, which averages over the batch and the positions).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .. import checks


def _check_eps(eps: float) -> None:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0:
        raise ValueError(f"eps must be a positive number (it keeps the division finite), got {eps!r}")


def _check_affine(x: Tensor, name: str, param: Tensor | None) -> None:
    if param is not None and tuple(param.shape) != (x.shape[-1],):
        raise ValueError(
            f"{name} must have shape ({x.shape[-1]},) to match x's last dimension, got {tuple(param.shape)}"
        )


def layer_norm(x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """LayerNorm over the last dimension: (x - mean) / sqrt(var + eps) * weight + bias.

    x: (..., d); weight, bias: (d,) or None (no scale / no shift). The variance is the biased one (divide by d,
    not d - 1), as in ``nn.LayerNorm``. Returns (..., d).
    """
    _check_eps(eps)
    if x.dim() < 1:
        raise ValueError("x must have at least one dimension (the features), got a 0-d tensor")
    _check_affine(x, "weight", weight)
    _check_affine(x, "bias", bias)
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    var = (x - mean).pow(2).mean(dim=-1, keepdim=True)  # (..., 1), biased
    out = (x - mean) / torch.sqrt(var + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def rms_norm(x: Tensor, weight: Tensor | None = None, eps: float = 1e-6) -> Tensor:
    """RMSNorm over the last dimension: x / sqrt(mean(x^2) + eps) * weight.

    No mean is subtracted and there is no bias: it rescales each vector to root-mean-square 1, nothing else.
    x: (..., d); weight: (d,) or None. Returns (..., d).
    """
    _check_eps(eps)
    if x.dim() < 1:
        raise ValueError("x must have at least one dimension (the features), got a 0-d tensor")
    _check_affine(x, "weight", weight)
    out = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    return out if weight is None else out * weight


class RMSNorm(nn.Module):
    """Root-mean-square normalisation (Zhang & Sennrich, 2019) with a learned per-feature scale.

    x: (..., d_model) -> (..., d_model). Equals ``torch.nn.RMSNorm(d_model, eps=eps)`` (PyTorch >= 2.4).
    """

    def __init__(self, d_model: int, eps: float = 1e-6) -> None:
        super().__init__()
        checks.positive_int("d_model", d_model)
        _check_eps(eps)
        self.d_model = d_model
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: Tensor) -> Tensor:
        """x: (..., d_model) -> (..., d_model)."""
        if x.dim() < 1 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (..., d_model={self.d_model}), got {tuple(x.shape)}")
        return rms_norm(x, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.d_model}, eps={self.eps}"


NORMS = ("layer", "rms")


def make_norm(kind: str, d_model: int, eps: float = 1e-5) -> nn.Module:
    """``"layer"``: ``nn.LayerNorm(d_model, eps)`` (the paper); ``"rms"``: :class:`RMSNorm` (LLaMA-style models)."""
    if kind not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {kind!r}")
    return nn.LayerNorm(d_model, eps=eps) if kind == "layer" else RMSNorm(d_model, eps)

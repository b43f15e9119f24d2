"""Position schemes of modern decoders: rotary embeddings (RoPE) and attention with linear biases (ALiBi).

Both act inside attention instead of being added to the token embeddings:

- RoPE (Su et al., 2021) turns each pair of dimensions of a query or key at position ``m`` by the angle
  ``m * omega_i`` (the same angles as the sinusoidal table of notebook 03). A dot product of two rotated vectors
  then depends on the positions only through their difference: ``R_m q . R_n k = q . R_(n-m) k``.
- ALiBi (Press et al., 2022) adds ``-slope_h * |i - j|`` to the attention score of query ``i`` and key ``j``, with one
  fixed slope per head: no parameters, and nothing is added to the embeddings.

Two layouts of the rotated pairs are in use. ``interleaved=True`` pairs dimensions (0, 1), (2, 3), ... as in the
RoFormer paper and Meta's original LLaMA code; ``interleaved=False`` pairs dimension i with i + head_dim/2 (the
"rotate half" layout of Hugging Face's LLaMA). They give the same attention scores once the columns of W_Q and W_K
are permuted to match.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .. import checks


def _check_head_dim(head_dim: int) -> None:
    if not isinstance(head_dim, int) or head_dim < 2 or head_dim % 2:
        raise ValueError(f"head_dim must be a positive even int (dimensions are rotated in pairs), got {head_dim!r}")


def _check_base(base: float) -> None:
    if not isinstance(base, (int, float)) or not base > 1:
        raise ValueError(f"base must be a number > 1, got {base!r}")


def rope_frequencies(head_dim: int, base: float = 10000.0) -> Tensor:
    """omega_i = base^(-2i / head_dim) for i = 0 .. head_dim/2 - 1, in float64; returns (head_dim // 2,).

    These are the frequencies of the sinusoidal encoding (notebook 03) with d_model replaced by head_dim.
    """
    _check_head_dim(head_dim)
    _check_base(base)
    return torch.exp(torch.arange(0, head_dim, 2, dtype=torch.float64) * (-math.log(base) / head_dim))


def rope_cos_sin(positions: Tensor, head_dim: int, base: float = 10000.0) -> tuple[Tensor, Tensor]:
    """cos and sin of the rotation angles ``positions[m] * omega_i``.

    positions: (len,) integer or float positions. Returns (cos, sin), each (len, head_dim // 2), float64 (cast them
    to the dtype of the vectors they turn): in float32 the angle of position 100000 would lose two decimal places.
    """
    if positions.dim() != 1:
        raise ValueError(f"positions must be a 1-D tensor (len,), got shape {tuple(positions.shape)}")
    angle = positions.to(torch.float64)[:, None] * rope_frequencies(head_dim, base).to(positions.device)
    return torch.cos(angle), torch.sin(angle)


def rotate_pairs(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool = True) -> Tensor:
    """Rotate each pair (a, b) of the last dimension of x to (a cos - b sin, a sin + b cos).

    x: (..., len, head_dim); cos, sin: (len, head_dim // 2), broadcast over the leading dimensions.
    Returns a tensor of x's shape and dtype.
    """
    half = x.shape[-1] // 2
    if x.shape[-1] % 2 or tuple(cos.shape) != (x.shape[-2], half) or cos.shape != sin.shape:
        raise ValueError(
            f"x (..., len, head_dim) = {tuple(x.shape)} needs an even head_dim and cos, sin of shape "
            f"(len, head_dim/2) = ({x.shape[-2]}, {half}); got {tuple(cos.shape)} and {tuple(sin.shape)}"
        )
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]  # (..., len, head_dim/2) each: the pairs (0, 1), (2, 3), ...
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
    a, b = x[..., :half], x[..., half:]  # the pairs (i, i + head_dim/2)
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


def apply_rope(x: Tensor, positions: Tensor | None = None, base: float = 10000.0, interleaved: bool = True) -> Tensor:
    """Rotary position embedding of queries or keys.

    x: (..., len, head_dim), usually (batch, heads, len, head_dim); positions: (len,), default 0 .. len - 1.
    Returns x with the pair i of the vector at position m turned by the angle m * omega_i; same shape as x.
    """
    if x.dim() < 2:
        raise ValueError(f"x must have shape (..., len, head_dim), got {tuple(x.shape)}")
    _check_head_dim(x.shape[-1])
    if positions is None:
        positions = torch.arange(x.shape[-2], device=x.device)
    if positions.shape != (x.shape[-2],):
        raise ValueError(f"positions must have shape (len,) = ({x.shape[-2]},), got {tuple(positions.shape)}")
    cos, sin = rope_cos_sin(positions, x.shape[-1], base)
    return rotate_pairs(x, cos, sin, interleaved)


def rope_matrix(position: int | float, head_dim: int, base: float = 10000.0, interleaved: bool = True) -> Tensor:
    """The rotation R_position as a (head_dim, head_dim) matrix (float64), so that apply_rope(x) = x @ R^T.

    Block-diagonal with 2 x 2 rotations [[cos, -sin], [sin, cos]] by position * omega_i; for teaching and tests, the
    model never builds it.
    """
    angle = position * rope_frequencies(head_dim, base)
    cos, sin = torch.cos(angle), torch.sin(angle)
    blocks = torch.stack([torch.stack([cos, -sin], -1), torch.stack([sin, cos], -1)], -2)  # (head_dim/2, 2, 2)
    matrix = torch.block_diag(*blocks)
    if interleaved:
        return matrix
    order = torch.stack([torch.arange(head_dim // 2), torch.arange(head_dim // 2) + head_dim // 2], -1).flatten()
    permute = torch.eye(head_dim, dtype=torch.float64)[order]  # row 2i picks dim i, row 2i+1 picks dim i + half
    return permute.T @ matrix @ permute


class RotaryEmbedding(nn.Module):
    """RoPE with its cos/sin tables computed once, for positions 0 .. max_len - 1. No parameters.

    ``forward(x, offset)`` rotates x: (..., len, head_dim) as if its rows sat at positions offset .. offset + len - 1
    (the offset is the number of cached positions during incremental decoding). Returns x's shape.
    """

    def __init__(self, head_dim: int, max_len: int = 4096, base: float = 10000.0, interleaved: bool = True) -> None:
        super().__init__()
        _check_head_dim(head_dim)
        _check_base(base)
        checks.positive_int("max_len", max_len)
        self.head_dim = head_dim
        self.max_len = max_len
        self.base = base
        self.interleaved = interleaved
        cos, sin = rope_cos_sin(torch.arange(max_len), head_dim, base)
        self.register_buffer("cos", cos.float(), persistent=False)  # (max_len, head_dim/2)
        self.register_buffer("sin", sin.float(), persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """x: (..., len, head_dim) -> (..., len, head_dim), positions offset .. offset + len - 1."""
        if x.dim() < 2 or x.shape[-1] != self.head_dim:
            raise ValueError(f"x must have shape (..., len, head_dim={self.head_dim}), got {tuple(x.shape)}")
        checks.non_negative_int("offset", offset)
        end = offset + x.shape[-2]
        if end > self.max_len:
            raise ValueError(
                f"positions {offset}..{end - 1} exceed max_len={self.max_len}; build RotaryEmbedding with a larger "
                "max_len (RoPE itself works at any position)"
            )
        return rotate_pairs(x, self.cos[offset:end], self.sin[offset:end], self.interleaved)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, max_len={self.max_len}, base={self.base}, interleaved={self.interleaved}"


def alibi_slopes(num_heads: int) -> Tensor:
    """ALiBi's fixed slope per head; returns (num_heads,) float32.

    For a power of two n: 2^(-8/n), 2^(-16/n), ..., 2^(-8) (a geometric sequence). Otherwise the paper takes the
    slopes of the largest power of two p below n, then every other slope of the sequence for 2p until it has n.
    """
    checks.positive_int("num_heads", num_heads)

    def geometric(n: int) -> Tensor:
        return torch.pow(2.0, -8.0 * torch.arange(1, n + 1, dtype=torch.float64) / n)

    power = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = geometric(power)
    if power < num_heads:
        slopes = torch.cat([slopes, geometric(2 * power)[0::2][: num_heads - power]])
    return slopes.float()


def alibi_bias(
    num_heads: int, len_q: int, len_k: int | None = None, device: torch.device | str | None = None
) -> Tensor:
    """The additive ALiBi bias -slope_h * |i - j|, (num_heads, len_q, len_k), float32.

    Queries are the last len_q of the len_k positions (as during incremental decoding, where len_q < len_k), so
    query row i sits at position i + len_k - len_q. Add it to the scores before the softmax, together with a causal
    mask for a decoder; F.scaled_dot_product_attention accepts it as a float ``attn_mask``.
    """
    len_k = len_q if len_k is None else len_k
    for name, value in (("len_q", len_q), ("len_k", len_k)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if len_q > len_k:
        raise ValueError(f"len_q ({len_q}) must not exceed len_k ({len_k}): queries are the last len_q positions")
    query_pos = torch.arange(len_k - len_q, len_k, device=device)[:, None]
    key_pos = torch.arange(len_k, device=device)[None, :]
    distance = (query_pos - key_pos).abs().float()  # (len_q, len_k)
    return -alibi_slopes(num_heads).to(device)[:, None, None] * distance

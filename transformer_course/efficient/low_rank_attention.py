"""Attention in O(n) through a low-rank stand-in for the n x n weights: Linformer and Performer.

- Linformer (Wang et al., 2020): project the n keys and values down to k rows with learned (k, n) matrices E and F,
  O(n k). Exact when the attention matrix has rank at most k along the directions E and F keep.
- Performer, FAVOR+ (Choromanski et al., 2021): replace exp(q . k) by a dot product of positive random features
  phi(q) . phi(k), then use associativity, phi(Q) (phi(K)^T V), O(n m d) for m features. Approximate; the error
  falls as m grows.

Tensors are (..., len, head_dim), usually (batch, heads, len, head_dim).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .. import checks
from ..core.attention import MultiHeadAttention, scaled_dot_product_attention


# ------------------------------------------------------------------------------------------------------ Linformer
def linformer_attention(q: Tensor, k: Tensor, v: Tensor, e: Tensor, f: Tensor | None = None) -> Tensor:
    """softmax(Q (E K)^T / sqrt(d)) (F V): the n keys and values are mixed down to proj_len rows first.

    q: (..., n_q, d); k, v: (..., n, d); e, f: (proj_len, n) (f defaults to e, shared). Returns (..., n_q, d_v).
    Cost O(n_q proj_len d). With proj_len = n and E = F = identity it is exactly full attention.
    """
    checks.qkv(q, k, v)
    f = e if f is None else f
    n = k.shape[-2]
    for name, p in (("e", e), ("f", f)):
        if p.dim() != 2 or p.shape[1] != n:
            raise ValueError(f"{name} must have shape (proj_len, n={n}), got {tuple(p.shape)}")
    if e.shape != f.shape:
        raise ValueError(f"e and f must have the same shape, got {tuple(e.shape)} and {tuple(f.shape)}")
    out, _ = scaled_dot_product_attention(q, e @ k, f @ v)  # (proj_len, n) @ (..., n, d) -> (..., proj_len, d)
    return out


class LinformerSelfAttention(MultiHeadAttention):
    """Multi-head self-attention whose keys and values are projected from length n to proj_len (Wang et al., 2020).

    x: (batch, n, d_model) with n <= seq_len -> (batch, n, d_model). The projections W_Q, W_K, W_V, W_O (with
    biases) and the heads are those of :class:`~transformer_course.core.attention.MultiHeadAttention`; Linformer adds
    E and F, learned (proj_len, seq_len) matrices shared by the heads (a shorter input uses their first n columns). No
    mask: the projection mixes all positions, so Linformer suits encoders, not causal decoders.
    """

    def __init__(
        self, d_model: int, num_heads: int, seq_len: int, proj_len: int, share_projection: bool = False
    ) -> None:
        checks.positive_ints(d_model=d_model, num_heads=num_heads, seq_len=seq_len, proj_len=proj_len)
        super().__init__(d_model, num_heads)
        self.seq_len, self.proj_len = seq_len, proj_len
        # N(0, 1/proj_len): a random projection that keeps lengths on average (Johnson-Lindenstrauss)
        self.e = nn.Parameter(torch.randn(proj_len, seq_len) / math.sqrt(proj_len))
        self.f = self.e if share_projection else nn.Parameter(torch.randn(proj_len, seq_len) / math.sqrt(proj_len))

    def forward(self, x: Tensor) -> Tensor:  # type: ignore[override]
        """x: (batch, n, d_model), n <= seq_len -> (batch, n, d_model)."""
        checks.sequence("x", x, self.d_model)
        n = x.shape[1]
        if n > self.seq_len:
            raise ValueError(f"sequence length {n} exceeds the projection's seq_len={self.seq_len}")
        q = self.split_heads(self.w_q(x))  # (batch, heads, n, d_k)
        k = self.e[:, :n] @ self.split_heads(self.w_k(x))  # (proj_len, n) @ (batch, heads, n, d_k): proj_len rows
        v = self.f[:, :n] @ self.split_heads(self.w_v(x))
        out, weights = self._attend(q, k, v, None)  # weights (batch, heads, n, proj_len)
        self.attention_weights = None if weights is None else weights.detach()
        return self.w_o(self.merge_heads(out))

    def extra_repr(self) -> str:
        shared = ", shared E = F" if self.e is self.f else ""
        return f"{super().extra_repr()}, seq_len={self.seq_len}, proj_len={self.proj_len}{shared}"


# ----------------------------------------------------------------------------------------------------- Performer
def orthogonal_random_features(
    num_features: int, head_dim: int, generator: torch.Generator | None = None, orthogonal: bool = True
) -> Tensor:
    """Random projection directions omega: (num_features, head_dim), each row ~ N(0, I) in distribution.

    With ``orthogonal=True`` (FAVOR+), rows come in blocks of head_dim mutually orthogonal directions (from a QR
    decomposition), each rescaled to the length of an independent Gaussian vector; this lowers the variance of the
    estimate. Sampled on the CPU (move it with ``.to``).
    """
    checks.positive_ints(num_features=num_features, head_dim=head_dim)
    if not orthogonal:
        return torch.randn(num_features, head_dim, generator=generator)
    blocks = -(-num_features // head_dim)  # ceil
    gaussian = torch.randn(blocks, head_dim, head_dim, generator=generator)
    q, r = torch.linalg.qr(gaussian)  # (blocks, d, d), orthonormal columns
    # QR's sign convention favours some directions; flipping by sign(diag R) makes Q uniformly random (Haar)
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)
    directions = q.transpose(-2, -1).reshape(blocks * head_dim, head_dim)[:num_features]
    lengths = torch.randn(num_features, head_dim, generator=generator).norm(dim=-1, keepdim=True)
    return directions * lengths


def positive_random_features(x: Tensor, omega: Tensor, is_query: bool) -> Tensor:
    """phi(x) = exp(omega x - |x|^2 / 2) / sqrt(m), so that E[phi(q) . phi(k)] = exp(q . k).

    x: (..., n, d); omega: (m, d). Returns (..., n, m), all entries positive. For numerical safety a constant is
    subtracted inside the exp: per row for queries, one per leading index for keys; both cancel in attention's
    normalisation (that is why the caller must say which one x is).
    """
    if omega.dim() != 2 or omega.shape[1] != x.shape[-1]:
        raise ValueError(f"omega must have shape (num_features, d={x.shape[-1]}), got {tuple(omega.shape)}")
    projection = x @ omega.T  # (..., n, m)
    log_phi = projection - x.pow(2).sum(dim=-1, keepdim=True) / 2
    if is_query:
        shift = log_phi.amax(dim=-1, keepdim=True)
    else:
        shift = log_phi.amax(dim=(-2, -1), keepdim=True)
    return torch.exp(log_phi - shift.detach()) / math.sqrt(omega.shape[0])


def performer_attention(q: Tensor, k: Tensor, v: Tensor, omega: Tensor, causal: bool = False) -> Tensor:
    """FAVOR+ attention: phi(Q) (phi(K)^T V) normalised by phi(Q) (phi(K)^T 1), never forming the n x n matrix.

    q: (..., n_q, d); k, v: (..., n_k, d); omega: (m, d) from :func:`orthogonal_random_features`. Returns
    (..., n_q, d_v). The inputs are scaled by d^(-1/4) each, so exp(q' . k') = exp(q . k / sqrt(d)), the softmax
    kernel. causal=True (needs n_q == n_k) uses prefix sums over the keys: O(n m d) memory.
    """
    checks.qkv(q, k, v)
    scale = q.shape[-1] ** -0.25
    q_features = positive_random_features(q * scale, omega, is_query=True)  # (..., n_q, m)
    k_features = positive_random_features(k * scale, omega, is_query=False)  # (..., n_k, m)
    if not causal:
        kv = k_features.transpose(-2, -1) @ v  # (..., m, d_v)
        normaliser = q_features @ k_features.sum(dim=-2).unsqueeze(-1)  # (..., n_q, 1)
        return (q_features @ kv) / normaliser
    if q.shape[-2] != k.shape[-2]:
        raise ValueError(f"causal Performer attention needs len_q == len_k, got {q.shape[-2]} and {k.shape[-2]}")
    kv_prefix = torch.cumsum(k_features.unsqueeze(-1) * v.unsqueeze(-2), dim=-3)  # (..., n, m, d_v)
    k_prefix = torch.cumsum(k_features, dim=-2)  # (..., n, m)
    numerator = torch.einsum("...nm,...nmd->...nd", q_features, kv_prefix)
    return numerator / (q_features * k_prefix).sum(dim=-1, keepdim=True)

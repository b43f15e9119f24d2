"""Attention that costs less than O(n^2): sparse patterns, low rank, random features, recurrence, fused kernels.

Full attention compares every query with every key: n^2 scores per head. The variants here trade that as follows.

- Sliding window (Longformer, Mistral): each token sees the ``window`` tokens on each side, O(n w). Longformer adds
  a few *global* tokens that see and are seen by everyone. :func:`sliding_window_attention` and
  :func:`longformer_attention` compute only the band (and the global rows and columns); the ``*_mask`` functions
  give the same patterns as masks for the full attention, for checking and for plots.
- BigBird: window + global + a few *random* keys per query. Here it is a mask only (:func:`bigbird_mask`); BigBird
  gets its speed from block-sparse kernels that gather blocks of keys, which this course does not write.
- Linformer: project the n keys and values down to k rows with learned (k, n) matrices, O(n k).
- Performer (FAVOR+): replace exp(q . k) by a dot product of positive random features phi(q) . phi(k), then use
  associativity, phi(Q) (phi(K)^T V), O(n m d) for m features. Approximate; the error falls as m grows.
- Transformer-XL: process a long text in segments; each segment also attends to the cached hidden states of the
  previous one(s) (no gradient flows into the cache).
- Fused / flash attention: the exact result, computed block by block with a running softmax so the n x n matrix is
  never stored (:func:`blockwise_attention` writes the idea out; :func:`fused_attention` calls PyTorch's kernel).

Mask convention as everywhere in the package: ``True`` = may attend. Tensors are (..., len, head_dim), usually
(batch, heads, len, head_dim).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .attention import scaled_dot_product_attention
from .rope import RotaryEmbedding


# ------------------------------------------------------------------------------------------------------ checks
def _check_length(length: int) -> None:
    if not isinstance(length, int) or length < 1:
        raise ValueError(f"length must be a positive int, got {length!r}")


def _check_window(window: int) -> None:
    if not isinstance(window, int) or window < 0:
        raise ValueError(f"window must be a non-negative int (keys on each side), got {window!r}")


def _global_index(global_positions: Sequence[int] | Tensor, length: int, device: torch.device | str | None) -> Tensor:
    index = torch.as_tensor(global_positions, dtype=torch.long, device=device).flatten()
    if index.numel():
        low, high = int(index.min()), int(index.max())
        if low < 0 or high >= length:
            raise ValueError(f"global_positions must lie in [0, {length}), got values in [{low}, {high}]")
        if index.unique().numel() != index.numel():
            raise ValueError(f"global_positions must not repeat a position, got {index.tolist()}")
    return index


def _check_qkv(q: Tensor, k: Tensor, v: Tensor) -> None:
    if q.dim() < 2 or k.dim() != q.dim() or v.dim() != q.dim():
        raise ValueError(
            f"q, k, v must share a shape (..., len, head_dim) with the same number of dimensions, got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share the last dimension d_k, got {q.shape[-1]} and {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same length len_k, got {k.shape[-2]} and {v.shape[-2]}")


# ------------------------------------------------------------------------------------------------------- masks
def sliding_window_mask(
    length: int, window: int, causal: bool = False, device: torch.device | str | None = None
) -> Tensor:
    """Query i may attend key j when |i - j| <= window (causal: 0 <= i - j <= window). Returns (1, 1, len, len)."""
    _check_length(length)
    _check_window(window)
    offset = torch.arange(length, device=device)[:, None] - torch.arange(length, device=device)[None, :]  # i - j
    allowed = offset.abs() <= window
    if causal:
        allowed = allowed & (offset >= 0)
    return allowed[None, None]


def global_token_mask(
    length: int, global_positions: Sequence[int] | Tensor, device: torch.device | str | None = None
) -> Tensor:
    """Global tokens attend to every position and every position attends to them. Returns (1, 1, len, len)."""
    _check_length(length)
    is_global = torch.zeros(length, dtype=torch.bool, device=device)
    is_global[_global_index(global_positions, length, device)] = True
    return (is_global[:, None] | is_global[None, :])[None, None]


def longformer_mask(
    length: int, window: int, global_positions: Sequence[int] | Tensor, device: torch.device | str | None = None
) -> Tensor:
    """Longformer's pattern: a sliding window of ``window`` keys on each side plus global tokens. (1, 1, len, len)."""
    return sliding_window_mask(length, window, device=device) | global_token_mask(length, global_positions, device)


def random_key_mask(
    length: int, num_random: int, generator: torch.Generator | None = None, device: torch.device | str | None = None
) -> Tensor:
    """Each query gets ``num_random`` distinct keys chosen uniformly at random. Returns (1, 1, len, len).

    The keys are the num_random largest of one uniform number per (query, key): no loop over queries.
    """
    _check_length(length)
    if not isinstance(num_random, int) or not 0 <= num_random <= length:
        raise ValueError(f"num_random must be an int in [0, length={length}], got {num_random!r}")
    scores = torch.rand(length, length, generator=generator)
    chosen = scores.topk(num_random, dim=-1).indices  # (len, num_random)
    mask = torch.zeros(length, length, dtype=torch.bool).scatter_(1, chosen, True)
    return mask.to(device)[None, None]


def bigbird_mask(
    length: int,
    window: int,
    num_random: int,
    global_positions: Sequence[int] | Tensor,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    """BigBird's pattern at token level: sliding window + random keys + global tokens. Returns (1, 1, len, len).

    (BigBird itself works on blocks of 64 tokens so that a GPU can gather whole blocks; the pattern is the same.)
    """
    return (
        sliding_window_mask(length, window, device=device)
        | random_key_mask(length, num_random, generator, device)
        | global_token_mask(length, global_positions, device)
    )


def transformer_xl_mask(
    length: int, segment_len: int, mem_len: int, device: torch.device | str | None = None
) -> Tensor:
    """What one Transformer-XL layer lets each position see: (1, 1, len, len).

    Position t in the segment starting at s sees positions max(0, s - mem_len) .. t: its own segment up to itself
    (causal) and the last mem_len positions before the segment (the cached memory).
    """
    _check_length(length)
    if not isinstance(segment_len, int) or segment_len < 1:
        raise ValueError(f"segment_len must be a positive int, got {segment_len!r}")
    if not isinstance(mem_len, int) or mem_len < 0:
        raise ValueError(f"mem_len must be a non-negative int, got {mem_len!r}")
    query = torch.arange(length, device=device)[:, None]
    key = torch.arange(length, device=device)[None, :]
    segment_start = query - query % segment_len
    return ((key <= query) & (key >= segment_start - mem_len))[None, None]


# --------------------------------------------------------------------------------------- sliding window (banded)
def _band(x: Tensor, left: int, right: int) -> Tensor:
    """(..., n, d) -> (..., n, d, left + right + 1): for each row i the rows i - left .. i + right (zero-padded)."""
    padded = F.pad(x, (0, 0, left, right))  # (..., n + left + right, d)
    return padded.unfold(-2, left + right + 1, 1)  # a view: (..., n, d, width)


def _band_valid(n: int, left: int, right: int, device: torch.device) -> Tensor:
    """(n, width) bool: which entries of the band are real positions (not the zero padding)."""
    key_pos = torch.arange(n, device=device)[:, None] + torch.arange(-left, right + 1, device=device)[None, :]
    return (key_pos >= 0) & (key_pos < n)


def sliding_window_attention(q: Tensor, k: Tensor, v: Tensor, window: int, causal: bool = False) -> Tensor:
    """Attention restricted to |i - j| <= window (causal: 0 <= i - j <= window), computed on the band only.

    q, k, v: (..., n, d) with one length n. Returns (..., n, d_v). Cost O(n (2 window + 1) d) time and memory instead
    of O(n^2 d); equal to full attention with :func:`sliding_window_mask`.
    """
    _check_qkv(q, k, v)
    _check_window(window)
    n = q.shape[-2]
    if k.shape[-2] != n:
        raise ValueError(f"sliding-window self-attention needs len_q == len_k, got {n} and {k.shape[-2]}")
    left, right = window, 0 if causal else window
    k_band, v_band = _band(k, left, right), _band(v, left, right)  # (..., n, d, width)
    scores = torch.einsum("...nd,...ndw->...nw", q, k_band) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~_band_valid(n, left, right, q.device), float("-inf"))
    weights = scores.softmax(dim=-1)  # every row holds at least its own position, so no row is all -inf
    return torch.einsum("...nw,...ndw->...nd", weights, v_band)


def longformer_attention(
    q: Tensor, k: Tensor, v: Tensor, window: int, global_positions: Sequence[int] | Tensor
) -> Tensor:
    """Longformer self-attention: a band of width 2 window + 1 plus global tokens, O(n (window + g)).

    q, k, v: (..., n, d). Every query attends to its band and to the g global keys; each global query attends to
    all n keys. Equal to full attention with :func:`longformer_mask`. Returns (..., n, d_v).
    """
    _check_qkv(q, k, v)
    _check_window(window)
    n, scale = q.shape[-2], 1.0 / math.sqrt(q.shape[-1])
    if k.shape[-2] != n:
        raise ValueError(f"Longformer self-attention needs len_q == len_k, got {n} and {k.shape[-2]}")
    index = _global_index(global_positions, n, q.device)
    k_band, v_band = _band(k, window, window), _band(v, window, window)
    band_scores = torch.einsum("...nd,...ndw->...nw", q, k_band) * scale
    band_scores = band_scores.masked_fill(~_band_valid(n, window, window, q.device), float("-inf"))
    k_global, v_global = k[..., index, :], v[..., index, :]  # (..., g, d)
    global_scores = q @ k_global.transpose(-2, -1) * scale  # (..., n, g)
    inside_band = (torch.arange(n, device=q.device)[:, None] - index[None, :]).abs() <= window  # counted already
    global_scores = global_scores.masked_fill(inside_band, float("-inf"))
    weights = torch.cat([band_scores, global_scores], dim=-1).softmax(dim=-1)
    width = band_scores.shape[-1]
    out = torch.einsum("...nw,...ndw->...nd", weights[..., :width], v_band) + weights[..., width:] @ v_global
    if index.numel():  # the global queries see everything: ordinary attention for those g rows
        full_rows, _ = scaled_dot_product_attention(q[..., index, :], k, v)
        out = out.index_copy(-2, index, full_rows)
    return out


# ------------------------------------------------------------------------------------------------------ Linformer
def linformer_attention(q: Tensor, k: Tensor, v: Tensor, e: Tensor, f: Tensor | None = None) -> Tensor:
    """softmax(Q (E K)^T / sqrt(d)) (F V): the n keys and values are mixed down to proj_len rows first.

    q: (..., n_q, d); k, v: (..., n, d); e, f: (proj_len, n) (f defaults to e, shared). Returns (..., n_q, d_v).
    Cost O(n_q proj_len d). With proj_len = n and E = F = identity it is exactly full attention.
    """
    _check_qkv(q, k, v)
    f = e if f is None else f
    n = k.shape[-2]
    for name, p in (("e", e), ("f", f)):
        if p.dim() != 2 or p.shape[1] != n:
            raise ValueError(f"{name} must have shape (proj_len, n={n}), got {tuple(p.shape)}")
    if e.shape != f.shape:
        raise ValueError(f"e and f must have the same shape, got {tuple(e.shape)} and {tuple(f.shape)}")
    out, _ = scaled_dot_product_attention(q, e @ k, f @ v)  # (proj_len, n) @ (..., n, d) -> (..., proj_len, d)
    return out


class LinformerSelfAttention(nn.Module):
    """Multi-head self-attention whose keys and values are projected from length n to proj_len (Wang et al., 2020).

    x: (batch, n, d_model) with n <= seq_len -> (batch, n, d_model). E and F are learned (proj_len, seq_len)
    matrices shared by the heads; a shorter input uses their first n columns. No mask: the projection mixes all
    positions, so Linformer suits encoders, not causal decoders.
    """

    def __init__(
        self, d_model: int, num_heads: int, seq_len: int, proj_len: int, share_projection: bool = False
    ) -> None:
        super().__init__()
        for name, value in (
            ("d_model", d_model),
            ("num_heads", num_heads),
            ("seq_len", seq_len),
            ("proj_len", proj_len),
        ):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if d_model % num_heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        self.num_heads, self.d_k, self.seq_len = num_heads, d_model // num_heads, seq_len
        self.w_q, self.w_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.w_v, self.w_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        # N(0, 1/proj_len): a random projection that keeps lengths on average (Johnson-Lindenstrauss)
        self.e = nn.Parameter(torch.randn(proj_len, seq_len) / math.sqrt(proj_len))
        self.f = self.e if share_projection else nn.Parameter(torch.randn(proj_len, seq_len) / math.sqrt(proj_len))

    def forward(self, x: Tensor) -> Tensor:
        """x: (batch, n, d_model), n <= seq_len -> (batch, n, d_model)."""
        if x.dim() != 3 or x.shape[-1] != self.num_heads * self.d_k:
            raise ValueError(f"x must have shape (batch, n, d_model={self.num_heads * self.d_k}), got {tuple(x.shape)}")
        batch, n, _ = x.shape
        if n > self.seq_len:
            raise ValueError(f"sequence length {n} exceeds the projection's seq_len={self.seq_len}")

        def split(t: Tensor) -> Tensor:
            return t.view(batch, n, self.num_heads, self.d_k).transpose(1, 2)

        out = linformer_attention(
            split(self.w_q(x)), split(self.w_k(x)), split(self.w_v(x)), self.e[:, :n], self.f[:, :n]
        )
        return self.w_o(out.transpose(1, 2).reshape(batch, n, -1))


# ----------------------------------------------------------------------------------------------------- Performer
def orthogonal_random_features(
    num_features: int, head_dim: int, generator: torch.Generator | None = None, orthogonal: bool = True
) -> Tensor:
    """Random projection directions omega: (num_features, head_dim), each row ~ N(0, I) in distribution.

    With ``orthogonal=True`` (FAVOR+), rows come in blocks of head_dim mutually orthogonal directions (from a QR
    decomposition), each rescaled to the length of an independent Gaussian vector; this lowers the variance of the
    estimate. Sampled on the CPU (move it with ``.to``).
    """
    for name, value in (("num_features", num_features), ("head_dim", head_dim)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
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
    _check_qkv(q, k, v)
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


# -------------------------------------------------------------------------------------------------- Transformer-XL
class TransformerXLAttention(nn.Module):
    """One self-attention layer with Transformer-XL's segment-level recurrence (Dai et al., 2019).

    ``forward(x, memory)`` attends from the segment x: (batch, s, d_model) to [memory; x], where memory (batch, m,
    d_model) holds the hidden states of earlier segments, detached: gradients stop at the segment boundary. It
    returns (output (batch, s, d_model), new memory = the last mem_len rows of [memory; x], detached).

    Positions: Transformer-XL needs *relative* positions, because absolute ones would repeat in every segment. Here
    RoPE provides them: the rows of [memory; x] are rotated as positions 0 .. m + s - 1 of the current window, and
    only differences of positions reach the scores. Parameter names match :class:`gqa.GroupedQueryAttention`, so its
    state_dict loads into this module.
    """

    def __init__(self, d_model: int, num_heads: int, mem_len: int, rope: bool = True, max_len: int = 4096) -> None:
        super().__init__()
        if not isinstance(d_model, int) or not isinstance(num_heads, int) or num_heads < 1 or d_model % num_heads:
            raise ValueError(f"d_model ({d_model!r}) must be a positive multiple of num_heads ({num_heads!r})")
        if not isinstance(mem_len, int) or mem_len < 0:
            raise ValueError(f"mem_len must be a non-negative int, got {mem_len!r}")
        self.d_model, self.num_heads, self.head_dim, self.mem_len = d_model, num_heads, d_model // num_heads, mem_len
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, d_model, bias=False)
        self.w_v = nn.Linear(d_model, d_model, bias=False)
        self.w_o = nn.Linear(d_model, d_model, bias=False)
        self.rope = RotaryEmbedding(self.head_dim, max_len) if rope else None

    def _split(self, x: Tensor) -> Tensor:
        return x.view(x.shape[0], x.shape[1], self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x: Tensor, memory: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """x: (batch, s, d_model); memory: (batch, m, d_model) or None. Returns (out (batch, s, d_model), memory)."""
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (batch, len, d_model={self.d_model}), got {tuple(x.shape)}")
        if memory is not None and (
            memory.dim() != 3 or memory.shape[0] != x.shape[0] or memory.shape[-1] != x.shape[-1]
        ):
            raise ValueError(
                f"memory must have shape (batch={x.shape[0]}, m, d_model={self.d_model}), got {tuple(memory.shape)}"
            )
        context = x if memory is None else torch.cat([memory.detach(), x], dim=1)  # (batch, m + s, d_model)
        past = context.shape[1] - x.shape[1]
        q = self._split(self.w_q(x))  # (batch, heads, s, head_dim)
        k, v = self._split(self.w_k(context)), self._split(self.w_v(context))  # (batch, heads, m + s, head_dim)
        if self.rope is not None:
            q, k = self.rope(q, offset=past), self.rope(k)
        query_pos = torch.arange(past, context.shape[1], device=x.device)[:, None]
        mask = torch.arange(context.shape[1], device=x.device)[None, :] <= query_pos  # causal over the window
        out, _ = scaled_dot_product_attention(q, k, v, mask)
        out = self.w_o(out.transpose(1, 2).reshape(x.shape[0], x.shape[1], self.d_model))
        new_memory = context[:, max(0, context.shape[1] - self.mem_len) :].detach() if self.mem_len else None
        return out, new_memory


def run_in_segments(module: TransformerXLAttention, x: Tensor, segment_len: int) -> Tensor:
    """Feed x: (batch, n, d_model) to ``module`` one segment of ``segment_len`` at a time, carrying the memory.

    Returns the outputs of all segments concatenated, (batch, n, d_model). The loop over segments is the algorithm:
    segment t + 1 needs the memory that segment t leaves behind.
    """
    if not isinstance(segment_len, int) or segment_len < 1:
        raise ValueError(f"segment_len must be a positive int, got {segment_len!r}")
    outputs, memory = [], None
    for start in range(0, x.shape[1], segment_len):
        out, memory = module(x[:, start : start + segment_len], memory)
        outputs.append(out)
    return torch.cat(outputs, dim=1)


# ------------------------------------------------------------------------------------------ flash / fused attention
def blockwise_attention(q: Tensor, k: Tensor, v: Tensor, block_size: int = 128, causal: bool = False) -> Tensor:
    """Exact attention computed over blocks of keys with a running softmax (the idea of FlashAttention).

    q: (..., n_q, d); k, v: (..., n_k, d). Returns (..., n_q, d_v). For each block the scores (..., n_q, block_size)
    are formed, and three running quantities per query are updated: the largest score m so far, the sum l of
    exp(score - m), and the weighted sum of values acc. When m grows, the old l and acc are rescaled by
    exp(m_old - m_new). At the end acc / l is softmax(scores) V, exactly. The n_q x n_k matrix never exists.
    causal=True lets query i (aligned with the last n_q keys) see keys up to its own position.
    """
    _check_qkv(q, k, v)
    if not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be a positive int, got {block_size!r}")
    n_q, n_k, scale = q.shape[-2], k.shape[-2], 1.0 / math.sqrt(q.shape[-1])
    query_pos = torch.arange(n_k - n_q, n_k, device=q.device)[:, None]
    running_max = q.new_full(q.shape[:-1], float("-inf"))  # (..., n_q)
    running_sum = q.new_zeros(q.shape[:-1])
    acc = q.new_zeros(*q.shape[:-1], v.shape[-1])  # (..., n_q, d_v)
    for start in range(0, n_k, block_size):  # the loop over key blocks is the algorithm
        k_block, v_block = k[..., start : start + block_size, :], v[..., start : start + block_size, :]
        scores = q @ k_block.transpose(-2, -1) * scale  # (..., n_q, block)
        if causal:
            key_pos = torch.arange(start, start + k_block.shape[-2], device=q.device)[None, :]
            scores = scores.masked_fill(key_pos > query_pos, float("-inf"))
        new_max = torch.maximum(running_max, scores.amax(dim=-1))
        safe_max = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)  # rows with nothing yet
        p = torch.exp(scores - safe_max.unsqueeze(-1))
        correction = torch.exp(running_max - safe_max)  # exp(-inf) = 0 on the first block
        running_sum = running_sum * correction + p.sum(dim=-1)
        acc = acc * correction.unsqueeze(-1) + p @ v_block
        running_max = new_max
    return acc / running_sum.clamp_min(torch.finfo(acc.dtype).tiny).unsqueeze(-1)


def fused_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, causal: bool = False) -> Tensor:
    """PyTorch's fused kernel (``F.scaled_dot_product_attention``: flash, memory-efficient or math backend).

    q: (..., n_q, d); k, v: (..., n_k, d); mask: bool, broadcastable to (..., n_q, n_k), ``True`` = may attend (the
    same convention as the package). causal=True adds the causal mask. Returns (..., n_q, d_v). The weights are not
    returned: not storing them is the point.
    """
    _check_qkv(q, k, v)
    if mask is not None and mask.dtype != torch.bool:
        raise ValueError(f"mask must have dtype torch.bool (True = may attend), got {mask.dtype}")
    if causal and mask is not None:
        n_q, n_k = q.shape[-2], k.shape[-2]
        causal_part = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device).tril(diagonal=n_k - n_q)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask & causal_part)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)


# ----------------------------------------------------------------------------------------------- measuring memory
class _TensorMemoryTracker(TorchDispatchMode):
    """Counts the bytes of the tensors that PyTorch operators create while it is active, and their peak; also
    records the operators' names in call order."""

    def __init__(self) -> None:
        super().__init__()
        self.operators: list[str] = []
        self.current = 0
        self.peak = 0
        self._bytes: dict[int, int] = {}
        self._holders: dict[int, int] = {}

    def _release(self, key: int) -> None:
        self._holders[key] -= 1
        if self._holders[key] == 0:
            self.current -= self._bytes.pop(key)
            del self._holders[key]

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.operators.append(str(func.overloadpacket.__name__))
        inputs = {t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0] if isinstance(t, Tensor)}
        for t in tree_flatten(out)[0]:
            if not isinstance(t, Tensor) or t.untyped_storage().nbytes() == 0:
                continue
            key = t.untyped_storage().data_ptr()
            if key not in self._bytes:
                if key in inputs:  # a view of, or an in-place result on, a tensor from before the measurement
                    continue
                self._bytes[key] = t.untyped_storage().nbytes()
                self._holders[key] = 0
                self.current += self._bytes[key]
                self.peak = max(self.peak, self.current)
            self._holders[key] += 1
            weakref.finalize(t, self._release, key)
        return out


def peak_tensor_bytes(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, int]:
    """Run ``fn(*args, **kwargs)`` without autograd and return (its result, the peak bytes of new tensors).

    Counts every tensor that a PyTorch operator allocates during the call, while it is alive (a deterministic
    count, the same on every machine). Not counted: tensors that existed before the call, and scratch buffers a
    fused kernel allocates internally (small for the flash kernel: one block per thread).
    """
    with torch.no_grad(), _TensorMemoryTracker() as tracker:
        result = fn(*args, **kwargs)
    return result, tracker.peak


def traced_operators(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[str]:
    """The ATen operators ``fn(*args, **kwargs)`` runs (without autograd), in order of first use, without repeats.

    For example, ``F.scaled_dot_product_attention`` on a CPU shows which fused kernel PyTorch picked.
    """
    with torch.no_grad(), _TensorMemoryTracker() as tracker:
        fn(*args, **kwargs)
    return list(dict.fromkeys(tracker.operators))

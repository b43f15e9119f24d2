"""Argument checks, written once. The public entry points (constructors, ``Transformer.forward``, the functions
a learner calls) use these; the maths inside the modules does not repeat them.

Every check raises ``ValueError`` naming the argument, the value it got and what it expected.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor


def _is_int(value: Any) -> bool:
    """An int that is not a bool. While ``torch.jit`` traces a model (the ONNX export, ``python -m tools.export_onnx``),
    also a size read from a tensor's shape: the tracer hands it on as a 0-dim integer tensor, so that the exported graph
    keeps the length variable."""
    if isinstance(value, int):
        return not isinstance(value, bool)
    traced_size = isinstance(value, Tensor) and value.dim() == 0 and not value.is_floating_point()
    return traced_size and torch.jit.is_tracing()


def positive_int(name: str, value: Any) -> None:
    """``value`` must be an int >= 1 (``bool`` is not accepted)."""
    if not _is_int(value) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def non_negative_int(name: str, value: Any) -> None:
    """``value`` must be an int >= 0 (``bool`` is not accepted)."""
    if not _is_int(value) or value < 0:
        raise ValueError(f"{name} must be a non-negative int, got {value!r}")


def positive_ints(**values: Any) -> None:
    """:func:`positive_int` for each keyword, in order: ``positive_ints(d_model=d_model, num_heads=num_heads)``."""
    for name, value in values.items():
        positive_int(name, value)


def probability(name: str, value: Any) -> None:
    """A dropout-like rate: a number in [0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value!r}")


def positive_number(name: str, value: Any) -> None:
    """A number > 0 (eps, a temperature, a base)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")


def one_of(name: str, value: Any, choices: Iterable[Any]) -> None:
    """``value`` must be one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


def divisible(name: str, value: int, by_name: str, by: int, why: str = "") -> None:
    """``value`` must be a multiple of ``by``."""
    if value % by:
        reason = f"; {why}" if why else ""
        raise ValueError(f"{name} ({value}) must be divisible by {by_name} ({by}){reason}")


def token_ids(
    name: str, ids: Any, vocab_size: int | None = None, max_len: int | None = None, allow_empty: bool = False
) -> None:
    """``ids`` must be an integer tensor (batch, len), with 1 <= len <= max_len and ids in [0, vocab_size).

    The range check reads the tensor's min and max (one pass); pass ``vocab_size=None`` to skip it.
    """
    if not isinstance(ids, Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of token ids, got {type(ids).__name__}")
    if ids.dim() != 2:
        raise ValueError(f"{name} must have shape (batch, len) of token ids, got {tuple(ids.shape)}")
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise ValueError(f"{name} must be an integer tensor, got dtype {ids.dtype}")
    if ids.shape[1] == 0 and not allow_empty:
        raise ValueError(f"{name} has length 0; it must hold at least one token per row, got {tuple(ids.shape)}")
    if max_len is not None and ids.shape[1] > max_len:
        raise ValueError(f"{name} has length {ids.shape[1]}, longer than the model's max_len={max_len}")
    if vocab_size is not None and ids.numel():
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or high >= vocab_size:
            raise ValueError(f"{name} must hold ids in [0, {vocab_size}), got values in [{low}, {high}]")


def sequence(name: str, x: Any, d_model: int) -> None:
    """``x`` must be a tensor (batch, len, d_model)."""
    if not isinstance(x, Tensor) or x.dim() != 3 or x.shape[-1] != d_model:
        shape = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"{name} must have shape (batch, len, d_model={d_model}), got {shape}")


def attention_inputs(query: Tensor, key: Tensor, value: Tensor, d_model: int) -> None:
    """query (batch, len_q, d_model), key and value (batch, len_k, d_model), one batch size."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        sequence(name, t, d_model)
    if not query.shape[0] == key.shape[0] == value.shape[0]:
        raise ValueError(
            f"query, key and value must share the batch size, got {query.shape[0]}, {key.shape[0]}, {value.shape[0]}"
        )
    if key.shape[1] != value.shape[1]:
        raise ValueError(f"key and value must have the same length, got {key.shape[1]} and {value.shape[1]}")


def queries_last(len_q: int, len_k: int) -> int:
    """The position of the first query when the len_q queries are the last of len_k positions: len_k - len_q."""
    if len_q > len_k:
        raise ValueError(
            f"rotary positions need the queries to be the last of the keys' positions, got len_q={len_q} > "
            f"len_k={len_k} (use rope only in self-attention)"
        )
    return len_k - len_q


def qkv(q: Tensor, k: Tensor, v: Tensor) -> None:
    """q (..., len_q, d_k), k (..., len_k, d_k), v (..., len_k, d_v), leading dimensions that broadcast."""
    if q.dim() < 2 or k.dim() != q.dim() or v.dim() != q.dim():
        raise ValueError(
            f"q, k, v must share a shape (..., len, head_dim) with the same number of dimensions, got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share the last dimension d_k, got {q.shape[-1]} and {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same length len_k, got {k.shape[-2]} and {v.shape[-2]}")
    try:
        torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"the leading dimensions of q, k, v must broadcast, got {tuple(q.shape)}, {tuple(k.shape)}, "
            f"{tuple(v.shape)}"
        ) from None

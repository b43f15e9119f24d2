"""Exercises of notebook 13 (efficient attention): their checkers and reference solutions.

1. ``check_longformer_mask(fn)``: ``fn(length, window, global_positions)`` builds Longformer's (length, length) mask.
2. ``check_online_softmax_merge(fn)``: ``fn(state_a, state_b)`` merges two partial softmax states (m, l, acc), the
   step that lets flash attention process keys block by block.
3. ``check_linear_attention_step(fn)``: ``fn(s, z, phi_q, phi_k, v)`` advances causal linear attention by one token
   with a state of fixed size (s, z), the recurrence that replaces the KV cache in linear-attention decoders.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from ._core import ExerciseMistake, expect, expect_close, expect_tensor, report

State = tuple[Tensor, Tensor, Tensor]


# ----------------------------------------------------------------------------------------------- exercise 1
def reference_longformer_mask(length: int, window: int, global_positions: Sequence[int]) -> Tensor:
    """Reference solution of exercise 1: (length, length) bool, True where |i - j| <= window or i or j is global."""
    pos = torch.arange(length)
    allowed = (pos[:, None] - pos[None, :]).abs() <= window
    is_global = torch.zeros(length, dtype=torch.bool)
    is_global[list(global_positions)] = True
    return allowed | is_global[:, None] | is_global[None, :]


_MASK_CASES = ((10, 2, [0]), (16, 1, [0, 9]), (7, 0, []), (12, 3, [5, 11]))


def _mask_mistakes(length: int, window: int, global_positions: Sequence[int]) -> list[tuple[str, Tensor]]:
    pos = torch.arange(length)
    offset = pos[:, None] - pos[None, :]
    is_global = torch.zeros(length, dtype=torch.bool)
    is_global[list(global_positions)] = True
    right = reference_longformer_mask(length, window, global_positions)
    return [
        (
            "the window is one too narrow: |i - j| <= window is allowed, including |i - j| = window",
            (offset.abs() < window) | is_global[:, None] | is_global[None, :],
        ),
        (
            "global tokens must also be *seen* by every token: set their columns, not only their rows",
            (offset.abs() <= window) | is_global[:, None],
        ),
        (
            "global tokens must also *see* every token: set their rows, not only their columns",
            (offset.abs() <= window) | is_global[None, :],
        ),
        (
            "Longformer's window is two-sided (an encoder): token i also sees i + 1 .. i + window",
            ((offset >= 0) & (offset <= window)) | is_global[:, None] | is_global[None, :],
        ),
        ("the convention is True = may attend; yours marks the blocked pairs", ~right),
        ("the global tokens are missing", offset.abs() <= window),
    ]


def _check_longformer_mask(fn: Callable[[int, int, Sequence[int]], Tensor]) -> None:
    for length, window, global_positions in _MASK_CASES:
        what = f"your mask for length={length}, window={window}, global_positions={global_positions}"
        out = fn(length, window, list(global_positions))
        expect_tensor(out, what, (length, length))
        expect(out.dtype == torch.bool, f"{what} has dtype {out.dtype}; masks are torch.bool (True = may attend)")
        expected = reference_longformer_mask(length, window, global_positions)
        if torch.equal(out, expected):
            continue
        for hint, wrong in _mask_mistakes(length, window, global_positions):
            if torch.equal(out, wrong):
                raise ExerciseMistake(f"{what}: {hint}.")
        bad = (out != expected).nonzero()[0].tolist()
        raise ExerciseMistake(f"{what} differs at (query, key) = {tuple(bad)}: expected {bool(expected[tuple(bad)])}.")


def check_longformer_mask(fn: Callable[[int, int, Sequence[int]], Tensor]) -> bool:
    """Exercise 13.1: ``fn(length, window, global_positions)`` must return Longformer's (length, length) bool mask."""
    return report("Exercise 13.1 (Longformer mask)", lambda: _check_longformer_mask(fn))


# ----------------------------------------------------------------------------------------------- exercise 2
def partial_state(q: Tensor, k: Tensor, v: Tensor) -> State:
    """The softmax state of q (..., n_q, d) over one block of keys k, v (..., b, d): (m, l, acc) with m (..., n_q) the
    largest score, l (..., n_q) the sum of exp(score - m) and acc (..., n_q, d) the sum of exp(score - m) v."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    m = scores.amax(dim=-1)
    p = torch.exp(scores - m.unsqueeze(-1))
    return m, p.sum(dim=-1), p @ v


def reference_merge(a: State, b: State) -> State:
    """Reference solution of exercise 2: the state of the two blocks together, rescaled to the common maximum."""
    m_a, l_a, acc_a = a
    m_b, l_b, acc_b = b
    m = torch.maximum(m_a, m_b)
    scale_a, scale_b = torch.exp(m_a - m), torch.exp(m_b - m)
    return m, l_a * scale_a + l_b * scale_b, acc_a * scale_a.unsqueeze(-1) + acc_b * scale_b.unsqueeze(-1)


def _merge_mistakes(a: State, b: State) -> list[tuple[str, State]]:
    m = torch.maximum(a[0], b[0])
    scale_a, scale_b = torch.exp(a[0] - m), torch.exp(b[0] - m)
    only_a = (m, a[1] * scale_a + b[1], a[2] * scale_a.unsqueeze(-1) + b[2])
    only_b = (m, a[1] + b[1] * scale_b, a[2] + b[2] * scale_b.unsqueeze(-1))
    return [
        (
            "you added l and acc without rescaling: multiply each block's l and acc by exp(m_block - m_new) first",
            (m, a[1] + b[1], a[2] + b[2]),
        ),
        (
            "you rescaled only block a: block b's l and acc also need the factor exp(m_b - m), since where block a "
            "holds the larger maximum, b's sums were taken relative to a smaller m_b",
            only_a,
        ),
        (
            "you rescaled only block b: block a's l and acc also need the factor exp(m_a - m), since where block b "
            "holds the larger maximum, a's sums were taken relative to a smaller m_a",
            only_b,
        ),
        (
            "the new m must be the larger of the two maxima (torch.maximum), so that no exp() can overflow",
            reference_merge_with(a, b, torch.minimum(a[0], b[0])),
        ),
    ]


def reference_merge_with(a: State, b: State, m: Tensor) -> State:
    """A merge rescaled to a given m (for the checker's hints)."""
    scale_a, scale_b = torch.exp(a[0] - m), torch.exp(b[0] - m)
    return m, a[1] * scale_a + b[1] * scale_b, a[2] * scale_a.unsqueeze(-1) + b[2] * scale_b.unsqueeze(-1)


def _check_merge(fn: Callable[[State, State], State]) -> None:
    generator = torch.Generator().manual_seed(13)
    for shape, split in (((1, 4, 8), 3), ((2, 3, 5, 16), 7), ((6, 4), 1)):
        d = shape[-1]
        q = torch.randn(*shape, generator=generator) * 2
        k = torch.randn(*shape[:-2], 10, d, generator=generator) * 2
        v = torch.randn(*shape[:-2], 10, d, generator=generator)
        a, b = (
            partial_state(q, k[..., :split, :], v[..., :split, :]),
            partial_state(q, k[..., split:, :], v[..., split:, :]),
        )
        what = f"your merge for q of shape {shape}, keys split {split} + {10 - split}"
        out = fn(tuple(t.clone() for t in a), tuple(t.clone() for t in b))
        expect(
            isinstance(out, (tuple, list)) and len(out) == 3,
            f"{what} should return three tensors (m, l, acc), got {type(out).__name__}",
        )
        expected = reference_merge(a, b)
        if all(
            isinstance(o, Tensor) and o.shape == e.shape and torch.allclose(o, e, atol=1e-5, rtol=1e-4)
            for o, e in zip(out, expected)
        ):
            continue
        for hint, wrong in _merge_mistakes(a, b):
            if all(
                isinstance(o, Tensor) and o.shape == w.shape and torch.allclose(o, w, atol=1e-5, rtol=1e-4)
                for o, w in zip(out, wrong)
            ):
                raise ExerciseMistake(f"{what}: {hint}.")
        expect_close(out[0], expected[0], f"{what}: m (the running maximum)")
        expect_close(out[1], expected[1], f"{what}: l (the sum of exp(score - m))")
        expect_close(out[2], expected[2], f"{what}: acc (the sum of exp(score - m) v; do not divide by l yet)")


def check_online_softmax_merge(fn: Callable[[State, State], State]) -> bool:
    """Exercise 13.2: ``fn((m_a, l_a, acc_a), (m_b, l_b, acc_b))`` must return the merged (m, l, acc)."""
    return report("Exercise 13.2 (online softmax merge)", lambda: _check_merge(fn))


# ----------------------------------------------------------------------------------------------- exercise 3
Step = tuple[Tensor, Tensor, Tensor]


def reference_linear_attention_step(s: Tensor, z: Tensor, phi_q: Tensor, phi_k: Tensor, v: Tensor) -> Step:
    """Reference solution of exercise 3: one token of causal linear attention with a fixed-size state.

    s: (m, d) the sum of phi(k_j) v_j^T over the tokens so far; z: (m,) the sum of phi(k_j); phi_q, phi_k: (m,) the
    features of the new token's query and key; v: (d,) its value. Returns the new (s, z) and the token's output
    (d,) = phi_q^T s / (phi_q . z), after the new token has been added (a query also attends to its own key).
    """
    s = s + phi_k[:, None] * v[None, :]  # (m, d): add phi(k_i) v_i^T
    z = z + phi_k  # (m,)
    return s, z, (phi_q @ s) / (phi_q @ z)


def causal_kernel_attention(phi_q: Tensor, phi_k: Tensor, v: Tensor) -> Tensor:
    """The quadratic form that the recurrence must equal: phi_q, phi_k (n, m), v (n, d) -> (n, d).

    out_i = sum_{j <= i} (phi_q_i . phi_k_j) v_j / sum_{j <= i} (phi_q_i . phi_k_j), with the n x n kernel matrix.
    """
    kernel = (phi_q @ phi_k.T).tril()  # (n, n)
    return (kernel @ v) / kernel.sum(dim=-1, keepdim=True)


_READ_BEFORE_UPDATE = (
    "the output of token i leaves out token i itself: add phi_k v^T to s and phi_k to z first, then read the "
    "output from the updated state (a query attends to its own key; at token 0 the old state is all zeros)"
)


def _step_mistakes(phi_q: Tensor, phi_k: Tensor, v: Tensor) -> list[tuple[str, Tensor]]:
    kernel = (phi_q @ phi_k.T).tril()  # (n, n)
    return [
        (
            "each output equals its own value v_i, so the state never carried over: return the updated s and z, "
            "and start each step from the state the previous step returned",
            v.clone(),
        ),
        ("the output is not normalised: divide phi_q^T s by phi_q . z (the sum of the kernel weights)", kernel @ v),
    ]


_STEP_CASES = ((6, 4, 3), (12, 8, 5), (1, 3, 2))  # n tokens, m features, d value dimension


def _check_step(fn: Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Step]) -> None:
    generator = torch.Generator().manual_seed(17)
    for n, m, d in _STEP_CASES:
        phi_q = torch.rand(n, m, generator=generator) + 0.1  # positive features, as Performer's
        phi_k = torch.rand(n, m, generator=generator) + 0.1
        v = torch.randn(n, d, generator=generator)
        what = f"your steps over {n} token{'s' if n > 1 else ''} ({m} features, values of size {d})"
        s, z = torch.zeros(m, d), torch.zeros(m)
        outputs = []
        for i in range(n):
            result = fn(s.clone(), z.clone(), phi_q[i].clone(), phi_k[i].clone(), v[i].clone())
            expect(
                isinstance(result, (tuple, list)) and len(result) == 3,
                f"{what}: each step should return three tensors (s, z, out), got {type(result).__name__}",
            )
            s, z, out = result
            expect_tensor(s, f"{what}: the state s after token {i}", (m, d), "(m, d): one row per feature")
            expect_tensor(z, f"{what}: the state z after token {i}", (m,), "(m,): the running sum of phi_k")
            expect_tensor(out, f"{what}: the output of token {i}", (d,), "(d,)")
            outputs.append(out.detach())
        got = torch.stack(outputs)
        expected = causal_kernel_attention(phi_q, phi_k, v)
        if torch.allclose(got, expected, atol=1e-5, rtol=1e-4):
            continue
        if not torch.isfinite(got[0]).all():
            raise ExerciseMistake(f"{what}: token 0's output is not finite; {_READ_BEFORE_UPDATE}.")
        strict = (phi_q @ phi_k.T).tril(-1)  # (n, n): keys before the query only
        if n > 1 and torch.allclose(got[1:], (strict @ v)[1:] / strict.sum(-1, keepdim=True)[1:], atol=1e-5, rtol=1e-4):
            raise ExerciseMistake(f"{what}: {_READ_BEFORE_UPDATE}.")
        for hint, wrong in _step_mistakes(phi_q, phi_k, v):
            if torch.allclose(got, wrong, atol=1e-5, rtol=1e-4):
                raise ExerciseMistake(f"{what}: {hint}.")
        expect_close(got, expected, f"{what}: the outputs, stacked")


def check_linear_attention_step(fn: Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Step]) -> bool:
    """Exercise 13.3: ``fn(s, z, phi_q, phi_k, v)`` must return the new state (s, z) and the new token's output."""
    return report("Exercise 13.3 (linear attention as a recurrence)", lambda: _check_step(fn))

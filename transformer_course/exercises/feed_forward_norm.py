"""Exercises of notebook 07 (feed-forward, residuals, normalisation): checkers and reference solutions.

1. :func:`check_layer_norm`: LayerNorm by hand, ``layer_norm(x, gamma, beta, eps)``.
2. :func:`check_swiglu`: the SwiGLU feed-forward network, ``swiglu(x, w_gate, w_up, w_down)``.
3. :func:`check_pre_ln_sublayer`: one Pre-LN residual sub-layer, ``pre_ln_sublayer(x, sublayer, norm)``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._core import ExerciseMistake, expect, expect_close, report

# ---- reference solutions -------------------------------------------------------------------------------


def layer_norm_reference(x: Tensor, gamma: Tensor, beta: Tensor, eps: float = 1e-5) -> Tensor:
    """x: (..., d); gamma, beta: (d,). Normalise over the last dimension with the biased variance."""
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


def swiglu_reference(x: Tensor, w_gate: Tensor, w_up: Tensor, w_down: Tensor) -> Tensor:
    """x: (..., d_model); w_gate, w_up: (d_model, d_ff); w_down: (d_ff, d_model). Returns (..., d_model)."""
    return (F.silu(x @ w_gate) * (x @ w_up)) @ w_down


def pre_ln_sublayer_reference(x: Tensor, sublayer: Callable[[Tensor], Tensor], norm: nn.Module) -> Tensor:
    """x: (batch, len, d_model). Pre-LN: normalise the sub-layer's input, add its output to the untouched x."""
    return x + sublayer(norm(x))


# ---- checkers ------------------------------------------------------------------------------------------


def _close(a: object, b: Tensor) -> bool:
    return isinstance(a, Tensor) and a.shape == b.shape and torch.allclose(a.detach().double(), b.double(), atol=1e-5)


def check_layer_norm(layer_norm: Callable[..., Tensor]) -> bool:
    """Check ``layer_norm(x, gamma, beta, eps)`` against ``torch.nn.functional.layer_norm``."""

    def check() -> None:
        g = torch.Generator().manual_seed(7)
        x = torch.randn(2, 3, 8, generator=g) * 3 + 1.5
        gamma, beta = torch.randn(8, generator=g), torch.randn(8, generator=g)
        expected = F.layer_norm(x, (8,), gamma, beta, eps=1e-5)
        out = layer_norm(x, gamma, beta, 1e-5)
        if isinstance(out, Tensor) and out.shape == x.shape:
            unbiased = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + 1e-5) * gamma + beta
            if _close(out, unbiased):
                raise ExerciseMistake("you used the unbiased variance (divide by d - 1); LayerNorm divides by d")
            mean0, var0 = x.mean(0, keepdim=True), x.var(0, unbiased=False, keepdim=True)
            if _close(out, (x - mean0) / torch.sqrt(var0 + 1e-5) * gamma + beta):
                raise ExerciseMistake("you normalised over the batch (dim 0); LayerNorm uses the last dimension")
            if _close(out, (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, False, True) + 1e-5)):
                raise ExerciseMistake("the result is normalised but gamma and beta were not applied")
        expect_close(out, expected, "layer_norm(x, gamma, beta)")
        # a nearly constant input: here eps matters, and it belongs inside the square root
        small = torch.randn(4, 8, generator=g) * 1e-3
        small_before = small.clone()
        ones, zeros = torch.ones(8), torch.zeros(8)
        expected_small = F.layer_norm(small, (8,), ones, zeros, eps=1e-5)
        out_small = layer_norm(small, ones, zeros, 1e-5)
        expect(torch.equal(small, small_before), "layer_norm must not modify its input x in place")
        centred = small - small.mean(-1, keepdim=True)
        outside = centred / (small.var(-1, unbiased=False, keepdim=True).sqrt() + 1e-5)
        if _close(out_small, outside) and not _close(out_small, expected_small):
            raise ExerciseMistake("eps goes inside the square root: sqrt(var + eps), not sqrt(var) + eps")
        expect_close(out_small, expected_small, "layer_norm of an almost constant input", atol=1e-4)

    return report("Exercise 1 (LayerNorm by hand)", check)


def check_swiglu(swiglu: Callable[[Tensor, Tensor, Tensor, Tensor], Tensor]) -> bool:
    """Check ``swiglu(x, w_gate, w_up, w_down)`` = (silu(x W_gate) * (x W_up)) W_down."""

    def check() -> None:
        g = torch.Generator().manual_seed(11)
        x = torch.randn(2, 5, 6, generator=g)
        w_gate, w_up = torch.randn(6, 10, generator=g), torch.randn(6, 10, generator=g)
        w_down = torch.randn(10, 6, generator=g)
        out = swiglu(x, w_gate, w_up, w_down)
        expected = swiglu_reference(x, w_gate, w_up, w_down)
        if isinstance(out, Tensor) and out.shape == expected.shape and not _close(out, expected):
            if _close(out, ((x @ w_gate) * F.silu(x @ w_up)) @ w_down):
                raise ExerciseMistake("the SiLU belongs on the gate branch (x @ w_gate), not on x @ w_up")
            if _close(out, (torch.sigmoid(x @ w_gate) * (x @ w_up)) @ w_down):
                raise ExerciseMistake("that is GLU with a sigmoid gate; SwiGLU uses silu(z) = z * sigmoid(z)")
            if _close(out, F.silu(x @ w_gate) @ w_down):
                raise ExerciseMistake("the gate must multiply the second branch (x @ w_up) element-wise")
            if _close(out, (F.relu(x @ w_gate) * (x @ w_up)) @ w_down):
                raise ExerciseMistake("that is ReGLU (a ReLU gate); SwiGLU uses silu")
        expect_close(out, expected, "swiglu(x, w_gate, w_up, w_down)", atol=1e-4)

    return report("Exercise 2 (SwiGLU feed-forward)", check)


def check_pre_ln_sublayer(pre_ln_sublayer: Callable[[Tensor, Callable[[Tensor], Tensor], nn.Module], Tensor]) -> bool:
    """Check ``pre_ln_sublayer(x, sublayer, norm)`` = x + sublayer(norm(x))."""

    def check() -> None:
        g = torch.Generator().manual_seed(3)
        d = 8
        linear = nn.Linear(d, d)
        norm = nn.LayerNorm(d)
        with torch.no_grad():
            for p in (*linear.parameters(), *norm.parameters()):
                p.copy_(torch.randn(p.shape, generator=g))
        x = torch.randn(2, 4, d, generator=g) * 2 + 1
        with torch.no_grad():
            out = pre_ln_sublayer(x, linear, norm)
            expected = x + linear(norm(x))
            if isinstance(out, Tensor) and out.shape == expected.shape and not _close(out, expected):
                if _close(out, norm(x + linear(x))):
                    raise ExerciseMistake("that is Post-LN, norm(x + sublayer(x)); Pre-LN normalises the input")
                if _close(out, linear(norm(x))):
                    raise ExerciseMistake("the residual is missing: add the untouched x to the sub-layer's output")
                if _close(out, norm(x + linear(norm(x)))):
                    raise ExerciseMistake("Pre-LN does not normalise the sum; the residual path stays untouched")
                if _close(out, norm(x) + linear(norm(x))):
                    raise ExerciseMistake("add the original x, not norm(x): the residual path bypasses the norm")
            expect_close(out, expected, "pre_ln_sublayer(x, sublayer, norm)", atol=1e-4)

    return report("Exercise 3 (a Pre-LN sub-layer)", check)

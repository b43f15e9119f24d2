"""Exercises of notebook 01 (why RNNs and CNNs fall short): their checkers and reference solutions.

1. ``check_rnn_step(fn)``: ``fn(x, h, U, W, b)`` returns one tanh RNN step, S_t = tanh(x U^T + h W^T + b).
2. ``check_bptt_product(fn)``: ``fn(jacobians)`` returns dS_T/dS_0 = J_T J_{T-1} ... J_1.
3. ``check_conv_layers(fn)``: ``fn(n, kernel_size, dilated)`` returns how many convolution layers it takes
   before position n sees position 1.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ._core import ExerciseMistake, expect, expect_close, expect_tensor, report


def reference_rnn_step(x: Tensor, h: Tensor, U: Tensor, W: Tensor, b: Tensor) -> Tensor:
    """Reference solution of exercise 1.

    x: (batch, input), h: (batch, hidden), U: (hidden, input), W: (hidden, hidden), b: (hidden,).
    Returns S_t: (batch, hidden).
    """
    return torch.tanh(x @ U.T + h @ W.T + b)


def reference_bptt_product(jacobians: Tensor) -> Tensor:
    """Reference solution of exercise 2.

    jacobians: (T, hidden, hidden), jacobians[t - 1] = J_t = dS_t/dS_{t-1}. Returns dS_T/dS_0 (hidden, hidden).
    """
    product = torch.eye(jacobians.shape[-1], dtype=jacobians.dtype)
    for J in jacobians:  # J_1 first: each new step multiplies from the left
        product = J @ product
    return product


def reference_conv_layers(n: int, kernel_size: int = 3, dilated: bool = False) -> int:
    """Reference solution of exercise 3: the fewest layers whose receptive field covers n positions."""
    layers, field = 0, 1
    while field < n:
        field += (kernel_size - 1) * (2**layers if dilated else 1)  # layer l (from 0) has dilation 2^l
        layers += 1
    return layers


# ----------------------------------------------------------------------------------------------- exercise 1
def _rnn_inputs() -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """input 3 and hidden 5 differ, so swapping U and W or forgetting a transpose shows up as a shape error."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 3, generator=g)
    h = torch.randn(4, 5, generator=g)
    U = torch.randn(5, 3, generator=g) * 0.7
    W = torch.randn(5, 5, generator=g) * 0.7
    b = torch.randn(5, generator=g)
    return x, h, U, W, b


def _check_rnn_step(fn: Callable[..., Tensor]) -> None:
    x, h, U, W, b = _rnn_inputs()
    try:
        out = fn(x.clone(), h.clone(), U.clone(), W.clone(), b.clone())
    except RuntimeError as error:
        if "shape" in str(error) or "size" in str(error):
            raise ExerciseMistake(
                f"a matrix product failed ({error}). x is (batch, input) and U is (hidden, input), so the input "
                "term is x @ U.T; h is (batch, hidden), so the recurrent term is h @ W.T."
            ) from None
        raise
    expected = reference_rnn_step(x, h, U, W, b)
    expect_tensor(out, "S_t", expected.shape, "= (batch, hidden)")
    o = out.detach()
    pre = x @ U.T + h @ W.T + b
    hints = [
        (pre, "apply the nonlinearity: S_t = tanh(pre-activation)."),
        (torch.sigmoid(pre), "the vanilla RNN here uses tanh, not sigmoid."),
        (torch.tanh(x @ U.T + h @ W.T), "add the bias b inside the tanh."),
        (torch.tanh(x @ U.T + b), "the previous state matters: add h @ W.T inside the tanh."),
        (torch.tanh(x @ U.T + h @ W + b), "use h @ W.T (row i of W holds the weights into unit i), not h @ W."),
    ]
    for wrong, hint in hints:
        if torch.allclose(o, wrong, atol=1e-5):
            raise ExerciseMistake(hint)
    expect_close(out, expected, "S_t")


def check_rnn_step(fn: Callable[..., Tensor]) -> bool:
    """Exercise 1: ``fn(x, h, U, W, b)`` must return tanh(x U^T + h W^T + b)."""
    return report("Exercise 1 (one RNN step)", lambda: _check_rnn_step(fn))


# ----------------------------------------------------------------------------------------------- exercise 2
def _check_bptt_product(fn: Callable[[Tensor], Tensor]) -> None:
    g = torch.Generator().manual_seed(2)
    jacobians = torch.randn(6, 4, 4, generator=g, dtype=torch.float64) * 0.6  # matrices that do not commute
    out = fn(jacobians.clone())
    expected = reference_bptt_product(jacobians)
    expect_tensor(out, "dS_T/dS_0", (4, 4), "= one (hidden, hidden) matrix")
    o = out.detach().double()
    reversed_order = torch.eye(4, dtype=torch.float64)
    for J in jacobians:
        reversed_order = reversed_order @ J
    hints = [
        (reversed_order, "the order is reversed: dS_T/dS_0 = J_T ... J_2 J_1, the latest step on the left."),
        (jacobians.prod(dim=0), "multiply matrices (@), not element by element."),
        (jacobians.sum(dim=0), "chain the Jacobians with matrix products; do not add them."),
    ]
    for wrong, hint in hints:
        if torch.allclose(o, wrong, atol=1e-8):
            raise ExerciseMistake(hint)
    expect_close(out, expected, "dS_T/dS_0", atol=1e-8, rtol=1e-6)
    single = fn(jacobians[:1].clone())
    expect_close(single, jacobians[0], "the product for a single step (T = 1)", atol=1e-8, rtol=1e-6)


def check_bptt_product(fn: Callable[[Tensor], Tensor]) -> bool:
    """Exercise 2: ``fn(jacobians)`` with jacobians (T, hidden, hidden) must return J_T ... J_1."""
    return report("Exercise 2 (the product of Jacobians)", lambda: _check_bptt_product(fn))


# ----------------------------------------------------------------------------------------------- exercise 3
def _check_conv_layers(fn: Callable[[int, int, bool], int]) -> None:
    cases = [(n, k, d) for d in (False, True) for k in (3, 5) for n in (2, 3, 4, 5, 8, 9, 16, 17, 100, 1000, 1)]
    for n, k, dilated in cases:
        got = fn(n, k, dilated)
        want = reference_conv_layers(n, k, dilated)
        what = f"n={n}, kernel_size={k}, dilated={dilated}"
        expect(
            isinstance(got, int) and not isinstance(got, bool), f"return an int, got {type(got).__name__} for {what}"
        )
        if got == want:
            continue
        if n == 1:
            raise ExerciseMistake("position 1 already sees itself: n = 1 needs 0 layers.")
        if not dilated and got == math.ceil(n / (k - 1)):
            raise ExerciseMistake(
                f"off by one for {what}: positions 1 and n are n - 1 apart, and each layer "
                "adds kernel_size - 1 to the receptive field."
            )
        if not dilated and k != 3 and got == reference_conv_layers(n, 3, False):
            raise ExerciseMistake(f"for {what} you gave the answer for kernel 3: use kernel_size.")
        raise ExerciseMistake(
            f"for {what} you returned {got}, but {want} layers are needed (the receptive field "
            "is 1 + (k-1) * L plain, 1 + (k-1) * (2^L - 1) with dilations 1, 2, 4, ...)."
        )


def check_conv_layers(fn: Callable[[int, int, bool], int]) -> bool:
    """Exercise 3: ``fn(n, kernel_size, dilated)`` must return the fewest layers connecting positions 1 and n."""
    return report("Exercise 3 (layers a CNN needs)", lambda: _check_conv_layers(fn))

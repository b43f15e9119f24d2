"""Exercises of notebook 01 (why RNNs and CNNs fall short): their checkers and reference solutions.

1.1 ``check_bptt_product(fn)``: ``fn(jacobians)`` returns dS_T/dS_0 = J_T J_{T-1} ... J_1.
1.2 ``check_input_gradient(fn)``: ``fn(x, states, deltas)`` returns dL_T/dU of a tanh RNN, the sum over steps
    of (delta_k * (1 - S_k^2)) x_k^T: the derivation of the gradient for W, carried over to U.
1.3 ``check_conv_layers(fn)``: ``fn(n, kernel_size, dilated)`` returns how many convolution layers it takes
    before position n sees position 1.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ..prelude.rnn import RNNCell, autograd_state_jacobians, unroll
from ._core import Exercise, ExerciseMistake, expect, expect_close, expect_tensor, explain_shape_error, report, tr

BPTT_PRODUCT = Exercise("1.1", "the product of Jacobians", "雅可比矩阵之积")
INPUT_GRADIENT = Exercise("1.2", "the gradient for U", "U 的梯度")
CONV_LAYERS = Exercise("1.3", "layers a CNN needs", "CNN 需要的层数")


def _layers(count: int) -> str:
    return f"{count} layer" if count == 1 else f"{count} layers"


def reference_bptt_product(jacobians: Tensor) -> Tensor:
    """Reference solution of exercise 1.1.

    jacobians: (T, hidden, hidden), jacobians[t - 1] = J_t = dS_t/dS_{t-1}. Returns dS_T/dS_0 (hidden, hidden).
    """
    product = torch.eye(jacobians.shape[-1], dtype=jacobians.dtype)
    for J in jacobians:  # J_1 first: each new step multiplies from the left
        product = J @ product
    return product


def reference_input_gradient(x: Tensor, states: Tensor, deltas: Tensor) -> Tensor:
    """Reference solution of exercise 1.2: dL_T/dU of a tanh RNN, S_k = tanh(U x_k + W S_{k-1} + b).

    x: (T, input) the inputs x_1..x_T; states: (T, hidden) S_1..S_T; deltas: (T, hidden), row k - 1 is
    delta_k = dL_T/dS_k. U is used at every step, so its gradient is the sum of one term per step; the
    immediate derivative of a_k = U x_k + ... with respect to U_ij is x_k[j], so step k's term is
    (delta_k * f'(a_k)) x_k^T with f'(a_k) = 1 - S_k^2. Returns (hidden, input), the shape of U.
    """
    return (deltas * (1 - states**2)).T @ x


def reference_conv_layers(n: int, kernel_size: int = 3, dilated: bool = False) -> int:
    """Reference solution of exercise 1.3: the fewest layers whose receptive field covers n positions."""
    layers, field = 0, 1
    while field < n:
        field += (kernel_size - 1) * (2**layers if dilated else 1)  # layer l (from 0) has dilation 2^l
        layers += 1
    return layers


# --------------------------------------------------------------------------------------------- exercise 1.1
def _check_bptt_product(fn: Callable[[Tensor], Tensor]) -> None:
    g = torch.Generator().manual_seed(2)
    jacobians = torch.randn(6, 4, 4, generator=g, dtype=torch.float64) * 0.6  # matrices that do not commute
    out = fn(jacobians.clone())
    expected = reference_bptt_product(jacobians)
    expect_tensor(out, "dS_T/dS_0", (4, 4), tr("= one (hidden, hidden) matrix", "= 一个 (hidden, hidden) 矩阵"))
    o = out.detach().double()
    reversed_order = torch.eye(4, dtype=torch.float64)
    for J in jacobians:
        reversed_order = reversed_order @ J
    hints = [
        (
            reversed_order,
            tr(
                "The order is reversed: dS_T/dS_0 = J_T ... J_2 J_1, the latest step on the left.",
                "顺序反了：dS_T/dS_0 = J_T ... J_2 J_1，最新的一步在最左边。",
            ),
        ),
        (
            jacobians.prod(dim=0),
            tr("Multiply matrices (@), not element by element.", "要做矩阵乘法（@），而不是逐元素相乘。"),
        ),
        (
            jacobians.sum(dim=0),
            tr(
                "Chain the Jacobians with matrix products; do not add them.",
                "要用矩阵乘法把雅可比矩阵串起来；不要把它们相加。",
            ),
        ),
        (
            reference_bptt_product(jacobians[1:]),
            tr(
                "You left out J_1: dS_T/dS_0 = J_T ... J_2 J_1 multiplies all T Jacobians, the first one included.",
                "你漏掉了 J_1：dS_T/dS_0 = J_T ... J_2 J_1 要把全部 T 个雅可比矩阵相乘，第一个也包括在内。",
            ),
        ),
        (
            reference_bptt_product(jacobians[:-1]),
            tr(
                "You left out J_T: dS_T/dS_0 = J_T ... J_2 J_1 multiplies all T Jacobians, the last one included.",
                "你漏掉了 J_T：dS_T/dS_0 = J_T ... J_2 J_1 要把全部 T 个雅可比矩阵相乘，最后一个也包括在内。",
            ),
        ),
    ]
    for wrong, hint in hints:
        if torch.allclose(o, wrong, atol=1e-8):
            raise ExerciseMistake(hint)
    expect_close(out, expected, "dS_T/dS_0", atol=1e-8, rtol=1e-6)
    try:
        single = fn(jacobians[:1].clone())
    except RuntimeError as error:  # e.g. torch.linalg.multi_dot, which wants at least 2 matrices
        raise ExerciseMistake(
            tr(
                f"Right for T = 6, but a single step (T = 1) raised RuntimeError ({error}). With one step the product "
                "is J_1 itself: return it, or start from the identity matrix and multiply each J_t on from the left",
                f"T = 6 时是对的，但只有一步（T = 1）时出错了：{explain_shape_error(error)}。只有一步时，乘积就是 J_1 "
                "本身：直接返回它，或者从单位矩阵开始，把每个 J_t 从左边乘上去",
            )
        ) from None
    expect_close(
        single,
        jacobians[0],
        tr("The product for a single step (T = 1)", "只有一步（T = 1）时的乘积"),
        atol=1e-8,
        rtol=1e-6,
    )


def check_bptt_product(fn: Callable[[Tensor], Tensor]) -> bool:
    """Exercise 1.1: ``fn(jacobians)`` with jacobians (T, hidden, hidden) must return J_T ... J_1."""
    return report(BPTT_PRODUCT, lambda: _check_bptt_product(fn))


# --------------------------------------------------------------------------------------------- exercise 1.2
def _input_gradient_case() -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """A tanh RNN (input 3, hidden 5: U and W have different shapes) over 7 steps, with L_T = r . S_T.

    Returns x (T, input), states S_1..S_T (T, hidden), deltas dL_T/dS_k (T, hidden) and autograd's dL_T/dU.
    """
    generator = torch.Generator().manual_seed(3)
    cell = RNNCell(3, 5).double()
    with torch.no_grad():
        for parameter in cell.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator, dtype=torch.float64) * 0.8)
    x = torch.randn(1, 7, 3, generator=generator, dtype=torch.float64)
    readout = torch.randn(5, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        states, _ = unroll(cell, x)
    deltas = readout @ autograd_state_jacobians(cell, x)[0, 1:]  # (T, hidden): dL_T/dS_k for k = 1..T
    cell.zero_grad()
    (unroll(cell, x)[0][0, -1] @ readout).backward()
    assert cell.weight_ih.grad is not None
    return x[0], states[0], deltas, cell.weight_ih.grad


def _check_input_gradient(fn: Callable[[Tensor, Tensor, Tensor], Tensor]) -> None:
    x, states, deltas, expected = _input_gradient_case()
    try:
        out = fn(x.clone(), states.clone(), deltas.clone())
    except RuntimeError as error:
        if "shape" in str(error) or "size" in str(error):
            raise ExerciseMistake(
                tr(
                    f"A product failed ({error}). x is (T, input), states and deltas are (T, hidden); the result "
                    "has U's shape (hidden, input).",
                    f"有一次乘法失败了：{explain_shape_error(error)}。"
                    "x 是 (T, input)，states 和 deltas 是 (T, hidden)；"
                    "结果的形状与 U 相同，为 (hidden, input)。",
                )
            ) from None
        raise
    hidden, inputs = expected.shape
    if isinstance(out, Tensor) and tuple(out.shape) == (hidden, hidden):
        raise ExerciseMistake(
            tr(
                "Your result has W's shape (hidden, hidden): for W the immediate derivative of a_k is S_{k-1}, "
                "but U multiplies x_k, so step k's term is (delta_k * f'(a_k)) x_k^T.",
                "你的结果是 W 的形状 (hidden, hidden)：对 W 来说，a_k 的直接导数是 S_{k-1}，但 U 乘的是 x_k，"
                "所以第 k 步的项是 (delta_k * f'(a_k)) x_k^T。",
            )
        )
    if isinstance(out, Tensor) and tuple(out.shape) == (inputs, hidden):
        raise ExerciseMistake(
            tr(
                "The result is transposed: the gradient for U has U's shape, (hidden, input).",
                "结果转置了：U 的梯度与 U 的形状相同，为 (hidden, input)。",
            )
        )
    expect_tensor(
        out, "dL_T/dU", expected.shape, tr("= (hidden, input), the shape of U", "= (hidden, input)，即 U 的形状")
    )
    o = out.detach().double()
    slope = 1 - states**2
    previous_slope = torch.cat([torch.ones(1, hidden, dtype=torch.float64), slope[:-1]])  # f' one step early
    hints = [
        (
            deltas.T @ x,
            tr(
                "Multiply delta_k by the slope f'(a_k) = 1 - S_k^2 before the outer product with x_k.",
                "在与 x_k 做外积之前，要先把 delta_k 乘以斜率 f'(a_k) = 1 - S_k^2。",
            ),
        ),
        (
            (deltas[-1:] * slope[-1:]).T @ x[-1:],
            tr(
                "U is used at every step, not only the last: sum the terms of all T steps.",
                "每一步都用到了 U，而不只是最后一步：要把全部 T 步的项加起来。",
            ),
        ),
        (
            (deltas * previous_slope).T @ x,
            tr(
                "The slope belongs to the same step as delta_k: f'(a_k) = 1 - S_k^2, not 1 - S_{k-1}^2.",
                "斜率与 delta_k 属于同一步：f'(a_k) = 1 - S_k^2，而不是 1 - S_{k-1}^2。",
            ),
        ),
        (
            (deltas * (1 - torch.tanh(states) ** 2)).T @ x,
            tr("S_k is already tanh(a_k): f'(a_k) = 1 - S_k^2.", "S_k 已经是 tanh(a_k) 了：f'(a_k) = 1 - S_k^2。"),
        ),
        (
            (deltas * (1 - states)).T @ x,
            tr(
                "The slope of tanh is 1 - S_k^2 (the state squared), not 1 - S_k.",
                "tanh 的斜率是 1 - S_k^2（状态的平方），而不是 1 - S_k。",
            ),
        ),
        (
            (deltas * slope)[1:].T @ x[:-1],
            tr(
                "U multiplies x_k, the input of step k itself: step k's term is (delta_k * f'(a_k)) x_k^T, not "
                "x_{k-1} (the shift by one step belongs to W's S_{k-1}).",
                "U 乘的是第 k 步自己的输入 x_k：第 k 步的项是 (delta_k * f'(a_k)) x_k^T，而不是 x_{k-1}"
                "（错开一步的是 W 的梯度中的 S_{k-1}）。",
            ),
        ),
    ]
    for wrong, hint in hints:
        if torch.allclose(o, wrong, atol=1e-8):
            raise ExerciseMistake(hint)
    expect_close(
        out, expected, tr("dL_T/dU (compared with autograd)", "dL_T/dU（与 autograd 的结果比较）"), atol=1e-8, rtol=1e-6
    )


def check_input_gradient(fn: Callable[[Tensor, Tensor, Tensor], Tensor]) -> bool:
    """Exercise 1.2: ``fn(x, states, deltas)`` must return dL_T/dU = sum_k (delta_k * (1 - S_k^2)) x_k^T."""
    return report(INPUT_GRADIENT, lambda: _check_input_gradient(fn))


# --------------------------------------------------------------------------------------------- exercise 1.3
def _check_conv_layers(fn: Callable[[int, int, bool], int]) -> None:
    cases = [(n, k, d) for d in (False, True) for k in (3, 5) for n in (2, 3, 4, 5, 8, 9, 16, 17, 100, 1000, 1)]
    for n, k, dilated in cases:
        got = fn(n, k, dilated)
        want = reference_conv_layers(n, k, dilated)
        what = f"n={n}, kernel_size={k}, dilated={dilated}"
        type_name = type(got).__name__
        expect(
            isinstance(got, int) and not isinstance(got, bool),
            tr(f"Return an int, got {type_name} for {what}", f"{what} 时应返回 int，得到的是 {type_name}"),
        )
        if got == want:
            continue
        if n == 1:
            raise ExerciseMistake(
                tr(
                    "Position 1 already sees itself: n = 1 needs 0 layers.",
                    "位置 1 本来就能看到它自己：n = 1 需要 0 层。",
                )
            )
        if not dilated and got == math.ceil(n / (k - 1)):
            raise ExerciseMistake(
                tr(
                    f"Off by one for {what}: positions 1 and n are n - 1 apart, and each layer "
                    "adds kernel_size - 1 to the receptive field.",
                    f"{what} 时差了一层：位置 1 和 n 相距 n - 1，而每一层让感受野增加 kernel_size - 1。",
                )
            )
        if dilated and got == math.ceil(math.log2(n)):
            raise ExerciseMistake(
                tr(
                    f"For {what} you returned ceil(log2 n) = {got}, but {_layers(want)} "
                    f"{'is' if want == 1 else 'are'} needed: with dilations 1, 2, 4, ... the receptive field of L "
                    "layers is 1 + (k-1) * (2^L - 1) positions, not 2^L, so count layers until it reaches n",
                    f"{what} 时你返回的是 ceil(log2 n) = {got}，但需要 {want} 层：膨胀率为 1, 2, 4, ... 时，"
                    "L 层的感受野是 1 + (k-1) * (2^L - 1) 个位置，而不是 2^L，所以要一层层地数，直到它达到 n",
                )
            )
        if not dilated and k != 3 and got == reference_conv_layers(n, 3, False):
            raise ExerciseMistake(
                tr(
                    f"For {what} you gave the answer for kernel 3: use kernel_size.",
                    f"{what} 时你给出的是卷积核大小为 3 时的答案：要用 kernel_size。",
                )
            )
        raise ExerciseMistake(
            tr(
                f"For {what} you returned {got}, but {_layers(want)} {'is' if want == 1 else 'are'} needed (the "
                "receptive field of L layers is 1 + (k-1) * L plain, 1 + (k-1) * (2^L - 1) with dilations 1, 2, 4, "
                "...).",
                f"{what} 时你返回的是 {got}，但需要 {want} 层（L 层的感受野：普通卷积是 1 + (k-1) * L，"
                "膨胀率为 1, 2, 4, ... 时是 1 + (k-1) * (2^L - 1)）。",
            )
        )


def check_conv_layers(fn: Callable[[int, int, bool], int]) -> bool:
    """Exercise 1.3: ``fn(n, kernel_size, dilated)`` must return the fewest layers connecting positions 1 and n."""
    return report(CONV_LAYERS, lambda: _check_conv_layers(fn))

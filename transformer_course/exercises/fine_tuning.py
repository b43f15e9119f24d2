"""Exercises of notebook 17 (fine-tuning a pre-trained model, LoRA): their checkers and reference solutions.

17.1 ``check_lora_gradients(fn)``: ``fn(x, g, lora_a, lora_b, scale)`` returns (dL/dA, dL/dB) of one LoRA layer whose
     low-rank part is y = scale * x A^T B^T, given its inputs x (n, in) and the gradient g = dL/dy (n, out) at n
     positions; compared with autograd's, first at B = 0 (step 0 of training), then with a trained B.
17.2 ``check_rank_matching_last_block(fn)``: ``fn(layer_shapes, last_block)`` returns the smallest rank r at which
     LoRA beside linear layers of the shapes ``layer_shapes`` (each ``(out_features, in_features)``) trains at least
     ``last_block`` numbers, the count of training the last block instead.

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from ._core import Exercise, ExerciseMistake, expect, expect_tensor, explain_shape_error, report, tr

LORA_GRADIENTS = Exercise("17.1", "LoRA's gradients", "LoRA 的梯度")
MATCHING_RANK = Exercise(
    "17.2", "the rank at which LoRA trains as much as the last block", "LoRA 与最后一个块训练同样多参数时的秩"
)


# --------------------------------------------------------------------------------------------- exercise 17.1
def reference_lora_gradients(
    x: Tensor, g: Tensor, lora_a: Tensor, lora_b: Tensor, scale: float
) -> tuple[Tensor, Tensor]:
    """Reference solution of exercise 17.1: the gradients of LoRA's A and B at one layer.

    x (n, in): the layer's inputs at n positions; g (n, out): dL/dy there; lora_a A (r, in); lora_b B (out, r);
    the low-rank part of the output is y = scale * x A^T B^T. With h = x A^T (n, r):
    dL/dB = scale * g^T h, (out, r), and dL/dA = scale * (g B)^T x, (r, in): each a sum over the n positions of one
    outer product per position, which the matrix product does. At B = 0, dL/dA = 0 and dL/dB is not.
    """
    h = x @ lora_a.T  # (n, r)
    grad_b = scale * g.T @ h  # (out, r)
    grad_a = scale * (g @ lora_b).T @ x  # (r, in)
    return grad_a, grad_b


def autograd_lora_gradients(
    x: Tensor, g: Tensor, lora_a: Tensor, lora_b: Tensor, scale: float
) -> tuple[Tensor, Tensor]:
    """(dL/dA, dL/dB) by autograd: L = sum(y * g) has dL/dy = g, for y = scale * x A^T B^T."""
    a = lora_a.detach().clone().requires_grad_(True)
    b = lora_b.detach().clone().requires_grad_(True)
    y = scale * x @ a.T @ b.T  # (n, out)
    (y * g).sum().backward()
    assert a.grad is not None and b.grad is not None
    return a.grad, b.grad


# (n, in, out, r, scale, B zero): no two sizes equal, so a transposed or misplaced factor cannot pass unseen, and
# scale != 1; the first case is step 0 of training (B = 0)
_GRADIENT_CASES = ((6, 5, 3, 2, 4.0, True), (7, 4, 6, 3, 0.5, False), (9, 8, 5, 4, 2.0, False))


def _gradient_inputs(n: int, d_in: int, d_out: int, rank: int, b_zero: bool, seed: int) -> tuple[Tensor, ...]:
    generator = torch.Generator().manual_seed(170 + seed)
    x = torch.randn(n, d_in, generator=generator, dtype=torch.float64)
    g = torch.randn(n, d_out, generator=generator, dtype=torch.float64)
    lora_a = torch.randn(rank, d_in, generator=generator, dtype=torch.float64) / math.sqrt(d_in)
    lora_b = torch.randn(d_out, rank, generator=generator, dtype=torch.float64)
    return x, g, lora_a, torch.zeros_like(lora_b) if b_zero else lora_b


def _close(answer: Tensor, expected: Tensor) -> bool:
    return answer.shape == expected.shape and torch.allclose(answer.detach().double(), expected, atol=1e-8, rtol=1e-6)


def _product_of_sums(left: Tensor, right: Tensor) -> Tensor:
    """(sum over positions of left)(sum over positions of right)^T: the positions summed before the product."""
    return left.sum(0)[:, None] * right.sum(0)[None, :]


def _check_lora_gradients(fn: Callable[[Tensor, Tensor, Tensor, Tensor, float], tuple[Tensor, Tensor]]) -> None:
    for seed, (n, d_in, d_out, rank, scale, b_zero) in enumerate(_GRADIENT_CASES):
        x, g, lora_a, lora_b = _gradient_inputs(n, d_in, d_out, rank, b_zero, seed)
        what = tr(
            f"for x ({n}, {d_in}), g ({n}, {d_out}), A ({rank}, {d_in}), B ({d_out}, {rank})"
            f"{' = 0 (step 0)' if b_zero else ''} and scale {scale:g},",
            f"对 x ({n}, {d_in})、g ({n}, {d_out})、A ({rank}, {d_in})、B ({d_out}, {rank})"
            f"{' = 0（第 0 步）' if b_zero else ''}、scale = {scale:g}，",
        )
        try:
            answer = fn(x.clone(), g.clone(), lora_a.clone(), lora_b.clone(), scale)
        except RuntimeError as error:
            if "shape" not in str(error) and "size" not in str(error):
                raise
            raise ExerciseMistake(
                tr(
                    f"{what} a product failed ({error}): write each factor's shape beside it, x (n, in), g (n, out), "
                    "A (r, in), B (out, r), and check that the inner sizes of every product agree",
                    f"{what}你的代码出错了：{explain_shape_error(error)}。"
                    "在每个因子旁写下它的形状，x (n, in)、g (n, out)、A (r, in)、B (out, r)，"
                    "检查每个乘积相邻的两个维度是否一致",
                )
            ) from None
        got = type(answer).__name__
        expect(
            isinstance(answer, tuple | list) and len(answer) == 2,
            tr(
                f"return two tensors, (dL/dA, dL/dB); got {got}",
                f"应返回两个张量 (dL/dA, dL/dB)；得到的是 {got}",
            ),
        )
        grad_a, grad_b = answer
        expected_a, expected_b = autograd_lora_gradients(x, g, lora_a, lora_b, scale)
        if isinstance(grad_a, Tensor) and isinstance(grad_b, Tensor):
            expect(
                not (tuple(grad_a.shape) == (d_out, rank) and tuple(grad_b.shape) == (rank, d_in)),
                tr(
                    f"{what} you returned (dL/dB, dL/dA): return dL/dA first",
                    f"{what}你返回的是 (dL/dB, dL/dA)：应先返回 dL/dA",
                ),
            )
        for name, mine, shape, meaning in (
            ("dL/dA", grad_a, (rank, d_in), "(r, in)"),
            ("dL/dB", grad_b, (d_out, rank), "(out, r)"),
        ):
            if isinstance(mine, Tensor) and mine.dim() == 2 and tuple(mine.shape) == shape[::-1]:
                parameter = "A" if name == "dL/dA" else "B"
                raise ExerciseMistake(
                    tr(
                        f"{what} your {name} has shape {tuple(mine.shape)}, the transpose of {parameter}'s "
                        f"{meaning}: a parameter's gradient has the parameter's own shape, so transpose the other "
                        "factors of your product instead",
                        f"{what}你的 {name} 形状是 {tuple(mine.shape)}，是 {parameter} 的形状 {meaning} 的转置："
                        "参数的梯度与参数本身形状相同，应转置乘积中的其他因子",
                    )
                )
            expect_tensor(mine, name, shape, meaning)
        h, g_b = x @ lora_a.T, g @ lora_b  # (n, r) each
        mistakes = {
            "dL/dA": (
                (expected_a / scale, "without"),
                (-expected_a, "sign"),
                (expected_a / n, "mean"),
                (scale * _product_of_sums(g_b, x), "sums"),
            ),
            "dL/dB": (
                (expected_b / scale, "without"),
                (-expected_b, "sign"),
                (expected_b / n, "mean"),
                (scale * _product_of_sums(g, h), "sums"),
            ),
        }
        for name, mine, expected in (("dL/dA", grad_a, expected_a), ("dL/dB", grad_b, expected_b)):
            if _close(mine, expected):
                continue
            hints = {
                "without": tr(
                    f"{what} your {name} leaves out the scale: the low-rank part is scale * x A^T B^T, so both "
                    "gradients carry the factor scale",
                    f"{what}你的 {name} 漏掉了缩放系数：低秩部分是 scale * x A^T B^T，"
                    "所以两个梯度都带有 scale 这个因子",
                ),
                "sign": tr(
                    f"{what} your {name} has the wrong sign: return the gradient itself, not the step that "
                    "gradient descent takes (which is minus the learning rate times it)",
                    f"{what}你的 {name} 符号反了：应返回梯度本身，而不是梯度下降走的那一步"
                    "（那一步是学习率乘以梯度再取负）",
                ),
                "mean": tr(
                    f"{what} your {name} averages over the n positions: g already holds dL/dy at each position, "
                    "so the gradient is the sum over positions (a mean loss's 1/n is inside g already)",
                    f"{what}你的 {name} 对 n 个位置取了平均：g 已经是每个位置上的 dL/dy，所以梯度是对各位置求和"
                    "（若损失取平均，1/n 已经在 g 里了）",
                ),
                "sums": tr(
                    f"{what} your {name} sums over the positions before multiplying: the gradient is the sum of one "
                    "outer product per position, which a matrix product over the position axis computes; the "
                    "product of the two sums mixes positions",
                    f"{what}你的 {name} 先对各位置求和再相乘：梯度是每个位置一个外积之和，沿位置这一维做矩阵乘法"
                    "正好算出它；两个和的乘积把不同位置混在了一起",
                ),
            }
            for wrong, kind in mistakes[name]:
                if _close(mine, wrong):
                    raise ExerciseMistake(hints[kind])
            if b_zero and name == "dL/dA":
                raise ExerciseMistake(
                    tr(
                        f"{what} dL/dA must be zero: A reaches the output only through B (the update is "
                        "scale * B A), so while B = 0 a change of A changes nothing; yours is not zero",
                        f"{what}dL/dA 应为零：A 只通过 B 影响输出（更新量是 scale * B A），所以当 B = 0 时改变 A "
                        "不会改变任何东西；你的结果不为零",
                    )
                )
            if b_zero and name == "dL/dB" and not mine.abs().max() > 0:
                raise ExerciseMistake(
                    tr(
                        f"{what} your dL/dB is zero, but it is not: B's gradient pairs g with x A^T, the input of B, "
                        "which does not involve B and is not zero",
                        f"{what}你的 dL/dB 是零，但它不应为零：B 的梯度由 g 与 B 的输入 x A^T 配对而成，"
                        "x A^T 与 B 无关，也不为零",
                    )
                )
            raise ExerciseMistake(
                tr(
                    f"{what} your {name} differs from autograd's: start from h = x A^T (n, r), the input of B, and "
                    "ask what multiplies each entry of A and of B in y",
                    f"{what}你的 {name} 与 autograd 的结果不同：从 h = x A^T (n, r)（B 的输入）出发，想一想 y 中 "
                    "A 和 B 的每个元素各乘以什么",
                )
            )


def check_lora_gradients(fn: Callable[[Tensor, Tensor, Tensor, Tensor, float], tuple[Tensor, Tensor]]) -> bool:
    """Exercise 17.1: ``fn(x, g, lora_a, lora_b, scale)`` must return autograd's (dL/dA, dL/dB)."""
    return report(LORA_GRADIENTS, lambda: _check_lora_gradients(fn))


# --------------------------------------------------------------------------------------------- exercise 17.2
def reference_rank_matching_last_block(layer_shapes: Sequence[tuple[int, int]], last_block: int) -> int:
    """Reference solution of exercise 17.2: the smallest rank r at which LoRA beside layers of the shapes
    ``layer_shapes`` (each (out, in)) trains at least ``last_block`` numbers.

    At rank r LoRA trains r * sum(in + out) over the layers (A (r, in) and B (out, r) for each), so r is
    ``last_block / sum(in + out)`` rounded up, in integers so that an exact quotient is not rounded past.
    """
    per_rank = sum(in_features + out_features for out_features, in_features in layer_shapes)
    return -(-last_block // per_rank)


def _shipped_model_layers() -> tuple[tuple[int, int], ...]:
    d_model, kv, d_ff = 128, 64, 341  # the shipped model: width 128, 2 K/V heads of 32, SwiGLU's 341
    block = ((d_model, d_model), (kv, d_model), (kv, d_model), (d_model, d_model), (d_ff, d_model), (d_ff, d_model))
    return (*block, (d_model, d_ff)) * 4


# (layer shapes, the last block's count): the shipped model's 28 layers and its last block (notebook 17's table);
# small layers whose count divides exactly (so that "floor + 1" is wrong); Llama-2-7B's w_q and w_v and its last
# block's seven linear layers and two norms (so that rounding to the nearest rank is wrong)
_RANK_CASES: tuple[tuple[tuple[tuple[int, int], ...], int], ...] = (
    (_shipped_model_layers(), 180_480),
    (((30, 10), (10, 30), (20, 10)), 330),
    (((4096, 4096),) * 64, 4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096),
)


def _check_rank_matching_last_block(fn: Callable[[Sequence[tuple[int, int]], int], int]) -> None:
    for shapes, last_block in _RANK_CASES:
        answer = fn([tuple(shape) for shape in shapes], last_block)
        got = type(answer).__name__
        expect(
            isinstance(answer, int) and not isinstance(answer, bool),
            tr(f"return a Python int, got {got}", f"应返回 Python int，得到的是 {got}"),
        )
        expected = reference_rank_matching_last_block(shapes, last_block)
        if answer == expected:
            continue
        few = len(shapes) <= 3
        what = tr(
            f"for {f'layers {list(shapes)}' if few else f'the {len(shapes)} layers {list(shapes[:2])} ...'} and a "
            f"last block of {last_block:,} numbers,",
            f"对{f'层 {list(shapes)} ' if few else f' {len(shapes)} 个层 {list(shapes[:2])} ……'}和 {last_block:,} "
            "个参数的最后一个块，",
        )
        per_rank = sum(i + o for o, i in shapes)
        first_out, first_in = shapes[0]
        wrong_answers = [
            (
                last_block // per_rank if last_block % per_rank else None,
                tr(
                    f"{what} at your rank LoRA trains fewer numbers than the last block: you rounded the quotient "
                    "down (or to the nearest whole number); the smallest rank with at least as many rounds it up",
                    f"{what}在你给出的秩下，LoRA 训练的参数比最后一个块少：你把商向下取整了（或四舍五入了）；"
                    "“至少一样多”的最小秩要向上取整",
                ),
            ),
            (
                last_block // per_rank + 1 if not last_block % per_rank else None,
                tr(
                    f"{what} your rank is not the smallest: here the count can equal the last block's exactly, and "
                    "'at least as many' includes 'as many' (round up with math.ceil or -(-a // b); floor + 1 "
                    "overshoots when the division is exact)",
                    f"{what}你给出的秩不是最小的：这里 LoRA 的参数个数可以恰好等于最后一个块的，而“至少一样多”"
                    "包括“一样多”（用 math.ceil 或 -(-a // b) 向上取整；整除时“向下取整再加 1”会多出一）",
                ),
            ),
            (
                -(-last_block // sum(i * o for o, i in shapes)),
                tr(
                    f"{what} you counted r x in x out per layer: LoRA trains two thin matrices, A (r, in) and "
                    "B (out, r), so r (in + out) per layer",
                    f"{what}你按每层 r × in × out 计数：LoRA 训练的是两个窄矩阵 A (r, in) 和 B (out, r)，"
                    "所以每层是 r (in + out)",
                ),
            ),
            (
                -(-last_block // (first_in + first_out)),
                tr(
                    f"{what} you used the first layer's r (in + out) only: at rank r LoRA trains r (in + out) for "
                    "every layer in the list, summed",
                    f"{what}你只用了第一层的 r (in + out)：秩为 r 时，LoRA 对列表中每一层都训练 r (in + out) 个参数，"
                    "要全部加起来",
                ),
            ),
            (
                -(-last_block // sum(i for o, i in shapes)),
                tr(
                    f"{what} you counted only A (r, in) per layer: B (out, r) trains too",
                    f"{what}你每层只数了 A (r, in)：B (out, r) 也要训练",
                ),
            ),
            (
                -(-last_block // sum(o for o, i in shapes)),
                tr(
                    f"{what} you counted only B (out, r) per layer: A (r, in) trains too",
                    f"{what}你每层只数了 B (out, r)：A (r, in) 也要训练",
                ),
            ),
        ]
        for wrong, hint in wrong_answers:
            if answer == wrong:
                raise ExerciseMistake(hint)
        if answer >= last_block or answer == expected * per_rank:
            raise ExerciseMistake(
                tr(
                    f"{what} you returned a number of parameters: return the rank r",
                    f"{what}你返回的是参数个数：应返回秩 r",
                )
            )
        if answer < 1 or answer * per_rank < last_block:
            raise ExerciseMistake(
                tr(
                    f"{what} at your rank LoRA trains fewer numbers than the last block: the rank must be larger",
                    f"{what}在你给出的秩下，LoRA 训练的参数比最后一个块少：秩还要更大",
                )
            )
        raise ExerciseMistake(
            tr(
                f"{what} at your rank LoRA trains at least as many numbers as the last block, but so does a smaller "
                "rank: find the smallest",
                f"{what}在你给出的秩下，LoRA 训练的参数不少于最后一个块，但更小的秩也做得到：要找最小的那个",
            )
        )


def check_rank_matching_last_block(fn: Callable[[Sequence[tuple[int, int]], int], int]) -> bool:
    """Exercise 17.2: ``fn(layer_shapes, last_block)`` must return the smallest rank at which LoRA trains at least
    ``last_block`` numbers."""
    return report(MATCHING_RANK, lambda: _check_rank_matching_last_block(fn))

"""Exercises of notebook 07 (feed-forward, residuals, normalisation): checkers and reference solutions.

7.1 :func:`check_layer_norm_channels_first`: LayerNorm of a ``(batch, d, n)`` tensor, the layout of ``nn.Conv1d``,
    ``layer_norm_channels_first(x, gamma, beta, eps)``.
7.2 :func:`check_residual_branch_init`: initialise a residual branch for its depth, ``init_(block, depth)``.
7.3 :func:`check_deepnorm_sublayer`: a DeepNorm sub-layer (Post-LN with the residual path weighted by alpha) with
    dropout, ``deepnorm_sublayer(x, sublayer, norm, dropout, alpha)``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..core.layers import FeedForward
from ._core import Exercise, ExerciseMistake, expect, expect_close, report, tr

LAYER_NORM_CHANNELS_FIRST = Exercise("7.1", "LayerNorm with the features in dimension 1", "特征在 dim=1 时的 LayerNorm")
RESIDUAL_BRANCH_INIT = Exercise("7.2", "a residual branch scaled for its depth", "按深度缩放残差分支")
DEEPNORM_SUBLAYER = Exercise("7.3", "dropout in a DeepNorm sub-layer", "DeepNorm 子层中的 dropout")

# ---- reference solutions -------------------------------------------------------------------------------


def layer_norm_channels_first_reference(x: Tensor, gamma: Tensor, beta: Tensor, eps: float = 1e-5) -> Tensor:
    """x: (batch, d, n), the features in dimension 1; gamma, beta: (d,). Each position is normalised over its d
    features with the biased variance; the result keeps the layout (batch, d, n)."""
    mean = x.mean(dim=1, keepdim=True)  # (batch, 1, n): one mean per position
    var = x.var(dim=1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * gamma[:, None] + beta[:, None]


def init_residual_branch_reference(block: FeedForward, depth: int) -> None:
    """Re-initialise a ReLU :class:`FeedForward` in place so that Var(block(x)) / Var(x) = 1 / depth.

    He init keeps the variance (2 / fan_in before the ReLU, 1 / fan_in after it); scaling the last weights by
    1 / sqrt(depth) scales the variance by 1 / depth (GPT-2's residual scaling). Biases zero.
    """
    with torch.no_grad():
        nn.init.kaiming_normal_(block.linear1.weight, nonlinearity="relu")
        nn.init.kaiming_normal_(block.linear2.weight, nonlinearity="linear")
        block.linear2.weight.mul_(depth**-0.5)
        for layer in (block.linear1, block.linear2):
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)


def deepnorm_sublayer_reference(
    x: Tensor, sublayer: Callable[[Tensor], Tensor], norm: nn.Module, dropout: nn.Module, alpha: float
) -> Tensor:
    """x: (batch, len, d_model). DeepNorm (Wang et al., 2022): norm(alpha * x + dropout(sublayer(x))). Dropout acts
    on the sub-layer's output before the add, as in the Transformer; the residual path alpha * x is never dropped."""
    return norm(alpha * x + dropout(sublayer(x)))


# ---- checkers ------------------------------------------------------------------------------------------


def _close(a: object, b: Tensor) -> bool:
    return isinstance(a, Tensor) and a.shape == b.shape and torch.allclose(a.detach().double(), b.double(), atol=1e-5)


def _ln_channels_first(x: Tensor, gamma: Tensor | None, beta: Tensor | None, dim: int, unbiased: bool = False):
    """LayerNorm-like normalisation of a (batch, d, n) tensor over ``dim``, gamma and beta along dimension 1."""
    out = (x - x.mean(dim, keepdim=True)) / torch.sqrt(x.var(dim, unbiased=unbiased, keepdim=True) + 1e-5)
    return out if gamma is None or beta is None else out * gamma[:, None] + beta[:, None]


def check_layer_norm_channels_first(layer_norm_channels_first: Callable[..., Tensor]) -> bool:
    """Check ``layer_norm_channels_first(x, gamma, beta, eps)`` for x of shape (batch, d, n) against
    ``torch.nn.functional.layer_norm`` applied over the features of each position."""

    def call(x: Tensor, gamma: Tensor, beta: Tensor) -> object:
        try:
            return layer_norm_channels_first(x, gamma, beta, 1e-5)
        except RuntimeError as error:
            if "must match the size" in str(error):  # gamma (d,) broadcast against the last dimension, n
                raise ExerciseMistake(
                    tr(
                        "gamma and beta have shape (d,), and broadcasting lines them up with the LAST dimension, which "
                        "here holds the n positions: give them shape (d, 1) (gamma[:, None]) so they follow dimension "
                        "1, the features, the dimension the mean and variance are taken over too",
                        "gamma 和 beta 的形状是 (d,)，广播会把它们与最后一维对齐，而这里最后一维放的是 n 个位置："
                        "要把它们变成形状 (d, 1)（gamma[:, None]），让它们沿 dim=1 排列，也就是特征维，"
                        "均值和方差也是在这一维上算的",
                    )
                ) from None
            raise

    def check() -> None:
        g = torch.Generator().manual_seed(7)
        d, n = 8, 5  # d != n, so that a mix-up of the two dimensions shows
        x = torch.randn(2, d, n, generator=g) * 3 + 1.5  # (batch, d, n)
        gamma, beta = torch.randn(d, generator=g), torch.randn(d, generator=g)
        expected = F.layer_norm(x.transpose(1, 2), (d,), gamma, beta, eps=1e-5).transpose(1, 2)
        out = call(x, gamma, beta)
        if isinstance(out, Tensor) and out.shape == (2, n, d):
            raise ExerciseMistake(
                tr(
                    f"the output has shape {tuple(out.shape)}, the (batch, n, d) layout: transpose it back to "
                    "(batch, d, n)",
                    f"输出的形状是 {tuple(out.shape)}，即 (batch, n, d) 的布局：要把它转置回 (batch, d, n)。",
                )
            )
        if isinstance(out, Tensor) and out.shape == x.shape:
            over_positions = (_ln_channels_first(x, gamma, beta, dim=-1), _ln_channels_first(x, None, None, dim=-1))
            if any(_close(out, wrong) for wrong in over_positions):
                raise ExerciseMistake(
                    tr(
                        "you normalised each feature over the positions (the last dimension), which mixes positions "
                        "as BatchNorm does; LayerNorm normalises each position over its d features, here dimension 1",
                        "你让每个特征在所有位置上（最后一维）做了归一化，这会像 BatchNorm 那样把不同位置混在一起；"
                        "LayerNorm 是让每个位置在它的 d 个特征上归一化，这里就是 dim=1",
                    )
                )
            if _close(out, _ln_channels_first(x, gamma, beta, dim=1, unbiased=True)):
                raise ExerciseMistake(
                    tr(
                        "you used the unbiased variance (divide by d - 1); LayerNorm divides by d",
                        "你用的是无偏方差（除以 d - 1）；LayerNorm 除以的是 d",
                    )
                )
            if _close(out, _ln_channels_first(x, None, None, dim=1)):
                raise ExerciseMistake(
                    tr(
                        "the result is normalised but gamma and beta were not applied",
                        "结果做了归一化，但没有用上 gamma 和 beta",
                    )
                )
        expect_close(out, expected, "layer_norm_channels_first(x, gamma, beta)")
        # a nearly constant input: here eps matters, and it belongs inside the square root
        small = torch.randn(4, d, 3, generator=g) * 1e-3
        small_before = small.clone()
        ones, zeros = torch.ones(d), torch.zeros(d)
        expected_small = F.layer_norm(small.transpose(1, 2), (d,), eps=1e-5).transpose(1, 2)
        out_small = call(small, ones, zeros)
        expect(
            torch.equal(small, small_before),
            tr(
                "layer_norm_channels_first must not modify its input x in place",
                "layer_norm_channels_first 不能原地修改它的输入 x",
            ),
        )
        centred = small - small.mean(1, keepdim=True)
        outside = centred / (small.var(1, unbiased=False, keepdim=True).sqrt() + 1e-5)
        if _close(out_small, outside) and not _close(out_small, expected_small):
            raise ExerciseMistake(
                tr(
                    "eps goes inside the square root: sqrt(var + eps), not sqrt(var) + eps",
                    "eps 要放在平方根里面：sqrt(var + eps)，而不是 sqrt(var) + eps",
                )
            )
        expect_close(
            out_small,
            expected_small,
            tr(
                "layer_norm_channels_first of an almost constant input",
                "对几乎恒定的输入，layer_norm_channels_first 的结果",
            ),
            atol=1e-4,
        )

    return report(LAYER_NORM_CHANNELS_FIRST, check)


def _branch_variance_ratio(init_: Callable[[FeedForward, int], object], depth: int, blocks: int = 32) -> float:
    """Mean of Var(block(x)) / Var(x) over ``blocks`` blocks of width 32 initialised by ``init_(block, depth)``.

    The global random state is saved and restored around the measurement (the reader's init draws from it),
    so the checker gives the same verdict on every call and leaves the notebook's random numbers alone. The
    blocks are tiny: one thread runs them fastest (several threads wait for each other on a busy machine).
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(depth)
            x = torch.randn(1024, 32)
            ratios = []
            for _ in range(blocks):
                block = FeedForward(32, 128)
                init_(block, depth)
                with torch.no_grad():
                    out = block(x)
                expect(
                    isinstance(out, Tensor) and out.shape == x.shape,
                    tr(
                        "the block must still map (..., 32) to (..., 32): change its weights, not its shape",
                        "这个块仍必须把 (..., 32) 映射到 (..., 32)：要改的是它的权重，而不是它的形状",
                    ),
                )
                ratios.append((out.var() / x.var()).item())
    finally:
        torch.set_num_threads(threads)
    return sum(ratios) / len(ratios)


def _first_layer_has_he_variance(init_: Callable[[FeedForward, int], object], depth: int) -> bool:
    """True if ``init_`` gives the first layer of a (32 -> 128 -> 32) block He's variance 2/fan_in (within 20%):
    then a ratio of 1/(2 depth) comes from the scaling of the second layer, not from a missing factor 2."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(depth)
        block = FeedForward(32, 128)
        init_(block, depth)
    weight = block.linear1.weight.detach()
    return 0.8 <= weight.var().item() * weight.shape[1] / 2 <= 1.2


def check_residual_branch_init(init_residual_branch_: Callable[[FeedForward, int], object]) -> bool:
    """Check that ``init_residual_branch_(block, depth)`` gives a FeedForward block a variance ratio of 1/depth."""

    def check() -> None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            block = FeedForward(32, 128)
            default = [p.detach().clone() for p in block.parameters()]
            try:
                init_residual_branch_(block, 16)
            except RuntimeError as error:
                if "leaf Variable" in str(error):  # an in-place change of a weight outside torch.no_grad()
                    raise ExerciseMistake(
                        tr(
                            "PyTorch refuses to change a weight in place while it tracks gradients: "
                            "put the changes inside `with torch.no_grad():`, as he_init_ does",
                            "PyTorch 在跟踪梯度时不允许原地修改权重：要像 he_init_ 那样，"
                            "把修改放在 `with torch.no_grad():` 里面",
                        )
                    ) from None
                raise
        expect(
            any(not torch.equal(p, q) for p, q in zip(block.parameters(), default)),
            tr(
                "the block's weights did not change: re-initialise them in place, inside torch.no_grad()",
                "这个块的权重没有变：要在 torch.no_grad() 里面原地重新初始化它们。",
            ),
        )
        expect(
            all(layer.bias is None or not layer.bias.any() for layer in (block.linear1, block.linear2)),
            tr(
                "set both biases to zero (nn.init.zeros_): the variance ratio then depends on the weights alone",
                "要把两个偏置都设为零（nn.init.zeros_）：这样方差比就只取决于权重",
            ),
        )
        for depth in (4, 16, 64):
            ratio = _branch_variance_ratio(init_residual_branch_, depth)
            if 0.75 <= ratio * depth <= 1.33:
                continue
            if 0.75 <= ratio <= 1.33:
                raise ExerciseMistake(
                    tr(
                        f"at depth {depth} one block keeps the variance (ratio {ratio:.2f}): that is He init, which "
                        "makes a residual stack double its variance at every block; scale it down so the ratio is "
                        "1/depth",
                        f"深度为 {depth} 时，一个块保持了方差不变（比值 {ratio:.2f}）：这是 He 初始化，"
                        "它会让残差堆叠每经过一个块方差就翻倍；要把它缩小，使比值为 1/depth",
                    )
                )
            if 0.75 <= ratio * depth**2 <= 1.33:
                raise ExerciseMistake(
                    tr(
                        f"at depth {depth} the ratio is about 1/depth^2 ({ratio:.2g}): you divided the variance by "
                        "depth twice. The variance scales with the square of the weights: scale ONE layer's weights "
                        "by 1/sqrt(depth) (not by 1/depth, and not both layers)",
                        f"深度为 {depth} 时，比值约为 1/depth^2（{ratio:.2g}）：你把方差除了两次 depth。"
                        "方差随权重的平方变化：只把其中一层的权重乘以 1/sqrt(depth)（不是乘以 1/depth，"
                        "也不是两层都乘）。",
                    )
                )
            if 0.75 <= 18 * ratio * depth <= 1.33:
                raise ExerciseMistake(
                    tr(
                        f"at depth {depth} the ratio is about 1/(18 depth) ({ratio:.2g}): the scaling is right, but "
                        "it starts from PyTorch's default init, which already divides the variance by about 18; start "
                        "from He init (as he_init_ does), which keeps it",
                        f"深度为 {depth} 时，比值约为 1/(18 depth)（{ratio:.2g}）：缩放是对的，但它是从 PyTorch "
                        "的默认初始化开始的，而默认初始化本身就把方差除以了约 18；要从能保持方差的 He 初始化开始"
                        "（像 he_init_ 那样）。",
                    )
                )
            if 0.75 <= 2 * ratio * depth <= 1.33 and _first_layer_has_he_variance(init_residual_branch_, depth):
                raise ExerciseMistake(
                    tr(
                        f"at depth {depth} the ratio is about 1/(2 depth) ({ratio:.2g}): that is GPT-2's scaling, "
                        "1/sqrt(2 N) for N layers of two residual branches each; here depth counts the branches "
                        "already, so scale the second layer by 1/sqrt(depth)",
                        f"深度为 {depth} 时，比值约为 1/(2 depth)（{ratio:.2g}）：这是 GPT-2 的缩放 1/sqrt(2N)，"
                        "那里 N 层各有两个残差分支；这里的 depth 数的已经是分支，所以第二层只需乘以 1/sqrt(depth)。",
                    )
                )
            if 0.75 <= 2 * ratio * depth <= 1.33:
                raise ExerciseMistake(
                    tr(
                        f"at depth {depth} the ratio is about 1/(2 depth) ({ratio:.2g}): ReLU halves the mean "
                        "square, so the layer before it needs He's variance 2/fan_in (kaiming init with "
                        "nonlinearity='relu')",
                        f"深度为 {depth} 时，比值约为 1/(2 depth)（{ratio:.2g}）：ReLU 会让均方减半，"
                        "所以它前面那一层需要 He 的方差 2/fan_in（用 nonlinearity='relu' 的 kaiming 初始化）。",
                    )
                )
            raise ExerciseMistake(
                tr(
                    f"at depth {depth} one block multiplies the variance by {ratio:.3g}; it should be 1/depth = "
                    f"{1 / depth:.3g}",
                    f"深度为 {depth} 时，一个块把方差乘以了 {ratio:.3g}；应为 1/depth = {1 / depth:.3g}",
                )
            )

    return report(RESIDUAL_BRANCH_INIT, check)


class _FixedDropout(nn.Module):
    """Stands in for ``nn.Dropout(0.5)`` in training mode with a mask that never changes, so the checker knows
    which entries were dropped: it zeroes the same entries on every call and doubles the others."""

    def __init__(self, shape: tuple[int, ...], generator: torch.Generator) -> None:
        super().__init__()
        self.mask = (torch.rand(shape, generator=generator) < 0.5).float() * 2.0

    def forward(self, t: Tensor) -> Tensor:
        return t * self.mask


def check_deepnorm_sublayer(
    deepnorm_sublayer: Callable[[Tensor, Callable[[Tensor], Tensor], nn.Module, nn.Module, float], Tensor],
) -> bool:
    """Check ``deepnorm_sublayer(x, sublayer, norm, dropout, alpha)`` = norm(alpha * x + dropout(sublayer(x)))."""

    def check() -> None:
        g = torch.Generator().manual_seed(3)
        d, alpha = 8, 2.5
        linear = nn.Linear(d, d)
        norm = nn.LayerNorm(d)
        with torch.no_grad():
            for p in (*linear.parameters(), *norm.parameters()):
                p.copy_(torch.randn(p.shape, generator=g))
        x = torch.randn(2, 4, d, generator=g) * 2 + 1
        drop = _FixedDropout((2, 4, d), g)
        with torch.no_grad():
            out = deepnorm_sublayer(x, linear, norm, drop, alpha)
            expected = norm(alpha * x + drop(linear(x)))
            if isinstance(out, Tensor) and out.shape == expected.shape and not _close(out, expected):
                f, a = linear, alpha
                mistakes = [
                    (
                        norm(a * x + f(x)),
                        tr(
                            "dropout is missing: apply it to the sub-layer's output, before the add",
                            "缺少 dropout：要在相加之前把它用在子层的输出上",
                        ),
                    ),
                    (
                        norm(drop(a * x + f(x))),
                        tr(
                            "you dropped the sum; drop only the sub-layer's output: the residual path is never dropped",
                            "你对相加之后的和做了 dropout；只能对子层的输出做 dropout，残差路径从不做 dropout",
                        ),
                    ),
                    (
                        norm(a * drop(x) + f(x)),  # the same as drop(a * x): the fixed mask is linear
                        tr(
                            "you dropped alpha * x; the residual path is never dropped, only the sub-layer's output",
                            "你对 alpha * x 做了 dropout；残差路径从不做 dropout，只有子层的输出才做",
                        ),
                    ),
                    (
                        norm(a * x + f(drop(x))),
                        tr(
                            "dropout goes on the sub-layer's output, not on its input",
                            "dropout 要用在子层的输出上，而不是它的输入上",
                        ),
                    ),
                    (
                        drop(norm(a * x + f(x))),
                        tr(
                            "you dropped the normalised output; dropout acts before the add, on the sub-layer's output",
                            "你对归一化之后的输出做了 dropout；dropout 是在相加之前作用于子层的输出的",
                        ),
                    ),
                    (
                        norm(x + a * drop(f(x))),
                        tr(
                            "alpha weights the residual path x, not the sub-layer's output: alpha * x + dropout(...)",
                            "alpha 加权的是残差路径 x，而不是子层的输出：alpha * x + dropout(...)。",
                        ),
                    ),
                    (
                        norm(x + drop(f(x))),
                        tr(
                            "that is the paper's Post-LN: DeepNorm multiplies x by alpha before the add",
                            "这是原论文的后置归一化（Post-LN）：DeepNorm 在相加之前还要把 x 乘以 alpha",
                        ),
                    ),
                    (
                        a * x + drop(f(norm(x))),
                        tr(
                            "that is Pre-LN; DeepNorm is Post-LN: normalise the sum, and give the sub-layer x itself",
                            "这是前置归一化（Pre-LN）；DeepNorm 是后置归一化（Post-LN）：要对和做归一化，"
                            "并把 x 本身交给子层",
                        ),
                    ),
                    (
                        norm(a * x + drop(f(norm(x)))),
                        tr(
                            "the sub-layer takes x itself; the norm acts only on the sum",
                            "子层接收的是 x 本身；归一化只作用在和上",
                        ),
                    ),
                    (
                        a * norm(x + drop(f(x))),
                        tr(
                            "alpha multiplies x inside the norm, before the add, not the output",
                            "alpha 是在归一化之内、相加之前乘到 x 上的，而不是乘输出",
                        ),
                    ),
                ]
                for wrong, hint in mistakes:
                    if _close(out, wrong):
                        raise ExerciseMistake(hint)
            expect_close(out, expected, "deepnorm_sublayer(x, sublayer, norm, dropout, alpha)", atol=1e-4)

    return report(DEEPNORM_SUBLAYER, check)

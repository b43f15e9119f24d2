"""Exercises of notebook 09 (training): their checkers and reference solutions.

9.1 ``check_smoothed_loss(fn)``: ``fn(logits, target, eps, pad_id)`` is the Annotated Transformer's smoothed loss:
    KL(q || p) with q = 1 - eps on the target, 0 on <pad>, eps / (V - 2) elsewhere, summed over the non-padding
    positions and divided by their number. (The notebook builds PyTorch's convention; this is the transfer.)
9.2 ``check_noam_rate(fn)``: ``fn(step, d_model, warmup)`` is the paper's warm-up schedule.
9.3 ``check_annotated_floor(fn)``: ``fn(vocab_size, eps)`` is the lowest value cross-entropy can reach against the
    Annotated Transformer's smoothed targets (eps / (V - 2) on every class but the target and <pad>): their entropy,
    as a formula (the checker passes eps = 0 and V = 1e12, too many classes for a tensor or a loop).

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ._core import Exercise, ExerciseMistake, expect, expect_close, report, tr

SMOOTHED_LOSS = Exercise("9.1", "the Annotated Transformer's smoothed loss", "Annotated Transformer 的平滑损失")
NOAM_RATE = Exercise("9.2", "the warm-up schedule", "预热调度")
ANNOTATED_FLOOR = Exercise("9.3", "the floor of a smoothed loss", "平滑损失的下限")


def annotated_targets(target: Tensor, vocab: int, eps: float, pad_id: int = 0) -> Tensor:
    """The Annotated Transformer's smoothed targets, (..., V): fill eps / (V - 2), put 1 - eps on the target,
    set the <pad> column to 0. (Rows whose target is padding are dropped by the loss, not here.)"""
    q = torch.full((*target.shape, vocab), eps / (vocab - 2), dtype=torch.float64)
    q.scatter_(-1, target.unsqueeze(-1), 1 - eps)
    q[..., pad_id] = 0.0
    return q


def reference_smoothed_loss(logits: Tensor, target: Tensor, eps: float, pad_id: int = 0) -> Tensor:
    """Reference solution of exercise 9.1, the Annotated Transformer's loss. logits: (..., V), target: (...).
    KL(q || p) = sum_v q_v (log q_v - log p_v), with 0 log 0 = 0, summed over the positions whose target is not
    padding and divided by their number. Returns a scalar."""
    log_p = F.log_softmax(logits.double(), dim=-1)
    q = annotated_targets(target, logits.shape[-1], eps, pad_id)
    real = target != pad_id  # the rows the Annotated Transformer keeps
    kl = (torch.xlogy(q, q) - q * log_p)[real].sum()
    return (kl / real.sum()).to(logits.dtype)


def reference_noam_rate(step: int, d_model: int, warmup: int) -> float:
    """Reference solution of exercise 9.2: d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), step >= 1."""
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def reference_annotated_floor(vocab_size: int, eps: float) -> float:
    """Reference solution of exercise 9.3: the entropy of the Annotated Transformer's smoothed target for a real
    (non-padding) position, in nats. The target class gets 1 - eps, the <pad> class 0 and each of the other
    V - 2 classes eps / (V - 2); cross-entropy -sum(q log p) is smallest at p = q, where it equals this entropy."""
    if eps == 0:
        return 0.0
    return -(1 - eps) * math.log(1 - eps) - eps * math.log(eps / (vocab_size - 2))


# --------------------------------------------------------------------------------------------- exercise 9.1
def _loss_inputs() -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(9)
    logits = torch.randn(3, 6, 8, generator=g) * 2
    target = torch.randint(3, 8, (3, 6), generator=g)
    target[0, 4:] = 0
    target[1, 2:] = 0  # a lot of padding, so counting it changes the mean a lot
    return logits, target


def _kl_variant(logits: Tensor, target: Tensor, q: Tensor, rows: Tensor, count: int | Tensor) -> float:
    log_p = F.log_softmax(logits.double(), -1)
    return float((torch.xlogy(q, q) - q * log_p)[rows].sum() / count)


def _check_smoothed_loss(fn: Callable[[Tensor, Tensor, float, int], Tensor]) -> None:
    logits, target = _loss_inputs()
    vocab = logits.shape[-1]
    real = target != 0
    every = torch.ones_like(real)
    for eps in (0.0, 0.1, 0.3):
        result = fn(logits.clone(), target.clone(), eps, 0)
        expected = reference_smoothed_loss(logits, target, eps, 0)
        got = type(result).__name__
        expect(
            isinstance(result, Tensor), tr(f"return a torch.Tensor, got {got}", f"应返回 torch.Tensor，得到的是 {got}")
        )
        expect(
            result.dim() == 0,
            tr(
                f"return one number (a 0-d tensor), got shape {tuple(result.shape)}",
                f"应返回一个数（0 维张量），得到的形状是 {tuple(result.shape)}。",
            ),
        )
        r = float(result)
        # where q is 0: only the <pad> column when eps > 0, every column but the target when eps = 0
        zeros = tr("the <pad> column", "<pad> 那一列")
        if eps == 0:
            zeros = tr("every column but the target", "除目标外的每一列")
        expect(
            not math.isnan(r),
            tr(
                f"eps={eps}: the loss is nan. Where q is 0 ({zeros}), q log q is 0 * (-inf): take "
                "0 log 0 = 0 (torch.xlogy(q, q) does, and so does F.kl_div).",
                f"eps={eps}：损失是 nan。在 q 为 0 的地方（{zeros}），q log q 是 0 * (-inf)：要取 0 log 0 = 0"
                "（torch.xlogy(q, q) 就是这样做的，F.kl_div 也是）。",
            ),
        )
        q = annotated_targets(target, vocab, eps)
        entropy = float(torch.xlogy(q, q)[real].sum() / real.sum())
        if eps > 0 and abs(r - (float(expected) - entropy)) < 1e-4:
            raise ExerciseMistake(
                tr(
                    f"eps={eps}: that is the cross-entropy -sum q log p; the Annotated Transformer's loss is the KL "
                    "divergence sum q (log q - log p), which is smaller by the entropy of q.",
                    f"eps={eps}：这是交叉熵 -sum q log p；Annotated Transformer 的损失是 KL 散度 "
                    "sum q (log q - log p)，它比交叉熵小一个 q 的熵。",
                )
            )
        wrong = {
            _kl_variant(logits, target, q, every, every.sum()): tr(
                "the positions whose target is <pad> are in your sum or your count: drop those rows and divide by "
                "the number of real tokens.",
                "目标为 <pad> 的位置被算进了你的求和或计数：要去掉这些行，并除以真实词元的个数。",
            ),
            _kl_variant(logits, target, q, every, real.sum()): tr(
                "the rows whose target is <pad> are in your sum: drop them (zero those rows of q) before summing.",
                "目标为 <pad> 的行被算进了你的求和：求和之前要去掉它们（把 q 的这些行清零）。",
            ),
            _kl_variant(logits, target, q, real, every.sum()): tr(
                "divide by the number of real (non-padding) tokens, not by the number of positions.",
                "要除以真实（非填充）词元的个数，而不是位置的个数。",
            ),
        }
        if eps > 0:
            q_pad_kept = annotated_targets(target, vocab, eps)
            q_pad_kept[..., 0] = eps / (vocab - 2)
            q_pad_kept.scatter_(-1, target.unsqueeze(-1), 1 - eps)
            wrong[_kl_variant(logits, target, q_pad_kept, real, real.sum())] = tr(
                "the <pad> column of q must be 0: <pad> is never a right answer, so only the V - 2 classes that "
                "are neither the target nor <pad> share eps.",
                "q 的 <pad> 列必须为 0：<pad> 永远不是正确答案，所以 eps 只由既不是目标"
                "也不是 <pad> 的 V - 2 个类别平分。",
            )
            q_torch = (1 - eps) * F.one_hot(target, vocab).double() + eps / vocab
            wrong[_kl_variant(logits, target, q_torch, real, real.sum())] = tr(
                "that is PyTorch's convention (eps/V on every class); here the target gets exactly 1 - eps, <pad> 0 "
                "and every other class eps/(V-2).",
                "这是 PyTorch 的约定（每个类别都得到 eps/V）；这里目标恰好得到 1 - eps，<pad> 得到 0，"
                "其余每个类别得到 eps/(V-2)。",
            )
            q_others = (1 - eps) * F.one_hot(target, vocab).double()
            q_others = q_others + eps / (vocab - 1) * (1 - F.one_hot(target, vocab).double())
            wrong[_kl_variant(logits, target, q_others, real, real.sum())] = tr(
                "that spreads eps over V - 1 classes; with the <pad> column at 0, V - 2 classes share it.",
                "这是把 eps 分给了 V - 1 个类别；<pad> 列为 0 时，平分它的是 V - 2 个类别。",
            )
            q_short = torch.full_like(q, eps / (vocab - 1)).scatter(-1, target.unsqueeze(-1), 1 - eps)
            q_short[..., 0] = 0.0
            wrong[_kl_variant(logits, target, q_short, real, real.sum())] = tr(
                "with the <pad> column at 0, eps/(V-1) on the other classes leaves q summing to less than 1: "
                "only V - 2 classes (neither the target nor <pad>) share eps, eps/(V-2) each",
                "<pad> 列为 0 时，其他类别各得 eps/(V-1) 会让 q 之和小于 1：只有 V - 2 个类别（既不是目标也不是 <pad>）"
                "平分 eps，每个得到 eps/(V-2)。",
            )
            flat_logits, flat_target = logits.flatten(0, 1), target.flatten()
            pytorch_ce = F.cross_entropy(flat_logits.double(), flat_target, ignore_index=0, label_smoothing=eps)
            wrong[float(pytorch_ce)] = tr(
                "that is F.cross_entropy(..., label_smoothing=eps) as in section 4: PyTorch's convention (eps/V on "
                "every class) and a cross-entropy, not a KL divergence; build the Annotated Transformer's q "
                "yourself and take sum q (log q - log p)",
                "这是第 4 节里的 F.cross_entropy(..., label_smoothing=eps)：它用的是 PyTorch 的约定（每个类别 eps/V），"
                "而且是交叉熵，不是 KL 散度；要自己构造 Annotated Transformer 的 q，再求 sum q (log q - log p)。",
            )
        q_rows = q * real.unsqueeze(-1)  # the pad rows zeroed, as the Annotated Transformer does
        for count, how, how_zh in (
            (real.sum() * vocab, "real positions", "真实位置数"),
            (target.numel() * vocab, "positions", "位置数"),
        ):
            wrong[_kl_variant(logits, target, q_rows, every, count)] = tr(
                f'F.kl_div(..., reduction="mean") divides by every element ({how} x V classes), not by the number '
                'of tokens: use reduction="sum" and divide by the number of real tokens',
                f'F.kl_div(..., reduction="mean") 除以的是元素总数（{how_zh} x V 个类别），而不是词元的个数：'
                '要用 reduction="sum"，再除以真实词元的个数',
            )
        wrong[_kl_variant(logits, target, q_rows, every, target.shape[0])] = tr(
            'reduction="batchmean" divides by the first dimension (here the batch of sequences), not by the number '
            'of tokens: use reduction="sum" and divide by the number of real tokens',
            'reduction="batchmean" 除以的是第一维的大小（这里是序列批次的大小），而不是词元的个数：'
            '要用 reduction="sum"，再除以真实词元的个数',
        )
        for value, hint in wrong.items():
            if abs(r - value) < 1e-4 and abs(r - float(expected)) > 1e-4:
                raise ExerciseMistake(tr(f"eps={eps}: {hint}", f"eps={eps}：{hint}"))
        expect_close(result, expected, tr(f"the loss for eps={eps}", f"eps={eps} 时的损失"), atol=1e-4)


def check_smoothed_loss(fn: Callable[[Tensor, Tensor, float, int], Tensor]) -> bool:
    """Exercise 9.1: ``fn(logits, target, eps, pad_id)`` returns the Annotated Transformer's loss over real tokens."""
    return report(SMOOTHED_LOSS, lambda: _check_smoothed_loss(fn))


# --------------------------------------------------------------------------------------------- exercise 9.2
def _check_noam_rate(fn: Callable[[int, int, int], float]) -> None:
    cases = [(1, 512, 4000), (100, 512, 4000), (4000, 512, 4000), (20000, 512, 4000), (50, 64, 100), (900, 64, 100)]
    values = []
    for step, d_model, warmup in cases:
        result = fn(step, d_model, warmup)
        if isinstance(result, torch.Tensor):
            raise ExerciseMistake(
                tr(
                    "return a Python float, not a tensor: compute with Python numbers (**, min) or end with .item()",
                    "应返回 Python 浮点数，而不是张量：用 Python 的数来算（**、min），或者最后调用 .item()",
                )
            )
        try:
            values.append(float(result))
        except (TypeError, ValueError):
            got = type(result).__name__
            raise ExerciseMistake(tr(f"return a number, got {got}", f"应返回一个数，得到的是 {got}")) from None
    expected = [reference_noam_rate(*case) for case in cases]

    def matches(variant: Callable[[int, int, int], float]) -> bool:
        """Does the answer equal ``variant`` on every case (and differ from the reference somewhere)?"""
        wrong = [variant(*case) for case in cases]
        return all(abs(v - w) < 1e-12 for v, w in zip(values, wrong)) and wrong != expected

    # Each slip is recognised on all cases together: at some steps two slips give the same rate.
    slips = [
        (
            lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**1.5),
            tr(
                "the warm-up line is step * warmup ** -1.5 (a negative exponent): with warmup ** 1.5 it is so large "
                "that min(...) always picks step ** -0.5, and there is no warm-up",
                "预热阶段的直线是 step * warmup ** -1.5（指数为负）：换成 warmup ** 1.5 它就大得多，"
                "min(...) 总是选中 step ** -0.5，也就没有预热了",
            ),
        ),
        (
            lambda s, d, w: d**-0.5 * max(s**-0.5, s * w**-1.5),
            tr(
                "use min(...), not max(...): the rate follows the smaller of the two curves",
                "要用 min(...)，而不是 max(...)：学习率沿着两条曲线中较小的那条走",
            ),
        ),
        (
            lambda s, d, w: min(s**-0.5, s * w**-1.5),
            tr("multiply by d_model ** -0.5", "还要乘以 d_model ** -0.5"),
        ),
        (
            lambda s, d, w: d**-0.5 * min((s + 1) ** -0.5, (s + 1) * w**-1.5),
            tr(
                "step is already counted from 1 (the first update is step 1, the way the package's loop calls it): "
                "use it as it is, without adding 1",
                "step 已经从 1 开始计数（第一次更新就是第 1 步，课程包的训练循环也这样传入）：直接使用，不要再加 1",
            ),
        ),
        (
            lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-0.5),
            tr(
                "the warm-up line is step * warmup ** -1.5: with warmup ** -0.5 it rises too steeply and does not meet "
                "step ** -0.5 at step = warmup",
                "预热阶段的直线是 step * warmup ** -1.5：写成 warmup ** -0.5 它升得太陡，在 step = warmup 处也接不上 "
                "step ** -0.5",
            ),
        ),
    ]
    for variant, hint in slips:
        if matches(variant):
            raise ExerciseMistake(hint)
    for (step, d_model, warmup), value, want in zip(cases, values, expected):
        expect(
            abs(value - want) <= 1e-9 * max(1.0, abs(want)) + 1e-12,
            tr(
                f"step={step}, d_model={d_model}, warmup={warmup}: expected {want:.6g}, got {value:.6g}",
                f"step={step}, d_model={d_model}, warmup={warmup}：应为 {want:.6g}，得到的是 {value:.6g}",
            ),
        )


def check_noam_rate(fn: Callable[[int, int, int], float]) -> bool:
    """Exercise 9.2: ``fn(step, d_model, warmup)`` returns d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)."""
    return report(NOAM_RATE, lambda: _check_noam_rate(fn))


# --------------------------------------------------------------------------------------------- exercise 9.3
def _entropy(probabilities: list[tuple[float, int]]) -> float:
    """-sum q log q for (value, how many classes have it) pairs, with 0 log 0 = 0."""
    return -sum(count * q * math.log(q) for q, count in probabilities if q > 0)


# The last cases need a formula: at eps = 0 a formula must take 0 log 0 = 0, and V = 1e12 (a float) is far too
# many classes to build q as a tensor or to loop over.
_FLOOR_CASES = ((15, 0.1), (37000, 0.1), (5, 0.4), (3, 0.2), (15, 0.0), (1e12, 0.1))


def _check_annotated_floor(fn: Callable[[int, float], float]) -> None:
    for vocab, eps in _FLOOR_CASES:
        case = f"V={vocab:g}, eps={eps}"
        try:
            result = fn(vocab, eps)
        except NotImplementedError:  # a RuntimeError too: leave it to report()
            raise
        except ValueError as error:
            if eps == 0:
                raise ExerciseMistake(
                    tr(
                        f"{case}: your code raised ValueError ({error}); with eps = 0 the terms eps log(...) are "
                        "0 log 0, which counts as 0, so the floor is 0: handle eps = 0 on its own",
                        f"{case}：你的代码抛出了 ValueError（{error}）；eps = 0 时，eps log(...) 这些项是 0 log 0，"
                        "按 0 计算，所以下限是 0，要单独处理 eps = 0 的情况",
                    )
                ) from None
            raise
        except (TypeError, RuntimeError, MemoryError, OverflowError) as error:
            if vocab < 1e6:
                raise
            name = type(error).__name__
            raise ExerciseMistake(
                tr(
                    f"{case}: your code raised {name}; write the floor as a formula in V and eps, "
                    "without a tensor or a loop over the classes: the V - 2 classes that share eps all have the same "
                    "q, so their terms add up to one expression",
                    f"{case}：你的代码抛出了 {name}；要把下限写成关于 V 和 eps 的公式，不用张量，也不对类做循环。"
                    "共同分到 eps 的 V - 2 个类别的 q 都相同，它们的项可以合成一个表达式",
                )
            ) from None
        try:
            value = float(result)
        except (TypeError, ValueError):
            got = type(result).__name__
            raise ExerciseMistake(tr(f"return a number, got {got}", f"应返回一个数，得到的是 {got}")) from None
        expected = reference_annotated_floor(vocab, eps)
        if abs(value - expected) <= 1e-9 * max(1.0, expected):
            continue
        if eps == 0:
            raise ExerciseMistake(
                tr(
                    f"{case}: q is one-hot, so its entropy (the floor) is 0; got {value:.6g}",
                    f"{case}：q 是独热的，所以它的熵（即下限）是 0；得到的是 {value:.6g}",
                )
            )
        wrong = {
            _entropy([(1 - eps + eps / vocab, 1), (eps / vocab, vocab - 1)]): tr(
                "that is the floor of PyTorch's convention (eps/V on every class, the target included); here the "
                "target gets exactly 1 - eps and eps is shared by the V - 2 classes that are neither the target "
                "nor <pad>.",
                "这是 PyTorch 约定下的下限（每个类别都得到 eps/V，目标也不例外）；这里目标恰好得到 1 - eps，"
                "eps 由既不是目标也不是 <pad> 的 V - 2 个类别平分。",
            ),
            _entropy([(1 - eps, 1), (eps / (vocab - 1), vocab - 1)]): tr(
                "that spreads eps over V - 1 classes; the Annotated Transformer also gives the <pad> column 0, "
                "so V - 2 classes share eps.",
                "这是把 eps 分给了 V - 1 个类别；Annotated Transformer 还让 <pad> 列为 0，"
                "所以平分 eps 的是 V - 2 个类别。",
            ),
            -eps * math.log(eps / (vocab - 2)): tr(
                "the target class is in q too: add its term -(1 - eps) log(1 - eps).",
                "目标类也在 q 里：要加上它的项 -(1 - eps) log(1 - eps)。",
            ),
            0.0: tr(
                "0 is the floor of a KL divergence, KL(q || p) = cross-entropy - H(q) (what the Annotated "
                "Transformer prints); the cross-entropy itself cannot go below the entropy of q.",
                "0 是 KL 散度 KL(q || p) = 交叉熵 - H(q) 的下限（Annotated Transformer 打印的就是它）；"
                "而交叉熵本身不可能低于 q 的熵。",
            ),
        }
        for floor, hint in wrong.items():
            if abs(value - floor) <= 1e-9 * max(1.0, abs(floor)):
                raise ExerciseMistake(tr(f"{case}: {hint}", f"{case}：{hint}"))
        if abs(value + expected) <= 1e-9 * max(1.0, expected):
            raise ExerciseMistake(
                tr(
                    f"{case}: check the sign: the entropy -sum q log q is positive.",
                    f"{case}：检查一下符号，熵 -sum q log q 是正的。",
                )
            )
        if abs(value - expected) <= 1e-5 * max(1.0, expected):
            raise ExerciseMistake(
                tr(
                    f"{case}: right to about 6 digits ({value:.10g} against {expected:.10g}), the precision of "
                    "float32: compute with Python floats and math.log, as a formula, so that V = 1e12 works too",
                    f"{case}：大约前 6 位是对的（{value:.10g} 对 {expected:.10g}），这正是 float32 的精度。"
                    "要用 Python 的 float 和 math.log 按公式计算，这样 V = 1e12 也能算",
                )
            )
        if abs(value - expected / math.log(2)) <= 1e-9 * max(1.0, expected):
            raise ExerciseMistake(
                tr(
                    f"{case}: that is in bits; the floor is asked in nats (math.log, not math.log2).",
                    f"{case}：这是以比特为单位的；题目要的是以奈特（nats）为单位的下限"
                    "（用 math.log，而不是 math.log2）。",
                )
            )
        raise ExerciseMistake(
            tr(
                f"{case}: expected {expected:.10g} nats, got {value:.10g}",
                f"{case}：应为 {expected:.10g} 奈特，得到的是 {value:.10g}",
            )
        )


def check_annotated_floor(fn: Callable[[int, float], float]) -> bool:
    """Exercise 9.3: ``fn(vocab_size, eps)`` returns the entropy of the Annotated Transformer's smoothed target."""
    return report(ANNOTATED_FLOOR, lambda: _check_annotated_floor(fn))

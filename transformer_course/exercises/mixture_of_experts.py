"""Exercises of notebook 16 (mixture of experts): their checkers and reference solutions.

16.1 ``check_balance_loss(fn)``: ``fn(probs, experts)`` returns Switch Transformer's load-balancing loss
     ``num_experts * sum_i f_i P_i`` of probs (tokens, num_experts) and the chosen experts (tokens, top_k), with a
     gradient to ``probs``.
16.2 ``check_priority_capacity(fn)``: ``fn(experts, gates, capacity, num_experts)`` returns which assignments an
     expert of limited capacity keeps when the assignments with the largest gates are served first:
     a boolean (tokens, top_k).
16.3 ``check_expert_choice(fn)``: ``fn(probs, capacity)`` routes the other way round: each expert picks the
     ``capacity`` tokens it has the highest router probability for. probs (tokens, num_experts) -> (token indices
     (num_experts, capacity), gates (num_experts, capacity)).

Each checker prints one line of feedback and returns ``True`` only for a correct answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ._core import (
    Exercise,
    ExerciseMistake,
    expect,
    expect_tensor,
    explain_shape_error,
    is_index_assignment_mismatch,
    report,
    tr,
)

BALANCE_LOSS = Exercise("16.1", "the load-balancing loss", "负载均衡损失")
PRIORITY_CAPACITY = Exercise("16.2", "capacity served by priority", "按优先级分配容量")
EXPERT_CHOICE = Exercise("16.3", "experts choose their tokens", "由专家挑选词元")


def _router_probs(tokens: int, num_experts: int, seed: int) -> Tensor:
    """(tokens, num_experts) softmax probabilities of a random router, float64, no two equal in a column."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(tokens, num_experts, generator=generator, dtype=torch.float64).mul(1.5).softmax(dim=-1)


# ----------------------------------------------------------------------------------------------- exercise 16.1
def reference_balance_loss(probs: Tensor, experts: Tensor) -> Tensor:
    """Reference solution of exercise 16.1: Switch Transformer's load-balancing loss, for top-k routing.

    probs (tokens, num_experts): the router's softmax; experts (tokens, top_k): each token's chosen experts.
    f_i is the share of the tokens * top_k assignments that went to expert i (counted, no gradient), P_i the mean
    router probability of expert i (with a gradient). Returns num_experts * sum_i f_i P_i, a scalar: 1 when both
    are even, up to num_experts when one expert takes everything with certainty.
    """
    num_experts = probs.shape[-1]
    counts = torch.bincount(experts.flatten(), minlength=num_experts).to(probs.dtype)
    share = counts / experts.numel()  # f: (num_experts,), sums to 1
    mean_prob = probs.mean(dim=0)  # P: (num_experts,)
    return num_experts * (share * mean_prob).sum()


def _balance_cases() -> list[tuple[Tensor, Tensor]]:
    cases = []
    for tokens, num_experts, top_k, seed in ((12, 4, 2, 1600), (9, 6, 1, 1601), (20, 8, 2, 1602)):
        probs = _router_probs(tokens, num_experts, seed)
        cases.append((probs, probs.topk(top_k, dim=-1).indices))
    # a lopsided router: every token's first choice is expert 0
    probs = _router_probs(10, 4, 1603)
    probs = (probs + torch.tensor([2.0, 0.0, 0.0, 0.0], dtype=torch.float64)).div(3.0)
    cases.append((probs / probs.sum(dim=-1, keepdim=True), probs.topk(2, dim=-1).indices))
    return cases


def _check_balance_loss(fn: Callable[[Tensor, Tensor], Tensor]) -> None:
    for probs, experts in _balance_cases():
        tokens, num_experts = probs.shape
        top_k = experts.shape[1]
        what = tr(
            f"for {tokens} tokens, {num_experts} experts, top-{top_k}",
            f"在 {tokens} 个词元、{num_experts} 个专家、top-{top_k} 时，",
        )
        leaf = probs.clone().requires_grad_(True)
        answer = fn(leaf, experts.clone())
        got = type(answer).__name__
        expect(
            isinstance(answer, Tensor) and answer.numel() == 1,
            tr(
                f"return the loss as a tensor with one element, got {got}",
                f"应以只含一个元素的张量返回损失，得到的是 {got}",
            ),
        )
        expected = reference_balance_loss(probs, experts).item()
        value = answer.detach().double().item()
        expect(
            math.isfinite(value),
            tr(
                f"{what} the loss is {value}: a division by a count that is 0 for an expert nobody chose?",
                f"{what}损失是 {value}：是不是除以了某个没人选的专家的计数（它为 0）？",
            ),
        )
        close = 1e-6 * max(1.0, abs(expected))  # float32 arithmetic is fine
        if abs(value - expected) > close:
            share = torch.bincount(experts.flatten(), minlength=num_experts).double() / experts.numel()
            first = torch.bincount(experts[:, 0], minlength=num_experts).double() / tokens
            mean_prob = probs.mean(dim=0)
            chosen = F.one_hot(experts, num_experts).sum(dim=1).double()  # (tokens, E): 1 where the token chose i
            chosen_sum = (probs * chosen).sum(dim=0)  # each expert's probabilities, over the tokens that chose it
            only_chosen = tr(
                "P_i is the mean of expert i's probability over all the tokens, probs.mean(dim=0), whether they "
                "chose expert i or not; you used only the probabilities of the chosen experts",
                "P_i 是专家 i 的概率在所有词元上的平均 probs.mean(dim=0)，不管词元有没有选它；你只用了被选中专家的概率",
            )
            hints = [
                (num_experts * (share * chosen_sum / tokens).sum().item(), only_chosen),
                (num_experts * (share * chosen_sum / chosen.sum(dim=0).clamp(min=1)).sum().item(), only_chosen),
                (
                    expected / num_experts,
                    tr(
                        "multiply by num_experts (or sum over the experts instead of taking the mean), so that "
                        "an even load gives 1",
                        "要乘以 num_experts（或者对专家求和而不是取平均），这样负载均匀时损失才是 1",
                    ),
                ),
                (
                    expected * experts.numel(),
                    tr(
                        "f_i is a share: divide expert i's count by the number of assignments, tokens * top_k",
                        "f_i 是比例：把专家 i 的计数除以分配的总数，即 tokens * top_k",
                    ),
                ),
                (
                    expected * top_k,
                    tr(
                        "the shares f_i must sum to 1: divide the counts by tokens * top_k, not by tokens",
                        "各个 f_i 之和应为 1：计数要除以 tokens * top_k，而不是 tokens",
                    ),
                ),
                (
                    num_experts * (first * mean_prob).sum().item(),
                    tr(
                        "count every one of a token's top_k choices in f, not only its first",
                        "计算 f 时要把每个词元的 top_k 个选择都算上，而不只是第一个",
                    ),
                ),
                (
                    num_experts * (mean_prob * mean_prob).sum().item(),
                    tr(
                        "f_i comes from the choices (how many assignments expert i received), P_i from the "
                        "probabilities; you used the probabilities for both",
                        "f_i 来自选择结果（专家 i 收到了多少个分配），P_i 来自概率；你两处都用了概率",
                    ),
                ),
                (
                    num_experts * (share * share).sum().item(),
                    tr(
                        "P_i is the mean router probability of expert i, probs.mean(dim=0); you used the counted "
                        "shares for both",
                        "P_i 是专家 i 的平均路由概率 probs.mean(dim=0)；你两处都用了计数得到的比例",
                    ),
                ),
                (
                    num_experts * (share * probs.sum(dim=0)).sum().item(),
                    tr(
                        "P_i is a mean over the tokens, probs.mean(dim=0), not a sum",
                        "P_i 是对词元取的平均 probs.mean(dim=0)，而不是求和",
                    ),
                ),
            ]
            for wrong, hint in hints:
                if abs(value - wrong) <= close * max(1.0, abs(wrong)) and abs(wrong - expected) > close:
                    raise ExerciseMistake(tr(f"{what} {hint}", f"{what}{hint}"))
            raise ExerciseMistake(
                tr(
                    f"{what} the loss should be {expected:.6f}, got {value:.6f}",
                    f"{what}损失应为 {expected:.6f}，得到的是 {value:.6f}",
                )
            )
        expect(
            answer.requires_grad,
            tr(
                f"{what} the value is right but it has no gradient: the loss trains the router only through "
                "P_i = probs.mean(dim=0), so keep that part a tensor (no .item(), .detach() or .tolist())",
                f"{what}数值正确，但它没有梯度：这个损失只通过 P_i = probs.mean(dim=0) 训练路由器，"
                "所以这部分要保持为张量（不要用 .item()、.detach() 或 .tolist()）",
            ),
        )
        (grad,) = torch.autograd.grad(answer.sum(), leaf)
        share = torch.bincount(experts.flatten(), minlength=num_experts).double() / experts.numel()
        expected_grad = (num_experts * share / tokens).expand(tokens, num_experts)
        expect(
            torch.allclose(grad.double(), expected_grad, atol=1e-6),
            tr(
                f"{what} the value is right but its gradient is not: only P_i may carry a gradient; compute f_i "
                "from the counts of the chosen experts (torch.bincount or one_hot), which carry none",
                f"{what}数值正确，梯度却不对：只有 P_i 可以带梯度；f_i 要由所选专家的计数算出"
                "（torch.bincount 或 one_hot），它们不带梯度",
            ),
        )


def check_balance_loss(fn: Callable[[Tensor, Tensor], Tensor]) -> bool:
    """Exercise 16.1: ``fn(probs, experts)`` must return num_experts * sum_i f_i P_i with a gradient through P."""
    return report(BALANCE_LOSS, lambda: _check_balance_loss(fn))


# ----------------------------------------------------------------------------------------------- exercise 16.2
def _kept_in_order(experts: Tensor, order: Tensor, capacity: int, num_experts: int) -> Tensor:
    """Serve the assignments (tokens * top_k, flattened token-major) in ``order``; each expert keeps its first
    ``capacity``. Returns kept (tokens, top_k) bool."""
    flat = experts.flatten()[order]  # the experts of the assignments, in the order they are served
    position = (F.one_hot(flat, num_experts).cumsum(dim=0) - 1).gather(1, flat[:, None]).squeeze(1)
    kept = torch.empty_like(position, dtype=torch.bool)
    kept[order] = position < capacity
    return kept.view_as(experts)


def _whole_tokens_by_confidence(experts: Tensor, gates: Tensor, capacity: int, num_experts: int) -> list[Tensor]:
    """Three readings of V-MoE's batch prioritized routing, the likeliest answer copied from the exercise's first
    sentence: tokens ordered by their largest gate, and all first choices served before any second choice (the j-th
    choice taken as column j, or as the j-th largest gate of the row), or each token's choices served together.
    Each returns kept (tokens, top_k) bool."""
    tokens, top_k = experts.shape
    by_confidence = torch.argsort(gates.max(dim=1).values, descending=True, stable=True)
    within = torch.argsort(gates, dim=1, descending=True, stable=True)
    as_columns = torch.cat([by_confidence * top_k + j for j in range(top_k)])
    as_ranks = torch.cat([by_confidence * top_k + within[by_confidence, j] for j in range(top_k)])
    whole = (by_confidence[:, None] * top_k + within[by_confidence]).flatten()  # each token's choices together
    return [_kept_in_order(experts, order, capacity, num_experts) for order in (as_columns, as_ranks, whole)]


def reference_priority_capacity(experts: Tensor, gates: Tensor, capacity: int, num_experts: int) -> Tensor:
    """Reference solution of exercise 16.2: capacity served by priority, a simpler rule in the spirit of V-MoE's
    batch prioritized routing (which orders whole tokens by a confidence score and serves every first choice first).

    experts, gates (tokens, top_k): each token's chosen experts and their gates. Every expert takes at most
    ``capacity`` assignments; the assignments with the largest gates are served first (equal gates: the earlier
    token first, then its earlier choice). Returns kept (tokens, top_k) bool: True where the assignment is kept.
    """
    order = torch.argsort(gates.flatten(), descending=True, stable=True)
    return _kept_in_order(experts, order, capacity, num_experts)


def _priority_cases() -> list[tuple[Tensor, Tensor, int, int]]:
    """(experts, gates, capacity, num_experts) cases. The first lists the choices of tokens 0, 2, 4, ... worst
    first: nothing in the exercise says a token's choices come sorted, and that case tells a sort within each
    token's row apart from a sort of all the assignments."""
    cases = []
    for tokens, num_experts, top_k, capacity, seed in ((12, 4, 2, 4, 1613), (10, 3, 1, 2, 1611), (16, 4, 2, 5, 1612)):
        probs = _router_probs(tokens, num_experts, seed)
        gates, experts = probs.topk(top_k, dim=-1)
        cases.append((experts, gates / gates.sum(dim=-1, keepdim=True), capacity, num_experts))
    experts, gates, capacity, num_experts = cases[0]
    experts[::2], gates[::2] = experts[::2].flip(1).clone(), gates[::2].flip(1).clone()
    return cases


def _check_priority_capacity(fn: Callable[[Tensor, Tensor, int, int], Tensor]) -> None:
    for experts, gates, capacity, num_experts in _priority_cases():
        tokens, top_k = experts.shape
        what = tr(
            f"for {tokens} tokens, {num_experts} experts, top-{top_k} and capacity {capacity}",
            f"在 {tokens} 个词元、{num_experts} 个专家、top-{top_k}、容量为 {capacity} 时，",
        )
        try:
            answer = fn(experts.clone(), gates.clone(), capacity, num_experts)
        except RuntimeError as error:
            if not is_index_assignment_mismatch(error):
                raise
            raise ExerciseMistake(
                tr(
                    f"your code raised RuntimeError: {error}. kept[order] = ... writes one value per assignment, so "
                    "build kept flat while you write it (torch.zeros(tokens * top_k, dtype=torch.bool)) and return "
                    "kept.view_as(experts)",
                    f"你的代码出错了：{explain_shape_error(error)}。kept[order] = ... 是给每个分配写一个值，"
                    "所以写入时 kept 应是一维的（torch.zeros(tokens * top_k, dtype=torch.bool)），"
                    "最后再返回 kept.view_as(experts)",
                )
            ) from error
        expect_tensor(answer, tr("kept", "kept"), (tokens, top_k), "(tokens, top_k)")
        expect(
            answer.dtype == torch.bool,
            tr(f"kept must be a boolean tensor, got {answer.dtype}", f"kept 应是布尔张量，得到的是 {answer.dtype}"),
        )
        expected = reference_priority_capacity(experts, gates, capacity, num_experts)
        if torch.equal(answer, expected):
            continue
        per_expert = torch.bincount(experts[answer], minlength=num_experts)
        order = torch.argsort(gates.flatten(), descending=True, stable=True)
        first_come = _kept_in_order(experts, torch.arange(experts.numel()), capacity, num_experts)
        within = torch.argsort(gates, dim=1, descending=True, stable=True)  # each token's choices, best first
        row_sorted = first_come.gather(1, within)  # served in token order, answers left in each row's sorted order
        in_sorted_order = expected.flatten()[order].view_as(experts)  # the j-th answer left at place j
        not_inverted = expected.flatten()[order][order].view_as(experts)  # (answers in sorted order)[order]
        smallest_first = _kept_in_order(
            experts, torch.argsort(gates.flatten(), descending=False, stable=True), capacity, num_experts
        )
        everything = torch.ones_like(expected)
        one_more = _kept_in_order(experts, order, capacity + 1, num_experts)
        ascending_flipped = _kept_in_order(
            experts, torch.argsort(gates.flatten(), stable=True).flip(0), capacity, num_experts
        )
        if torch.equal(answer, first_come):
            hint = tr(
                "you served the assignments in token order (first come, first served, the notebook's rule); here "
                "the largest gates go first: flatten the tokens * top_k assignments and sort them all by gate, "
                "descending (sorting only each token's own choices changes nothing: they go to different experts)",
                "你是按词元顺序（先到先得，也就是笔记本里的规则）处理分配的，而这里要先处理门控值最大的。"
                "应把 tokens * top_k 个分配展平，再全部按门控值从大到小排序。只在每个词元自己的选择之内排序"
                "不会改变任何结果，因为它们去的是不同的专家",
            )
        elif any(
            torch.equal(answer, kept) for kept in _whole_tokens_by_confidence(experts, gates, capacity, num_experts)
        ):
            hint = tr(
                "you queued whole tokens by their largest gate, as V-MoE does; the simpler rule ranks each "
                "assignment by its own gate, so sort all tokens * top_k gates together",
                "你是按词元最大的门控值给整个词元排队，这是 V-MoE 的做法；这里的简化规则按每个分配自己的门控值排序，"
                "所以要把 tokens * top_k 个门控值放在一起排序",
            )
        elif torch.equal(answer, ascending_flipped):
            hint = tr(
                "equal gates are served in the wrong order (with top-1 every gate is 1, so all of them tie): the "
                "earlier token goes first; flipping an ascending sort reverses the ties, so sort with "
                "descending=True, stable=True",
                "门控值相等的分配处理顺序反了（top-1 时每个门控值都是 1，全部相等）：应是前面的词元先处理；"
                "把升序排序结果翻转会把平局的顺序也反过来，所以要用 descending=True、stable=True 排序",
            )
        elif torch.equal(answer, row_sorted):
            hint = tr(
                "you sorted each token's own choices by gate, row by row, and left the tokens in order (and the "
                "answers in each row's sorted order); sort all the assignments together: flatten experts and gates "
                "to tokens * top_k, then argsort the gates",
                "你只在每个词元自己的选择之内（逐行）按门控值排序，词元仍按原顺序（答案也留在了每行排序后的顺序）；"
                "应把所有分配放在一起排序：先把 experts 和 gates 展平成 tokens * top_k 个，再对门控值做 argsort",
            )
        elif torch.equal(answer, in_sorted_order):
            hint = tr(
                "you left the answers in sorted order: the j-th of them belongs to the assignment order[j]; put "
                "them back in token order with kept[order] = ... before reshaping",
                "你把答案留在了排序后的顺序：其中第 j 个属于分配 order[j]；"
                "在改变形状之前用 kept[order] = ... 把它们放回词元顺序",
            )
        elif torch.equal(answer, not_inverted):
            hint = tr(
                "you indexed the sorted answers with the permutation, (...)[order], which sorts them a second time; "
                "undo it instead: kept[order] = ... writes the j-th answer to the assignment order[j]",
                "你用排列去索引排序后的答案，即 (...)[order]，这等于又排了一次序；应当把它还原："
                "kept[order] = ... 会把第 j 个答案写到分配 order[j] 上",
            )
        elif torch.equal(answer, smallest_first):
            hint = tr(
                "you served the smallest gates first; sort by gate in descending order",
                "你先处理了门控值最小的分配；应按门控值从大到小排序",
            )
        elif torch.equal(answer, one_more):
            hint = tr(
                f"each expert kept capacity + 1 = {capacity + 1} assignments: the positions in a queue start at 0, "
                "so keep position < capacity",
                f"每个专家保留了 capacity + 1 = {capacity + 1} 个分配：队列中的位置从 0 开始，所以保留位置 < capacity",
            )
        elif torch.equal(answer, everything):
            hint = tr(
                "nothing was dropped, but some experts are over capacity", "没有丢弃任何分配，但有的专家超出了容量"
            )
        elif int(per_expert.max()) > capacity:
            hint = tr(
                f"an expert keeps {int(per_expert.max())} assignments, more than its capacity {capacity}: count "
                "the queue of each expert separately",
                f"有一个专家保留了 {int(per_expert.max())} 个分配，超过了容量 {capacity}：每个专家的队列要分别计数",
            )
        else:
            hint = tr(
                f"the kept assignments should be {expected.int().tolist()}, got {answer.int().tolist()}",
                f"应保留的分配是 {expected.int().tolist()}，得到的是 {answer.int().tolist()}",
            )
        raise ExerciseMistake(tr(f"{what} {hint}", f"{what}{hint}"))


def check_priority_capacity(fn: Callable[[Tensor, Tensor, int, int], Tensor]) -> bool:
    """Exercise 16.2: ``fn(experts, gates, capacity, num_experts)`` must keep, per expert, the ``capacity``
    assignments with the largest gates."""
    return report(PRIORITY_CAPACITY, lambda: _check_priority_capacity(fn))


# ----------------------------------------------------------------------------------------------- exercise 16.3
def reference_expert_choice(probs: Tensor, capacity: int) -> tuple[Tensor, Tensor]:
    """Reference solution of exercise 16.3: expert-choice routing (Zhou et al., 2022).

    probs (tokens, num_experts), the router's softmax over the experts -> (tokens (num_experts, capacity) long,
    gates (num_experts, capacity)): row e holds the ``capacity`` tokens with the highest probability for expert e,
    highest first, and those probabilities, unchanged.
    """
    gates, tokens = probs.topk(capacity, dim=0)  # (capacity, num_experts): down each expert's column
    return tokens.T, gates.T


def _canonical(tokens: Tensor, gates: Tensor) -> tuple[Tensor, Tensor]:
    """Each row sorted by token index, so that two answers that differ only in their order within a row compare
    equal."""
    order = tokens.argsort(dim=1)
    return tokens.gather(1, order), gates.gather(1, order)


def _same_choice(answer: tuple[Tensor, Tensor], expected: tuple[Tensor, Tensor]) -> bool:
    tokens, gates = _canonical(*answer)
    tokens_e, gates_e = _canonical(*expected)
    return torch.equal(tokens, tokens_e) and torch.allclose(gates.double(), gates_e, atol=1e-9)


_EXPERT_CHOICE_CASES = ((10, 4, 3, 160), (12, 3, 5, 161), (7, 5, 2, 162))  # tokens, experts, capacity, seed


def _check_expert_choice(fn: Callable[[Tensor, int], tuple[Tensor, Tensor]]) -> None:
    for num_tokens, num_experts, capacity, seed in _EXPERT_CHOICE_CASES:
        probs = _router_probs(num_tokens, num_experts, seed)
        what = tr(
            f"for {num_tokens} tokens, {num_experts} experts and capacity {capacity}",
            f"在 {num_tokens} 个词元、{num_experts} 个专家、容量为 {capacity} 时，",
        )
        answer = fn(probs.clone(), capacity)
        expect(
            isinstance(answer, tuple | list) and len(answer) == 2,
            tr(
                f"return two tensors, (tokens, gates), got {type(answer).__name__}",
                f"应返回两个张量 (tokens, gates)，得到的是 {type(answer).__name__}",
            ),
        )
        tokens, gates = answer
        if isinstance(tokens, Tensor) and tuple(tokens.shape) == (num_tokens, capacity) != (num_experts, capacity):
            raise ExerciseMistake(
                tr(
                    f"{what} your tokens have shape {tuple(tokens.shape)}, (tokens, capacity): that is each token "
                    "choosing experts; here each expert chooses tokens, so take the top-k down the tokens axis "
                    "(dim=0) and return one row per expert",
                    f"{what}你的 tokens 形状是 {tuple(tokens.shape)}，即 (tokens, capacity)：这是每个词元挑选专家；"
                    "这里是每个专家挑选词元，所以要沿词元那一维（dim=0）取 top-k，并且每个专家返回一行",
                )
            )
        if isinstance(tokens, Tensor) and tuple(tokens.shape) == (capacity, num_experts) != (num_experts, capacity):
            raise ExerciseMistake(
                tr(
                    f"{what} your tokens have shape {tuple(tokens.shape)}, (capacity, num_experts): transpose, so "
                    "that row e lists the tokens of expert e",
                    f"{what}你的 tokens 形状是 {tuple(tokens.shape)}，即 (capacity, num_experts)：需要转置，"
                    "让第 e 行列出专家 e 的词元",
                )
            )
        expect_tensor(tokens, tr("tokens", "tokens"), (num_experts, capacity), "(num_experts, capacity)")
        expect_tensor(gates, tr("gates", "gates"), (num_experts, capacity), "(num_experts, capacity)")
        expect(
            not tokens.is_floating_point() and not tokens.is_complex(),
            tr(
                f"tokens must hold integer token indices (torch.long), got {tokens.dtype}: did you swap the two "
                "tensors that topk returns (values first, then indices)?",
                f"tokens 应是整数的词元下标（torch.long），得到的是 {tokens.dtype}：是不是把 topk 返回的两个张量"
                "弄反了（先是值，后是下标）？",
            ),
        )
        expected = reference_expert_choice(probs, capacity)
        if _same_choice((tokens, gates), expected):
            continue
        lowest = tuple(t.T for t in probs.topk(capacity, dim=0, largest=False)[::-1])
        if _same_choice((tokens, gates), lowest):
            raise ExerciseMistake(
                tr(
                    f"{what} each expert took the tokens it likes least: topk keeps the largest values by default",
                    f"{what}每个专家拿到的是它最不想要的词元：topk 默认保留最大的值",
                )
            )
        tokens_c, gates_c = _canonical(tokens, gates)
        tokens_e, gates_e = _canonical(*expected)
        if torch.equal(tokens_c, tokens_e):
            rescaled = (gates_e / gates_e.sum(dim=1, keepdim=True), gates_e.softmax(dim=1))
            if any(torch.allclose(gates_c.double(), r, atol=1e-9) for r in rescaled):
                raise ExerciseMistake(
                    tr(
                        f"{what} the tokens are right but you rescaled the gates; a gate is the token's router "
                        "probability for that expert, probs[token, expert], unchanged",
                        f"{what}词元选对了，但你把门控值重新缩放了；门控值就是该词元对这个专家的路由概率 "
                        "probs[token, expert]，不做任何改动",
                    )
                )
            raise ExerciseMistake(
                tr(
                    f"{what} the tokens are right but not their gates: gates[e, j] is probs[tokens[e, j], e]",
                    f"{what}词元选对了，门控值却不对：gates[e, j] 应等于 probs[tokens[e, j], e]",
                )
            )
        raise ExerciseMistake(
            tr(
                f"{what} expert 0 should take tokens {sorted(expected[0][0].tolist())}, your answer gives "
                f"{sorted(tokens[0].tolist())}",
                f"{what}专家 0 应拿到词元 {sorted(expected[0][0].tolist())}，你的答案给出的是 "
                f"{sorted(tokens[0].tolist())}",
            )
        )


def check_expert_choice(fn: Callable[[Tensor, int], tuple[Tensor, Tensor]]) -> bool:
    """Exercise 16.3: ``fn(probs, capacity)`` must return each expert's ``capacity`` best tokens and their gates."""
    return report(EXPERT_CHOICE, lambda: _check_expert_choice(fn))

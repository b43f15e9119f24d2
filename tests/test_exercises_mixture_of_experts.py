"""Notebook 16's checkers accept the reference solutions and name the likeliest mistakes."""

import pytest
import torch
import torch.nn.functional as F

from tests.chinese_feedback import assert_checker_speaks_chinese, assert_mistake_named_in_chinese
from transformer_course.exercises import mixture_of_experts as ex
from transformer_course.families.moe import MixtureOfExperts

# ----------------------------------------------------------------------------------------------- 16.3


def test_expert_choice_reference_fills_every_expert_with_its_best_tokens():
    probs = torch.randn(9, 3).softmax(-1)
    tokens, gates = ex.reference_expert_choice(probs, 4)
    assert tokens.shape == gates.shape == (3, 4)
    for e in range(3):
        best = set(probs[:, e].argsort(descending=True)[:4].tolist())
        assert set(tokens[e].tolist()) == best
        assert torch.equal(gates[e], probs[tokens[e], e])


def test_expert_choice_checker_accepts_the_reference_in_any_order_within_a_row(capsys):
    assert ex.check_expert_choice(ex.reference_expert_choice)

    def reversed_rows(probs, capacity):
        tokens, gates = ex.reference_expert_choice(probs, capacity)
        return tokens.flip(1), gates.flip(1)

    assert ex.check_expert_choice(reversed_rows)
    assert capsys.readouterr().out.count("Exercise 16.3 (experts choose their tokens): correct!") == 2


def _token_choice(probs, capacity):
    gates, experts = probs.topk(capacity, dim=-1)
    return experts, gates


def _not_transposed(probs, capacity):
    gates, tokens = probs.topk(capacity, dim=0)
    return tokens, gates


def _least_liked(probs, capacity):
    gates, tokens = probs.topk(capacity, dim=0, largest=False)
    return tokens.T, gates.T


def _renormalised(probs, capacity):
    tokens, gates = ex.reference_expert_choice(probs, capacity)
    return tokens, gates / gates.sum(dim=1, keepdim=True)


def _swapped(probs, capacity):
    tokens, gates = ex.reference_expert_choice(probs, capacity)
    return gates, tokens


def _softmax_over_tokens(probs, capacity):
    """Picks by a softmax over the tokens of the raw scores: the same tokens, other gates."""
    tokens, _ = ex.reference_expert_choice(probs, capacity)
    return tokens, probs.softmax(dim=0).gather(0, tokens.T).T


def _first_tokens(probs, capacity):
    return torch.arange(capacity).repeat(probs.shape[1], 1), probs[:capacity].T


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_token_choice, "each token choosing experts"),
        (_not_transposed, "transpose"),
        (_least_liked, "likes least"),
        (_renormalised, "you rescaled the gates"),
        (_softmax_over_tokens, "gates[e, j] is probs[tokens[e, j], e]"),
        (_swapped, "did you swap"),
        (_first_tokens, "expert 0 should take tokens"),
        (lambda probs, capacity: probs, "Return two tensors"),
    ],
)
def test_expert_choice_checker_names_the_mistake(wrong, hint, capsys):
    assert not ex.check_expert_choice(wrong)
    out = capsys.readouterr().out
    assert out.startswith("Exercise 16.3 (experts choose their tokens): not yet.") and hint in out, out


def test_expert_choice_checker_says_not_attempted(capsys):
    def stub(probs, capacity):
        raise NotImplementedError

    assert not ex.check_expert_choice(stub)
    assert "not attempted yet" in capsys.readouterr().out


# ----------------------------------------------------------------------------------------------- 16.1


def test_balance_loss_reference_equals_the_package_layer():
    torch.manual_seed(0)
    layer = MixtureOfExperts(8, 16, num_experts=4, top_k=2).double()
    torch.nn.init.normal_(layer.router.weight)
    x = torch.randn(2, 7, 8, dtype=torch.float64)
    layer(x)
    probs, experts, _, _ = layer.route(x.reshape(-1, 8))
    assert torch.allclose(ex.reference_balance_loss(probs, experts), layer.last_routing.balance_loss, atol=1e-12)


def test_balance_loss_reference_is_one_when_even_and_num_experts_when_collapsed():
    even = torch.full((8, 4), 0.25, dtype=torch.float64)
    assert ex.reference_balance_loss(even, torch.arange(8)[:, None] % 4).item() == pytest.approx(1.0)
    collapsed = F.one_hot(torch.zeros(8, dtype=torch.long), 4).double()
    assert ex.reference_balance_loss(collapsed, torch.zeros(8, 1, dtype=torch.long)).item() == pytest.approx(4.0)


def test_balance_loss_checker_accepts_the_reference(capsys):
    assert ex.check_balance_loss(ex.reference_balance_loss)
    assert capsys.readouterr().out == "Exercise 16.1 (the load-balancing loss): correct!\n"


def _one_hot_shares(probs, experts):
    """Another correct answer: f from one_hot, P as a mean, the sum over the experts."""
    num_experts = probs.shape[1]
    f = F.one_hot(experts, num_experts).sum(dim=(0, 1)) / experts.numel()
    return num_experts * (f * probs.mean(0)).sum()


def _shares(probs, experts, divide_by=None):
    counts = torch.bincount(experts.flatten(), minlength=probs.shape[1]).to(probs.dtype)
    return counts / (experts.numel() if divide_by is None else divide_by)


def _chosen(probs, experts):
    """(tokens, num_experts): 1 where the token chose the expert."""
    return F.one_hot(experts, probs.shape[1]).sum(dim=1).to(probs.dtype)


def _mean_over_choosers(probs, experts):
    """Each expert's mean probability over the tokens that chose it only (a slip: P must average every token)."""
    chosen = _chosen(probs, experts)
    return (probs * chosen).sum(0) / chosen.sum(0).clamp(min=1)


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda p, e: (_shares(p, e) * p.mean(0)).sum(), "multiply by num_experts"),
        (lambda p, e: p.shape[1] * (_shares(p, e) * p.mean(0)).mean(), "multiply by num_experts"),
        (lambda p, e: p.shape[1] * (_shares(p, e, 1) * p.mean(0)).sum(), "f_i is a share"),
        (lambda p, e: p.shape[1] * (_shares(p, e, len(e)) * p.mean(0)).sum(), "not by tokens"),
        (lambda p, e: p.shape[1] * (_shares(p, e[:, :1]) * p.mean(0)).sum(), "count every one"),
        (lambda p, e: p.shape[1] * (p.mean(0) * p.mean(0)).sum(), "you used the probabilities for both"),
        (lambda p, e: p.shape[1] * (_shares(p, e) * _shares(p, e)).sum(), "the counted shares for both"),
        (lambda p, e: p.shape[1] * (_shares(p, e) * p.sum(0)).sum(), "not a sum"),
        (lambda p, e: torch.tensor(ex.reference_balance_loss(p, e).item()), "it has no gradient"),
        (lambda p, e: p.shape[1] * (F.one_hot(e, p.shape[1]).sum((0, 1)) / e.numel() * p.mean(0)).sum(), None),
        (lambda p, e: p.shape[1] * (p[:, :].mean(0) * p.detach().mean(0) * 0 + _shares(p, e) * p.mean(0)).sum(), None),
        (
            lambda p, e: p.shape[1] * (_shares(p, e) * (p * _chosen(p, e)).sum(0) / len(p)).sum(),
            "only the probabilities",
        ),
        (lambda p, e: p.shape[1] * (_shares(p, e) * _mean_over_choosers(p, e)).sum(), "only the probabilities"),
        (lambda p, e: p.sum() * float("nan"), "a division by a count that is 0"),
        (lambda p, e: ex.reference_balance_loss(p, e).item(), "a tensor with one element"),
        (lambda p, e: torch.tensor(1.0), "the loss should be"),
    ],
)
def test_balance_loss_checker_names_the_mistake(wrong, hint, capsys):
    result = ex.check_balance_loss(wrong)
    out = capsys.readouterr().out
    if hint is None:  # correct answers written another way
        assert result, out
        return
    assert not result
    assert out.startswith("Exercise 16.1 (the load-balancing loss): not yet.") and hint in out, out


def test_balance_loss_checker_accepts_one_hot_shares(capsys):
    assert ex.check_balance_loss(_one_hot_shares)


def test_balance_loss_checker_names_a_gradient_through_f(capsys):
    def soft_shares(p, e):  # the right value, but a gradient through a soft version of f as well
        hard = _shares(p, e)
        soft = p.sum(0) / p.sum()
        return p.shape[1] * ((hard + soft - soft.detach()) * p.mean(0)).sum()

    assert not ex.check_balance_loss(soft_shares)
    assert "only P_i may carry a gradient" in capsys.readouterr().out


# ----------------------------------------------------------------------------------------------- 16.2


def test_priority_reference_keeps_the_largest_gates_of_each_expert():
    experts = torch.tensor([[0], [0], [0], [1]])
    gates = torch.tensor([[0.2], [0.9], [0.5], [0.1]])
    kept = ex.reference_priority_capacity(experts, gates, 2, 2)
    assert kept.squeeze(1).tolist() == [False, True, True, True]


def test_priority_reference_with_equal_gates_is_the_package_rule():
    torch.manual_seed(1)
    layer = MixtureOfExperts(8, 16, num_experts=4, top_k=2, capacity_factor=0.5).double()
    torch.nn.init.normal_(layer.router.weight)
    x = torch.randn(1, 9, 8, dtype=torch.float64)
    _, experts, _, slot = layer.route(x[0])
    capacity = layer.capacity(9)
    equal = torch.ones(experts.shape, dtype=torch.float64)
    assert torch.equal(ex.reference_priority_capacity(experts, equal, capacity, 4), slot < capacity)


def test_priority_checker_accepts_the_reference(capsys):
    assert ex.check_priority_capacity(ex.reference_priority_capacity)
    assert capsys.readouterr().out == "Exercise 16.2 (capacity served by priority): correct!\n"


def _served(experts, order, capacity, num_experts):
    return ex._kept_in_order(experts, order, capacity, num_experts)


def _token_order(experts, gates, capacity, num_experts):
    return _served(experts, torch.arange(experts.numel()), capacity, num_experts)


def _ascending(experts, gates, capacity, num_experts):
    return _served(experts, torch.argsort(gates.flatten(), stable=True), capacity, num_experts)


def _one_too_many(experts, gates, capacity, num_experts):
    return ex.reference_priority_capacity(experts, gates, capacity + 1, num_experts)


def _global_top(experts, gates, capacity, num_experts):
    """Keeps the capacity * num_experts largest gates overall, whichever expert they belong to."""
    keep = torch.zeros(experts.numel(), dtype=torch.bool)
    keep[gates.flatten().argsort(descending=True)[: capacity * num_experts]] = True
    return keep.view_as(experts)


def _per_token(experts, gates, capacity, num_experts):
    """Keeps each token's first listed choice only (no expert over capacity in the first case: the generic hint)."""
    kept = torch.zeros_like(experts, dtype=torch.bool)
    kept[:, 0] = True
    return kept


def _sorted_places(experts, gates, capacity, num_experts):
    """The assignments sorted by gate, largest first: (order, kept in that order)."""
    order = torch.argsort(gates.flatten(), descending=True, stable=True)
    flat = experts.flatten()[order]
    place = (F.one_hot(flat, num_experts).cumsum(0) - 1).gather(1, flat[:, None]).squeeze(1)
    return order, place < capacity


def _left_in_sorted_order(experts, gates, capacity, num_experts):
    _, kept_sorted = _sorted_places(experts, gates, capacity, num_experts)
    return kept_sorted.view_as(experts)


def _permutation_not_inverse(experts, gates, capacity, num_experts):
    order, kept_sorted = _sorted_places(experts, gates, capacity, num_experts)
    return kept_sorted[order].view_as(experts)


def _sorted_within_rows(experts, gates, capacity, num_experts):
    """Sorts each token's choices by gate (not all the assignments together) and keeps that layout."""
    within = torch.argsort(gates, dim=1, descending=True, stable=True)
    flat = experts.gather(1, within).flatten()
    place = (F.one_hot(flat, num_experts).cumsum(0) - 1).gather(1, flat[:, None]).squeeze(1)
    return (place < capacity).view_as(experts)


def _sorted_within_rows_put_back(experts, gates, capacity, num_experts):
    """The same sort within each row, its answers put back: first come, first served again."""
    within = torch.argsort(gates, dim=1, descending=True, stable=True)
    kept = torch.empty_like(experts, dtype=torch.bool)
    kept.scatter_(1, within, _sorted_within_rows(experts, gates, capacity, num_experts))
    return kept


def _v_moe_by_token(experts, gates, capacity, num_experts):
    """V-MoE as the exercise's first sentence describes it: tokens by their largest gate, every first choice (a row's
    largest gate) before any second choice."""
    tokens, top_k = experts.shape
    confident_first = sorted(range(tokens), key=lambda t: -float(gates[t].max()))
    order = []
    for rank in range(top_k):
        for t in confident_first:
            order.append(t * top_k + int(gates[t].argsort(descending=True)[rank]))
    return _served(experts, torch.tensor(order), capacity, num_experts)


def _v_moe_by_column(experts, gates, capacity, num_experts):
    """The same, with column j taken as each token's j-th choice."""
    tokens, top_k = experts.shape
    confident_first = sorted(range(tokens), key=lambda t: -float(gates[t].max()))
    order = [t * top_k + j for j in range(top_k) for t in confident_first]
    return _served(experts, torch.tensor(order), capacity, num_experts)


def _whole_token_together(experts, gates, capacity, num_experts):
    """Tokens by their largest gate, each token's choices served one after the other."""
    tokens, top_k = experts.shape
    confident_first = sorted(range(tokens), key=lambda t: -float(gates[t].max()))
    order = [t * top_k + int(j) for t in confident_first for j in gates[t].argsort(descending=True)]
    return _served(experts, torch.tensor(order), capacity, num_experts)


def _flipped_ascending(experts, gates, capacity, num_experts):
    """Descending order made by flipping a stable ascending sort: equal gates come later token first."""
    return _served(experts, torch.argsort(gates.flatten(), stable=True).flip(0), capacity, num_experts)


def test_priority_reference_does_not_assume_sorted_rows():
    for experts, gates, capacity, num_experts in ex._priority_cases():
        swapped = ex.reference_priority_capacity(experts.flip(1), gates.flip(1), capacity, num_experts)
        assert torch.equal(swapped.flip(1), ex.reference_priority_capacity(experts, gates, capacity, num_experts))
    experts, gates, _, _ = ex._priority_cases()[0]
    assert (gates[:, 0] < gates[:, 1]).any(), "the first case must list some token's choices worst first"


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (_left_in_sorted_order, "left the answers in sorted order"),
        (_permutation_not_inverse, "sorts them a second time"),
        (_sorted_within_rows, "row by row"),
        (_sorted_within_rows_put_back, "sorting only each token's own choices changes nothing"),
        (_token_order, "first come, first served"),
        (_ascending, "smallest gates first"),
        (_one_too_many, "capacity + 1"),
        (_v_moe_by_token, "as V-MoE does"),
        (_v_moe_by_column, "as V-MoE does"),
        (_whole_token_together, "as V-MoE does"),
        (_flipped_ascending, "equal gates are served in the wrong order"),
        (lambda e, g, c, n: torch.ones_like(e, dtype=torch.bool), "nothing was dropped"),
        (_global_top, "more than its capacity"),
        (_per_token, "the kept assignments should be"),
        (lambda e, g, c, n: torch.zeros_like(e, dtype=torch.bool), "the kept assignments should be"),
        (lambda e, g, c, n: torch.ones_like(e), "boolean"),
        (lambda e, g, c, n: torch.ones(e.shape[0], dtype=torch.bool), "(tokens, top_k)"),
    ],
)
def test_priority_checker_names_the_mistake(wrong, hint, capsys):
    assert not ex.check_priority_capacity(wrong)
    out = capsys.readouterr().out
    assert out.startswith("Exercise 16.2 (capacity served by priority): not yet.") and hint in out, out


def test_priority_checker_says_not_attempted(capsys):
    def stub(experts, gates, capacity, num_experts):
        raise NotImplementedError

    assert not ex.check_priority_capacity(stub)
    assert "not attempted yet" in capsys.readouterr().out


# ----------------------------------------------------------------------------------------------- Chinese


@pytest.mark.parametrize(
    "number, check, reference",
    [
        ("16.1", ex.check_balance_loss, ex.reference_balance_loss),
        ("16.2", ex.check_priority_capacity, ex.reference_priority_capacity),
        ("16.3", ex.check_expert_choice, ex.reference_expert_choice),
    ],
)
def test_checkers_speak_chinese(number, check, reference, capsys):
    assert_checker_speaks_chinese(number, check, reference, capsys)


def _kept_written_two_dimensional(experts, gates, capacity, num_experts):
    """The hint's kept[order] = ... written into the (tokens, top_k) tensor itself: a shape error."""
    order = torch.argsort(gates.flatten(), descending=True, stable=True)
    kept = torch.zeros_like(experts, dtype=torch.bool)
    kept[order] = torch.ones(order.numel(), dtype=torch.bool)
    return kept


@pytest.mark.parametrize(
    "check, wrong, hint",
    [
        (ex.check_expert_choice, _token_choice, "这是每个词元挑选专家"),
        (ex.check_expert_choice, _renormalised, "重新缩放"),
        (ex.check_balance_loss, lambda p, e: (_shares(p, e) * p.mean(0)).sum(), "要乘以 num_experts"),
        (ex.check_balance_loss, lambda p, e: torch.tensor(ex.reference_balance_loss(p, e).item()), "没有梯度"),
        (ex.check_priority_capacity, _token_order, "先到先得"),
        (ex.check_priority_capacity, _one_too_many, "capacity + 1"),
        (ex.check_priority_capacity, _left_in_sorted_order, "kept[order] = ..."),
        (ex.check_priority_capacity, _permutation_not_inverse, "又排了一次序"),
        (ex.check_priority_capacity, _sorted_within_rows, "逐行"),
        (ex.check_priority_capacity, _v_moe_by_token, "这是 V-MoE 的做法"),
        (ex.check_priority_capacity, _flipped_ascending, "平局的顺序也反过来"),
        (ex.check_priority_capacity, _kept_written_two_dimensional, "写入时 kept 应是一维的"),
        (
            ex.check_balance_loss,
            lambda p, e: p.shape[1] * (_shares(p, e) * _mean_over_choosers(p, e)).sum(),
            "不管词元有没有选它",
        ),
    ],
)
def test_mistakes_named_in_chinese(check, wrong, hint, capsys):
    assert_mistake_named_in_chinese(check, wrong, hint, capsys)

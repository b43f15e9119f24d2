"""The mixture-of-experts layer: the batched layer equals the looped one, capacity drops what it should, the routing
statistics and the counts are right, and bad settings are named."""

import math

import pytest
import torch
import torch.nn.functional as F

from transformer_course.families.moe import MixtureOfExperts


def _layer(capacity_factor=None, top_k=2, num_experts=4, seed=0) -> MixtureOfExperts:
    torch.manual_seed(seed)
    layer = MixtureOfExperts(8, 16, num_experts, top_k=top_k, capacity_factor=capacity_factor).double()
    torch.nn.init.normal_(layer.router.weight)  # a router that prefers some experts, as a trained one does
    return layer


@pytest.mark.parametrize("capacity_factor", [None, 1.0, 0.5])
@pytest.mark.parametrize("top_k", [1, 2])
def test_batched_equals_looped(capacity_factor, top_k):
    layer = _layer(capacity_factor, top_k)
    x = torch.randn(3, 5, 8, dtype=torch.float64)
    batched = layer(x)
    batched_routing = layer.last_routing
    looped = layer.forward_looped(x)
    assert torch.allclose(batched, looped, atol=1e-12)
    assert batched_routing.dropped == layer.last_routing.dropped
    assert torch.equal(batched_routing.expert_share, layer.last_routing.expert_share)


def test_one_expert_with_top_1_is_a_swiglu_network():
    layer = _layer(top_k=1, num_experts=1)
    x = torch.randn(2, 3, 8, dtype=torch.float64)
    expected = (F.silu(x @ layer.w_gate[0]) * (x @ layer.w_up[0])) @ layer.w_down[0]
    assert torch.allclose(layer(x), expected, atol=1e-12)


def test_each_token_is_the_gate_weighted_sum_of_its_experts():
    layer = _layer(top_k=2)
    x = torch.randn(1, 4, 8, dtype=torch.float64)
    out = layer(x)
    probs = layer.router(x[0]).softmax(-1)
    for t in range(4):
        gates, experts = probs[t].topk(2)
        gates = gates / gates.sum()
        by_hand = sum(
            g * (F.silu(x[0, t] @ layer.w_gate[e]) * (x[0, t] @ layer.w_up[e])) @ layer.w_down[e]
            for g, e in zip(gates, experts)
        )
        assert torch.allclose(out[0, t], by_hand, atol=1e-12)


def test_capacity_drops_the_latest_tokens_of_a_full_expert():
    layer = MixtureOfExperts(4, 8, num_experts=2, top_k=1, capacity_factor=0.5).double()
    with torch.no_grad():
        layer.router.weight.zero_()
        layer.router.weight[0, 0] = 10.0  # every token with a positive first feature goes to expert 0
    x = torch.zeros(1, 4, 4, dtype=torch.float64)
    x[0, :, 0] = 1.0  # all four tokens want expert 0, whose capacity is ceil(0.5 * 4 * 1 / 2) = 1
    out = layer(x)
    assert layer.capacity(4) == 1 and layer.last_routing.dropped == 3
    assert out[0, 0].abs().sum() > 0 and torch.equal(out[0, 1:], torch.zeros(3, 4, dtype=torch.float64))
    assert torch.equal(layer.last_routing.expert_share, torch.tensor([1.0, 0.0], dtype=torch.float64))


def test_the_balance_loss_is_one_when_the_load_is_even_and_grows_when_it_is_not():
    layer = MixtureOfExperts(4, 8, num_experts=4, top_k=1).double()
    with torch.no_grad():
        layer.router.weight.copy_(torch.eye(4, dtype=torch.float64) * 5)
    even = torch.eye(4, dtype=torch.float64)[None]  # token i prefers expert i
    layer(even)
    assert torch.allclose(layer.last_routing.expert_share, torch.full((4,), 0.25, dtype=torch.float64))
    assert math.isclose(layer.last_routing.balance_loss.item(), 1.0, rel_tol=1e-9)
    layer(torch.eye(4, dtype=torch.float64)[[0, 0, 0, 0]][None])  # all prefer expert 0
    assert layer.last_routing.balance_loss.item() > 3.0


def test_the_balance_loss_trains_the_router():
    layer = _layer(top_k=2)
    layer(torch.randn(2, 6, 8, dtype=torch.float64))
    layer.last_routing.balance_loss.backward()
    assert layer.router.weight.grad.abs().sum() > 0


def test_parameter_counts_and_flops_from_the_shapes():
    layer = MixtureOfExperts(8, 16, num_experts=4, top_k=2)
    counts = layer.parameter_counts()
    assert counts["total"] == sum(p.numel() for p in layer.parameters()) == 8 * 4 + 4 * 3 * 8 * 16
    assert counts["active"] == 8 * 4 + 2 * 3 * 8 * 16
    assert layer.flops_per_token() == 2 * 8 * 4 + 2 * 2 * 3 * 8 * 16


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(top_k=5), "top_k=5 is larger than num_experts=4"),
        (dict(top_k=0), "top_k"),
        (dict(capacity_factor=0), "capacity_factor must be a number > 0"),
        (dict(capacity_factor="1"), "capacity_factor must be a number > 0"),
    ],
)
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MixtureOfExperts(8, 16, num_experts=4, **kwargs)


def test_a_wrong_input_shape_is_named():
    with pytest.raises(ValueError, match=r"\(batch, len, d_model=8\)"):
        MixtureOfExperts(8, 16, num_experts=4)(torch.randn(2, 7))


def test_moe_language_model_differs_from_the_dense_one_only_in_its_feed_forward_layers():
    from transformer_course.families.language_model import LMConfig, build_language_model
    from transformer_course.families.moe import balance_loss, moe_language_model, moe_layers

    config = LMConfig(style="llama", d_model=32, num_layers=2, num_heads=4, num_kv_heads=2, context=16)
    torch.manual_seed(0)
    dense = build_language_model(config, 50)
    torch.manual_seed(0)
    moe = moe_language_model(config, 50, num_experts=4, top_k=2, d_ff=24)
    dense_weights, moe_weights = dense.state_dict(), moe.state_dict()
    shared = [name for name in dense_weights if ".feed_forward." not in name]
    assert shared and all(torch.equal(dense_weights[name], moe_weights[name]) for name in shared)
    assert [layer.d_ff for layer in moe_layers(moe)] == [24, 24]
    ids = torch.randint(0, 50, (3, 16))
    assert moe(ids).shape == (3, 16, 50)
    for layer in moe_layers(moe):
        torch.nn.init.zeros_(layer.router.weight)
    moe(ids)
    # a zero router spreads the probabilities evenly, so each layer's balance loss is num_experts * sum f_i / E = 1
    assert torch.allclose(balance_loss(moe), torch.tensor(2.0))
    with pytest.raises(ValueError, match="style='llama'"):
        moe_language_model(LMConfig(style="gpt2", d_model=32, num_heads=4), 50, num_experts=4)
    with pytest.raises(ValueError, match="no MixtureOfExperts"):
        balance_loss(dense)
    with pytest.raises(ValueError, match="forward first"):
        balance_loss(moe_language_model(config, 50, num_experts=4))


def test_the_balance_loss_trains_the_router_and_is_not_recorded():
    from transformer_course.families.language_model import LMConfig
    from transformer_course.families.moe import balance_loss, moe_language_model
    from transformer_course.training.lm_training import LMTrainConfig, train_language_model

    config = LMConfig(style="llama", d_model=32, num_layers=1, num_heads=4, num_kv_heads=2, context=16)
    ids = torch.randint(0, 40, (2000,), generator=torch.Generator().manual_seed(0))
    runs = {}
    for weight in (0.0, 1.0):
        torch.manual_seed(0)
        model = moe_language_model(config, 40, num_experts=4, top_k=1)
        history = train_language_model(
            model,
            ids,
            ids[:200],
            16,
            LMTrainConfig(steps=3, warmup=1, batch_size=4),
            extra_loss=lambda m=model, w=weight: w * balance_loss(m),
        )
        runs[weight] = (history.loss, model.blocks[0].feed_forward.router.weight.detach().clone())
    # the first recorded loss is the cross-entropy of the same first batch, with or without the extra term
    assert runs[0.0][0][0] == pytest.approx(runs[1.0][0][0], abs=1e-6)
    assert not torch.equal(runs[0.0][1], runs[1.0][1])


def test_the_router_starts_small_and_random_so_the_load_starts_roughly_even():
    torch.manual_seed(0)
    layer = MixtureOfExperts(64, 32, num_experts=8, top_k=2)
    bound = 1 / math.sqrt(64)
    assert layer.router.weight.abs().max() <= bound and layer.router.weight.std() > bound / 4
    layer(torch.randn(4, 64, 64))
    assert layer.last_routing.expert_share.min() > 0.05  # an even load gives 0.125 each


def test_expert_choice_fills_every_expert_with_its_most_likely_tokens():
    from transformer_course.exercises.mixture_of_experts import reference_expert_choice
    from transformer_course.families.moe import expert_choice

    probs = torch.randn(20, 4, generator=torch.Generator().manual_seed(3)).softmax(-1)
    tokens, gates = expert_choice(probs, 5)
    assert tokens.shape == gates.shape == (4, 5) and tokens.dtype == torch.long
    assert torch.equal(gates, probs[tokens, torch.arange(4)[:, None]])
    assert (gates[:, :-1] >= gates[:, 1:]).all()  # highest first
    assert all(set(tokens[e].tolist()) == set(probs[:, e].topk(5).indices.tolist()) for e in range(4))
    reference = reference_expert_choice(probs, 5)
    assert torch.equal(tokens, reference[0]) and torch.equal(gates, reference[1])
    tied = torch.full((6, 2), 0.5)
    assert expert_choice(tied, 3)[0].tolist() == [[0, 1, 2], [0, 1, 2]]  # ties: the earlier token first
    with pytest.raises(ValueError, match="capacity=7 is larger than the 6 tokens"):
        expert_choice(tied, 7)
    with pytest.raises(ValueError, match="capacity"):
        expert_choice(tied, 0)
    with pytest.raises(ValueError, match=r"\(tokens, num_experts\)"):
        expert_choice(torch.rand(6), 2)

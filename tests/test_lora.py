"""LoRA: it starts from the pre-trained model, trains only A and B, merges into the same outputs, equals the peft
library's on the same weights, and names bad settings."""

import pytest
import torch
from torch import nn

from transformer_course.training.lora import (
    LoRALinear,
    add_lora,
    lora_parameter_count,
    merge_lora,
    trainable_parameter_count,
    trainable_state_dict,
)


class TwoLayers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w_in = nn.Linear(6, 10)
        self.act = nn.GELU()
        self.w_out = nn.Linear(10, 4, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_out(self.act(self.w_in(x)))


def _trained_update(model: nn.Module) -> None:
    """Stand-in for training: give every B a non-zero value."""
    torch.manual_seed(1)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, LoRALinear):
                module.lora_b.normal_()


def test_lora_starts_from_the_pretrained_model_and_trains_only_a_and_b():
    torch.manual_seed(0)
    model = TwoLayers()
    x = torch.randn(3, 6)
    before = model(x)
    wrapped = add_lora(model, ["w_in", "w_out"], rank=2, alpha=4)
    assert wrapped == ["w_in", "w_out"]
    assert torch.equal(model(x), before)  # B = 0
    assert trainable_parameter_count(model) == 2 * (6 + 10) + 2 * (10 + 4)
    assert not model.w_in.base.weight.requires_grad and model.w_in.lora_a.requires_grad
    assert model.w_in.scale == 2.0


def test_a_merged_lora_computes_the_same_as_the_unmerged_one():
    torch.manual_seed(0)
    model = TwoLayers().double()
    add_lora(model, ["w_in", "w_out"], rank=3, alpha=6)
    _trained_update(model)
    x = torch.randn(5, 6, dtype=torch.float64)
    unmerged = model(x)
    merge_lora(model)
    assert isinstance(model.w_in, nn.Linear) and not any(isinstance(m, LoRALinear) for m in model.modules())
    assert torch.allclose(model(x), unmerged, atol=1e-12)


def test_the_update_is_scale_times_b_a():
    torch.manual_seed(0)
    layer = LoRALinear(nn.Linear(4, 3), rank=2, alpha=1.0).double()
    _trained_update(layer)
    x = torch.randn(2, 4, dtype=torch.float64)
    expected = layer.base(x) + 0.5 * x @ (layer.lora_b @ layer.lora_a).T
    assert torch.allclose(layer(x), expected, atol=1e-12)


def test_lora_equals_the_peft_librarys_on_the_same_weights():
    peft = pytest.importorskip("peft")
    torch.manual_seed(0)
    ours, theirs = TwoLayers(), TwoLayers()
    theirs.load_state_dict(ours.state_dict())
    add_lora(ours, ["w_in", "w_out"], rank=2, alpha=4)
    theirs = peft.get_peft_model(theirs, peft.LoraConfig(r=2, lora_alpha=4, target_modules=["w_in", "w_out"]))
    _trained_update(ours)
    with torch.no_grad():
        for name in ("w_in", "w_out"):
            peft_layer = theirs.base_model.model.get_submodule(name)
            peft_layer.lora_A["default"].weight.copy_(ours.get_submodule(name).lora_a)
            peft_layer.lora_B["default"].weight.copy_(ours.get_submodule(name).lora_b)
    x = torch.randn(4, 6)
    assert torch.allclose(ours(x), theirs(x), atol=1e-6)
    assert trainable_parameter_count(ours) == sum(p.numel() for p in theirs.parameters() if p.requires_grad)


def test_the_count_from_shapes_equals_the_wrapped_models():
    torch.manual_seed(0)
    model = TwoLayers()
    add_lora(model, ["w_in", "w_out"], rank=3)
    shapes = [tuple(model.w_in.base.weight.shape), tuple(model.w_out.base.weight.shape)]  # (out, in) each
    assert lora_parameter_count(shapes, 3) == trainable_parameter_count(model) == 3 * (6 + 10) + 3 * (10 + 4)
    assert lora_parameter_count([], 3) == 0


def test_what_has_to_be_saved_is_the_trainable_tensors():
    torch.manual_seed(0)
    model = TwoLayers()
    add_lora(model, ["w_out"], rank=2)
    saved = trainable_state_dict(model)
    assert list(saved) == ["w_out.lora_a", "w_out.lora_b"]
    assert sum(t.numel() for t in saved.values()) == trainable_parameter_count(model)
    assert not any(t.requires_grad for t in saved.values())
    tied = nn.Sequential(nn.Embedding(5, 3), nn.Linear(3, 5, bias=False))
    tied[1].weight = tied[0].weight  # a tied weight is saved once
    assert list(trainable_state_dict(tied)) == ["0.weight"]


@pytest.mark.parametrize(
    "shapes, rank, message",
    [
        ([(4, 3)], 0, "rank"),
        ([(4, 3, 2)], 2, r"\(out_features, in_features\) of positive ints, got \(4, 3, 2\)"),
        ([(4, 0)], 2, "positive ints"),
        ([4], 2, "got 4"),
    ],
)
def test_bad_shapes_for_the_count_are_named(shapes, rank, message):
    with pytest.raises(ValueError, match=message):
        lora_parameter_count(shapes, rank)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda m: add_lora(m, ["w_hidden"], rank=2), r"no nn.Linear layer is named \['w_hidden'\]"),
        (lambda m: add_lora(m, ["w_in"], rank=0), "rank"),
        (lambda m: add_lora(m, "w_in", rank=2), "non-empty list"),
        (lambda m: LoRALinear(m.act, rank=2), "LoRA wraps an nn.Linear, got GELU"),
        (lambda m: LoRALinear(m.w_in, rank=2, alpha=0), "alpha must be a finite number > 0"),
    ],
)
def test_bad_settings_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call(TwoLayers())


def test_the_optimizer_gets_only_the_trainable_parameters():
    from transformer_course.training.schedules import make_optimizer

    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    add_lora(model, ["1"], rank=2)
    optimizer = make_optimizer(model, 1e-3, weight_decay=0.1, decay_matrices_only=True)
    given = [p for group in optimizer.param_groups for p in group["params"]]
    assert len(given) == 2 and all(p.requires_grad for p in given)  # LoRA's A and B
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    with pytest.raises(ValueError, match="nothing to train"):
        make_optimizer(model, 1e-3)

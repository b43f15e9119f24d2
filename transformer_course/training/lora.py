"""LoRA: fine-tune a pre-trained model by training a low-rank update beside each chosen weight, which stays frozen
(Hu et al., 2021; notebook 17).

A linear layer y = x W^T becomes y = x W^T + (alpha / r) x A^T B^T, with A (r, in) and B (out, r). B starts at zero,
so training starts from the pre-trained model exactly; A starts as ``nn.Linear`` would (Kaiming-uniform), as in the
``peft`` library. Only A and B train: r (in + out) numbers per layer instead of in x out. The factor alpha / r is
Hu et al.'s; :class:`LoRALinear` says what it does and does not keep fixed when r changes.

* :class:`LoRALinear`: one frozen ``nn.Linear`` with its update; :meth:`LoRALinear.merged` folds the update into the
  weight, W + (alpha / r) B A, a plain ``nn.Linear`` that computes the same with no extra work.
* :func:`add_lora` puts a :class:`LoRALinear` in place of every ``nn.Linear`` whose name ends with one of the given
  names, and freezes everything else; :func:`merge_lora` undoes the wrapping with merged weights;
  :func:`trainable_parameter_count` counts what training will update, :func:`trainable_state_dict` is what a
  fine-tuned copy has to save, and :func:`lora_parameter_count` counts LoRA's numbers from the layers' shapes alone
  (no model needed: a published model's shapes will do).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from .. import checks


class LoRALinear(nn.Module):
    """A frozen linear layer plus a trainable low-rank update. x (..., in) -> (..., out).

    ``base``: the pre-trained ``nn.Linear`` (its weight and bias are frozen); ``rank``: r; ``alpha``: the update is
    scaled by alpha / r. Hu et al. set alpha to the first r they tried and left it, a scale meant to reduce retuning
    (of the learning rate above all) when r changes. It does not keep the update's size fixed: with Adam each entry of
    B moves by about the learning rate per step whatever r is, an entry of B A sums r such moves, so (alpha / r) B A
    shrinks about as 1 / sqrt(r) (rsLoRA, Kalajdzievski 2023, scales by alpha / sqrt(r) instead; notebook 17 measures
    the first step).
    """

    def __init__(self, base: nn.Linear, rank: int, alpha: float = 1.0) -> None:
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise ValueError(f"LoRA wraps an nn.Linear, got {type(base).__name__}")
        checks.positive_int("rank", rank)
        if not (isinstance(alpha, int | float) and math.isfinite(alpha) and alpha > 0):
            raise ValueError(f"alpha must be a finite number > 0, got {alpha!r}")
        self.base, self.rank, self.alpha = base, rank, alpha
        for parameter in base.parameters():
            parameter.requires_grad_(False)
        factory = {"device": base.weight.device, "dtype": base.weight.dtype}
        self.lora_a = nn.Parameter(torch.empty(rank, base.in_features, **factory))
        self.lora_b = nn.Parameter(torch.zeros(base.out_features, rank, **factory))
        nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))  # nn.Linear's own initialisation

    @property
    def scale(self) -> float:
        """alpha / r, the factor of the low-rank update."""
        return self.alpha / self.rank

    def forward(self, x: Tensor) -> Tensor:
        """x (..., in) -> base(x) + scale * x A^T B^T, (..., out)."""
        return self.base(x) + (x @ self.lora_a.T @ self.lora_b.T) * self.scale

    def merged(self) -> nn.Linear:
        """A plain ``nn.Linear`` with weight W + scale * B A (and the same bias): the same outputs, one product."""
        linear = nn.Linear(
            self.base.in_features,
            self.base.out_features,
            bias=self.base.bias is not None,
            device=self.base.weight.device,
            dtype=self.base.weight.dtype,
        )
        with torch.no_grad():
            linear.weight.copy_(self.base.weight + self.scale * self.lora_b @ self.lora_a)
            if self.base.bias is not None:
                linear.bias.copy_(self.base.bias)
        return linear

    def extra_repr(self) -> str:
        return f"rank={self.rank}, alpha={self.alpha}"


def _replace(model: nn.Module, name: str, module: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent_name) if parent_name else model, child, module)


def add_lora(model: nn.Module, target_names: Sequence[str], rank: int, alpha: float = 1.0) -> list[str]:
    """Freeze ``model`` and wrap every ``nn.Linear`` whose dotted name ends with one of ``target_names`` (e.g.
    ``["w_q", "w_v"]``) in a :class:`LoRALinear`. Returns the wrapped names, in order.

    A target that matches no linear layer is an error, so a misspelt name cannot leave a layer untrained silently.
    """
    checks.positive_int("rank", rank)
    if isinstance(target_names, str) or not target_names:
        raise ValueError(f"target_names must be a non-empty list of layer names, got {target_names!r}")
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    linear = [name for name, module in model.named_modules() if isinstance(module, nn.Linear)]
    chosen = [name for name in linear if any(name == t or name.endswith("." + t) for t in target_names)]
    missing = [t for t in target_names if not any(name == t or name.endswith("." + t) for name in chosen)]
    if missing:
        raise ValueError(
            f"no nn.Linear layer is named {missing} in this model; linear layers end with e.g. "
            f"{sorted({name.rpartition('.')[2] for name in linear})}"
        )
    for name in chosen:
        _replace(model, name, LoRALinear(model.get_submodule(name), rank, alpha))
    return chosen


def merge_lora(model: nn.Module) -> nn.Module:
    """Replace every :class:`LoRALinear` of ``model`` by its merged ``nn.Linear``, in place; returns the model."""
    wrapped = [name for name, module in model.named_modules() if isinstance(module, LoRALinear)]
    for name in wrapped:
        _replace(model, name, model.get_submodule(name).merged())
    return model


def trainable_parameter_count(model: nn.Module) -> int:
    """How many numbers training updates: the parameters with ``requires_grad`` (a tied weight counted once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def trainable_state_dict(model: nn.Module) -> dict[str, Tensor]:
    """The tensors training updates, by name (detached): what a fine-tuned copy of a shared pre-trained model has
    to save, since everything else is the pre-trained model's. A tied weight appears once."""
    return {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}


def lora_parameter_count(layer_shapes: Sequence[tuple[int, int]], rank: int) -> int:
    """Numbers LoRA of rank r trains for linear layers of the given shapes, each ``(out_features, in_features)``
    (the shape of ``nn.Linear.weight``): A (r, in) and B (out, r), r (in + out) per layer."""
    checks.positive_int("rank", rank)
    total = 0
    for shape in layer_shapes:
        if not (
            isinstance(shape, tuple | list) and len(shape) == 2 and all(isinstance(n, int) and n > 0 for n in shape)
        ):
            raise ValueError(f"each layer shape must be (out_features, in_features) of positive ints, got {shape!r}")
        out_features, in_features = shape
        total += rank * (in_features + out_features)
    return total


__all__ = [
    "LoRALinear",
    "add_lora",
    "lora_parameter_count",
    "merge_lora",
    "trainable_parameter_count",
    "trainable_state_dict",
]

"""A mixture-of-experts feed-forward layer: several SwiGLU experts and a learned router that sends each token to
its ``top_k`` best experts (Switch Transformer, Mixtral; notebook 16).

* :class:`MixtureOfExperts`: the layer. ``forward`` groups the tokens by expert into one buffer per expert and runs
  every expert at once with batched matrix products (no Python loop over tokens or experts);
  :meth:`MixtureOfExperts.forward_looped` is the readable version, one expert at a time, and computes the same.
* Capacity: with ``capacity_factor`` set, each expert takes at most ``ceil(capacity_factor * tokens * top_k /
  num_experts)`` token assignments, earlier tokens first; the rest are dropped (their share of the output is zero, so
  a residual connection passes the token on unchanged).
* :attr:`MixtureOfExperts.last_routing` keeps what the last call routed: each expert's share of the assignments, the
  number dropped, and the load-balancing loss of Switch Transformer, ``num_experts * sum_i f_i P_i`` (f_i: the share
  of assignments expert i received, P_i: the mean router probability of expert i), which is 1 when the load is even
  and grows as the router favours a few experts.
* :func:`expert_choice`: routing the other way round (Zhou et al., 2022): each expert takes the tokens it has the
  highest probability for, so every queue is exactly full, while a token may get several experts or none.
* :func:`moe_language_model`: the course's decoder-only language model with a mixture of experts in place of each
  block's feed-forward network; :func:`moe_layers` finds them and :func:`balance_loss` sums their auxiliary losses
  for training (``train_language_model(..., extra_loss=...)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import checks
from .decoder_lm import DecoderLM
from .language_model import LMConfig, build_language_model


@dataclass(frozen=True)
class Routing:
    """What one call of :class:`MixtureOfExperts` routed.

    expert_share: (num_experts,) the share of the token assignments each expert received (sums to 1). dropped: how
    many assignments went over an expert's capacity. balance_loss: Switch Transformer's auxiliary loss (a scalar
    tensor with a gradient to the router). router_probs: (tokens, num_experts) the router's softmax.
    """

    expert_share: Tensor
    dropped: int
    balance_loss: Tensor
    router_probs: Tensor


class MixtureOfExperts(nn.Module):
    """``num_experts`` SwiGLU feed-forward networks and a router; each token goes to its ``top_k`` experts.

    x (batch, len, d_model) -> (batch, len, d_model): the sum over the token's chosen experts of gate * expert(x),
    where the gates are the router's softmax probabilities of the chosen experts, renormalised to sum to 1 over them
    (Mixtral; ``renormalize=False`` keeps the raw probabilities, as Switch Transformer does with ``top_k=1``).

    The experts' weights are stacked: ``w_gate`` and ``w_up`` (num_experts, d_model, d_ff), ``w_down``
    (num_experts, d_ff, d_model), so that one batched product runs every expert. Each expert is initialised as
    ``nn.Linear`` would be (uniform within 1/sqrt(fan_in)), and so is the router: its small random weights spread the
    tokens roughly evenly over the experts at first, so any imbalance that appears later is training's doing.
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        num_experts: int,
        top_k: int = 2,
        capacity_factor: float | None = None,
        renormalize: bool = True,
    ) -> None:
        super().__init__()
        checks.positive_ints(d_model=d_model, d_ff=d_ff, num_experts=num_experts, top_k=top_k)
        if top_k > num_experts:
            raise ValueError(
                f"top_k={top_k} is larger than num_experts={num_experts}: a token can use each expert once"
            )
        if capacity_factor is not None and not (isinstance(capacity_factor, int | float) and capacity_factor > 0):
            raise ValueError(f"capacity_factor must be a number > 0 or None (no limit), got {capacity_factor!r}")
        self.d_model, self.d_ff, self.num_experts, self.top_k = d_model, d_ff, num_experts, top_k
        self.capacity_factor, self.renormalize = capacity_factor, renormalize
        self.router = nn.Linear(d_model, num_experts, bias=False)  # nn.Linear's own init: uniform within 1/sqrt(d)
        self.w_gate = nn.Parameter(torch.empty(num_experts, d_model, d_ff))
        self.w_up = nn.Parameter(torch.empty(num_experts, d_model, d_ff))
        self.w_down = nn.Parameter(torch.empty(num_experts, d_ff, d_model))
        for weight, fan_in in ((self.w_gate, d_model), (self.w_up, d_model), (self.w_down, d_ff)):
            nn.init.uniform_(weight, -1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))
        self.last_routing: Routing | None = None

    def capacity(self, tokens: int) -> int | None:
        """The most token assignments one expert takes in a call with ``tokens`` tokens; None without a capacity
        factor (no limit)."""
        if self.capacity_factor is None:
            return None
        return math.ceil(self.capacity_factor * tokens * self.top_k / self.num_experts)

    def route(self, x_flat: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """x_flat (tokens, d_model) -> (probs (tokens, E), experts (tokens, top_k), gates (tokens, top_k),
        slot (tokens, top_k)): the router's softmax, each token's chosen experts and their gates, and each
        assignment's place in its expert's queue (tokens in order, a token's choices in order of preference)."""
        probs = self.router(x_flat).softmax(dim=-1)
        gates, experts = probs.topk(self.top_k, dim=-1)
        if self.renormalize:
            gates = gates / gates.sum(dim=-1, keepdim=True)
        chosen = F.one_hot(experts.flatten(), self.num_experts)  # (tokens * top_k, E), token-major order
        slot = (chosen.cumsum(dim=0) - 1).gather(1, experts.flatten()[:, None]).view_as(experts)
        return probs, experts, gates, slot

    def _record(self, probs: Tensor, experts: Tensor, kept: Tensor) -> None:
        counts = torch.bincount(experts.flatten(), minlength=self.num_experts).to(probs.dtype)
        share = counts / counts.sum()
        balance = self.num_experts * (share.detach() * probs.mean(dim=0)).sum()
        self.last_routing = Routing(share.detach(), int((~kept).sum()), balance, probs.detach())

    def _check(self, x: Tensor) -> None:
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (batch, len, d_model={self.d_model}), got {tuple(x.shape)}")

    def forward(self, x: Tensor) -> Tensor:
        """x (batch, len, d_model) -> (batch, len, d_model), every expert in one batched product."""
        self._check(x)
        x_flat = x.reshape(-1, self.d_model)  # (T, d)
        tokens = x_flat.shape[0]
        probs, experts, gates, slot = self.route(x_flat)
        capacity = self.capacity(tokens)
        if capacity is None:  # no limit: each queue as long as the busiest expert's
            capacity = int(slot.max()) + 1
        kept = slot < capacity  # (T, k)
        expert_of, slot_of = experts[kept], slot[kept]  # the kept assignments
        token_of = torch.arange(tokens, device=x.device)[:, None].expand_as(experts)[kept]
        buffer = x_flat.new_zeros(self.num_experts, capacity, self.d_model)  # (E, C, d): each expert's queue
        buffer[expert_of, slot_of] = x_flat[token_of]
        hidden = F.silu(buffer @ self.w_gate) * (buffer @ self.w_up)  # (E, C, d_ff)
        done = hidden @ self.w_down  # (E, C, d)
        weighted = done[expert_of, slot_of] * gates[kept][:, None]  # (kept assignments, d)
        out = x_flat.new_zeros(tokens, self.d_model).index_add_(0, token_of, weighted)
        self._record(probs, experts, kept)
        return out.view_as(x)

    def forward_looped(self, x: Tensor) -> Tensor:
        """The same as :meth:`forward`, written one expert at a time (for reading and for checking)."""
        self._check(x)
        x_flat = x.reshape(-1, self.d_model)
        probs, experts, gates, slot = self.route(x_flat)
        capacity = self.capacity(x_flat.shape[0])
        kept = torch.ones_like(slot, dtype=torch.bool) if capacity is None else slot < capacity
        out = torch.zeros_like(x_flat)
        for e in range(self.num_experts):
            token, choice = torch.nonzero((experts == e) & kept, as_tuple=True)  # the tokens expert e takes
            h = x_flat[token]
            y = (F.silu(h @ self.w_gate[e]) * (h @ self.w_up[e])) @ self.w_down[e]
            out.index_add_(0, token, y * gates[token, choice][:, None])
        self._record(probs, experts, kept)
        return out.view_as(x)

    def parameter_counts(self) -> dict[str, int]:
        """``total``: every weight; ``active``: the weights one token uses (the router and top_k experts)."""
        expert = 3 * self.d_model * self.d_ff
        router = self.d_model * self.num_experts
        return {"total": router + self.num_experts * expert, "active": router + self.top_k * expert}

    def flops_per_token(self) -> int:
        """Multiply-adds x 2 of one token's forward pass, from the shapes: the router and top_k SwiGLU experts."""
        return 2 * self.d_model * self.num_experts + self.top_k * 2 * 3 * self.d_model * self.d_ff

    def extra_repr(self) -> str:
        capacity = "" if self.capacity_factor is None else f", capacity_factor={self.capacity_factor}"
        return f"d_model={self.d_model}, d_ff={self.d_ff}, num_experts={self.num_experts}, top_k={self.top_k}{capacity}"


def expert_choice(probs: Tensor, capacity: int) -> tuple[Tensor, Tensor]:
    """Expert-choice routing: probs (tokens, num_experts), a router's softmax over the experts -> (tokens
    (num_experts, capacity) long, gates (num_experts, capacity)): row e holds the ``capacity`` tokens with the highest
    probability for expert e, highest first, and those probabilities (ties: the earlier token first)."""
    if not isinstance(probs, Tensor) or probs.dim() != 2:
        raise ValueError(f"probs must be a (tokens, num_experts) tensor, got {getattr(probs, 'shape', probs)!r}")
    checks.positive_int("capacity", capacity)
    if capacity > probs.shape[0]:
        raise ValueError(f"capacity={capacity} is larger than the {probs.shape[0]} tokens an expert can choose from")
    order = torch.argsort(probs, dim=0, descending=True, stable=True)[:capacity]  # (capacity, num_experts)
    return order.T.contiguous(), probs.gather(0, order).T.contiguous()


def moe_language_model(
    config: LMConfig,
    vocab_size: int,
    num_experts: int,
    top_k: int = 2,
    d_ff: int | None = None,
    capacity_factor: float | None = None,
) -> DecoderLM:
    """:func:`~transformer_course.families.language_model.build_language_model` of a LLaMA-style ``config``, with a
    :class:`MixtureOfExperts` of ``num_experts`` SwiGLU experts (each ``d_ff`` wide, default the dense block's width)
    in place of every block's feed-forward network. ids (batch, len) -> logits (batch, len, vocab_size).

    The rest of the model (embedding, attention, norms) is built, and initialised, exactly as the dense model of
    the same ``config``: with the same seed, the two differ only in their feed-forward layers.
    """
    if not isinstance(config, LMConfig) or config.style != "llama":
        raise ValueError(f"config must be an LMConfig with style='llama' (SwiGLU experts), got {config!r}")
    model = build_language_model(config, vocab_size)
    width = model.blocks[0].feed_forward.d_ff if d_ff is None else d_ff
    for block in model.blocks:
        block.feed_forward = MixtureOfExperts(config.d_model, width, num_experts, top_k, capacity_factor)
    return model


def moe_layers(model: nn.Module) -> list[MixtureOfExperts]:
    """Every :class:`MixtureOfExperts` inside ``model``, in order."""
    return [module for module in model.modules() if isinstance(module, MixtureOfExperts)]


def balance_loss(model: nn.Module) -> Tensor:
    """The sum of the load-balancing losses of ``model``'s mixture-of-experts layers from its last forward pass (a
    scalar tensor; 1 per layer when every layer spreads its tokens evenly)."""
    layers = moe_layers(model)
    if not layers:
        raise ValueError("the model has no MixtureOfExperts layer")
    if any(layer.last_routing is None for layer in layers):
        raise ValueError("run the model forward first: a MixtureOfExperts layer has not routed anything yet")
    return torch.stack([layer.last_routing.balance_loss for layer in layers]).sum()


__all__ = ["MixtureOfExperts", "Routing", "balance_loss", "expert_choice", "moe_language_model", "moe_layers"]

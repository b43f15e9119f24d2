"""Small helpers every notebook uses: seeding, choosing a device, counting parameters, the Xavier initialisation."""

from __future__ import annotations

import os
import random

import numpy as np
import torch
from torch import Tensor, nn

from . import checks


def seed_everything(seed: int = 0) -> None:
    """Seed Python, NumPy and PyTorch (CPU and CUDA) so a run can be repeated exactly."""
    checks.non_negative_int("seed", seed)
    os.environ["PYTHONHASHSEED"] = str(seed % 2**32)  # for child processes; Python accepts 0 .. 2**32 - 1 only
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device


def get_device(prefer: str | None = None) -> torch.device:
    """The best available device: CUDA, then Apple's MPS, then the CPU.

    ``prefer`` ("cpu", "cuda", "mps") forces one and raises ``ValueError`` if it is not available.
    """
    available = {"cpu": True, "cuda": torch.cuda.is_available()}
    mps = getattr(torch.backends, "mps", None)
    available["mps"] = bool(mps is not None and mps.is_available())
    if prefer is not None:
        if prefer not in available:
            raise ValueError(f"prefer must be one of {sorted(available)}, got {prefer!r}")
        if not available[prefer]:
            raise ValueError(f"device {prefer!r} was asked for but is not available on this machine")
        return torch.device(prefer)
    for name in ("cuda", "mps"):
        if available[name]:
            return torch.device(name)
    return torch.device("cpu")


def count_parameters(module: nn.Module, trainable_only: bool = False) -> int:
    """Number of distinct parameters in ``module`` (a tied weight is counted once)."""
    seen: set[int] = set()
    total = 0
    for p in module.parameters():
        if id(p) in seen or (trainable_only and not p.requires_grad):
            continue
        seen.add(id(p))
        total += p.numel()
    return total


def xavier_init_(module: nn.Module) -> nn.Module:
    """Xavier-uniform for every matrix of ``module``, zero for its biases; norms keep their ones and zeros.

    The initialisation of the package's Transformer (and of the BERT, GPT and ViT models built from its stacks).
    Returns ``module``.
    """
    for name, p in module.named_parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
        elif name.endswith("bias") and "norm" not in name:
            nn.init.zeros_(p)
    return module


def rename_weights(renames: dict[str, str], weights: dict[str, Tensor], expected: set[str]) -> dict[str, Tensor]:
    """``weights`` (name -> tensor, as a safetensors file holds them) with old name prefixes changed to new ones.

    ``renames``: {old prefix: new prefix}. A name is renamed only where the model does not expect it as it is and
    does expect the renamed one (``expected``: the model's state-dict names), so a file saved under either name
    loads. Tensors are not copied.
    """
    renamed = {}
    for name, tensor in weights.items():
        for old, new in renames.items():
            if name.startswith(old) and name not in expected and new + name[len(old) :] in expected:
                name = new + name[len(old) :]
        renamed[name] = tensor
    return renamed

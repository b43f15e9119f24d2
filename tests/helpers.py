"""Shared by the parity tests: our modules equal PyTorch's, number for number, with copied weights (eval mode,
float32, <= 1e-5)."""

from __future__ import annotations

import torch

ATOL = 1e-5
SRC = torch.tensor([[5, 6, 7, 8, 0, 0], [3, 4, 5, 6, 7, 8], [9, 0, 0, 0, 0, 0]])
TGT = torch.tensor([[1, 5, 6, 0, 0], [1, 3, 4, 5, 6], [1, 9, 9, 9, 0]])


def assert_parity(ours: torch.Tensor, theirs: torch.Tensor) -> None:
    torch.testing.assert_close(ours, theirs, atol=ATOL, rtol=0)

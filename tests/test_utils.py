"""utils.py: seeding, choosing a device, counting parameters, the Xavier initialisation."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn

from transformer_course.utils import count_parameters, get_device, seed_everything, xavier_init_


def test_seed_everything_repeats_random_draws(monkeypatch):
    monkeypatch.setenv("PYTHONHASHSEED", "0")  # seed_everything sets it; restored after the test

    def draws():
        return torch.randn(4).tolist(), np.random.rand(3).tolist(), random.random()

    seed_everything(3)
    first = draws()
    seed_everything(3)
    assert draws() == first  # PyTorch, NumPy and Python's random, all three
    seed_everything(4)
    other = draws()
    assert all(a != b for a, b in zip(other, first))
    seed_everything(2**32 + 3)  # NumPy takes the seed modulo 2**32
    assert np.random.rand(3).tolist() == first[1]
    assert os.environ["PYTHONHASHSEED"] == "3"  # a child Python refuses values of 2**32 and above


def test_a_large_seed_leaves_child_pythons_able_to_start(monkeypatch):
    monkeypatch.setenv("PYTHONHASHSEED", "0")
    seed_everything(2**40)
    result = subprocess.run([sys.executable, "-c", "print('started')"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == "started", result.stderr


@pytest.mark.parametrize("seed", [-1, True, 1.5, "3"])
def test_seed_everything_rejects_bad_seeds(seed):
    with pytest.raises(ValueError, match=f"seed must be a non-negative int, got {seed!r}"):
        seed_everything(seed)


def test_get_device_prefers_cuda_then_mps_then_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert get_device().type == "cpu"
    with pytest.raises(ValueError, match="'cuda' was asked for but is not available"):
        get_device("cuda")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert get_device().type == "mps"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert get_device().type == "cuda"
    assert get_device("cpu").type == "cpu"
    with pytest.raises(ValueError, match="prefer must be one of"):
        get_device("tpu")


def test_count_parameters_counts_a_tied_weight_once_and_can_skip_frozen_ones():
    model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 10))
    assert count_parameters(model) == 10 * 4 + 4 * 10 + 10
    model[1].weight = model[0].weight  # tied: one (10, 4) matrix
    assert count_parameters(model) == 10 * 4 + 10
    model[1].bias.requires_grad_(False)
    assert count_parameters(model, trainable_only=True) == 10 * 4
    assert count_parameters(nn.ReLU()) == 0


def test_xavier_init_sets_matrices_and_zeroes_biases_but_not_the_norms():
    torch.manual_seed(0)
    module = nn.ModuleDict({"proj": nn.Linear(300, 200), "norm": nn.LayerNorm(200)})
    with torch.no_grad():
        module["norm"].bias.fill_(0.5)
    assert xavier_init_(module) is module
    bound = (6 / (300 + 200)) ** 0.5  # Xavier-uniform: U(-bound, bound)
    weight = module["proj"].weight
    assert weight.abs().max() <= bound and weight.abs().max() > 0.95 * bound
    torch.testing.assert_close(weight.var().item(), bound**2 / 3, atol=0, rtol=0.05)
    assert torch.equal(module["proj"].bias, torch.zeros(200))
    assert torch.equal(module["norm"].weight, torch.ones(200))
    assert torch.equal(module["norm"].bias, torch.full((200,), 0.5))  # a norm's shift is left alone


def test_rename_weights_renames_only_what_the_model_expects_under_the_new_name():
    from transformer_course.utils import rename_weights

    weights = {"embedding.weight": torch.zeros(2), "decoder.norm.weight": torch.ones(2), "old.bias": torch.ones(1)}
    expected = {"token_embedding.embedding.weight", "decoder.norm.weight", "old.bias"}
    renamed = rename_weights({"embedding.": "token_embedding.embedding.", "old.": "new."}, weights, expected)
    assert set(renamed) == expected  # old.bias is expected as it is, so it keeps its name
    assert renamed["token_embedding.embedding.weight"] is weights["embedding.weight"]

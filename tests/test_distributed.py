"""Two CPU processes under torchrun (DDP, gloo) train exactly like one process with the same global batch."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import torch

from transformer_course.text.tasks import Batch
from transformer_course.training.distributed import (
    DistributedContext,
    autocast_context,
    shard_batch,
    sharded,
    with_autocast,
    wrap_model,
)
from transformer_course.training.recipes import make_task, recipe_model_config, train_task_model
from transformer_course.training.trainers import TrainConfig

ARGS = ["--task", "copy", "--steps", "6", "--warmup", "2", "--batch-size", "16", "--quiet", "--eval-size", "8"]


# The rendezvous listens on a loopback port the OS picks (":0"), so a busy fixed port cannot break the run.
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
            "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:0"]  # fmt: skip


def _losses(tmp_path, name: str, launcher: list[str]) -> list[float]:
    out = tmp_path / f"{name}.json"
    command = [*launcher, "-m", "transformer_course.train", *ARGS, "--history-out", str(out)]
    run = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, (
        f"{' '.join(command)} exited with {run.returncode}:\n{run.stdout[-3000:]}\n{run.stderr[-6000:]}"
    )
    return json.loads(out.read_text())["loss"]


def test_two_processes_match_one_with_the_same_global_batch(tmp_path):
    single = _losses(tmp_path, "single", [sys.executable])
    double = _losses(tmp_path, "ddp", TORCHRUN)
    assert len(single) == len(double) == 6
    assert single[-1] < single[0]  # it did learn something
    for a, b in zip(single, double):
        assert a == pytest.approx(b, abs=1e-5)


def test_shard_batch_splits_rows_evenly():
    ids = torch.arange(12).reshape(6, 2)
    batch = Batch(ids, ids + 100, ids + 200)
    second = shard_batch(batch, rank=1, world_size=3)
    assert torch.equal(second.src, ids[2:4]) and torch.equal(second.tgt_out, ids[2:4] + 200)
    with pytest.raises(ValueError, match=r"global batch size \(6\) must be divisible by the number of processes \(4\)"):
        shard_batch(batch, rank=0, world_size=4)


def test_bf16_autocast_trains_on_cpu():
    task = make_task("copy")
    config = TrainConfig(steps=3, warmup=1, batch_size=8)
    _, history = train_task_model(task, recipe_model_config(task), config, progress=False, amp=True)
    assert all(math.isfinite(x) for x in history.loss)
    assert len(history.batch_accuracy) == len(history.grad_norm) == 3  # the one loop's history, under autocast
    with autocast_context(torch.device("cpu"), enabled=True):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
    with pytest.raises(ValueError, match="not on 'mps'"):
        autocast_context(torch.device("mps"), enabled=True)


def test_the_wrappers_change_nothing_in_a_single_process_run_without_amp():
    model = torch.nn.Linear(2, 2)
    assert wrap_model(model, None) is model

    def draw():
        return Batch(torch.zeros(4, 2), torch.zeros(4, 2), torch.zeros(4, 2))

    def loss(x):
        return x @ x

    assert sharded(draw, None) is draw
    assert with_autocast(loss, torch.device("cpu"), enabled=False) is loss


def test_sharded_draws_the_global_batch_and_keeps_this_processs_rows():
    ids = torch.arange(12).reshape(6, 2)
    context = DistributedContext(rank=2, world_size=3, device=torch.device("cpu"))
    draw = sharded(lambda: Batch(ids, ids + 100, ids + 200), context)
    assert torch.equal(draw().src, ids[4:6]) and torch.equal(draw().tgt_in, ids[4:6] + 100)


def test_with_autocast_runs_the_function_in_bfloat16_and_checks_the_device_at_once():
    matmul = with_autocast(lambda a, b: a @ b, torch.device("cpu"), enabled=True)
    assert matmul(torch.ones(2, 2), torch.ones(2, 2)).dtype == torch.bfloat16
    assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32  # only inside the wrapped call
    with pytest.raises(ValueError, match="not on 'mps'"):
        with_autocast(lambda: None, torch.device("mps"), enabled=True)

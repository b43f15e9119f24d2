"""Training on several processes with DistributedDataParallel, and mixed precision.

Launch the shell entry point with ``torchrun``:

    torchrun --standalone --nproc_per_node 2 -m transformer_course.train --task copy --steps 300

Each process draws the same global batch from the same seeded generator and keeps its own contiguous slice
of rows, so with N processes and a global batch B every step sees exactly the B examples a single process
would see; DDP averages the gradients. (The average of per-process mean losses equals the global mean loss
when every process has the same number of target tokens, as in the copy and date tasks.)

The training loop itself knows nothing of this: :func:`~transformer_course.training.trainers.train` prepares, before
its loop, the model the step calls (:func:`wrap_model`: DistributedDataParallel), where its batches come from
(:func:`sharded`: this process's slice), the loss it computes (:func:`with_autocast`: bfloat16 autocast) and
the numbers it logs (:func:`mean_across_processes`). In a single-process run without mixed precision each of
these returns what it was given.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import NoReturn, TypeVar

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from ..text.tasks import Batch

T = TypeVar("T")


@dataclass(frozen=True)
class DistributedContext:
    """Where this process sits in a distributed run."""

    rank: int
    world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_from_environment(device: torch.device) -> DistributedContext | None:
    """Join the process group that ``torchrun`` describes in the environment (``WORLD_SIZE``, ``RANK``,
    ``MASTER_ADDR``...); ``None`` for an ordinary single-process run. Gloo on the CPU, NCCL on CUDA."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return None
    rank = int(os.environ["RANK"])
    if device.type == "cuda":
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return DistributedContext(rank, world_size, device)


def leave_process_group(context: DistributedContext | None) -> None:
    """Wait for every process, then tear the process group down (a no-op in a single-process run).

    A process that exits with the group still alive can abort in Gloo's background threads
    ("terminate called without an active exception"), failing the whole ``torchrun`` job after the
    training itself has succeeded."""
    if context is None or not dist.is_initialized():
        return
    dist.barrier()
    dist.destroy_process_group()


def launched_by_torchrun() -> bool:
    """True inside one of several processes started by ``torchrun``."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def exit_finished_worker(exit_code: int = 0) -> NoReturn:
    """End a finished ``torchrun`` worker at once, skipping the interpreter's shutdown.

    Even after :func:`leave_process_group`, PyTorch's Gloo backend sometimes aborts in a C++ destructor while
    the interpreter shuts down ("terminate called without an active exception"): here, about 2 runs in 100 of
    the two-process test, each reported by ``torchrun`` as a failed job after a successful training. The
    worker has written everything it had to write, so it flushes its output and leaves without that shutdown.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)


def shard_batch(batch: Batch, rank: int, world_size: int) -> Batch:
    """This process's contiguous slice of a global batch; the global batch size must divide evenly.

    batch.src: (global_batch, len_s) -> (global_batch / world_size, len_s); likewise tgt_in and tgt_out.
    """
    rows = len(batch)
    if rows % world_size:
        raise ValueError(f"the global batch size ({rows}) must be divisible by the number of processes ({world_size})")
    per_rank = rows // world_size
    part = slice(rank * per_rank, (rank + 1) * per_rank)
    return Batch(batch.src[part], batch.tgt_in[part], batch.tgt_out[part])


def wrap_model(model: nn.Module, context: DistributedContext | None) -> nn.Module:
    """The module a training step calls: ``model`` itself, or in a distributed run ``model`` wrapped in
    DistributedDataParallel, which averages the gradients over the processes during ``backward``. Either way
    the parameters are ``model``'s, so build the optimizer from ``model``."""
    return model if context is None else DistributedDataParallel(model)


def sharded(draw: Callable[[], Batch], context: DistributedContext | None) -> Callable[[], Batch]:
    """A batch source giving this process's slice (:func:`shard_batch`) of each global batch ``draw()`` returns;
    ``draw`` itself in a single-process run. Every process must draw the same global batches (the same seeded
    generator)."""
    if context is None:
        return draw
    return lambda: shard_batch(draw(), context.rank, context.world_size)


def mean_across_processes(value: torch.Tensor, context: DistributedContext | None) -> torch.Tensor:
    """The average of a scalar over all processes (the value itself in a single-process run)."""
    if context is None:
        return value
    value = value.detach().clone()
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    return value / context.world_size


def autocast_context(device: torch.device, enabled: bool) -> AbstractContextManager:
    """bfloat16 autocast where the device supports it; raises ``ValueError`` where it does not."""
    if not enabled:
        return nullcontext()
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise ValueError(f"mixed precision (bf16) is not supported on {torch.cuda.get_device_name(device)}")
    if device.type not in ("cuda", "cpu"):
        raise ValueError(f"mixed precision (bf16) is supported here on cuda and cpu, not on {device.type!r}")
    return torch.autocast(device.type, dtype=torch.bfloat16)


def with_autocast(fn: Callable[..., T], device: torch.device, enabled: bool) -> Callable[..., T]:
    """``fn`` run under :func:`autocast_context` (bfloat16 autocast) when ``enabled``; ``fn`` itself otherwise.

    Wrap the forward pass and the loss, not the backward pass or the optimizer step. Raises ``ValueError`` at
    once for a device without bf16 autocast.
    """
    if not enabled:
        return fn
    autocast_context(device, enabled)  # check the device now, not at the first step

    @functools.wraps(fn)
    def run(*args, **kwargs):
        with autocast_context(device, enabled):
            return fn(*args, **kwargs)

    return run

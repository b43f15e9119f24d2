"""Watching every PyTorch operator call: the peak bytes of the new tensors, and which operators ran and how often.

All three functions watch every operator call (a ``TorchDispatchMode``), so the counts are deterministic: the same
on every machine, unlike the process's memory. :func:`peak_tensor_bytes` shows that written-out attention stores
n x n matrices and that blockwise or fused attention does not; :func:`traced_operators` shows which fused kernel
PyTorch picked; :func:`operator_calls` counts every call, e.g. the hundreds that one cached decoding step makes.
:func:`matmul_flops` counts the floating-point operations of the matrix products from their shapes: the work of a
model, on an axis every machine shares, where seconds depend on the CPU and on what else the machine is doing.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

__all__ = ["bytes_moved", "matmul_flops", "operator_calls", "peak_tensor_bytes", "traced_operators"]


class _TensorMemoryTracker(TorchDispatchMode):
    """Counts the bytes of the tensors that PyTorch operators create while it is active, and their peak; also
    records the operators' names in call order."""

    def __init__(self) -> None:
        super().__init__()
        self.operators: list[str] = []
        self.current = 0
        self.peak = 0
        self._bytes: dict[int, int] = {}
        self._holders: dict[int, int] = {}

    def _release(self, key: int) -> None:
        self._holders[key] -= 1
        if self._holders[key] == 0:
            self.current -= self._bytes.pop(key)
            del self._holders[key]

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.operators.append(str(func.overloadpacket.__name__))
        inputs = {t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0] if isinstance(t, Tensor)}
        for t in tree_flatten(out)[0]:
            if not isinstance(t, Tensor) or t.untyped_storage().nbytes() == 0:
                continue
            key = t.untyped_storage().data_ptr()
            if key not in self._bytes:
                if key in inputs:  # a view of, or an in-place result on, a tensor from before the measurement
                    continue
                self._bytes[key] = t.untyped_storage().nbytes()
                self._holders[key] = 0
                self.current += self._bytes[key]
                self.peak = max(self.peak, self.current)
            self._holders[key] += 1
            weakref.finalize(t, self._release, key)
        return out


def peak_tensor_bytes(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, int]:
    """Run ``fn(*args, **kwargs)`` without autograd and return (its result, the peak bytes of new tensors).

    Counts every tensor that a PyTorch operator allocates during the call, while it is alive (a deterministic
    count, the same on every machine). Not counted: tensors that existed before the call, and scratch buffers a
    fused kernel allocates internally (small for the flash kernel: one block per thread).
    """
    with torch.no_grad(), _TensorMemoryTracker() as tracker:
        result = fn(*args, **kwargs)
    return result, tracker.peak


def operator_calls(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[str]:
    """Every ATen operator call ``fn(*args, **kwargs)`` makes (without autograd), in call order, repeats included.

    Views (``view``, ``transpose``, ``slice``, ...) count too: each is a dispatched call, cheap in arithmetic but
    not free. When ``fn`` is one decoding step, the length counts the calls whose fixed overhead (dispatch, often
    Python too) the step pays whatever the tensor sizes.
    """
    with torch.no_grad(), _TensorMemoryTracker() as tracker:
        fn(*args, **kwargs)
    return tracker.operators


def traced_operators(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[str]:
    """The ATen operators ``fn(*args, **kwargs)`` runs (without autograd), in order of first use, without repeats.

    For example, ``F.scaled_dot_product_attention`` on a CPU shows which fused kernel PyTorch picked.
    """
    return list(dict.fromkeys(operator_calls(fn, *args, **kwargs)))


def matmul_flops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """Floating-point operations of the matrix products ``fn(*args, **kwargs)`` runs, counted from their shapes.

    A product of (m, k) by (k, n) counts 2 m k n (a multiply and an add per term); batched products, linear layers
    and convolutions are counted the same way, by PyTorch's own ``torch.utils.flop_counter.FlopCounterMode``.
    Element-wise work (softmax, norms, activations) is not counted: in a Transformer it is a small share. Fused
    kernels that have no formula there count 0: on the CPU, ``F.scaled_dot_product_attention``'s fused kernel
    (count it as 4 n_q n_k d per head: two products) and the recurrent kernels of ``nn.LSTM`` and ``nn.GRU`` (8
    (d_in + d_hidden) d_hidden per token and layer for an LSTM's forward pass). Attention written out with matrix
    products, as the package's ``scaled_dot_product_attention`` does it, is counted. Runs with autograd as ``fn``
    leaves it, so a training step's backward pass counts too. The count depends only on the shapes, so it is the
    same on every machine.
    """
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        fn(*args, **kwargs)
    return int(counter.get_total_flops())


class _BytesMoved(TorchDispatchMode):
    """Adds up the bytes of the tensors every operator call reads (its inputs) and writes (its outputs)."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        tensors = [t for t in tree_flatten((args, kwargs, out))[0] if isinstance(t, Tensor)]
        self.total += sum(t.numel() * t.element_size() for t in tensors)
        return out


def bytes_moved(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """Bytes that the PyTorch operators ``fn(*args, **kwargs)`` calls read and write (without autograd).

    Each operator call counts the sizes of its input and output tensors: the traffic to and from memory of an
    element-wise computation such as a norm, where the arithmetic is cheap and moving the data is the cost. The count
    depends only on the shapes and the operators, so it is the same on every machine. A fused kernel reads its input
    and writes its output once; the same computation written out in several operators moves every intermediate too.
    """
    with torch.no_grad(), _BytesMoved() as counter:
        fn(*args, **kwargs)
    return counter.total

"""What a recurrent layer and an attention layer cost, counted from the shapes and timed (notebook 01, section 2).

The notebook shows the idea (the paper's Table 1: $n$ sequential steps against a fixed number); this module does the
bookkeeping, so that the notebook's cells stay short:

* :func:`count_layer_work`: for a batch of sequences at each length, the FLOPs of each layer's matrix products and the
  PyTorch operator calls it makes, both counted from the shapes (the same on every machine with the same PyTorch), in
  a :class:`LayerWork`, whose :meth:`~LayerWork.flops_table` and :meth:`~LayerWork.calls_table` print them;
* :func:`check_operator_calls`: the claims section 2 makes about the calls, each checked with
  :func:`~transformer_course.claims.check` (prints ``holds: ...``, raises when one fails);
* :func:`time_layers`: each layer's time at each length, the layers taking turns, best of several repeats, in a
  :class:`LayerTimes` whose :meth:`~LayerTimes.table` prints them;
* :func:`report_times`: what the clock showed on this run, reported with :func:`~transformer_course.claims.observe`
  (``seen on this run`` or ``not seen on this run``), never raised: times depend on the machine and its load.

The two layers are given under the names ``"RNN"`` and ``"attention"``; both map a batch ``(batch, n, d)`` to an output
(``nn.RNN(d, d, batch_first=True)`` and the package's ``MultiHeadAttention(d, heads)`` in the notebook).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from .. import checks
from ..claims import check, observe
from ..language import display_width, rjust, tr
from ..memory_tracker import matmul_flops, operator_calls
from ..timing import ratio, time_in_turns

__all__ = [
    "MATRIX_PRODUCTS",
    "LayerTimes",
    "LayerWork",
    "check_operator_calls",
    "count_layer_work",
    "report_times",
    "time_layers",
]

MATRIX_PRODUCTS = frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul"})
"""The ATen names of matrix products, as :func:`~transformer_course.memory_tracker.operator_calls` lists them."""

LAYERS = ("RNN", "attention")


@dataclass(frozen=True)
class LayerWork:
    """What :func:`count_layer_work` counted.

    ``flops[name, n]``: FLOPs of the matrix products of layer ``name`` (``"RNN"`` or ``"attention"``) for ``batch``
    sequences of ``n`` tokens of width ``d``. ``calls[name, n]``: the names of its operator calls, in order.
    ``calls["product", lengths[0]]``: the calls of one matrix product and ``tanh`` that do the RNN's multiply-adds at
    the shortest length in one go, the yardstick for the RNN's many small calls.
    """

    d: int
    batch: int
    lengths: tuple[int, ...]
    flops: dict[tuple[str, int], int]
    calls: dict[tuple[str, int], list[str]]

    def num_calls(self, name: str, n: int) -> int:
        """How many operator calls layer ``name`` makes at length ``n``."""
        if (name, n) not in self.calls:
            raise ValueError(f"no count for ({name!r}, {n}); counted: {sorted(self.calls)}")
        return len(self.calls[name, n])

    @property
    def rnn_calls_per_step(self) -> float:
        """The operator calls each further time step adds to the RNN (from the shortest to the longest length)."""
        first, last = self.lengths[0], self.lengths[-1]
        return (self.num_calls("RNN", last) - self.num_calls("RNN", first)) / (last - first)

    def products(self, name: str, n: int) -> str:
        """``"6 of them matrix products (addmm 4, bmm 2)"`` for layer ``name`` at length ``n``."""
        names = self.calls[name, n] if (name, n) in self.calls else []
        kinds = {kind: names.count(kind) for kind in sorted(set(names) & MATRIX_PRODUCTS)}
        listed = ", ".join(f"{kind} {count}" for kind, count in kinds.items())
        listed_zh = "，".join(f"{kind} {count} 次" for kind, count in kinds.items())
        return tr(
            f"{sum(kinds.values())} of them matrix products ({listed})",
            f"其中 {sum(kinds.values())} 次是矩阵乘法（{listed_zh}）",
        )

    def flops_table(self) -> str:
        """The FLOPs of both layers at every length, and attention's over the RNN's (two decimals: exact ratios)."""
        lines = [
            tr(
                f"FLOPs of the matrix products for a batch of {self.batch} sequences, d = {self.d}",
                f"一批 {self.batch} 个序列、d = {self.d} 时矩阵乘法的浮点运算次数（FLOPs）",
            ),
            f"{'n':>6} {'RNN':>13} {rjust(tr('attention', '注意力'), 15)} "
            f"{rjust(tr('attention/RNN', '注意力/RNN'), 14)}",
        ]
        for n in self.lengths:
            r, a = self.flops["RNN", n], self.flops["attention", n]
            lines.append(f"{n:>6} {r:>13,} {a:>15,} {a / r:>14.2f}")
        return "\n".join(lines)

    def calls_table(self) -> str:
        """The operator calls of both layers at every length, then what they are made of: the calls of one product
        doing the RNN's multiply-adds at the shortest length, the matrix products among each layer's calls, and the
        calls each further step adds to the RNN."""
        first = self.lengths[0]
        lines = [
            tr(
                f"PyTorch operator calls of one forward pass, batch of {self.batch} sequences, d = {self.d}",
                f"一次前向传播的 PyTorch 算子调用次数，一批 {self.batch} 个序列，d = {self.d}",
            ),
            f"{'n':>6} {'RNN':>7} {rjust(tr('attention', '注意力'), 10)}",
        ]
        lines += [f"{n:>6} {self.num_calls('RNN', n):>7} {self.num_calls('attention', n):>10}" for n in self.lengths]
        lines += [
            tr(
                f"n = {first}: the RNN's multiply-adds as one matrix product and tanh: "
                f"{self.num_calls('product', first)} operator calls",
                f"n = {first} 时，若把 RNN 的全部乘加写成一次矩阵乘法加一次 tanh，"
                f"只需 {self.num_calls('product', first)} 次算子调用",
            ),
            tr(
                f"attention at every n: {self.num_calls('attention', first)} operator calls, "
                f"{self.products('attention', first)}",
                f"注意力层在每个 n 上都是 {self.num_calls('attention', first)} 次算子调用，"
                f"{self.products('attention', first)}",
            ),
            tr(
                f"RNN at n = {first}: {self.num_calls('RNN', first)} operator calls, {self.products('RNN', first)}",
                f"RNN 在 n = {first} 时有 {self.num_calls('RNN', first)} 次算子调用，{self.products('RNN', first)}",
            ),
            tr(
                f"RNN: each further step adds {self.rnn_calls_per_step:g} operator calls",
                f"RNN 每多一步，就多 {self.rnn_calls_per_step:g} 次算子调用",
            ),
        ]
        return "\n".join(lines)


def _check_lengths(lengths: Sequence[int]) -> tuple[int, ...]:
    if isinstance(lengths, str | bytes) or not isinstance(lengths, Sequence) or len(lengths) < 2:
        raise ValueError(f"lengths must be a sequence of at least 2 lengths, got {lengths!r}")
    for n in lengths:
        checks.positive_int("each length", n)
    if list(lengths) != sorted(set(lengths)):
        raise ValueError(f"lengths must be distinct and increasing, got {list(lengths)}")
    return tuple(lengths)


def _check_layers(rnn: nn.Module, attention: nn.Module) -> None:
    for name, layer in (("rnn", rnn), ("attention", attention)):
        if not isinstance(layer, nn.Module):
            raise ValueError(f"{name} must be a layer (an nn.Module), got {type(layer).__name__}")


def count_layer_work(rnn: nn.Module, attention: nn.Module, d: int, lengths: Sequence[int], batch: int = 8) -> LayerWork:
    """Count the matrix-product FLOPs and the operator calls of ``rnn`` and ``attention`` on ``batch`` sequences of
    each length in ``lengths`` (increasing), with tokens of width ``d``: inputs of shape (batch, n, d), all zeros,
    since the counts depend only on the shapes. Also counts the calls of one matrix product and ``tanh`` that do the
    RNN's multiply-adds at the shortest length, ``(batch * n, 2 d) @ (2 d, d)``. Runs without autograd.

    Raises ``ValueError`` for a layer that is not an ``nn.Module``, a ``d`` or ``batch`` below 1, or fewer than two
    distinct increasing lengths.
    """
    _check_layers(rnn, attention)
    checks.positive_ints(d=d, batch=batch)
    lengths = _check_lengths(lengths)
    flops: dict[tuple[str, int], int] = {}
    calls: dict[tuple[str, int], list[str]] = {}
    with torch.no_grad():
        for n in lengths:
            seq = torch.zeros(batch, n, d)
            for name, layer in zip(LAYERS, (rnn, attention)):
                flops[name, n] = matmul_flops(layer, seq)
                calls[name, n] = operator_calls(layer, seq)
        inputs, weight = torch.zeros(batch * lengths[0], 2 * d), torch.zeros(2 * d, d)
        calls["product", lengths[0]] = operator_calls(lambda: torch.tanh(inputs @ weight))
    return LayerWork(d=d, batch=batch, lengths=lengths, flops=flops, calls=calls)


def check_operator_calls(work: LayerWork) -> None:
    """Check, with :func:`~transformer_course.claims.check`, what section 2 says about the work and the calls:

    PyTorch counts the RNN's matrix products (above 0 FLOPs at every length: ``nn.LSTM``'s fused kernel counts 0, and
    the FLOP ratios would then mean nothing); every further step adds the same number of calls to the RNN (at least
    one); the attention layer makes the same number of calls at every length; at the shortest length the RNN makes
    more than 10 times the calls of one matrix product and ``tanh`` doing its multiply-adds.
    """
    if not isinstance(work, LayerWork):
        raise ValueError(f"work must be the LayerWork that count_layer_work returns, got {type(work).__name__}")
    lengths, first = work.lengths, work.lengths[0]
    check(
        all(work.flops["RNN", n] > 0 for n in lengths),
        tr(
            "PyTorch counts the RNN's matrix products: above 0 FLOPs at every n",
            "PyTorch 统计到了 RNN 的矩阵乘法：每个 n 上的 FLOPs 都大于 0",
        ),
        measured={n: work.flops["RNN", n] for n in lengths},
    )
    per_step = work.rnn_calls_per_step
    rnn_calls = {n: work.num_calls("RNN", n) for n in lengths}
    check(
        per_step >= 1 and all(rnn_calls[n] == rnn_calls[first] + per_step * (n - first) for n in lengths),
        tr(
            "every further step adds the same number of operator calls to the RNN: n rounds of small calls",
            "RNN 每多一步，算子调用就多出同样的次数（共 n 轮小调用）",
        ),
        measured=rnn_calls,
    )
    check(
        len({work.num_calls("attention", n) for n in lengths}) == 1,
        tr(
            "the attention layer makes the same number of operator calls at every n",
            "注意力层在每个 n 上的算子调用次数都相同",
        ),
        measured={n: work.num_calls("attention", n) for n in lengths},
    )
    check(
        rnn_calls[first] > 10 * work.num_calls("product", first),
        tr(
            f"at n = {first} the RNN makes more than 10 times the operator calls of one matrix product and tanh doing "
            "its multiply-adds",
            f"n = {first} 时，RNN 的算子调用次数是“一次矩阵乘法加 tanh 完成同样乘加”的 10 倍以上",
        ),
        measured=(rnn_calls[first], work.num_calls("product", first)),
    )


@dataclass(frozen=True)
class LayerTimes:
    """What :func:`time_layers` measured: ``ms[name, n]``, the best time of one call of layer ``name`` at length
    ``n`` in milliseconds (and ``ms["product", lengths[0]]`` for the single product), with the counts they go with."""

    work: LayerWork
    ms: dict[tuple[str, int], float]
    repeats: int

    def attention_over_rnn(self, n: int) -> float:
        """Attention's time over the RNN's at length ``n`` (nan if the clock saw no time for the RNN)."""
        return ratio(self.ms["attention", n], self.ms["RNN", n])

    def table(self) -> str:
        """The times (and the RNN's time per step), attention's over the RNN's, and the single product's time."""
        work, first = self.work, self.work.lengths[0]
        rnn_header = tr("RNN (ms)", "RNN（毫秒）")
        w = max(10, display_width(rnn_header))  # the Chinese header is 11 columns wide
        lines = [
            tr(f"time on this thread, best of {self.repeats}", f"单线程耗时，取 {self.repeats} 次中最快的一次"),
            f"{'n':>6} {rjust(rnn_header, w)} "
            f"{rjust(tr('RNN per step (us)', 'RNN 每步（微秒）'), 18)} "
            f"{rjust(tr('attention (ms)', '注意力（毫秒）'), 15)} {rjust(tr('attention/RNN', '注意力/RNN'), 14)}",
        ]
        for n in work.lengths:
            r, a = self.ms["RNN", n], self.ms["attention", n]
            lines.append(f"{n:>6} {r:>{w}.2f} {1000 * r / n:>18.1f} {a:>15.2f} {self.attention_over_rnn(n):>14.2f}")
        lines.append(
            tr(
                f"n = {first}: the RNN's multiply-adds as one matrix product and tanh: "
                f"{self.ms['product', first]:.2f} ms",
                f"n = {first} 时，若把 RNN 的全部乘加写成一次矩阵乘法加一次 tanh，"
                f"只需 {self.ms['product', first]:.2f} 毫秒",
            )
        )
        return "\n".join(lines)


def time_layers(rnn: nn.Module, attention: nn.Module, work: LayerWork, repeats: int = 5, seed: int = 0) -> LayerTimes:
    """Time ``rnn`` and ``attention`` at every length of ``work`` (random inputs of its shapes, drawn with ``seed``
    from a generator of their own) and the single product of :func:`count_layer_work`, all taking turns, best of
    ``repeats`` (:func:`~transformer_course.timing.time_in_turns`), without autograd, on the current torch threads.
    """
    _check_layers(rnn, attention)
    if not isinstance(work, LayerWork):
        raise ValueError(f"work must be the LayerWork that count_layer_work returns, got {type(work).__name__}")
    checks.positive_int("repeats", repeats)
    g = torch.Generator().manual_seed(seed)
    first, d, batch = work.lengths[0], work.d, work.batch
    inputs, weight = torch.randn(batch * first, 2 * d, generator=g), torch.randn(2 * d, d, generator=g)
    functions: dict[tuple[str, int], Callable[[], object]] = {("product", first): lambda: torch.tanh(inputs @ weight)}
    for n in work.lengths:
        seq = torch.randn(batch, n, d, generator=g)
        functions["RNN", n] = lambda seq=seq: rnn(seq)
        functions["attention", n] = lambda seq=seq: attention(seq)
    with torch.no_grad():
        seconds = time_in_turns(functions, repeats).seconds
    return LayerTimes(work=work, ms={key: 1000 * s for key, s in seconds.items()}, repeats=repeats)


def report_times(times: LayerTimes, middle: int = 64) -> dict[str, bool]:
    """Report, with :func:`~transformer_course.claims.observe`, what section 2 says the clock usually shows on one CPU
    thread; returns whether each was seen, by a short name. ``middle`` is the length (one of the counted lengths,
    below the longest) from which the RNN's fixed cost per call no longer dominates: at the shortest length the RNN
    takes more than twice as long as one product doing its multiply-adds (``"fixed cost"``); its time per step at the
    longest length is within a factor of 3 of that at ``middle`` (``"per step"``); attention's time over the RNN's is
    more than twice as large at the longest length as at ``middle`` (``"grows"``); attention takes longer than the
    RNN at every length above ``middle`` (``"slower"``). Nothing is said about which layer is faster up to ``middle``:
    there the RNN's many small calls can weigh about as much as attention's chain of calls and its extra arithmetic,
    and either can come out ahead.
    """
    if not isinstance(times, LayerTimes):
        raise ValueError(f"times must be the LayerTimes that time_layers returns, got {type(times).__name__}")
    lengths = times.work.lengths
    if middle not in lengths[:-1]:
        raise ValueError(f"middle must be one of the lengths below the longest, {list(lengths[:-1])}; got {middle!r}")
    first, last, ms = lengths[0], lengths[-1], times.ms
    per_step = ratio(ms["RNN", last] / last, ms["RNN", middle] / middle)
    growth = (times.attention_over_rnn(middle), times.attention_over_rnn(last))
    above_middle = [n for n in lengths if n > middle]
    over_rnn = {n: times.attention_over_rnn(n) for n in above_middle}
    return {
        "fixed cost": observe(
            ms["RNN", first] > 2 * ms["product", first],
            tr(
                f"at n = {first} the RNN takes more than twice as long as one matrix product doing its multiply-adds",
                f"n = {first} 时，RNN 的耗时是“一次矩阵乘法完成同样乘加”的两倍以上",
            ),
            measured=(ms["RNN", first], ms["product", first]),
        ),
        "per step": observe(
            1 / 3 < per_step < 3,
            tr(
                f"the RNN's time per step at n = {last} is within a factor of 3 of its time per step at n = {middle}",
                f"RNN 在 n = {last} 时的每步耗时与 n = {middle} 时的每步耗时之比，在 1/3 到 3 之间",
            ),
            measured=per_step,
        ),
        "grows": observe(
            growth[1] > 2 * growth[0],
            tr(
                f"attention's time relative to the RNN's is more than twice as large at n = {last} as at n = {middle}",
                f"注意力耗时与 RNN 耗时之比，在 n = {last} 时是 n = {middle} 时的两倍以上",
            ),
            measured=growth,
        ),
        "slower": observe(
            all(over_rnn[n] > 1 for n in above_middle),
            tr(
                f"attention takes longer than the RNN at every n from {above_middle[0]} to {last}",
                f"从 {above_middle[0]} 到 {last} 的每个 n 上，注意力都比 RNN 慢",
            ),
            measured=over_rnn,
        ),
    }

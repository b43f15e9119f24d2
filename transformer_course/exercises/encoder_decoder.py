"""Exercises of notebook 08 (encoder and decoder): checkers and reference solutions.

8.1 :func:`check_shift_right`: the decoder input from the target, ``shift_right(tgt_out, bos_id, pad_id, eos_id)``.
8.2 :func:`check_cross_attention`: one head of cross-attention, ``cross_attention(y, memory, w_q, w_k, w_v, src_mask)``.
8.3 :func:`check_parameter_formula`: the parameter count of a shared-and-tied Transformer by formula.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ..core.model import Transformer, TransformerConfig
from ..utils import count_parameters
from ._core import Exercise, ExerciseMistake, expect, expect_close, expect_tensor, explain_shape_error, report, tr

SHIFT_RIGHT = Exercise("8.1", "shift the target right", "把目标序列右移")
CROSS_ATTENTION = Exercise("8.2", "cross-attention, one head", "单头交叉注意力")
PARAMETER_FORMULA = Exercise("8.3", "parameters by formula", "用公式算参数量")

# ---- reference solutions -------------------------------------------------------------------------------


def shift_right_reference(tgt_out: Tensor, bos_id: int = 1, pad_id: int = 0, eos_id: int = 2) -> Tensor:
    """tgt_out: (batch, len) = ``y_1 ... y_n <eos> <pad> ...`` -> decoder input (batch, len) = ``<bos> y_1 ... y_n
    <pad> ...``: <bos> in front, the last column dropped, and <eos> (never an input) replaced by <pad>."""
    shifted = torch.cat([torch.full_like(tgt_out[:, :1], bos_id), tgt_out[:, :-1]], dim=1)
    return shifted.masked_fill(shifted == eos_id, pad_id)


def cross_attention_reference(
    y: Tensor, memory: Tensor, w_q: Tensor, w_k: Tensor, w_v: Tensor, src_mask: Tensor
) -> Tensor:
    """One head. y: (batch, len_t, d_model) decoder states (the queries); memory: (batch, len_s, d_model)
    encoder output (keys and values); w_q, w_k, w_v: (d_model, d_k); src_mask: (batch, len_s) bool, True at
    real source tokens. Returns (batch, len_t, d_k)."""
    q, k, v = y @ w_q, memory @ w_k, memory @ w_v
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (batch, len_t, len_s)
    scores = scores.masked_fill(~src_mask[:, None, :], float("-inf"))
    return F.softmax(scores, dim=-1) @ v


def parameter_formula_reference(
    d_model: int, d_ff: int, num_encoder_layers: int, num_decoder_layers: int, vocab_size: int
) -> int:
    """Parameters of the course's Transformer with one shared embedding table that is also the output matrix
    (``share_embeddings=True, tie_output=True``); biases and LayerNorm parameters included."""
    attention = 4 * (d_model * d_model + d_model)  # W_Q, W_K, W_V, W_O and their biases
    ffn = 2 * d_model * d_ff + d_ff + d_model
    norm = 2 * d_model  # gain and bias
    encoder_layer = attention + ffn + 2 * norm
    decoder_layer = 2 * attention + ffn + 3 * norm  # self- and cross-attention
    embedding = vocab_size * d_model  # counted once: shared by source, target and the output layer
    output_bias = vocab_size
    return num_encoder_layers * encoder_layer + num_decoder_layers * decoder_layer + embedding + output_bias


# ---- checkers ------------------------------------------------------------------------------------------


def check_shift_right(shift_right: Callable[..., Tensor]) -> bool:
    """Check ``shift_right(tgt_out, bos_id, pad_id, eos_id)`` on a padded batch."""

    def check() -> None:
        bos, pad, eos = 1, 0, 2
        tgt_out = torch.tensor([[5, 6, 7, eos], [8, 9, eos, pad], [4, eos, pad, pad]])
        before = tgt_out.clone()
        expected = shift_right_reference(tgt_out, bos, pad, eos)
        out = shift_right(tgt_out, bos, pad, eos)
        expect(
            torch.equal(tgt_out, before),
            tr(
                "shift_right must not change tgt_out in place (it is also the label)",
                "shift_right 不能原地修改 tgt_out（它同时也是标签）。",
            ),
        )
        expect_tensor(
            out,
            tr("the decoder input", "解码器输入"),
            tgt_out.shape,
            tr(
                "(the target's shape): put <bos> in front and drop the last column",
                "（与目标序列的形状相同）：在前面放上 <bos>，并去掉最后一列",
            ),
        )
        expect(
            not out.dtype.is_floating_point,
            tr(
                f"token ids must stay integers, got dtype {out.dtype}",
                f"词元 id 必须保持为整数，得到的 dtype 是 {out.dtype}",
            ),
        )
        expect(
            bool((out[:, 0] == bos).all()),
            tr("every row of the decoder input starts with <bos>", "解码器输入的每一行都要以 <bos> 开头"),
        )
        if torch.equal(out[:, 1:], tgt_out[:, :-1]):
            raise ExerciseMistake(
                tr(
                    "<eos> is what the decoder must predict last, never an input: make it <pad>",
                    "<eos> 是解码器最后要预测的词元，绝不会是输入：要把它换成 <pad>",
                )
            )
        if torch.equal(out[:, 1:-1], tgt_out[:, 2:]):
            raise ExerciseMistake(
                tr(
                    "that shifts the wrong way: position t of the input holds label t - 1",
                    "方向移反了：输入的位置 t 放的应是标签 t - 1",
                )
            )
        expect(
            torch.equal(out, expected),
            tr(
                f"expected {expected.tolist()}, got {out.tolist()}",
                f"应为 {expected.tolist()}，得到的是 {out.tolist()}",
            ),
        )

    return report(SHIFT_RIGHT, check)


def _works_with_a_query_axis(cross_attention: Callable[..., Tensor], y, memory, w_q, w_k, w_v, src_mask) -> bool:
    """Whether the reader's code is right once the mask already has the query axis it forgot to add."""
    try:
        out = cross_attention(y, memory, w_q, w_k, w_v, src_mask[:, None, :])
    except Exception:
        return False
    expected = cross_attention_reference(y, memory, w_q, w_k, w_v, src_mask)
    return isinstance(out, Tensor) and out.shape == expected.shape and torch.allclose(out, expected, atol=1e-5)


def check_cross_attention(cross_attention: Callable[..., Tensor]) -> bool:
    """Check ``cross_attention(y, memory, w_q, w_k, w_v, src_mask)`` (one head, Q from y, K and V from memory)."""

    def check() -> None:
        g = torch.Generator().manual_seed(5)
        y, memory = torch.randn(2, 3, 8, generator=g), torch.randn(2, 5, 8, generator=g)
        w_q, w_k, w_v = (torch.randn(8, 4, generator=g) for _ in range(3))
        src_mask = torch.tensor([[True, True, True, True, True], [True, True, True, False, False]])
        try:
            out = cross_attention(y, memory, w_q, w_k, w_v, src_mask)
        except NotImplementedError:  # a RuntimeError too: leave it to report()
            raise
        except RuntimeError as error:  # a mask without its query axis, or queries from memory
            if _works_with_a_query_axis(cross_attention, y, memory, w_q, w_k, w_v, src_mask):
                raise ExerciseMistake(
                    tr(
                        f"your code raised RuntimeError ({str(error).splitlines()[0]}); src_mask is (batch, len_s) "
                        "and the scores are (batch, len_t, len_s): give the mask a query axis, src_mask[:, None, :], "
                        "so it broadcasts over the len_t rows",
                        f"你的代码出错了：{explain_shape_error(error).splitlines()[0]}。src_mask 的形状是 "
                        "(batch, len_s)，而分数是 (batch, len_t, len_s)：要给掩码加上查询轴 src_mask[:, None, :]，"
                        "让它在 len_t 行上广播",
                    )
                ) from None
            raise ExerciseMistake(
                tr(
                    f"your code raised RuntimeError ({str(error).splitlines()[0]}); check which input feeds which "
                    "projection: the queries come from y (the decoder), the keys and values from memory (the encoder "
                    "output), so the scores are (batch, len_t, len_s) and src_mask masks their last axis",
                    f"你的代码出错了：{explain_shape_error(error).splitlines()[0]}。检查一下哪个输入进了哪个投影："
                    "查询来自 y（解码器），键和值来自 memory（编码器的输出），所以分数是 (batch, len_t, len_s)，"
                    "src_mask 屏蔽的是它的最后一轴",
                )
            ) from None
        expected = cross_attention_reference(y, memory, w_q, w_k, w_v, src_mask)
        if isinstance(out, Tensor) and tuple(out.shape) == (2, 5, 4):
            raise ExerciseMistake(
                tr(
                    "your output has one row per source position, and it should have one per target position: the "
                    "queries must come from the decoder (y), the keys and values from the encoder output (memory)",
                    "你的输出是每个源位置一行，而应当是每个目标位置一行：查询必须来自解码器（y），"
                    "键和值来自编码器的输出（memory）。",
                )
            )
        if isinstance(out, Tensor) and out.shape == expected.shape and not torch.allclose(out, expected, atol=1e-5):
            q, k, v = y @ w_q, memory @ w_k, memory @ w_v
            unscaled = F.softmax((q @ k.transpose(-2, -1)).masked_fill(~src_mask[:, None], float("-inf")), -1) @ v
            if torch.allclose(out, unscaled, atol=1e-5):
                raise ExerciseMistake(
                    tr("divide the scores by sqrt(d_k) before the softmax", "在 softmax 之前要把分数除以 sqrt(d_k)。")
                )
            unmasked = F.softmax(q @ k.transpose(-2, -1) / 2.0, -1) @ v
            if torch.allclose(out, unmasked, atol=1e-5):
                raise ExerciseMistake(
                    tr(
                        "padded source positions must get zero weight: apply src_mask to the keys",
                        "源序列中的填充位置必须得到零权重：要把 src_mask 用在键上",
                    )
                )
            scaled = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            by_d_model = q @ k.transpose(-2, -1) / math.sqrt(y.shape[-1])
            slips = (  # (what such an answer returns, the hint)
                (
                    F.softmax(by_d_model.masked_fill(~src_mask[:, None], float("-inf")), -1) @ v,
                    tr(
                        f"you divided the scores by sqrt(d_model) = sqrt({y.shape[-1]}); divide by sqrt(d_k) = "
                        f"sqrt({q.shape[-1]}), the width of the queries and keys after projection",
                        f"你把分数除以了 sqrt(d_model) = sqrt({y.shape[-1]})；应除以 sqrt(d_k) = sqrt({q.shape[-1]})，"
                        "即投影之后查询和键的维度",
                    ),
                ),
                (
                    F.softmax(scaled.masked_fill(src_mask[:, None], -1e9), -1) @ v,
                    tr(
                        "the mask is inverted: src_mask is True at real tokens, so mask the scores where it is False "
                        "(~src_mask); you masked the real tokens",
                        "掩码反了：src_mask 在真实词元处为 True，所以要在它为 False 的地方（~src_mask）屏蔽分数；"
                        "你屏蔽的是真实词元",
                    ),
                ),
                (
                    F.softmax(scaled * src_mask[:, None], -1) @ v,
                    tr(
                        "the masked scores must become -inf before the softmax (masked_fill), not be multiplied by "
                        "the mask: a score of 0 still gets weight after the softmax",
                        "被屏蔽位置的分数要在 softmax 之前填成 -inf（用 masked_fill），不能乘以掩码：分数为 0 的位置在 "
                        "softmax 之后仍会分到权重",
                    ),
                ),
            )
            over_targets = tr(
                "take the softmax over the source positions, the last axis of the scores (dim=-1): each target "
                "position's weights over the source must sum to 1; you normalised over the target positions (dim=-2)",
                "softmax 要在源位置上做，也就是分数的最后一轴（dim=-1）：每个目标位置分给各源位置的权重之和"
                "必须为 1；你是在目标位置这一轴（dim=-2）上归一化的",
            )
            slips += tuple(  # the softmax over the target positions (dim=-2), with a -inf or a finite fill
                (F.softmax(scaled.masked_fill(~src_mask[:, None], fill), -2) @ v, over_targets)
                for fill in (float("-inf"), -1e9)
            )
            for wrong, hint in slips:
                if torch.allclose(out, wrong, atol=1e-5, equal_nan=True):
                    raise ExerciseMistake(hint)
            inverted = F.softmax(scaled.masked_fill(src_mask[:, None], float("-inf")), -1) @ v
            if torch.allclose(out, inverted, atol=1e-5, equal_nan=True) or bool(out[0].isnan().any()):
                raise ExerciseMistake(
                    tr(
                        "the mask is inverted: src_mask is True at real tokens, so fill the scores with -inf where it "
                        "is False (~src_mask); the first sequence has no padding, and masking all of it gives nan",
                        "掩码反了：src_mask 在真实词元处为 True，所以要在它为 False 的地方（~src_mask）把分数填成 "
                        "-inf；第一个序列没有填充，把它全部屏蔽就会得到 nan",
                    )
                )
        expect_close(out, expected, "cross_attention(...)", atol=1e-4)

    return report(CROSS_ATTENTION, check)


_FORMULA_CASES = (
    dict(d_model=16, d_ff=64, num_encoder_layers=2, num_decoder_layers=3, vocab_size=50),
    dict(d_model=32, d_ff=48, num_encoder_layers=1, num_decoder_layers=1, vocab_size=7),
    dict(d_model=8, d_ff=32, num_encoder_layers=3, num_decoder_layers=0, vocab_size=20),
)


def check_parameter_formula(formula: Callable[[int, int, int, int, int], int]) -> bool:
    """Check ``formula(d_model, d_ff, num_encoder_layers, num_decoder_layers, vocab_size)`` against the count of a
    real model built with ``share_embeddings=True, tie_output=True``, and give a hint from the difference."""

    def check() -> None:
        for case in _FORMULA_CASES:
            config = TransformerConfig(
                src_vocab_size=case["vocab_size"], tgt_vocab_size=case["vocab_size"], d_model=case["d_model"],
                num_heads=2, d_ff=case["d_ff"], num_encoder_layers=case["num_encoder_layers"],
                num_decoder_layers=case["num_decoder_layers"], share_embeddings=True, tie_output=True,
            )  # fmt: skip
            expected = count_parameters(Transformer(config))
            got = formula(*case.values())
            type_name = type(got).__name__
            expect(
                isinstance(got, int),
                tr(f"the formula should return an int, got {type_name}", f"公式应返回 int，得到的是 {type_name}"),
            )
            diff = expected - got
            if diff == 0:
                continue
            d, v, n_enc, n_dec = (
                case["d_model"],
                case["vocab_size"],
                case["num_encoder_layers"],
                case["num_decoder_layers"],
            )
            d_ff = case["d_ff"]
            biases = n_enc * (4 * d + d_ff + d) + n_dec * (8 * d + d_ff + d) + v  # every Linear's bias
            norms = 2 * d * (2 * n_enc + 3 * n_dec)  # every LayerNorm's gain and bias
            biases_where = tr(
                "every Linear has a bias (4 d_model per attention block, d_ff + d_model per FFN, vocab_size for "
                "the output layer)",
                "每个线性层都有偏置（每个注意力块 4 × d_model 个，每个 FFN d_ff + d_model 个，输出层 vocab_size 个）",
            )
            norms_where = tr(
                "every LayerNorm has 2 d_model parameters (gain and bias; 2 per encoder layer, 3 per decoder layer)",
                "每个层归一化有 2 × d_model 个参数（增益和偏置；每个编码器层 2 个，每个解码器层 3 个）",
            )
            both = tr(
                f"the biases and the LayerNorms are missing: {biases_where}, and {norms_where}",
                f"漏掉了偏置和层归一化：{biases_where}；{norms_where}",
            )
            only_biases = tr(f"the biases are missing: {biases_where}", f"漏掉了偏置：{biases_where}")
            attention_biases = 4 * d * (n_enc + 2 * n_dec)  # W_Q, W_K, W_V, W_O of every attention block
            ffn_biases = (d_ff + d) * (n_enc + n_dec)  # both Linears of every FFN
            hints = {
                attention_biases: tr(
                    "the attention blocks' biases are missing: W_Q, W_K, W_V and W_O each have one, 4 d_model per "
                    "block (one block per encoder layer, two per decoder layer)",
                    "漏掉了注意力块的偏置：W_Q、W_K、W_V、W_O 各有一个，每个注意力块共 4 × d_model 个"
                    "（每个编码器层一个注意力块，每个解码器层两个）",
                ),
                ffn_biases: tr(
                    "the feed-forward biases are missing: its two Linears have d_ff + d_model per layer",
                    "漏掉了前馈网络的偏置：它的两个线性层每层共有 d_ff + d_model 个",
                ),
                biases + norms: both,
                biases - v + norms: both,
                biases: only_biases,
                biases - v: only_biases,
                n_dec * (4 * d * d + 4 * d): tr(
                    "each decoder layer has a second attention block (cross-attention)",
                    "每个解码器层还有第二个注意力块（交叉注意力）",
                ),
                n_dec * (4 * d * d + 4 * d + 2 * d): tr(
                    "a decoder layer is not an encoder layer: it has a second attention block (cross-attention, "
                    "4 d_model^2 + 4 d_model) with its own LayerNorm (2 d_model)",
                    "解码器层不等于编码器层：它还有第二个注意力块（交叉注意力，4 × d_model² + 4 × d_model 个参数），"
                    "以及这个块自己的层归一化（2 × d_model 个）",
                ),
                d * (2 * n_enc + 3 * n_dec): tr(
                    "each LayerNorm has a bias as well as a gain: 2 d_model parameters, not d_model",
                    "每个层归一化除了增益还有偏置：共 2 × d_model 个参数，而不是 d_model 个",
                ),
                2 * d * (2 * n_enc + 3 * n_dec): tr(
                    "each LayerNorm has 2 d_model parameters (gain and bias)",
                    "每个层归一化有 2 × d_model 个参数（增益和偏置）",
                ),
                -v * d: tr(
                    "with tied weights the output matrix IS the embedding table: count it once",
                    "权重绑定时，输出矩阵与嵌入表是同一个矩阵，只算一次",
                ),
                v * d: tr(
                    "the shared embedding table (vocab_size x d_model) is missing",
                    "漏掉了共享的嵌入表（vocab_size × d_model）",
                ),
                v: tr(
                    "the output layer still has its own bias, one per vocabulary entry",
                    "输出层仍有自己的偏置，词表中每个词一个",
                ),
                -2 * v * d: tr(
                    "one shared table serves source, target and output: count it once",
                    "源序列、目标序列和输出共用同一张表，只算一次",
                ),
            }
            when = "当 " + "、".join(f"{name}={value}" for name, value in case.items()) + " 时"
            if diff in hints:
                raise ExerciseMistake(
                    tr(
                        f"{case}: off by {diff:,}; {hints[diff]}",
                        f"{when}，你的结果比应有值{'少' if diff > 0 else '多'}了 {abs(diff):,}；{hints[diff]}。",
                    )
                )
            raise ExerciseMistake(
                tr(
                    f"{case}: expected {expected:,} parameters, the formula gives {got:,}",
                    f"{when}，应为 {expected:,} 个参数，公式给出的是 {got:,}",
                )
            )

    return report(PARAMETER_FORMULA, check)

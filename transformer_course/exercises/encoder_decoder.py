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

from ..model import Transformer, TransformerConfig
from ..utils import count_parameters
from ._core import ExerciseMistake, expect, expect_close, expect_tensor, report

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
        expect(torch.equal(tgt_out, before), "shift_right must not change tgt_out in place (it is also the label)")
        expect_tensor(
            out, "the decoder input", tgt_out.shape, "(the target's shape): put <bos> in front and drop the last column"
        )
        expect(not out.dtype.is_floating_point, f"token ids must stay integers, got dtype {out.dtype}")
        expect(bool((out[:, 0] == bos).all()), "every row of the decoder input starts with <bos>")
        if torch.equal(out[:, 1:], tgt_out[:, :-1]):
            raise ExerciseMistake("<eos> is what the decoder must predict last, never an input: make it <pad>")
        if torch.equal(out[:, 1:-1], tgt_out[:, 2:]):
            raise ExerciseMistake("that shifts the wrong way: position t of the input holds label t - 1")
        expect(torch.equal(out, expected), f"expected {expected.tolist()}, got {out.tolist()}")

    return report("Exercise 8.1 (shift the target right)", check)


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
                    f"your code raised RuntimeError ({str(error).splitlines()[0]}); src_mask is (batch, len_s) and "
                    "the scores are (batch, len_t, len_s): give the mask a query axis, src_mask[:, None, :], so it "
                    "broadcasts over the len_t rows"
                ) from None
            raise ExerciseMistake(
                f"your code raised RuntimeError ({str(error).splitlines()[0]}); check which input feeds which "
                "projection: the queries come from y (the decoder), the keys and values from memory (the encoder "
                "output), so the scores are (batch, len_t, len_s) and src_mask masks their last axis"
            ) from None
        expected = cross_attention_reference(y, memory, w_q, w_k, w_v, src_mask)
        if isinstance(out, Tensor) and tuple(out.shape) == (2, 5, 4):
            raise ExerciseMistake(
                "the output has one row per source position: the queries must come from the decoder (y), "
                "the keys and values from the encoder output (memory)"
            )
        if isinstance(out, Tensor) and out.shape == expected.shape and not torch.allclose(out, expected, atol=1e-5):
            q, k, v = y @ w_q, memory @ w_k, memory @ w_v
            unscaled = F.softmax((q @ k.transpose(-2, -1)).masked_fill(~src_mask[:, None], float("-inf")), -1) @ v
            if torch.allclose(out, unscaled, atol=1e-5):
                raise ExerciseMistake("divide the scores by sqrt(d_k) before the softmax")
            unmasked = F.softmax(q @ k.transpose(-2, -1) / 2.0, -1) @ v
            if torch.allclose(out, unmasked, atol=1e-5):
                raise ExerciseMistake("padded source positions must get zero weight: apply src_mask to the keys")
            inverted = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            inverted = F.softmax(inverted.masked_fill(src_mask[:, None], float("-inf")), -1) @ v
            if torch.allclose(out, inverted, atol=1e-5, equal_nan=True) or bool(out[0].isnan().any()):
                raise ExerciseMistake(
                    "the mask is inverted: src_mask is True at real tokens, so fill the scores with -inf where it "
                    "is False (~src_mask); the first sequence has no padding, and masking all of it gives nan"
                )
        expect_close(out, expected, "cross_attention(...)", atol=1e-4)

    return report("Exercise 8.2 (cross-attention, one head)", check)


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
            expect(isinstance(got, int), f"the formula should return an int, got {type(got).__name__}")
            diff = expected - got
            if diff == 0:
                continue
            d, v, n_enc, n_dec = (
                case["d_model"],
                case["vocab_size"],
                case["num_encoder_layers"],
                case["num_decoder_layers"],
            )
            hints = {
                n_dec * (4 * d * d + 4 * d): "each decoder layer has a second attention block (cross-attention)",
                2 * d * (2 * n_enc + 3 * n_dec): "each LayerNorm has 2 d_model parameters (gain and bias)",
                -v * d: "with tied weights the output matrix IS the embedding table: count it once",
                v * d: "the shared embedding table (vocab_size x d_model) is missing",
                v: "the output layer still has its own bias, one per vocabulary entry",
                -2 * v * d: "one shared table serves source, target and output: count it once",
            }
            if diff in hints:
                raise ExerciseMistake(f"{case}: off by {diff:,}; {hints[diff]}")
            raise ExerciseMistake(f"{case}: expected {expected:,} parameters, the formula gives {got:,}")

    return report("Exercise 8.3 (parameters by formula)", check)

"""Sections 2 and 3: a training step of the course's Transformer against nn.Transformer's stacks doing the same
work, and the model FLOPs utilisation of each (its matmul FLOPs per second over a large matmul's on this device)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from benchmarks.common import Settings, markdown_table, measure, sync
from transformer_course import Transformer, TransformerConfig
from transformer_course.core.attention import set_attention_backend
from transformer_course.core.interop import transformer_to_torch
from transformer_course.training.schedules import optimizer_update
from transformer_course.utils import count_parameters, seed_everything

SECTIONS = (2, 3)
TITLE = "2-3. training step and MFU"


class TorchStackModel(nn.Module):
    """nn.Transformer's stacks between our embeddings and output layer, so both models do the same work."""

    def __init__(self, ours: Transformer) -> None:
        super().__init__()
        self.ours = ours
        self.stacks = transformer_to_torch(ours)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """src: (batch, n_src), tgt: (batch, n_tgt) ids -> logits (batch, n_tgt, tgt_vocab_size)."""
        o = self.ours
        src_pad, tgt_len = src == 0, tgt.shape[1]
        causal = torch.ones(tgt_len, tgt_len, dtype=torch.bool, device=src.device).triu(1)
        h = self.stacks(
            o.positional(o.src_embedding(src)),
            o.positional(o.tgt_embedding(tgt)),
            tgt_mask=causal,
            src_key_padding_mask=src_pad,
            memory_key_padding_mask=src_pad,
            tgt_is_causal=True,
        )
        return o.output_projection(h)


def training_step_flops(config: TransformerConfig, batch: int, n_src: int, n_tgt: int) -> float:
    """Matmul FLOPs of one forward + backward pass (backward = 2x forward): 2 per multiply-add."""
    d, ff, v = config.d_model, config.d_ff, config.tgt_vocab_size
    attention_proj = 4 * d * d  # W_Q, W_K, W_V, W_O per token
    ffn = 2 * d * ff
    enc_tokens, dec_tokens = batch * n_src, batch * n_tgt
    forward = 2 * config.num_encoder_layers * (enc_tokens * (attention_proj + ffn) + batch * 2 * n_src * n_src * d)
    forward += (
        2
        * config.num_decoder_layers
        * (dec_tokens * (2 * attention_proj + ffn) + batch * 2 * (n_tgt * n_tgt + n_tgt * n_src) * d)
    )
    forward += 2 * dec_tokens * d * v  # output layer
    return 3.0 * forward


def matmul_flops_per_second(device: torch.device, size: int, run_time: float) -> float:
    """FLOPs per second of a (size, size) @ (size, size) matmul: the device's practical peak."""
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)

    def call():
        a @ b
        sync(device)

    return 2 * size**3 / measure(call, run_time)


def _training_step(model, optimizer, src, tgt_in, tgt_out, device) -> Callable[[], None]:
    # one bare step, the same for both models: the package's update without clipping, so what is timed is the
    # model, not a training loop's extras (no gradient norm, no label smoothing, no accuracy)
    lr = optimizer.param_groups[0]["lr"]

    def step() -> None:
        logits = model(src, tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=0)
        optimizer_update(optimizer, loss, lr, clip_norm=None)
        sync(device)

    return step


def bench_training_step(device: torch.device, setups: dict, run_time: float, peak: float) -> list[dict]:
    """One row per setup ``label: (config, batch, n_src, n_tgt)``: seconds per step (forward, loss, backward,
    Adam) of each model on src (batch, n_src) and tgt (batch, n_tgt), and its MFU against ``peak`` FLOPs/s."""
    rows = []
    for label, (config, batch, n_src, n_tgt) in setups.items():
        seed_everything(0)
        ours = Transformer(config).to(device)
        src = torch.randint(1, config.src_vocab_size, (batch, n_src), device=device)
        tgt = torch.randint(1, config.tgt_vocab_size, (batch, n_tgt + 1), device=device)
        tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
        models = {
            "ours (written out)": ours,
            "ours (fused)": set_attention_backend(Transformer(config).to(device), "fused"),
            "nn.Transformer": TorchStackModel(Transformer(config).to(device)),
        }
        row: dict = {"setup": label, "parameters": count_parameters(ours)}
        flops = training_step_flops(config, batch, n_src, n_tgt)
        for name, model in models.items():
            model.train()
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)

            row[name] = measure(_training_step(model, optimizer, src, tgt_in, tgt_out, device), run_time)
            row[f"MFU {name}"] = flops / row[name] / peak
        row["ours/torch"] = row["ours (written out)"] / row["nn.Transformer"]
        row["fused/torch"] = row["ours (fused)"] / row["nn.Transformer"]
        row["GFLOP per step"] = flops / 1e9
        rows.append(row)
        print(
            f"  training step {label}: ours/torch {row['ours/torch']:.2f}, fused/torch {row['fused/torch']:.2f}, "
            f"MFU ours {row['MFU ours (written out)']:.0%}",
            flush=True,
        )
    return rows


def run(settings: Settings) -> dict:
    quick, device = settings.quick, settings.device
    peak = matmul_flops_per_second(device, 256 if quick else 2048, settings.run_time)
    vocab = 64 if quick else 1000
    paper = TransformerConfig.preset(
        "base", src_vocab_size=vocab, tgt_vocab_size=vocab, num_encoder_layers=2, num_decoder_layers=2
    )
    tiny = TransformerConfig.preset("tiny", src_vocab_size=vocab, tgt_vocab_size=vocab)
    # The same step with dropout off shows how much of the gap to the matmul peak is dropout's random masks.
    setups = {"tiny": (tiny, 4, 8, 8)} if quick else {
        "paper dims, 2+2 layers, batch 16 x 64 tokens": (paper, 16, 64, 64),
        "the same, dropout off": (replace(paper, dropout=0.0), 16, 64, 64),
        "tiny preset, batch 64 x 24 tokens": (tiny, 64, 24, 24),
    }  # fmt: skip
    return {
        "matmul_gflops": peak / 1e9,
        "training_step": bench_training_step(device, setups, settings.run_time, peak),
    }


def report(results: dict) -> list[str]:
    if "training_step" not in results:
        return []
    models = ["ours (written out)", "ours (fused)", "nn.Transformer"]
    columns = ["setup", "parameters", *models, "ours/torch", "fused/torch", "GFLOP per step"]
    columns += [f"MFU {m}" for m in models]
    formats = {"parameters": ",", "ours/torch": ".2f", "fused/torch": ".2f", "GFLOP per step": ".1f"}
    formats |= {m: ".3f" for m in models} | {f"MFU {m}": ".0%" for m in models}
    return [
        "",
        f"## 2-3. A training step (forward, loss, backward, Adam) and model FLOPs utilisation "
        f"(matmul peak measured here: {results['matmul_gflops']:.1f} GFLOP/s)",
        "",
        markdown_table(results["training_step"], columns, formats),
    ]

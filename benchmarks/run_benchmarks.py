"""Benchmarks of the course's model against PyTorch's, on the current device, measured in one run.

    python benchmarks/run_benchmarks.py            # the full set (~10 minutes on two CPU cores)
    python benchmarks/run_benchmarks.py --quick    # tiny sizes, to check that everything runs

Writes benchmarks/results.md (a Markdown table per section), benchmarks/results.json and figures
figures/benchmark_*.png. Ratios compare timings taken in the same run, on the same machine, back to back.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils import benchmark

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from transformer_course import MultiHeadAttention, Transformer, TransformerConfig  # noqa: E402
from transformer_course.attention import set_attention_backend  # noqa: E402
from transformer_course.interop import mha_to_torch, transformer_to_torch  # noqa: E402
from transformer_course.utils import count_parameters, get_device, seed_everything  # noqa: E402

THREADS = torch.get_num_threads()
RESULTS_MD = ROOT / "benchmarks" / "results.md"
RESULTS_JSON = ROOT / "benchmarks" / "results.json"
FIGURES = ROOT / "figures"


def measure(fn: Callable[[], object], min_run_time: float) -> float:
    """Median seconds per call of ``fn``, with every thread torch would use."""
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=min_run_time).median


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


# ---- 1. multi-head attention ---------------------------------------------------------------------------


def _attention_calls(ours, fused, theirs, x: Tensor, q: Tensor) -> dict[str, Callable[[], Tensor]]:
    return {
        "ours (written out)": lambda: ours(x),
        "ours (fused)": lambda: fused(x),
        "nn.MultiheadAttention": lambda: theirs(x, x, x, need_weights=False)[0],
        "F.sdpa (core only)": lambda: F.scaled_dot_product_attention(q, q, q),
    }


def _timed_call(fn: Callable[[], Tensor], backward: bool, device: torch.device) -> Callable[[], None]:
    def call() -> None:
        if backward:
            fn().sum().backward()
        else:
            with torch.no_grad():
                fn()
        sync(device)

    return call


def bench_attention_modules(device: torch.device, grid: list[tuple[int, int, int]], run_time: float) -> list[dict]:
    rows = []
    for batch, n, d_model in grid:
        seed_everything(0)
        heads = 8
        ours = MultiHeadAttention(d_model, heads).to(device)
        fused = MultiHeadAttention(d_model, heads).to(device)
        fused.load_state_dict(ours.state_dict())
        set_attention_backend(fused, "fused")
        theirs = mha_to_torch(ours).to(device)
        x = torch.randn(batch, n, d_model, device=device, requires_grad=True)
        q = torch.randn(batch, heads, n, d_model // heads, device=device, requires_grad=True)

        row = {"batch": batch, "n": n, "d_model": d_model}
        for mode in ("forward", "forward+backward"):
            for name, fn in _attention_calls(ours, fused, theirs, x, q).items():
                row[f"{mode}: {name}"] = measure(_timed_call(fn, mode == "forward+backward", device), run_time)
            base = row[f"{mode}: nn.MultiheadAttention"]
            row[f"{mode}: ours/torch"] = row[f"{mode}: ours (written out)"] / base
            row[f"{mode}: fused/torch"] = row[f"{mode}: ours (fused)"] / base
        rows.append(row)
        print(
            f"  attention b={batch} n={n} d={d_model}: fwd ours/torch {row['forward: ours/torch']:.2f}, "
            f"fwd+bwd ours/torch {row['forward+backward: ours/torch']:.2f}",
            flush=True,
        )
    return rows


# ---- 2. and 3. a training step, and model FLOPs utilisation ----------------------------------------------


class TorchStackModel(nn.Module):
    """nn.Transformer's stacks between our embeddings and output layer, so both models do the same work."""

    def __init__(self, ours: Transformer) -> None:
        super().__init__()
        self.ours = ours
        self.stacks = transformer_to_torch(ours)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
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
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)

    def call():
        a @ b
        sync(device)

    return 2 * size**3 / measure(call, run_time)


def _training_step(model, optimizer, src, tgt_in, tgt_out, device) -> Callable[[], None]:
    def step() -> None:
        logits = model(src, tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=0)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        sync(device)

    return step


def bench_training_step(device: torch.device, setups: dict, run_time: float, peak: float) -> list[dict]:
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


# ---- 4. attention time and peak memory against n ------------------------------------------------------

_MEMORY_PROBE = """
import gc, resource, sys, time, torch
import torch.nn.functional as F
from transformer_course.attention import scaled_dot_product_attention
method, n, heads, d_k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])


def status_kb(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])


torch.manual_seed(0)
q, k, v = (torch.randn(1, heads, n, d_k) for _ in range(3))
f = (lambda: scaled_dot_product_attention(q, k, v)[0]) if method == "written_out" else (
    lambda: F.scaled_dot_product_attention(q, k, v))
with torch.no_grad():
    f()  # warm-up: library buffers are allocated once, before the baseline
    gc.collect()
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # reset the resident-memory high-water mark (VmHWM) to the current size
    base = status_kb("VmRSS")
    elapsed = float("inf")
    for _ in range(3):  # the best of three calls: the least disturbed by the rest of the machine
        start = time.perf_counter(); out = f(); elapsed = min(elapsed, time.perf_counter() - start); del out
    peak = status_kb("VmHWM")
print(elapsed, peak, base)
"""


def bench_attention_scaling(lengths: list[int], heads: int = 4, d_k: int = 64) -> list[dict]:
    """Each measurement in a fresh process; peak memory is the growth of its resident set (Linux) during the
    calls, above what it held before them."""
    rows = []
    for n in lengths:
        row: dict = {"n": n}
        for method in ("written_out", "sdpa"):
            out = subprocess.run(
                [sys.executable, "-c", _MEMORY_PROBE, method, str(n), str(heads), str(d_k)],
                capture_output=True, text=True, check=True, cwd=ROOT,
            )  # fmt: skip
            elapsed, peak_kb, base_kb = (float(x) for x in out.stdout.split())
            row[f"time {method} (s)"] = elapsed
            row[f"peak extra memory {method} (MB)"] = max(peak_kb - base_kb, 0.0) / 1024
        row["time ratio"] = row["time written_out (s)"] / row["time sdpa (s)"]
        row["scores matrix (MB)"] = heads * n * n * 4 / 2**20
        rows.append(row)
        print(
            f"  attention n={n}: written-out {row['time written_out (s)'] * 1e3:.1f} ms, "
            f"{row['peak extra memory written_out (MB)']:.0f} MB; sdpa {row['time sdpa (s)'] * 1e3:.1f} ms, "
            f"{row['peak extra memory sdpa (MB)']:.0f} MB",
            flush=True,
        )
    return rows


# ---- 5. greedy decoding with and without the KV cache ------------------------------------------------


def bench_kv_cache(device: torch.device, new_tokens: list[int], batch: int = 64) -> list[dict]:
    """Greedy decoding of exactly N new tokens (no <eos> can stop it early) by the tiny preset."""
    from transformer_course.decoding import greedy_decode

    seed_everything(0)
    config = TransformerConfig.preset("tiny", src_vocab_size=64, tgt_vocab_size=64, max_len=max(new_tokens) + 1)
    model = Transformer(config).to(device).eval()
    src = torch.randint(3, 64, (batch, 32), device=device)
    rows = []
    for n in new_tokens:
        row: dict = {"new tokens": n}
        tokens = {}
        for use_cache in (False, True):
            start = time.perf_counter()
            # eos_id=-1 never matches a token, so every row decodes exactly n tokens
            tokens[use_cache] = greedy_decode(model, src, max_len=n, use_cache=use_cache, eos_id=-1).tokens
            sync(device)
            row["with cache (s)" if use_cache else "without cache (s)"] = time.perf_counter() - start
        row["speed-up"] = row["without cache (s)"] / row["with cache (s)"]
        row["same tokens"] = "yes" if torch.equal(tokens[False], tokens[True]) else "NO"
        rows.append(row)
        print(f"  KV cache, {n} new tokens: {row['speed-up']:.1f}x faster, same: {row['same tokens']}", flush=True)
    return rows


# ---- 6. time to accuracy on the copy task ------------------------------------------------------------

COPY_RECIPE = dict(layers=1, d_model=64, heads=4, lr=5e-3, warmup=30, batch_size=32, max_steps=300)


def bench_copy_time_to_accuracy(device: torch.device, target: float = 0.99) -> dict:
    """Seconds of training (evaluation excluded) until greedy exact match on 500 fresh sequences >= target."""
    from transformer_course.recipes import make_task, recipe_model_config, time_to_accuracy
    from transformer_course.training import TrainConfig

    r = COPY_RECIPE
    torch.set_num_threads(1)  # a model this small runs fastest on one thread (see NOTEBOOK_PATTERNS)
    task = make_task("copy")
    config = recipe_model_config(
        task, d_model=r["d_model"], num_heads=r["heads"], num_encoder_layers=r["layers"],
        num_decoder_layers=r["layers"], d_ff=4 * r["d_model"],
    )  # fmt: skip
    train_config = TrainConfig(
        steps=r["max_steps"], batch_size=r["batch_size"], lr=r["lr"], warmup=r["warmup"], clip_norm=1.0
    )
    outcome = time_to_accuracy(task, config, train_config, target=target, device=device)
    torch.set_num_threads(THREADS)
    result = {
        "recipe": f"{r['layers']}+{r['layers']} layers, d_model {r['d_model']}, batch {r['batch_size']}, "
        f"lr {r['lr']} with {r['warmup']} warm-up steps",
        "reached": outcome.reached,
        "steps": outcome.steps,
        "seconds": outcome.seconds,
        "exact match": outcome.exact_match,
    }
    print(f"  copy task: {result}", flush=True)
    return result


# ---- 7. notebooks --------------------------------------------------------------------------------------


def bench_notebooks(names: list[str] | None) -> list[dict]:
    """Execute copies of the notebooks (the committed ones are left alone) and time each."""
    import shutil
    import tempfile

    from tools.course_notebooks import notebook_paths
    from tools.execute_notebooks import execute

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in notebook_paths(names):
            copy = Path(tmp) / path.name
            shutil.copy(path, copy)
            seconds = execute(copy)
            rows.append({"notebook": path.name, "seconds": seconds})
            print(f"  {path.name}: {seconds:.1f} s", flush=True)
    return rows


# ---- report --------------------------------------------------------------------------------------------


# ---- 8. a language model on the corpus: the course's recipe against a minimal GPT's, same wall clock ---------

LM_RECIPES = {
    # a well-known minimal GPT's CPU recipe: characters as tokens, the GPT-2 style, lr 1e-3
    "baseline: GPT-2 style, characters, lr 1e-3": dict(style="gpt2", tokenizer="char", lr=1e-3, kv_heads=None),
    # notebook 15's: the LLaMA style with grouped K/V heads, 512 BPE tokens, lr 2e-3
    "course: LLaMA style, 512 BPE tokens, lr 2e-3": dict(style="llama", tokenizer="bpe", lr=2e-3, kv_heads=2),
}


def _lm_data(tokenizer_kind: str):
    from transformer_course.bpe import train_bpe
    from transformer_course.corpus import load_stdlib_text

    text = load_stdlib_text().text
    cut = int(len(text) * 0.9)
    vocab = 512 if tokenizer_kind == "bpe" else len(set(text[:cut])) + 1
    tokenizer = train_bpe(text[:cut], vocab)
    fast = tokenizer.to_tokenizers()
    train_ids, held_out_ids = torch.tensor(fast.encode(text[:cut]).ids), torch.tensor(fast.encode(text[cut:]).ids)
    return tokenizer, train_ids, held_out_ids, cut / len(train_ids), len(text) - cut


def bench_language_model(budgets: list[float]) -> dict:
    """Each recipe trained for each wall-clock budget (its cosine schedule sized to end there), held-out loss in
    nats per character."""
    from transformer_course.language_model import LMConfig, build_language_model
    from transformer_course.lm_training import LMTrainConfig, held_out_loss, train_language_model

    rows = []
    for name, recipe in LM_RECIPES.items():
        tokenizer, train_ids, held_out_ids, chars_per_token, held_out_chars = _lm_data(recipe["tokenizer"])
        config = LMConfig(style=recipe["style"], num_kv_heads=recipe["kv_heads"])  # 4 x 4 heads, width 128, 64 ids

        def fresh(config: LMConfig = config, vocab_size: int = tokenizer.vocab_size) -> torch.nn.Module:
            seed_everything(0)
            return build_language_model(config, vocab_size)

        probe_config = LMTrainConfig(steps=60, warmup=5)
        probe = train_language_model(fresh(), train_ids, held_out_ids, 64, probe_config, eval_windows=1)
        seconds_per_step = probe.seconds / probe.steps
        for budget in budgets:
            steps = max(int(budget / seconds_per_step), 200)
            train_config = LMTrainConfig(steps=steps, lr=recipe["lr"], min_lr=1e-4, warmup=100)
            model = fresh()
            history = train_language_model(
                model, train_ids, held_out_ids, 64, train_config, seconds=budget, eval_windows=1
            )
            nats = held_out_loss(model, held_out_ids, 64) * len(held_out_ids) / held_out_chars
            rows.append({
                "recipe": name, "budget (s)": budget, "steps": history.steps, "planned steps": steps,
                "seconds": history.seconds, "tokens/s": history.tokens_per_second,
                "characters/s": history.tokens_per_second * chars_per_token,
                "held-out nats/char": nats,
            })  # fmt: skip
            print(f"  {name}, {budget:.0f} s: {history.steps} steps, {nats:.3f} nats/char", flush=True)

    return rows


def bench_generation(batches: list[int]) -> list[dict]:
    """Greedy generation of 256 new tokens by the shipped language model, with and without the KV cache."""
    from transformer_course.corpus import load_stdlib_text
    from transformer_course.decoding import generate
    from transformer_course.language_model import load_shipped_language_model

    model, tokenizer, config, _ = load_shipped_language_model()
    text = load_stdlib_text().text
    # as in notebook 15: the first 64 tokens of the held-out text, then 256 new ones (the model's context is 320)
    ids = tokenizer.to_tokenizers().encode(text[int(len(text) * 0.9) :]).ids
    rows = []
    for batch in batches:
        prompt = torch.tensor([ids[64 * i : 64 * (i + 1)] for i in range(batch)])  # (batch, 64)
        row: dict = {"prompts": batch, "prompt tokens": 64, "new tokens": 256, "context": config.context}
        outputs = {}
        for use_cache in (False, True):
            best = float("inf")
            for _ in range(3):
                start = time.perf_counter()
                with torch.no_grad():
                    outputs[use_cache] = generate(model, prompt, 256, greedy=True, use_cache=use_cache)
                best = min(best, time.perf_counter() - start)
            row["with cache (tokens/s)" if use_cache else "without cache (tokens/s)"] = 256 * batch / best
        row["speed-up"] = row["with cache (tokens/s)"] / row["without cache (tokens/s)"]
        row["same tokens"] = "yes" if torch.equal(outputs[False], outputs[True]) else "NO"
        rows.append(row)
        speedup, same = row["speed-up"], row["same tokens"]
        print(f"  generation, {batch} prompt(s), 256 new tokens: cache {speedup:.1f}x, same: {same}", flush=True)
    return rows


def markdown_table(rows: list[dict], columns: list[str], formats: dict[str, str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = []
        for c in columns:
            value = row[c]
            cells.append(format(value, formats.get(c, "")) if not isinstance(value, str) else value)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_scaling(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from transformer_course.viz import scaling_figure, set_style

    set_style()
    fig = scaling_figure(rows)
    fig.savefig(path, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: check that every row runs")
    parser.add_argument("--skip-notebooks", action="store_true", help="leave out the notebook timings")
    parser.add_argument(
        "--only", type=int, nargs="+", choices=range(1, 10), default=None,
        help="re-run only these sections (1-9) and keep the others from the existing results.json",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=None, help="folder for results.md/json (default: benchmarks/)")
    args = parser.parse_args()
    device = get_device()
    quick = args.quick
    run_time = 0.05 if quick else 1.0
    out_dir = args.out or RESULTS_MD.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = out_dir if args.out else FIGURES
    wanted = set(args.only or range(1, 10)) - ({7} if args.skip_notebooks else set())

    results: dict = json.loads((out_dir / "results.json").read_text()) if args.only else {}
    results["info"] = {
        "device": device.type,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "machine": platform.machine(),
    }
    print(f"device {device.type}, torch {torch.__version__}, {torch.get_num_threads()} threads", flush=True)

    if 1 in wanted:
        print("1. multi-head attention", flush=True)
        grid = [(2, 16, 32)] if quick else [(8, 64, 256), (8, 256, 256), (8, 64, 512), (8, 256, 512)]
        results["attention_modules"] = bench_attention_modules(device, grid, run_time)

    if wanted & {2, 3}:
        print("2-3. training step and MFU", flush=True)
        peak = matmul_flops_per_second(device, 256 if quick else 2048, run_time)
        results["matmul_gflops"] = peak / 1e9
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
        results["training_step"] = bench_training_step(device, setups, run_time, peak)

    if 4 in wanted:
        print("4. attention against n", flush=True)
        lengths = [64, 128] if quick else [256, 512, 1024, 2048, 4096, 8192]
        results["attention_scaling"] = bench_attention_scaling(lengths)
        plot_scaling(results["attention_scaling"], figures / "benchmark_attention_scaling.png")

    if 5 in wanted:
        print("5. KV cache", flush=True)
        results["kv_cache"] = bench_kv_cache(device, [16, 32] if quick else [64, 128, 256, 512])

    if 6 in wanted:
        print("6. copy task, time to 99% exact match", flush=True)
        results["copy_task"] = bench_copy_time_to_accuracy(device)

    if 7 in wanted:
        print("7. notebooks", flush=True)
        results["notebooks"] = bench_notebooks(["00"] if quick else None)

    if 8 in wanted:
        print("8. a language model on the corpus, same wall clock", flush=True)
        results["language_model"] = bench_language_model([5.0] if quick else [60.0, 120.0, 180.0])

    if 9 in wanted:
        print("9. generation with and without the KV cache (notebook 15's shipped model)", flush=True)
        results["generation"] = bench_generation([1] if quick else [1, 8])

    write_report(results, out_dir)


def write_report(results: dict, out_dir: Path) -> None:
    info = results["info"]
    parts = [
        "# Benchmark results",
        "",
        f"Device `{info['device']}` ({info['machine']}), {info['threads']} threads, torch {info['torch']}, "
        f"Python {info['python']}. Regenerate with `python benchmarks/run_benchmarks.py`.",
        "",
        "## 1. Multi-head attention (seconds per call; ratios against nn.MultiheadAttention)",
        "",
        markdown_table(
            results["attention_modules"],
            [
                "batch",
                "n",
                "d_model",
                "forward: ours (written out)",
                "forward: nn.MultiheadAttention",
                "forward: ours/torch",
                "forward: fused/torch",
                "forward+backward: ours/torch",
                "forward+backward: fused/torch",
                "forward: F.sdpa (core only)",
            ],
            {
                k: ".2e"
                for k in (
                    "forward: ours (written out)",
                    "forward: nn.MultiheadAttention",
                    "forward: F.sdpa (core only)",
                )
            }
            | {
                k: ".2f"
                for k in (
                    "forward: ours/torch",
                    "forward: fused/torch",
                    "forward+backward: ours/torch",
                    "forward+backward: fused/torch",
                )
            },
        ),  # fmt: skip
        "",
        f"## 2-3. A training step (forward, loss, backward, Adam) and model FLOPs utilisation "
        f"(matmul peak measured here: {results['matmul_gflops']:.1f} GFLOP/s)",
        "",
        markdown_table(
            results["training_step"],
            [
                "setup",
                "parameters",
                "ours (written out)",
                "ours (fused)",
                "nn.Transformer",
                "ours/torch",
                "fused/torch",
                "GFLOP per step",
                "MFU ours (written out)",
                "MFU ours (fused)",
                "MFU nn.Transformer",
            ],
            {
                "parameters": ",",
                "ours (written out)": ".3f",
                "ours (fused)": ".3f",
                "nn.Transformer": ".3f",
                "ours/torch": ".2f",
                "fused/torch": ".2f",
                "GFLOP per step": ".1f",
                "MFU ours (written out)": ".0%",
                "MFU ours (fused)": ".0%",
                "MFU nn.Transformer": ".0%",
            },
        ),  # fmt: skip
        "",
        "## 4. Attention against sequence length (1 sequence, 4 heads, d_k 64, forward)",
        "",
        markdown_table(
            results["attention_scaling"],
            [
                "n",
                "time written_out (s)",
                "time sdpa (s)",
                "time ratio",
                "peak extra memory written_out (MB)",
                "peak extra memory sdpa (MB)",
                "scores matrix (MB)",
            ],
            {
                "time written_out (s)": ".4f",
                "time sdpa (s)": ".4f",
                "time ratio": ".2f",
                "peak extra memory written_out (MB)": ".0f",
                "peak extra memory sdpa (MB)": ".0f",
                "scores matrix (MB)": ".0f",
            },
        ),  # fmt: skip
    ]
    copy = results["copy_task"]
    copy_line = (
        f"{copy['seconds']:.1f} s of training ({copy['steps']} steps) to {copy['exact match']:.1%} greedy exact match"
        if copy["reached"]
        else f"not reached within the step budget (last exact match {copy['exact match']:.1%})"
    )
    parts += [
        "",
        "## 5. Greedy decoding with and without the KV cache (tiny preset, 64 sequences)",
        "",
        markdown_table(
            results["kv_cache"],
            ["new tokens", "without cache (s)", "with cache (s)", "speed-up", "same tokens"],
            {"without cache (s)": ".3f", "with cache (s)": ".3f", "speed-up": ".1f"},
        ),
        "",
        "## 6. Time to accuracy on the copy task (symbols 1..10, length 10, 500 fresh sequences)",
        "",
        f"Recipe: {copy['recipe']}, one thread. Result: {copy_line}.",
    ]
    if "notebooks" in results:
        total = sum(r["seconds"] for r in results["notebooks"])
        parts += [
            "",
            f"## 7. Notebook execution times (total {total:.0f} s)",
            "",
            markdown_table(results["notebooks"], ["notebook", "seconds"], {"seconds": ".1f"}),
        ]
    if "language_model" in results:
        parts += [
            "",
            "## 8. A language model on the corpus: held-out loss after the same training time (notebook 15)",
            "",
            "Both recipes: 4 blocks of width 128, 4 heads, 64 tokens of context, batches of 12, AdamW (weight decay "
            "0.1, beta2 0.99), 100 warm-up steps, a cosine decay to 1e-4 sized to end at the budget, no dropout; "
            "the held-out tail is the last 10% of the text. Nats per character make the two tokenizers comparable.",
            "",
            markdown_table(
                results["language_model"],
                ["recipe", "budget (s)", "steps", "tokens/s", "characters/s", "held-out nats/char"],
                {"budget (s)": ".0f", "tokens/s": ",.0f", "characters/s": ",.0f", "held-out nats/char": ".3f"},
            ),
        ]
    if "generation" in results:
        parts += [
            "",
            "## 9. Generation with and without the KV cache (notebook 15's shipped model, context 320, greedy)",
            "",
            "Each prompt is 64 tokens of the held-out text; tokens/s counts the new tokens of all prompts.",
            "",
            markdown_table(
                results["generation"],
                [
                    "prompts",
                    "new tokens",
                    "without cache (tokens/s)",
                    "with cache (tokens/s)",
                    "speed-up",
                    "same tokens",
                ],  # fmt: skip
                {"without cache (tokens/s)": ",.0f", "with cache (tokens/s)": ",.0f", "speed-up": ".1f"},
            ),
        ]
    (out_dir / "results.md").write_text("\n".join(parts) + "\n")
    (out_dir / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {out_dir / 'results.md'} and {out_dir / 'results.json'}")


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"benchmarks took {time.perf_counter() - start:.0f} s")

"""Train a model from the shell with the same code the notebooks use.

    python -m transformer_course.train --task copy --steps 300
    python -m transformer_course.train --task date --out checkpoints/date.safetensors
    python -m transformer_course.train --task date --steps 2000 --positional learned --d-model 128
    torchrun --standalone --nproc_per_node 2 -m transformer_course.train --task copy --steps 300   # DDP, 2 processes
    python -m transformer_course.train --task copy --amp                              # bf16 autocast
    python -m transformer_course.train --task lm --style llama --steps 4000 --out checkpoints/lm.safetensors

The ``lm`` task trains a decoder-only language model on the course's corpus (the standard library's prose,
last 10% held out) with characters or BPE tokens, and reports the held-out loss in bits per character.

It prints a progress line, the held-out token and exact-match accuracy, a few mistakes, and saves a
checkpoint (weights in safetensors, with the config and vocabularies) when ``--out`` is given. ``--language zh``
prints all of it in Chinese, as the Chinese notebooks do.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

import torch

from .language import LANGUAGES, get_language, set_language, tr
from .training.checkpoints import save_checkpoint
from .training.distributed import exit_finished_worker, init_from_environment, launched_by_torchrun, leave_process_group
from .training.recipes import _run_description, make_task, recipe_model_config, train_task_model
from .training.trainers import TrainConfig, evaluate
from .utils import count_parameters, get_device


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m transformer_course.train",
        description="Train an encoder-decoder Transformer on a synthetic task and report held-out accuracy.",
    )
    parser.add_argument("--task", choices=["date", "copy", "lm"], default="date", help="what to learn (default: date)")
    parser.add_argument("--steps", type=int, default=1000, help="optimizer updates (default: 1000)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (noam: the factor)")
    parser.add_argument("--schedule", choices=["linear", "noam", "constant"], default="linear")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--final-lr-fraction", type=float, default=0.1)
    parser.add_argument("--clip-norm", type=float, default=1.0, help="gradient clipping; 0 turns it off")
    parser.add_argument("--label-smoothing", type=float, default=0.0)
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2, help="encoder and decoder layers each")
    parser.add_argument(
        "--d-ff", type=int, default=None, help="default 256; lm: 4 x d-model, or the matched SwiGLU width"
    )
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--positional", choices=["sinusoidal", "learned"], default="sinusoidal")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-size", type=int, default=2000, help="held-out examples to evaluate")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (default 1: fastest for models this small)"
    )
    parser.add_argument("--device", default=None, help="cpu, cuda or mps (default: the best available)")
    parser.add_argument("--out", default=None, help="where to save the checkpoint (.safetensors)")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    parser.add_argument("--amp", action="store_true", help="mixed precision: bfloat16 autocast")
    parser.add_argument("--history-out", default=None, help="write the per-step losses as JSON here")
    parser.add_argument("--language", choices=LANGUAGES, default="en", help="en (default) or zh: what it prints")
    lm = parser.add_argument_group("the lm task (decoder-only language model)")
    lm.add_argument("--style", choices=["gpt2", "llama"], default="gpt2")
    lm.add_argument("--context", type=int, default=64, help="tokens per training window")
    lm.add_argument("--tokenizer", choices=["char", "bpe"], default="char")
    lm.add_argument("--vocab-size", type=int, default=512, help="BPE vocabulary size (with --tokenizer bpe)")
    lm.add_argument("--kv-heads", type=int, default=None, help="K/V heads (llama style; default: --heads)")
    lm.add_argument("--min-lr", type=float, default=1e-4, help="where the cosine decay ends")
    lm.add_argument("--beta2", type=float, default=0.99)
    lm.add_argument("--eval-every", type=int, default=0, help="held-out loss every N steps (0: at the end)")
    lm.add_argument("--corpus-chars", type=int, default=None, help="use only the first N characters")
    return parser


def main_lm(args: argparse.Namespace) -> dict[str, float]:
    """The lm task: tokenizer, model, training and the held-out loss in bits per character."""
    from .families.language_model import LMConfig, build_language_model, save_language_model
    from .text.corpus import load_stdlib_text
    from .text.lm_data import bits_per_character, encode_corpus
    from .training.lm_training import LMTrainConfig, train_language_model
    from .utils import seed_everything

    text = load_stdlib_text().text[: args.corpus_chars]
    # the last 10% of the text is held out, tokenizer included; "char": one token per character seen
    corpus = encode_corpus(text, args.vocab_size if args.tokenizer == "bpe" else None, held_out=0.1)
    tokenizer, train_ids, held_out_ids = corpus.tokenizer, corpus.train_ids, corpus.held_out_ids
    config = LMConfig(
        style=args.style,
        d_model=args.d_model,
        num_layers=args.layers,
        num_heads=args.heads,
        num_kv_heads=args.kv_heads,
        d_ff=args.d_ff,
        context=args.context,
        dropout=args.dropout,
    )
    train_config = LMTrainConfig(
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        min_lr=args.min_lr,
        warmup=args.warmup,
        betas=(0.9, args.beta2),
        weight_decay=args.weight_decay,
        clip_norm=args.clip_norm or None,
        seed=args.seed,
        eval_every=args.eval_every,
    )
    seed_everything(args.seed)
    model = build_language_model(config, tokenizer.vocab_size)
    kind = {"char": "字符", "bpe": "BPE "}[args.tokenizer]
    print(
        tr(
            f"task lm: {len(text):,} characters ({len(corpus.held_out_text):,} held out), {tokenizer.vocab_size} "
            f"{args.tokenizer} tokens, {corpus.characters_per_token:.2f} characters per token; "
            f"{count_parameters(model):,} parameters",
            f"任务 lm：{len(text):,} 个字符（其中留出 {len(corpus.held_out_text):,} 个），{tokenizer.vocab_size} 个"
            f"{kind}词元，平均每个词元 {corpus.characters_per_token:.2f} 个字符；{count_parameters(model):,} 个参数",
        )
    )
    history = train_language_model(
        model, train_ids, held_out_ids, config.context, train_config, progress=not args.quiet, eval_windows=None
    )
    bpc = bits_per_character(history.eval_loss[-1], len(held_out_ids), len(corpus.held_out_text))
    print(
        tr(
            f"{history.steps} steps in {history.seconds:.1f} s ({history.tokens_per_second:,.0f} tokens/s); "
            f"held-out loss {history.eval_loss[-1]:.3f} nats/token = {bpc:.3f} bits/character",
            f"{history.steps} 步，用时 {history.seconds:.1f} 秒（每秒 {history.tokens_per_second:,.0f} 个词元）；"
            f"留出集损失为每词元 {history.eval_loss[-1]:.3f} 奈特，即每字符 {bpc:.3f} 比特",
        )
    )
    if args.history_out:
        with open(args.history_out, "w") as f:
            json.dump({"loss": history.loss, "eval_steps": history.eval_steps, "eval_loss": history.eval_loss}, f)
    if args.out:
        extra = {"bits_per_character": bpc, "train_seconds": history.seconds, "train_config": vars(args)}
        path = save_language_model(args.out, model, config, tokenizer, extra)
        print(tr(f"model saved to {path}", f"模型已保存到 {path}"))
    return {"held_out_nats_per_token": history.eval_loss[-1], "bits_per_character": bpc}


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """Run one training from command-line arguments; returns the held-out metrics. It speaks ``--language`` while
    it runs and leaves the caller's language as it was."""
    args = build_parser().parse_args(argv)
    before = get_language()
    set_language(args.language)
    try:
        return _main(args)
    finally:
        set_language(before)


def _main(args: argparse.Namespace) -> dict[str, float]:
    if args.threads < 1:
        raise SystemExit(f"--threads must be >= 1, got {args.threads}")
    torch.set_num_threads(args.threads)
    if args.task == "lm":
        return main_lm(args)
    device = get_device(args.device)
    distributed = init_from_environment(device)  # set when launched by torchrun with several processes
    if distributed is not None:
        device = distributed.device
    main_process = distributed is None or distributed.is_main
    task = make_task(args.task, seed=args.seed) if args.task == "date" else make_task(args.task)
    model_config = recipe_model_config(
        task,
        d_model=args.d_model,
        num_heads=args.heads,
        num_encoder_layers=args.layers,
        num_decoder_layers=args.layers,
        d_ff=256 if args.d_ff is None else args.d_ff,
        dropout=args.dropout,
        positional=args.positional,
    )
    train_config = TrainConfig(
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        schedule=args.schedule,
        warmup=args.warmup,
        final_lr_fraction=args.final_lr_fraction,
        clip_norm=args.clip_norm or None,
        label_smoothing=args.label_smoothing,
        weight_decay=args.weight_decay,
        seed=args.seed,
        log_every=max(1, min(50, args.steps // 20)),
    )
    processes = 1 if distributed is None else distributed.world_size
    if main_process:
        print(
            tr(
                f"task {args.task}: {len(task.src_vocab)} source / {len(task.tgt_vocab)} target tokens; "
                f"device {device}; {processes} process(es)",
                f"任务 {args.task}：源词表 {len(task.src_vocab)} 个词元，目标词表 {len(task.tgt_vocab)} 个词元；"
                f"设备 {device}；{processes} 个进程",
            )
        )
    start = time.perf_counter()
    model, history = train_task_model(
        task,
        model_config,
        train_config,
        progress=main_process and not args.quiet,
        device=device,
        distributed=distributed,
        amp=args.amp,
    )
    leave_process_group(distributed)  # every process has finished training
    if args.history_out and main_process:
        with open(args.history_out, "w") as f:
            json.dump(history.to_dict(), f)
    if not main_process:  # evaluation and saving happen once, on the main process
        return {}
    print(
        tr(
            f"{count_parameters(model):,} parameters, {args.steps} steps in {history.seconds:.1f} s",
            f"{count_parameters(model):,} 个参数，{args.steps} 步，用时 {history.seconds:.1f} 秒",
        )
    )
    result = evaluate(model, task, task.eval_pairs(args.eval_size))
    print(
        tr(
            f"held-out token accuracy {result.token_accuracy:.2%}, exact match {result.exact_match:.2%}",
            f"留出集上的词元准确率 {result.token_accuracy:.2%}，精确匹配率 {result.exact_match:.2%}",
        )
    )
    for source, target, prediction in result.mistakes()[:5]:
        print(
            tr(
                f"  {source!r}: expected {target!r}, got {prediction!r}",
                f"  {source!r}：应为 {target!r}，模型输出 {prediction!r}",
            )
        )
    if args.out:
        extra = {
            **_run_description(task, train_config),
            "exact_match": result.exact_match,
            "train_seconds": history.seconds,
            "final_loss": history.loss[-1],
        }
        path = save_checkpoint(args.out, model, task.src_vocab, task.tgt_vocab, extra)
        print(tr(f"checkpoint saved to {path}", f"检查点已保存到 {path}"))
    total = time.perf_counter() - start
    print(tr(f"total {total:.1f} s", f"总用时 {total:.1f} 秒"))
    return {"token_accuracy": result.token_accuracy, "exact_match": result.exact_match}


if __name__ == "__main__":
    main(sys.argv[1:])
    if launched_by_torchrun():
        exit_finished_worker()

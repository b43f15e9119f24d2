"""Section 6: seconds of training until the copy task is solved (greedy exact match on fresh sequences)."""

from __future__ import annotations

import torch

from benchmarks.common import Settings
from transformer_course.training.recipes import make_task, recipe_model_config, time_to_accuracy
from transformer_course.training.trainers import TrainConfig

SECTIONS = (6,)
TITLE = "6. copy task, time to 99% exact match"

COPY_RECIPE = dict(layers=1, d_model=64, heads=4, lr=5e-3, warmup=30, batch_size=32, max_steps=300)


def bench_copy_time_to_accuracy(device: torch.device, target: float = 0.99) -> dict:
    """Seconds of training (evaluation excluded) until greedy exact match on 500 fresh sequences >= target."""
    r = COPY_RECIPE
    threads = torch.get_num_threads()
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
    torch.set_num_threads(threads)
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


def run(settings: Settings) -> dict:
    return {"copy_task": bench_copy_time_to_accuracy(settings.device)}


def report(results: dict) -> list[str]:
    if "copy_task" not in results:
        return []
    copy = results["copy_task"]
    copy_line = (
        f"{copy['seconds']:.1f} s of training ({copy['steps']} steps) to {copy['exact match']:.1%} greedy exact match"
        if copy["reached"]
        else f"not reached within the step budget (last exact match {copy['exact match']:.1%})"
    )
    return [
        "",
        "## 6. Time to accuracy on the copy task (symbols 1..10, length 10, 500 fresh sequences)",
        "",
        f"Recipe: {copy['recipe']}, one thread. Result: {copy_line}.",
    ]

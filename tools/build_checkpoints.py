"""Build the trained model that ships with the package: ``transformer_course/trained_models/date_model.safetensors``.

    python -m tools.build_checkpoints
    python -m tools.build_checkpoints --rename-weights   # only rename old weight names in the shipped files

It trains the date model with exactly notebook 09's recipe (``DateTask(seed=0)``, ``recipe_model_config(task)``,
``TrainConfig()``, on the CPU with one torch thread, as notebook 09 runs it) and writes it with
``save_checkpoint``: the weights in float32, the model config and both vocabularies in the file, and in its
``extra`` the task, the training settings and the torch and Python versions that produced it.

Run it only when something that changes the trained model changes: the recipe, the model code or the task's
data generator. Then re-execute notebook 10 (``python -m tools.execute_notebooks 10``), regenerate the figures
(``python -m tools.make_figures``), run ``tests/test_shipped_checkpoint.py`` and commit the new file. Notebook 10,
the figures and the tests read this file instead of training, so every machine decodes with the same weights.
The training takes a few minutes on a laptop CPU.

``--rename-weights`` does not train: it rewrites each shipped file with the weights renamed since it was built
(``RENAMED_WEIGHTS`` in ``transformer_course/training/checkpoints.py``: ``generator.*`` -> ``output_projection.*``), the
same tensors and the same metadata. A rebuild gives the new names too, since ``save_checkpoint`` writes the
model's own names.
"""

from __future__ import annotations

import argparse
import platform
from pathlib import Path

import torch

from transformer_course.text.tasks import DateTask
from transformer_course.training.checkpoints import (
    RENAMED_WEIGHTS,
    SHIPPED_CHECKPOINTS,
    load_shipped_checkpoint,
    save_checkpoint,
)
from transformer_course.training.recipes import _run_description, recipe_model_config, train_task_model
from transformer_course.training.trainers import TrainConfig, evaluate

MAX_BYTES = 1_000_000  # the file is committed to git and shipped in the wheel: keep it small


def build_date_model() -> Path:
    torch.set_num_threads(1)  # notebook 09's setting: the same summation order as its run
    task = DateTask(seed=0)
    train_config = TrainConfig()
    model, history = train_task_model(task, recipe_model_config(task), train_config, progress=True, device="cpu")
    extra = {
        **_run_description(task, train_config),  # what load_or_train compares: task, task_args, train_config
        "final_loss": history.loss[-1],
        "torch": torch.__version__,
        "python": platform.python_version(),
        "built_by": "tools/build_checkpoints.py",
    }
    path = save_checkpoint(SHIPPED_CHECKPOINTS / "date_model.safetensors", model, task.src_vocab, task.tgt_vocab, extra)
    path.chmod(0o644)  # package data: readable by everyone (the temporary file it was written as is private)
    size = path.stat().st_size
    if size >= MAX_BYTES:
        raise SystemExit(f"{path} has {size:,} bytes, more than the {MAX_BYTES:,} allowed")
    shipped = load_shipped_checkpoint("date_model")
    result = evaluate(shipped.model, task, task.eval_pairs(2000))
    print(f"wrote {path} ({size:,} bytes) with torch {extra['torch']}, Python {extra['python']}")
    print(f"held-out: exact match {result.exact_match:.2%}, token accuracy {result.token_accuracy:.2%}")
    return path


def _new_name(name: str) -> str:
    for old, new in RENAMED_WEIGHTS.items():
        if name.startswith(old):
            return new + name[len(old) :]
    return name


def rename_weights(path: Path) -> bool:
    """Rewrite the checkpoint at ``path`` with its old weight names (``RENAMED_WEIGHTS``) replaced: the same
    tensors, the same metadata (where safetensors' notes on tied weights name a weight, renamed too). Returns
    whether anything changed; a file with only new names is left untouched."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(path), framework="pt") as f:
        metadata = f.metadata() or {}
        tensors = {name: f.get_tensor(name) for name in f.keys()}
    renamed = {_new_name(name): tensor for name, tensor in tensors.items()}
    notes = {_new_name(key): _new_name(value) for key, value in metadata.items()}  # the standard keys stay as they are
    if renamed.keys() == tensors.keys() and notes == metadata:
        return False
    tmp = path.with_name(path.name + ".tmp")
    save_file(renamed, str(tmp), metadata=notes)
    tmp.replace(path)
    path.chmod(0o644)
    return True


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rename-weights", action="store_true", help="rename old weight names; do not train")
    if parser.parse_args().rename_weights:
        for shipped in sorted(SHIPPED_CHECKPOINTS.glob("*.safetensors")):
            print(f"{shipped}: {'renamed' if rename_weights(shipped) else 'already up to date'}")
    else:
        build_date_model()

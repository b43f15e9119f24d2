"""nanoGPT's own code on the course's corpus: the outside anchor of section 8.

nanoGPT is Andrej Karpathy's minimal GPT (https://github.com/karpathy/nanoGPT); its README gives a CPU recipe for
a small character-level model. Nothing of nanoGPT is copied into this project: :func:`bench_nanogpt` runs the
unmodified ``train.py`` of a checkout the user passes (``python -m benchmarks.run --nanogpt PATH``), from a temporary
working directory that holds our corpus in nanoGPT's character-level format and symlinks to the checkout's
``train.py``, ``model.py``, ``configurator.py`` and ``config/``; the checkpoint it saves is scored with the checkout's
``model.py``, imported from PATH, on the same held-out tail and in the same windows as the course's models.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import pickle
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np
import torch
from torch import Tensor, nn

from transformer_course.training.lm_training import held_out_loss

REPOSITORY = "https://github.com/karpathy/nanoGPT"
# the files train.py reads or imports from its working directory (config/ is linked as a whole)
LINKED = ("train.py", "model.py", "configurator.py", "config")
REQUIRED = ("train.py", "model.py", "configurator.py", "config/train_shakespeare_char.py")
# nanoGPT's README CPU recipe, flag for flag, as one command line
README_CPU_RECIPE = (
    "python train.py config/train_shakespeare_char.py --device=cpu --compile=False --eval_iters=20 "
    "--log_interval=1 --block_size=64 --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128 --max_iters=2000 "
    "--lr_decay_iters=2000 --dropout=0.0"
)
DATASET = "stdlib_char"  # data/stdlib_char/ in the working directory: train.bin, val.bin, meta.pkl
OUT_DIR = "out"
PROBE_ITERATIONS = 60  # as the course rows' probe
MIN_ITERATIONS = 200  # as the course rows' floor; also keeps max_iters above the config's 100 warm-up iterations
_ITERATION_LINE = re.compile(r"^iter (\d+): loss \S+, time ([0-9.]+)ms", re.MULTILINE)


def check_checkout(path: Path) -> Path:
    """``path`` resolved, after checking that it is a nanoGPT checkout (train.py, model.py, configurator.py and
    config/train_shakespeare_char.py); raises ValueError naming the path and the missing files."""
    path = Path(path).expanduser().resolve()
    if not path.is_dir():
        raise ValueError(f"--nanogpt {path}: not a directory; expected a nanoGPT checkout ({REPOSITORY})")
    missing = [name for name in REQUIRED if not (path / name).is_file()]
    if missing:
        raise ValueError(
            f"--nanogpt {path}: not a nanoGPT checkout ({REPOSITORY}); expected {', '.join(REQUIRED)}, "
            f"missing {', '.join(missing)}"
        )
    return path


def checkout_commit(path: Path) -> str:
    """The git commit of the checkout at ``path``, or ``"unknown"`` if ``path`` is not the top of a git work tree
    (an extracted archive, say)."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    top = git("rev-parse", "--show-toplevel")
    if not top or Path(top).resolve() != Path(path).resolve():
        return "unknown"
    return git("rev-parse", "HEAD") or "unknown"


def train_arguments(iterations: int, out_dir: str = OUT_DIR, dataset: str = DATASET) -> list[str]:
    """The arguments after ``python``: the README CPU recipe with ``--max_iters`` and ``--lr_decay_iters`` set to
    ``iterations``, then ``--dataset``, ``--out_dir`` and ``--eval_interval=iterations`` (evaluate at the start and
    the end only)."""
    if not isinstance(iterations, int) or isinstance(iterations, bool) or iterations < 1:
        raise ValueError(f"iterations must be an int >= 1, got {iterations!r}")
    overrides = {"--max_iters": iterations, "--lr_decay_iters": iterations}
    arguments = []
    for argument in README_CPU_RECIPE.split()[1:]:  # after "python"
        key = argument.split("=")[0]
        arguments.append(f"{key}={overrides[key]}" if key in overrides else argument)
    return arguments + [f"--dataset={dataset}", f"--out_dir={out_dir}", f"--eval_interval={iterations}"]


def write_char_dataset(train_text: str, held_out_text: str, directory: Path) -> dict:
    """Write ``directory``/train.bin, val.bin (uint16 ids) and meta.pkl (vocab_size, stoi, itos) as nanoGPT's
    data/shakespeare_char/prepare.py does: the vocabulary is every distinct character of the whole text (training
    part and held-out tail), in sorted order. Returns the meta dict."""
    if not isinstance(train_text, str) or not isinstance(held_out_text, str) or not train_text or not held_out_text:
        raise ValueError("train_text and held_out_text must be non-empty strings")
    chars = sorted(set(train_text) | set(held_out_text))
    if len(chars) > np.iinfo(np.uint16).max + 1:
        raise ValueError(f"{len(chars)} distinct characters do not fit nanoGPT's uint16 ids")
    stoi = {ch: i for i, ch in enumerate(chars)}
    meta = {"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": stoi}
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in (("train.bin", train_text), ("val.bin", held_out_text)):
        ids = np.fromiter((stoi[ch] for ch in text), dtype=np.uint16, count=len(text))
        ids.tofile(directory / name)
    with open(directory / "meta.pkl", "wb") as f:
        pickle.dump(meta, f)
    return meta


def read_char_dataset(directory: Path) -> tuple[str, str]:
    """The training and held-out texts that ``directory``/train.bin and val.bin hold, decoded with meta.pkl."""
    with open(Path(directory) / "meta.pkl", "rb") as f:
        itos = pickle.load(f)["itos"]
    return tuple(  # type: ignore[return-value]
        "".join(itos[int(i)] for i in np.fromfile(Path(directory) / name, dtype=np.uint16))
        for name in ("train.bin", "val.bin")
    )


def prepare_workdir(checkout: Path, workdir: Path, train_text: str, held_out_text: str) -> dict:
    """Make ``workdir`` runnable for the checkout's unmodified train.py: symlinks to its files and our data in
    ``workdir``/data/<DATASET>/. Returns the data's meta dict."""
    checkout = check_checkout(checkout)
    for name in LINKED:
        (Path(workdir) / name).symlink_to(checkout / name, target_is_directory=(checkout / name).is_dir())
    return write_char_dataset(train_text, held_out_text, Path(workdir) / "data" / DATASET)


@dataclass(frozen=True)
class TrainRun:
    """One run of train.py: its arguments, wall-clock seconds, the time it logged for each iteration, its output."""

    arguments: list[str]
    wall_clock: float
    iteration_seconds: list[float]
    log: str

    @property
    def command(self) -> str:
        """The command line, as one would type it in the working directory."""
        return "python " + " ".join(self.arguments)


def iteration_seconds(log: str) -> list[float]:
    """The seconds train.py logged for each iteration (its ``iter k: loss x, time y ms`` lines), in order."""
    return [float(ms) / 1000 for _, ms in _ITERATION_LINE.findall(log)]


def run_train(workdir: Path, iterations: int, threads: int | None = None) -> TrainRun:
    """Run train.py in ``workdir`` for ``iterations`` (the README recipe, see :func:`train_arguments`) on
    ``threads`` torch threads (default: this process's), and time it."""
    arguments = train_arguments(iterations)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads or torch.get_num_threads())}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *arguments], cwd=workdir, env=env, capture_output=True, text=True, check=False
    )
    wall_clock = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"nanoGPT's train.py failed ({done.returncode}) in {workdir}:\n{done.stderr[-2000:]}")
    times = iteration_seconds(done.stdout)
    if len(times) != iterations + 1:  # train.py runs iterations 0..max_iters
        raise RuntimeError(f"expected {iterations + 1} logged iterations from train.py, found {len(times)}")
    return TrainRun(arguments, wall_clock, times, done.stdout)


def import_model_module(checkout: Path) -> ModuleType:
    """The checkout's model.py, imported from its path (as ``nanogpt_model``), not copied."""
    path = check_checkout(checkout) / "model.py"
    spec = importlib.util.spec_from_file_location("nanogpt_model", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = module  # type: ignore[union-attr]  # its dataclasses look their module up here
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


class AllPositions(nn.Module):
    """A nanoGPT ``GPT`` that returns the logits (batch, time, vocab) of every position, as the course's models do:
    GPT.forward returns only the last position's logits unless it is given targets, so it is given the inputs
    as dummy targets (the loss it computes from them is dropped)."""

    def __init__(self, gpt: nn.Module) -> None:
        super().__init__()
        self.gpt = gpt

    def forward(self, idx: Tensor) -> Tensor:
        logits, _ = self.gpt(idx, idx)
        return logits


def load_checkpoint(checkout: Path, path: Path) -> tuple[nn.Module, int]:
    """The model of train.py's checkpoint ``path`` (built with the checkout's model.py) and its iteration."""
    if not Path(path).is_file():
        raise RuntimeError(f"train.py saved no checkpoint at {path} (its final val loss did not beat the first)")
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    module = import_model_module(checkout)
    with contextlib.redirect_stdout(io.StringIO()):  # GPT() prints its number of parameters
        model = module.GPT(module.GPTConfig(**checkpoint["model_args"]))
    model.load_state_dict(checkpoint["model"])
    return model, int(checkpoint["iter_num"])


def held_out_nats_per_char(model: nn.Module, held_out_text: str, stoi: dict[str, int], context: int) -> float:
    """nanoGPT ``model``'s held-out loss in nats per character (a character is a token): the held-out text encoded
    with ``stoi``, scored by :func:`held_out_loss` as the course's models are (non-overlapping windows of
    ``context``)."""
    ids = torch.tensor([stoi[ch] for ch in held_out_text])
    return held_out_loss(AllPositions(model), ids, context)


def planned_iterations(budget: float, seconds_per_iteration: float) -> int:
    """Iterations that take about ``budget`` seconds, at least MIN_ITERATIONS."""
    if not budget > 0 or not seconds_per_iteration > 0:
        raise ValueError(f"need budget > 0 and seconds_per_iteration > 0, got {budget!r}, {seconds_per_iteration!r}")
    return max(int(budget / seconds_per_iteration), MIN_ITERATIONS)


def nanogpt_row(name: str, budget: float, planned: int, run: TrainRun, steps: int, nats: float, commit: str) -> dict:
    """One row of section 8. seconds and tokens/s cover the iterations without an evaluation (train.py's own
    timing); wall-clock (s) is the whole subprocess (start-up, two evaluations, every iteration)."""
    trained = run.iteration_seconds[1:-1]  # iterations 0 and max_iters include an evaluation
    batch, block = 12, 64  # the README recipe's --batch_size and --block_size
    tokens_per_second = len(trained) * batch * block / sum(trained)
    return {
        "recipe": name, "budget (s)": budget, "steps": steps, "planned steps": planned, "seconds": sum(trained),
        "wall-clock (s)": run.wall_clock, "tokens/s": tokens_per_second, "characters/s": tokens_per_second,
        "held-out nats/char": nats, "held-out bits/char": nats / np.log(2), "command": run.command,
        "nanoGPT commit": commit,
    }  # fmt: skip


def bench_nanogpt(
    checkout: Path, train_text: str, held_out_text: str, budgets: list[float], name: str, context: int = 64
) -> list[dict]:
    """For each budget in seconds, train.py run for about that long (its iterations sized from a probe of
    PROBE_ITERATIONS), its checkpoint scored on ``held_out_text``; one row each (see :func:`nanogpt_row`)."""
    checkout = check_checkout(checkout)
    commit = checkout_commit(checkout)
    if commit == "unknown":
        print(f"  {checkout} is not a git checkout: its nanoGPT commit is recorded as unknown", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="nanogpt_") as workdir:
        meta = prepare_workdir(checkout, Path(workdir), train_text, held_out_text)
        checkpoint = Path(workdir) / OUT_DIR / "ckpt.pt"
        probe = run_train(Path(workdir), PROBE_ITERATIONS)
        seconds_per_iteration = statistics.median(probe.iteration_seconds)
        for budget in budgets:
            planned = planned_iterations(budget, seconds_per_iteration)
            checkpoint.unlink(missing_ok=True)  # the probe's or the previous budget's
            run = run_train(Path(workdir), planned)
            model, steps = load_checkpoint(checkout, checkpoint)
            nats = held_out_nats_per_char(model, held_out_text, meta["stoi"], context)
            rows.append(nanogpt_row(name, budget, planned, run, steps, nats, commit))
            print(f"  {name}, {budget:.0f} s: {steps} iterations, {nats:.3f} nats/char", flush=True)
    return rows

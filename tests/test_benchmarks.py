"""The benchmark code runs and counts FLOPs correctly; no timing is asserted (timings live in the benchmark)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from benchmarks import kv_cache, language_model, nanogpt_anchor, run
from benchmarks.attention_modules import bench_attention_modules
from benchmarks.common import ROOT, Settings, markdown_table
from benchmarks.training_step import training_step_flops
from transformer_course import TransformerConfig
from transformer_course.text.corpus import load_stdlib_text
from transformer_course.text.lm_data import encode_corpus


def test_training_step_flops_by_hand():
    config = TransformerConfig(
        src_vocab_size=10, tgt_vocab_size=10, d_model=4, num_heads=2, d_ff=8, num_encoder_layers=1,
        num_decoder_layers=1,
    )  # fmt: skip
    # encoder, per token: projections 4*4*4=64, FFN 2*4*8=64 -> 2 FLOPs each: 2*(2*3*(128)) + attention 2*2*3*3*4
    batch, n_src, n_tgt = 2, 3, 2
    encoder = 2 * (batch * n_src * (64 + 64) + batch * 2 * n_src * n_src * 4)
    decoder = 2 * (batch * n_tgt * (128 + 64) + batch * 2 * (n_tgt * n_tgt + n_tgt * n_src) * 4)
    output = 2 * batch * n_tgt * 4 * 10
    assert training_step_flops(config, batch, n_src, n_tgt) == 3 * (encoder + decoder + output)


def test_attention_rows_have_every_column():
    rows = bench_attention_modules(torch.device("cpu"), [(1, 4, 16)], run_time=0.001)
    assert len(rows) == 1
    for key in ("forward: ours/torch", "forward+backward: fused/torch", "forward: F.sdpa (core only)"):
        assert rows[0][key] > 0
    table = markdown_table(rows, ["n", "forward: ours/torch"], {"forward: ours/torch": ".2f"})
    assert table.splitlines()[0] == "| n | forward: ours/torch |"


def test_a_table_names_a_column_its_rows_lack():
    with pytest.raises(ValueError, match="'speed-up'"):
        markdown_table([{"n": 1}], ["n", "speed-up"], {})


def test_every_section_is_one_module():
    numbers = [n for section in run.SECTIONS for n in section.SECTIONS]
    assert sorted(numbers) == list(range(1, 10))
    assert run.NOTEBOOK_SECTION in run.notebook_times.SECTIONS


def test_the_committed_report_is_written_from_the_committed_results():
    results = json.loads((ROOT / "benchmarks" / "results.json").read_text())
    assert run.report(results) == (ROOT / "benchmarks" / "results.md").read_text()


def test_a_quick_section_runs_and_the_cache_changes_no_token(tmp_path):
    settings = Settings(torch.device("cpu"), quick=True, run_time=0.001, figures=tmp_path)
    rows = kv_cache.run(settings)["kv_cache"]
    assert [row["new tokens"] for row in rows] == [16, 32]
    assert all(row["same tokens"] == "yes" for row in rows)
    assert kv_cache.report({"kv_cache": rows})[1].startswith("## 5. ")


# Section 8's nanoGPT anchor: nothing of nanoGPT is in the project, so these tests need no checkout.

README_CPU_RECIPE = (  # nanoGPT's README, line 85 at commit 3adf61e154c3
    "python train.py config/train_shakespeare_char.py --device=cpu --compile=False --eval_iters=20 --log_interval=1 "
    "--block_size=64 --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128 --max_iters=2000 --lr_decay_iters=2000 "
    "--dropout=0.0"
)


def flags(arguments: list[str]) -> dict[str, str]:
    return dict(argument.split("=", 1) for argument in arguments if argument.startswith("--"))


def test_the_nanogpt_data_gives_back_the_course_split(tmp_path):
    text = load_stdlib_text().text[:20_000] + "\u00e9 tail only: \u2192"  # characters seen only in the held-out tail
    corpus = encode_corpus(text, None, held_out=0.1)
    meta = nanogpt_anchor.write_char_dataset(corpus.train_text, corpus.held_out_text, tmp_path)
    assert nanogpt_anchor.read_char_dataset(tmp_path) == (corpus.train_text, corpus.held_out_text)
    assert meta["vocab_size"] == len(set(text)) and list(meta["itos"].values()) == sorted(set(text))
    assert (tmp_path / "train.bin").stat().st_size == 2 * len(corpus.train_text)  # uint16 ids


def test_the_nanogpt_command_is_the_readme_recipe_with_the_stated_overrides():
    assert nanogpt_anchor.README_CPU_RECIPE == README_CPU_RECIPE
    arguments = nanogpt_anchor.train_arguments(750)
    recipe = README_CPU_RECIPE.split()
    assert arguments[:2] == recipe[1:3]  # train.py, then the config file, before every --key=value
    overrides = {"--max_iters": "750", "--lr_decay_iters": "750", "--eval_interval": "750"}
    overrides |= {"--dataset": nanogpt_anchor.DATASET, "--out_dir": nanogpt_anchor.OUT_DIR}
    assert flags(arguments) == flags(recipe) | overrides
    assert len(arguments) == len(set(arguments)) == len(recipe) - 1 + 3


@pytest.mark.parametrize("files", [[], ["train.py"], ["train.py", "model.py", "configurator.py"]])
def test_a_path_that_is_not_a_nanogpt_checkout_is_refused(tmp_path, files):
    for name in files:
        (tmp_path / name).write_text("")
    with pytest.raises(ValueError, match=rf"{tmp_path}.*expected train.py, model.py.*missing") as error:
        nanogpt_anchor.check_checkout(tmp_path)
    assert "model.py" in str(error.value) or "config/train_shakespeare_char.py" in str(error.value)
    with pytest.raises(ValueError, match="not a directory"):
        nanogpt_anchor.check_checkout(tmp_path / "absent")
    with pytest.raises(ValueError, match="iterations"):
        nanogpt_anchor.train_arguments(0)


def test_a_nanogpt_model_is_scored_as_the_course_scores_its_models():
    class Uniform(torch.nn.Module):  # nanoGPT's GPT.forward(idx, targets) -> (logits, loss)
        def forward(self, idx, targets=None):
            logits = torch.zeros(*idx.shape, 7)
            return (logits, None) if targets is not None else (logits[:, [-1]], None)

    stoi = {ch: i for i, ch in enumerate("abcdefg")}
    nats = nanogpt_anchor.held_out_nats_per_char(Uniform(), "abcdefg" * 40, stoi, context=8)
    assert nats == pytest.approx(math.log(7))


def test_train_py_iteration_times_and_a_nanogpt_row():
    log = (
        "step 0: train loss 4.7\niter 0: loss 4.7, time 900.00ms, mfu -100.00%\n"
        + "".join(f"iter {k}: loss 3.1, time 50.00ms, mfu 0.01%\n" for k in range(1, 4))
        + "step 4: train loss 2.9\nsaving checkpoint to out\niter 4: loss 2.9, time 700.00ms, mfu 0.01%\n"
    )
    times = nanogpt_anchor.iteration_seconds(log)
    assert times == pytest.approx([0.9, 0.05, 0.05, 0.05, 0.7])
    run_ = nanogpt_anchor.TrainRun(nanogpt_anchor.train_arguments(4), 3.0, times, log)
    row = nanogpt_anchor.nanogpt_row("nanoGPT", 5.0, 4, run_, 4, 1.5, "abc")
    assert row["tokens/s"] == pytest.approx(12 * 64 / 0.05) and row["seconds"] == pytest.approx(0.15)
    assert row["held-out bits/char"] == pytest.approx(1.5 / math.log(2))
    assert row["command"].startswith("python train.py config/") and row["nanoGPT commit"] == "abc"
    assert nanogpt_anchor.planned_iterations(1.0, 0.05) == nanogpt_anchor.MIN_ITERATIONS


def test_the_report_names_nanogpt_and_how_its_rows_were_measured(tmp_path):
    course = {"recipe": language_model.COURSE, "budget (s)": 60.0, "steps": 9, "tokens/s": 1.0, "characters/s": 2.0}
    course["held-out nats/char"] = 1.0  # no bits: a row measured before they were recorded
    nanogpt = course | {"recipe": language_model.NANOGPT, "held-out bits/char": 2.0}
    info = {"measured": "2025-01-01", "benchmark command": "python -m benchmarks.run --only 8 --nanogpt x"}
    info |= {"threads": 2, "commit": "3adf61e154c3fe3f"}
    notes = {"caveats": ["plain words"], "nanoGPT": info}
    text = "\n".join(language_model.report({"language_model": [nanogpt, course], "language_model_notes": notes}))
    assert "nanoGPT, Andrej Karpathy's" in text and "- plain words" in text and "`3adf61e154c3`" in text
    assert "| 1.000 | 1.443 |" in text and "| 1.000 | 2.000 |" in text
    assert "No nanoGPT rows yet" in "\n".join(language_model.report({"language_model": [course]}))
    (tmp_path / "results.json").write_text(json.dumps({"language_model": [nanogpt, course]}))
    assert language_model.stored_nanogpt(tmp_path / "results.json") == ([nanogpt], None)


def test_the_shipped_anchor_comparison_is_section_8_of_the_results():
    results = json.loads((ROOT / "benchmarks" / "results.json").read_text())
    section = {key: results[key] for key in language_model.SECTION_KEYS if key in results}
    assert json.loads(language_model.ANCHOR.read_text()) == section
    assert language_model.ANCHOR.stat().st_size < 20_000


def test_retimed_notebooks_replace_their_rows_and_keep_the_order():
    from benchmarks.notebook_times import merge_rows

    stored = [
        {"notebook": "01_rnn_limits.ipynb", "seconds": 1.0},
        {"notebook": "00_introduction.ipynb", "seconds": 2.0},
    ]
    new = [
        {"notebook": "00_introduction.ipynb", "seconds": 3.0},
        {"notebook": "15_gpt_from_scratch.ipynb", "seconds": 4.0},
    ]
    assert merge_rows(stored, new) == [
        {"notebook": "00_introduction.ipynb", "seconds": 3.0},
        {"notebook": "01_rnn_limits.ipynb", "seconds": 1.0},
        {"notebook": "15_gpt_from_scratch.ipynb", "seconds": 4.0},
    ]

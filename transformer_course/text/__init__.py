"""Text and data: where the tokens come from (notebooks 02, 08, 09, 14, 15).

* :mod:`.tasks`: vocabularies, padded batches and the synthetic sequence-to-sequence tasks, dates and copying (08, 09).
* :mod:`.corpus`: the English prose of Python's standard library, on every machine offline (02, 15).
* :mod:`.bpe`: byte-pair encoding trained by hand (15); :mod:`.wordpiece`: BERT's WordPiece, through ``tokenizers``
  (14).
* :mod:`.lm_data`: one long text for a language model: the held-out split and its encoding, random windows,
  bits per character (15).
"""

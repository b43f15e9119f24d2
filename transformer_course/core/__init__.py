"""The Transformer of the paper, piece by piece (notebooks 03-10), each checked against PyTorch's own.

* :mod:`.masks`: padding and causal masks, ``True`` = may attend (06).
* :mod:`.attention`: scaled dot-product attention and the one multi-head attention module, with its KV cache (04, 05).
* :mod:`.positional`: token embeddings, sinusoidal and learned positions (03); :mod:`.rope`: RoPE and ALiBi (12).
* :mod:`.norms`: LayerNorm written out and RMSNorm (07).
* :mod:`.layers`: the feed-forward networks, the residual wrapper and :class:`~.layers.BlockConfig`, every choice
  of one encoder or decoder layer (07, 08).
* :mod:`.model`: the encoder and decoder stacks and the whole :class:`~.model.Transformer` (08).
* :mod:`.decoding`: greedy decoding, beam search and sampling, with or without a cache (10).
* :mod:`.interop`: copy weights to and from ``nn.Transformer`` and ``nn.MultiheadAttention`` to compare them (05, 08).
"""

"""Attention that costs less than O(n^2): sparse patterns, low rank, random features, recurrence, fused kernels.

Full attention compares every query with every key: n^2 scores per head. The variants trade that as follows; each
lives in its own module of this folder, named in brackets below (notebook 13).

- Sliding window (Longformer, Mistral): each token sees the ``window`` tokens on each side, O(n w). Longformer adds
  a few *global* tokens that see and are seen by everyone. :func:`sliding_window_attention` and
  :func:`longformer_attention` compute only the band (and the global rows and columns); the ``*_mask`` functions
  give the same patterns as masks for the full attention, for checking and for plots. (:mod:`.sparse_attention`)
- BigBird: window + global + a few *random* keys per query. Here it is a mask only (:func:`bigbird_mask`); BigBird
  gets its speed from block-sparse kernels that gather blocks of keys, which this course does not write.
  (:mod:`.sparse_attention`)
- Linformer: project the n keys and values down to k rows with learned (k, n) matrices, O(n k).
  (:mod:`.low_rank_attention`)
- Performer (FAVOR+): replace exp(q . k) by a dot product of positive random features phi(q) . phi(k), then use
  associativity, phi(Q) (phi(K)^T V), O(n m d) for m features. Approximate; the error falls as m grows.
  (:mod:`.low_rank_attention`)
- Transformer-XL: process a long text in segments; each segment also attends to the cached hidden states of the
  previous one(s) (no gradient flows into the cache). (:mod:`.recurrent_attention`; its pattern,
  :func:`transformer_xl_mask`, is in :mod:`.sparse_attention`)
- Fused / flash attention: the exact result, computed block by block with a running softmax so the n x n matrix is
  never stored (:func:`blockwise_attention` writes the idea out, :mod:`.blockwise_attention`;
  :func:`fused_attention` calls PyTorch's kernel, :mod:`~transformer_course.core.attention`).
- Measuring the memory: :func:`peak_tensor_bytes` and :func:`traced_operators`
  (:mod:`~transformer_course.memory_tracker`).

The modules :class:`LinformerSelfAttention` and :class:`TransformerXLAttention` are
:class:`~transformer_course.core.attention.MultiHeadAttention` with only their difference added. Mask convention as
everywhere in the package: ``True`` = may attend. Tensors are (..., len, head_dim), usually (batch, heads, len,
head_dim).
"""

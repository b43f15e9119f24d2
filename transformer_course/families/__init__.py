"""The model families that grew out of the Transformer (notebooks 11, 12, 14, 15 and 16), built from :mod:`..core`.

* :mod:`.bert`: encoder-only, masked language modelling and its data (11, 14).
* :mod:`.vit`: the Vision Transformer, an image cut into patches (11).
* the decoder-only language model, GPT-2 and LLaMA style as two block presets (11, 12, 15).
* :mod:`.pretrained`: a real pre-trained encoder (all-MiniLM-L6-v2) running in the course's own modules (14).
* :mod:`.language_model`: a language model's shape, saved and loaded with its tokenizer; the LSTM baseline (15).
* :mod:`.moe`: a mixture-of-experts feed-forward layer (a router and SwiGLU experts), and the decoder-only model
  built with one in each block (16).
"""

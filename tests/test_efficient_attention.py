"""The overview of efficient attention names, for each variant, the module that defines it; one attention module."""

from __future__ import annotations

import re
from pathlib import Path

import transformer_course
from transformer_course import efficient as efficient_attention
from transformer_course import memory_tracker
from transformer_course.core import attention
from transformer_course.efficient import blockwise_attention, low_rank_attention, recurrent_attention, sparse_attention

PUBLIC_NAMES = {
    attention: ["fused_attention"],
    blockwise_attention: ["blockwise_attention"],
    low_rank_attention: [
        "LinformerSelfAttention",
        "linformer_attention",
        "orthogonal_random_features",
        "performer_attention",
        "positive_random_features",
    ],
    memory_tracker: ["peak_tensor_bytes", "traced_operators"],
    recurrent_attention: ["TransformerXLAttention", "run_in_segments"],
    sparse_attention: [
        "bigbird_mask",
        "global_token_mask",
        "longformer_attention",
        "longformer_mask",
        "random_key_mask",
        "sliding_window_attention",
        "sliding_window_mask",
        "transformer_xl_mask",
    ],
}


def test_the_overview_names_modules_that_define_the_names_it_lists():
    """The folder's overview (its docstring) points each variant at the module that defines it."""
    doc = efficient_attention.__doc__
    for module, module_names in PUBLIC_NAMES.items():
        for name in module_names:
            assert hasattr(module, name), (module.__name__, name)
    for module_name in re.findall(r":mod:`\.(\w+)`", doc):
        assert module_name in {m.__name__.rsplit(".", 1)[1] for m in PUBLIC_NAMES}, module_name
    for module in PUBLIC_NAMES:
        if module is not attention and module is not memory_tracker:
            assert f":mod:`.{module.__name__.rsplit('.', 1)[1]}`" in doc, module.__name__


def test_the_only_attention_module_is_multi_head_attention():
    package = Path(transformer_course.__file__).parent
    found = [
        match
        for path in package.rglob("*.py")
        for match in re.findall(r"class (\w*Attention)\(nn\.Module\)", path.read_text(encoding="utf-8"))
    ]
    assert found == ["MultiHeadAttention"]
    for module in (low_rank_attention.LinformerSelfAttention, recurrent_attention.TransformerXLAttention):
        assert issubclass(module, attention.MultiHeadAttention)

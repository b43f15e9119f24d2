"""For each exercise, the course package's functions that do what the exercise asks the learner to write.

Read from each exercise's checker module (what its ``fn`` must compute) and the package: calling one of these in an
answer is handing in the package's code, and the grader flags it (column ``package``). An empty tuple means that the
package has no such function (the exercise asks for something new, such as a changed W_Q or a formula). Every
exercise of the course has an entry; tests/test_grader.py checks that each name resolves, and that the functions
marked as drop-in pass their exercise's checker as they are.
"""

from __future__ import annotations

import importlib

P = "transformer_course."

FORBIDDEN: dict[str, tuple[str, ...]] = {
    "0.1": (),  # a shape read from the notation
    "1.1": (P + "prelude.rnn.chain_jacobians",),  # BPTT's product of Jacobians
    "1.2": (),  # dL/dU by hand: the package computes it only through autograd
    "1.3": (P + "prelude.rnn.conv_layers_to_connect", P + "prelude.rnn.receptive_field"),
    "2.1": (P + "prelude.word2vec.cosine_similarities",),
    "2.2": (),  # the gradient by hand: the package's Word2Vec gets it from autograd
    "2.3": (P + "prelude.word2vec.nearest_neighbours",),
    "3.1": (),
    "3.2": (),  # the package's table interleaves sin and cos; the exercise's layout is halves
    "4.1": (P + "core.attention.scaled_dot_product_attention", P + "core.attention.fused_attention"),
    "4.2": (),
    "4.3": (),
    "5.1": (),
    "5.2": (P + "core.attention.MultiHeadAttention",),
    "6.1": (P + "core.masks.causal_mask", P + "core.masks.decoder_self_mask"),
    "6.2": (P + "core.masks.padding_mask",),
    "6.3": (),
    "7.1": (P + "core.norms.layer_norm",),
    "7.2": (),
    "7.3": (P + "core.layers.Residual",),
    "8.1": (),
    "8.2": (P + "core.attention.scaled_dot_product_attention", P + "core.attention.MultiHeadAttention"),
    "8.3": (P + "utils.count_parameters",),  # the count by formula, not by building the model and counting
    "9.1": (P + "training.losses.label_smoothing_loss", P + "training.losses.smoothed_targets"),
    "9.2": (P + "training.schedules.noam_lr",),
    "9.3": (),
    "10.1": (P + "core.decoding.filter_logits",),
    "10.2": (P + "core.decoding.filter_logits",),
    "10.3": (P + "core.attention.KVCache",),
    "11.1": (),
    "11.2": (P + "families.bert.segment_ids",),
    "11.3": (P + "families.vit.patchify",),
    "12.1": (P + "core.rope.apply_rope", P + "core.rope.RotaryEmbedding", P + "core.rope.rotate_pairs"),
    "12.2": (P + "core.attention.grouped_query_attention", P + "efficient.kv_cache.repeat_kv"),
    "12.3": (P + "efficient.kv_cache.kv_cache_bytes",),
    "13.1": (
        P + "efficient.sparse_attention.longformer_mask",
        P + "efficient.sparse_attention.sliding_window_mask",
        P + "efficient.sparse_attention.global_token_mask",
    ),
    "13.2": (P + "efficient.blockwise_attention.blockwise_attention",),
    "13.3": (),
    "14.1": (),
    "14.2": (),
    "15.1": (P + "text.bpe.merge_pair", P + "text.bpe.BPETokenizer"),
    "15.2": (P + "text.lm_data.bits_per_character",),
    "15.3": (P + "core.decoding.generate",),
    "16.1": (P + "families.moe.balance_loss", P + "families.moe.MixtureOfExperts"),
    "16.2": (P + "families.moe.MixtureOfExperts",),
    "16.3": (P + "families.moe.expert_choice",),
    "17.1": (),
    "17.2": (P + "training.lora.lora_parameter_count",),
}

# package functions that take the learner's arguments as they are and pass the checker: proof, in the tests, that
# the table names what the exercise asks for
DROP_IN: dict[str, str] = {
    "9.2": P + "training.schedules.noam_lr",
    "11.2": P + "families.bert.segment_ids",
    "11.3": P + "families.vit.patchify",
    "15.2": P + "text.lm_data.bits_per_character",
    "16.3": P + "families.moe.expert_choice",
}


def resolve(dotted: str) -> object:
    """The object a dotted path names ("transformer_course.core.masks.causal_mask"). Raises ValueError if it does
    not exist."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        try:
            for attribute in parts[split:]:
                found = getattr(found, attribute)
        except AttributeError:
            break
        return found
    raise ValueError(f"{dotted!r} names nothing importable")


def forbidden_objects(numbers: list[str]) -> dict[int, tuple[str, list[str]]]:
    """id(object) -> (its name, the exercises among ``numbers`` that ask for it) for every package function that
    the exercises ``numbers`` forbid. Raises ValueError for an exercise the table does not know."""
    found: dict[int, tuple[str, list[str]]] = {}
    for number in numbers:
        if number not in FORBIDDEN:
            raise ValueError(f"exercise {number!r} has no entry in tools/grader/forbidden.py's FORBIDDEN")
        for dotted in FORBIDDEN[number]:
            found.setdefault(id(resolve(dotted)), (dotted.rsplit(".", 1)[1], []))[1].append(number)
    return found

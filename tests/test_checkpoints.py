"""Checkpoints: an exact round trip, clear errors, and files written by older versions of the package (the output
projection's old name ``generator``, config fields that did not exist yet)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from transformer_course import Transformer, TransformerConfig
from transformer_course.text.tasks import Vocabulary
from transformer_course.training.checkpoints import (
    CheckpointError,
    _config_differences,
    load_checkpoint,
    save_checkpoint,
)

# added to TransformerConfig after the first checkpoints
NEW_FIELDS = ("norm", "num_kv_heads", "rope", "rope_base", "bias")


def _model_and_vocabs(tie: bool = False):
    vocab = Vocabulary("abcdef")
    torch.manual_seed(1)
    config = TransformerConfig(
        src_vocab_size=len(vocab),
        tgt_vocab_size=len(vocab),
        d_model=16,
        num_heads=2,
        d_ff=32,
        num_encoder_layers=1,
        num_decoder_layers=1,
        max_len=20,
        share_embeddings=tie,
        tie_output=tie,
    )
    return Transformer(config).eval(), vocab


def _rewrite(path, out, rename=lambda name: name, config=lambda stored: stored):
    """A copy of the checkpoint at ``path`` with its weights renamed and its stored config edited."""
    with safe_open(str(path), framework="pt") as f:
        metadata = f.metadata()
        tensors = {rename(name): f.get_tensor(name) for name in f.keys()}
    metadata = {rename(k): rename(v) for k, v in metadata.items()}
    metadata["config"] = json.dumps(config(json.loads(metadata["config"])))
    save_file(tensors, str(out), metadata=metadata)
    return out


def _old_name(name: str) -> str:
    return "generator." + name.removeprefix("output_projection.") if name.startswith("output_projection.") else name


def _assert_same_weights(a: torch.nn.Module, b: torch.nn.Module) -> None:
    state, again = a.state_dict(), b.state_dict()
    assert state.keys() == again.keys()
    for key in state:
        assert torch.equal(state[key], again[key]), key


@pytest.mark.parametrize("tie", [False, True])
def test_checkpoint_round_trip_is_exact(tmp_path, tie):
    model, vocab = _model_and_vocabs(tie)
    path = save_checkpoint(tmp_path / "m.safetensors", model, vocab, vocab, {"note": "hello", "steps": 3})
    loaded = load_checkpoint(path)
    assert loaded.config == model.config
    assert loaded.src_vocab == vocab and loaded.tgt_vocab == vocab
    assert loaded.extra == {"note": "hello", "steps": 3}
    assert not loaded.model.training
    _assert_same_weights(model, loaded.model)
    if tie:
        assert loaded.model.output_projection.weight is loaded.model.tgt_embedding.embedding.weight
        assert loaded.model.src_embedding is loaded.model.tgt_embedding
    src, tgt = torch.randint(4, 10, (2, 5)), torch.randint(4, 10, (2, 4))
    with torch.no_grad():
        assert torch.equal(model(src, tgt), loaded.model(src, tgt))


def test_checkpoint_into_a_given_model_checks_the_config(tmp_path):
    model, vocab = _model_and_vocabs()
    path = save_checkpoint(tmp_path / "m.safetensors", model, vocab, vocab)
    same = Transformer(model.config)
    load_checkpoint(path, model=same)
    assert torch.equal(same.output_projection.weight, model.output_projection.weight)
    other = Transformer(model.config.replace(d_ff=48))
    with pytest.raises(CheckpointError, match="d_ff: 32 vs 48"):
        load_checkpoint(path, model=other)


@pytest.mark.parametrize("tie", [False, True])
def test_a_checkpoint_with_the_old_generator_names_loads(tmp_path, tie):
    model, vocab = _model_and_vocabs(tie)
    path = save_checkpoint(tmp_path / "m.safetensors", model, vocab, vocab)
    old = _rewrite(path, tmp_path / "old.safetensors", rename=_old_name)
    with safe_open(str(old), framework="pt") as f:
        names = set(f.keys())
    assert "generator.weight" in names and not any(n.startswith("output_projection.") for n in names)
    _assert_same_weights(model, load_checkpoint(old).model)
    into = Transformer(model.config)
    load_checkpoint(old, model=into)
    _assert_same_weights(model, into)
    if tie:
        assert into.output_projection.weight is into.tgt_embedding.embedding.weight


def test_a_config_without_the_newer_fields_loads_with_their_defaults(tmp_path):
    model, vocab = _model_and_vocabs()
    path = save_checkpoint(tmp_path / "m.safetensors", model, vocab, vocab)
    old = _rewrite(
        path, tmp_path / "old.safetensors", config=lambda c: {k: v for k, v in c.items() if k not in NEW_FIELDS}
    )
    with safe_open(str(old), framework="pt") as f:
        assert not set(NEW_FIELDS) & set(json.loads(f.metadata()["config"]))
    loaded = load_checkpoint(old)
    assert loaded.config == model.config
    _assert_same_weights(model, loaded.model)
    load_checkpoint(old, model=Transformer(model.config))  # no difference reported for the defaults
    changed = Transformer(model.config.replace(bias=False))
    with pytest.raises(CheckpointError, match=r"saved for a different model .*bias: True vs False"):
        load_checkpoint(old, model=changed)


def test_a_config_with_the_old_field_names_loads(tmp_path):
    model, vocab = _model_and_vocabs()
    model = Transformer(model.config.replace(norm_eps=1e-6, positional="none", rope=True)).eval()
    path = save_checkpoint(tmp_path / "m.safetensors", model, vocab, vocab)

    def old_names(config: dict) -> dict:
        config = {k: v for k, v in config.items() if k != "rope"}
        config["layer_norm_eps"] = config.pop("norm_eps")
        config["positional"] = "rope"  # rotary positions were once a kind of positional encoding
        return config

    old = _rewrite(path, tmp_path / "old.safetensors", config=old_names)
    with safe_open(str(old), framework="pt") as f:
        stored = json.loads(f.metadata()["config"])
    assert "norm_eps" not in stored and (stored["layer_norm_eps"], stored["positional"]) == (1e-6, "rope")
    loaded = load_checkpoint(old)
    assert loaded.config == model.config
    _assert_same_weights(model, loaded.model)
    broken = _rewrite(path, tmp_path / "broken.safetensors", config=lambda c: {**c, "heads": 3})
    with pytest.raises(CheckpointError, match=r"broken metadata .*unknown TransformerConfig fields \['heads'\]"):
        load_checkpoint(broken)


def test_config_differences_name_only_the_fields_that_differ():
    model, _ = _model_and_vocabs()
    config = model.config
    assert _config_differences(config, config.replace()) == []
    assert _config_differences(config, config.replace(norm="rms", d_ff=48)) == [
        "d_ff: 32 vs 48",
        "norm: 'layer' vs 'rms'",
    ]


def test_corrupt_or_foreign_checkpoints_give_clear_errors(tmp_path):
    model, vocab = _model_and_vocabs()
    path = save_checkpoint(tmp_path / "m.safetensors", model, vocab, vocab)
    with pytest.raises(CheckpointError, match="no checkpoint file"):
        load_checkpoint(tmp_path / "missing.safetensors")
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(path.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="not a readable"):
        load_checkpoint(truncated)
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"this is not a checkpoint at all")
    with pytest.raises(CheckpointError, match="not a readable"):
        load_checkpoint(garbage)
    foreign = tmp_path / "foreign.safetensors"
    save_file({"w": torch.zeros(2)}, str(foreign))
    with pytest.raises(CheckpointError, match="not a transformer-course checkpoint"):
        load_checkpoint(foreign)
    # right metadata, wrong weights: a checkpoint whose tensors do not match its config
    with safe_open(str(path), framework="pt") as f:
        metadata = f.metadata()
    for weights in ({"generator.weight": torch.zeros(3, 3)}, {"output_projection.weight": torch.zeros(3, 3)}):
        bad = tmp_path / "bad.safetensors"
        save_file(weights, str(bad), metadata=metadata)
        with pytest.raises(CheckpointError, match="do not fit its config"):
            load_checkpoint(bad)
    # every weight present but one extra tensor: also refused
    with safe_open(str(path), framework="pt") as f:
        tensors = {name: f.get_tensor(name) for name in f.keys()}
    extra = tmp_path / "extra.safetensors"
    save_file({**tensors, "surplus.weight": torch.zeros(2)}, str(extra), metadata=metadata)
    with pytest.raises(CheckpointError, match="unexpected weights \\['surplus.weight'\\]"):
        load_checkpoint(extra)
    assert issubclass(CheckpointError, ValueError)


def test_save_checkpoint_checks_the_vocabularies(tmp_path):
    model, vocab = _model_and_vocabs()
    with pytest.raises(ValueError, match="vocabularies"):
        save_checkpoint(tmp_path / "m.safetensors", model, Vocabulary("ab"), vocab)


def test_the_builder_renames_old_weight_names_keeping_tensors_and_metadata(tmp_path):
    from tools.build_checkpoints import rename_weights

    model, vocab = _model_and_vocabs()
    path = save_checkpoint(tmp_path / "m.safetensors", model, vocab, vocab, {"note": "x"})
    old = _rewrite(path, tmp_path / "old.safetensors", rename=_old_name)
    assert rename_weights(old)
    with safe_open(str(old), framework="pt") as a, safe_open(str(path), framework="pt") as b:
        assert a.metadata() == b.metadata()
        assert set(a.keys()) == set(b.keys())
        for name in b.keys():
            assert torch.equal(a.get_tensor(name), b.get_tensor(name)), name
    assert not rename_weights(old)  # nothing left to rename

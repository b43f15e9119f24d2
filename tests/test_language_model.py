"""language_model.py: the LM config builds the one DecoderLM through the block presets, the shipped model loads
from its old weight names with the logits it had before, and broken files are clear errors."""

from __future__ import annotations

import copy

import pytest
import torch
from safetensors import safe_open

from transformer_course.core.decoding import generate
from transformer_course.families.decoder_lm import DecoderLM, gpt2_block_config, llama_block_config
from transformer_course.families.language_model import (
    RENAMED_WEIGHTS,
    SHIPPED_LANGUAGE_MODEL,
    LMConfig,
    build_language_model,
    load_language_model,
    load_shipped_language_model,
)

# computed from the shipped file before DecoderLM replaced the class that saved it (float64, so no CPU differs)
PROMPT = [[70, 238, 147, 309, 196, 28, 273, 284]]  # "def main():\n    return"
ARGMAX = [291, 328, 71, 190, 14, 1, 2, 2]
LAST_LOGITS = [-15.987, 4.7109, 7.3811, -1.1271, -1.6068, -0.0395]  # position 7, tokens 0..5
POSITION_3_LOGITS = [-3.9433, -4.2611, -3.2259, -4.4661, -3.2927, -1.148]  # tokens 100..105
GREEDY = [2, 231, 70, 75, 142, 231, 16, 231, 70, 75, 142, 231, 16, 231, 231, 231, 231, 231, 231, 231]


@pytest.fixture(scope="module")
def shipped():
    return load_shipped_language_model()


def test_lm_config_builds_the_one_class_through_the_presets():
    gpt2 = build_language_model(LMConfig(style="gpt2", d_model=32, num_heads=4, context=16), 50)
    llama = build_language_model(LMConfig(style="llama", d_model=32, num_heads=4, num_kv_heads=2, context=16), 50)
    assert type(gpt2) is DecoderLM and type(llama) is DecoderLM
    assert gpt2.config == gpt2_block_config(32, 4, max_len=16)
    assert llama.config == llama_block_config(32, 4, 2, max_len=16)
    assert gpt2.max_len == llama.max_len == 16  # from the config, nothing patched on afterwards
    assert gpt2.head is None and llama.head is None  # both tie the output layer to the embedding


def test_the_shipped_file_has_the_old_weight_names(shipped):
    with safe_open(str(SHIPPED_LANGUAGE_MODEL), framework="pt") as handle:
        names = set(handle.keys())
    assert "embedding.weight" in names and "decoder.norm.weight" in names
    model = shipped[0]
    renamed = {
        next((new + n[len(old) :] for old, new in RENAMED_WEIGHTS.items() if n.startswith(old)), n) for n in names
    }
    assert renamed == set(model.state_dict())


def test_the_shipped_model_gives_the_logits_it_gave_before(shipped):
    model, tokenizer, config, _ = shipped
    assert type(model) is DecoderLM and not model.training and model.max_len == config.context == 320
    assert tokenizer.encode("def main():\n    return") == PROMPT[0]
    model64 = copy.deepcopy(model).double()
    ids = torch.tensor(PROMPT)
    with torch.no_grad():
        logits = model64(ids)
    assert logits[0].argmax(-1).tolist() == ARGMAX
    torch.testing.assert_close(logits[0, -1, :6], torch.tensor(LAST_LOGITS, dtype=torch.float64), atol=1e-4, rtol=0)
    torch.testing.assert_close(
        logits[0, 3, 100:106], torch.tensor(POSITION_3_LOGITS, dtype=torch.float64), atol=1e-4, rtol=0
    )
    for use_cache in (False, True):
        assert generate(model64, ids, 20, greedy=True, use_cache=use_cache)[0, 8:].tolist() == GREEDY


def test_a_truncated_or_garbled_file_is_a_clear_value_error(tmp_path):
    data = SHIPPED_LANGUAGE_MODEL.read_bytes()
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(data[: len(data) // 2])
    garbled = tmp_path / "random.safetensors"
    garbled.write_bytes(torch.randint(0, 256, (4096,), generator=torch.Generator().manual_seed(0)).byte().numpy())
    header_only = tmp_path / "header.safetensors"
    header_only.write_bytes(data[:100])
    for path in (truncated, garbled, header_only):
        with pytest.raises(ValueError, match="is not a readable safetensors file"):
            load_language_model(path)


def test_weights_that_do_not_fit_the_config_are_a_clear_value_error(tmp_path):
    from safetensors.torch import save_file

    with safe_open(str(SHIPPED_LANGUAGE_MODEL), framework="pt") as handle:
        metadata = handle.metadata()
        tensors = {name: handle.get_tensor(name) for name in handle.keys()}
    missing = dict(tensors)
    del missing["decoder.norm.weight"]
    save_file(missing, str(tmp_path / "missing.safetensors"), metadata=metadata)
    with pytest.raises(ValueError, match=r"(?s)do not fit its config .*decoder\.norm\.weight"):
        load_language_model(tmp_path / "missing.safetensors")
    save_file(tensors, str(tmp_path / "no_format.safetensors"), metadata={**metadata, "format": "other"})
    with pytest.raises(ValueError, match="is not a language model saved by save_language_model"):
        load_language_model(tmp_path / "no_format.safetensors")
    save_file(tensors, str(tmp_path / "no_config.safetensors"), metadata={"format": metadata["format"]})
    with pytest.raises(ValueError, match="broken metadata"):
        load_language_model(tmp_path / "no_config.safetensors")

"""all-MiniLM-L6-v2 in the course's own encoder: equal to sentence-transformers, and a loader that refuses
checkpoints that do not fit."""

from __future__ import annotations

import os

# The reference library must read the local folder only, never the network; set before anything imports it.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import pytest
import torch
import torch.nn.functional as F

from transformer_course import TokenEmbedding
from transformer_course.core.attention import attention_maps
from transformer_course.families.pretrained import (
    UNUSED_CHECKPOINT_TENSORS,
    BertConfig,
    BertEncoder,
    CheckpointMismatchError,
    SentenceEncoder,
    checkpoint_name_map,
    default_model_folder,
    l2_normalize,
    layer_name_map,
    load_bert_weights,
    map_checkpoint,
    mean_pool,
    read_checkpoint,
)
from transformer_course.language import set_language
from transformer_course.text.wordpiece import WordPieceTokenizer

SENTENCES = [
    "Hi.",
    "The quick brown fox jumps over the lazy dog, then naps beside the riverbank until the sun goes down.",
    "Transformers replace recurrence with self-attention.",
    "Tokenization splits unbelievably rare words into wordpieces.",
    "我喜欢学习。",
]
SMALL = BertConfig(vocab_size=50, d_model=16, num_heads=4, num_layers=2, d_ff=32, max_len=20, dropout=0.0)


@pytest.fixture(scope="module")
def folder():
    return default_model_folder()


@pytest.fixture(scope="module")
def encoder(folder):
    return SentenceEncoder.from_folder(folder)


@pytest.fixture(scope="module")
def checkpoint(folder):
    return read_checkpoint(folder)


@pytest.fixture(scope="module")
def reference(folder):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), device="cpu")


# ------------------------------------------------------------------------------------- equal to the reference
def test_sentence_embeddings_equal_sentence_transformers(encoder, reference):
    batch = encoder.tokenize(SENTENCES)
    lengths = batch["attention_mask"].sum(1)
    assert len(set(lengths.tolist())) == len(SENTENCES), "the test needs sentences of different lengths"
    assert (batch["attention_mask"] == 0).any(), "the test needs padding in the batch"
    with torch.inference_mode():
        ours = encoder(SENTENCES)  # one padded batch
    theirs = reference.encode(SENTENCES, batch_size=len(SENTENCES), convert_to_tensor=True).cpu()
    assert ours.shape == theirs.shape == (len(SENTENCES), 384)
    assert (ours - theirs).abs().max().item() <= 1e-5


def test_token_vectors_equal_sentence_transformers(encoder, reference):
    sentence = [SENTENCES[1]]
    with torch.inference_mode():
        ours, _ = encoder.token_states(sentence)
    theirs = reference.encode(sentence, output_value="token_embeddings")[0].cpu()
    assert ours[0].shape == theirs.shape
    assert (ours[0] - theirs).abs().max().item() <= 1e-4


def test_padding_does_not_change_a_sentence_vector(encoder):
    with torch.inference_mode():
        alone = encoder([SENTENCES[0]])
        in_batch = encoder(SENTENCES)[:1]
    torch.testing.assert_close(alone, in_batch, atol=1e-5, rtol=0)


def test_encode_batches_agree_and_rows_are_unit_vectors(encoder):
    whole = encoder.encode(SENTENCES)
    pieces = encoder.encode(SENTENCES, batch_size=2)
    torch.testing.assert_close(whole, pieces, atol=1e-5, rtol=0)
    torch.testing.assert_close(whole.norm(dim=1), torch.ones(len(SENTENCES)))


def test_the_same_word_gets_different_vectors_in_different_contexts(encoder):
    sentences = ["She sat on the bank of the river.", "She paid the cheque into the bank."]
    with torch.inference_mode():
        states, batch = encoder.token_states(sentences)
    bank = encoder.tokenizer.tokenizer.token_to_id("bank")
    first, second = (states[i][batch["input_ids"][i] == bank][0] for i in range(2))
    assert F.cosine_similarity(first, second, dim=0) < 0.9


# ----------------------------------------------------------------------------------------------- the loader
def test_name_map_covers_exactly_our_tensors():
    model = BertEncoder(SMALL)
    assert set(checkpoint_name_map(SMALL.num_layers).values()) == set(model.state_dict())
    assert len(layer_name_map(0)) == 16


def test_the_real_checkpoint_fits_exactly(checkpoint):
    model = BertEncoder(BertConfig())
    names = checkpoint_name_map(6)
    assert set(checkpoint) == set(names) | set(UNUSED_CHECKPOINT_TENSORS)
    mapped = map_checkpoint(checkpoint, model)
    assert set(mapped) == set(model.state_dict())


def _small_checkpoint() -> dict[str, torch.Tensor]:
    source = BertEncoder(SMALL).state_dict()
    return {theirs: source[ours].clone() for theirs, ours in checkpoint_name_map(SMALL.num_layers).items()}


def test_loader_copies_every_tensor():
    checkpoint = _small_checkpoint()
    model = load_bert_weights(BertEncoder(SMALL), checkpoint)
    state = model.state_dict()
    for theirs, ours in checkpoint_name_map(SMALL.num_layers).items():
        torch.testing.assert_close(state[ours], checkpoint[theirs], atol=0, rtol=0)


def _unchanged_after_failure(checkpoint) -> str:
    model = BertEncoder(SMALL)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(CheckpointMismatchError) as info:
        load_bert_weights(model, checkpoint)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), "a failed load must not copy anything"
    assert isinstance(info.value, ValueError)
    return str(info.value)


def test_loader_names_a_missing_tensor():
    checkpoint = _small_checkpoint()
    del checkpoint["encoder.layer.1.output.LayerNorm.bias"]
    message = _unchanged_after_failure(checkpoint)
    assert "missing" in message and "encoder.layer.1.output.LayerNorm.bias" in message
    assert "encoder.layers.1.feed_forward_residual.norm.bias" in message


def test_loader_names_a_left_over_tensor():
    checkpoint = _small_checkpoint()
    checkpoint["encoder.layer.2.output.dense.weight"] = torch.zeros(16, 32)  # a third layer our model lacks
    message = _unchanged_after_failure(checkpoint)
    assert "left-over" in message and "encoder.layer.2.output.dense.weight" in message


def test_loader_names_a_wrong_shape():
    checkpoint = _small_checkpoint()
    checkpoint["encoder.layer.0.intermediate.dense.weight"] = torch.zeros(64, 16)
    message = _unchanged_after_failure(checkpoint)
    assert "shape mismatch" in message and "encoder.layer.0.intermediate.dense.weight" in message
    assert "(64, 16)" in message and "(32, 16)" in message


def test_loader_speaks_chinese_after_set_language_zh():
    checkpoint = _small_checkpoint()
    del checkpoint["encoder.layer.1.output.LayerNorm.bias"]
    set_language("zh")
    try:
        message = _unchanged_after_failure(checkpoint)
    finally:
        set_language("en")
    assert message.startswith("缺少张量：检查点中没有 'encoder.layer.1.output.LayerNorm.bias'")
    assert "encoder.layers.1.feed_forward_residual.norm.bias" in message


def test_loader_names_the_first_mismatch_in_our_order():
    checkpoint = _small_checkpoint()
    del checkpoint["encoder.layer.1.attention.self.key.weight"]
    del checkpoint["embeddings.LayerNorm.weight"]
    message = _unchanged_after_failure(checkpoint)
    assert "embeddings.LayerNorm.weight" in message and "key" not in message


def test_loader_accepts_the_listed_unused_tensors():
    checkpoint = _small_checkpoint()
    checkpoint["pooler.dense.weight"] = torch.zeros(16, 16)
    checkpoint["pooler.dense.bias"] = torch.zeros(16)
    model = load_bert_weights(BertEncoder(SMALL), checkpoint)
    mapped = checkpoint_name_map(SMALL.num_layers)
    for theirs, ours in mapped.items():  # every used tensor arrived; the pooler was left out, not loaded
        assert torch.equal(model.state_dict()[ours], checkpoint[theirs]), ours
    assert not any("pooler" in name for name in model.state_dict())


def test_name_maps_reject_bad_arguments():
    with pytest.raises(ValueError, match="num_layers"):
        checkpoint_name_map(-1)
    with pytest.raises(ValueError, match="index"):
        layer_name_map(-2)


def test_read_checkpoint_needs_the_file(tmp_path):
    with pytest.raises(ValueError, match="model.safetensors"):
        read_checkpoint(tmp_path)


# ---------------------------------------------------------------------------------------------- the config
def test_config_from_the_real_folder(folder):
    config = BertConfig.from_json(folder)
    assert (config.d_model, config.num_heads, config.num_layers, config.d_ff) == (384, 12, 6, 1536)
    assert (config.vocab_size, config.max_len, config.type_vocab_size) == (30522, 512, 2)
    assert config.layer_norm_eps == 1e-12 and config.activation == "gelu"


def test_config_refuses_what_the_encoder_cannot_run(tmp_path):
    with pytest.raises(ValueError, match="position_embedding_type"):
        BertConfig.from_dict({"position_embedding_type": "relative_key"})
    with pytest.raises(ValueError, match="hidden_act"):
        BertConfig.from_dict({"hidden_act": "gelu_new"})
    with pytest.raises(ValueError, match="divisible"):
        BertConfig(d_model=10, num_heads=3)
    with pytest.raises(ValueError, match="config.json"):
        BertConfig.from_json(tmp_path)


# -------------------------------------------------------------------------------------- the model's pieces
def test_token_embedding_scale_option_keeps_the_default():
    torch.manual_seed(0)
    scaled = TokenEmbedding(10, 4)
    plain = TokenEmbedding(10, 4, scale=False)
    plain.load_state_dict(scaled.state_dict())
    ids = torch.tensor([[1, 2, 3]])
    torch.testing.assert_close(scaled(ids), plain(ids) * 2.0)
    torch.testing.assert_close(plain(ids), plain.weight[ids])


def test_bert_embeddings_are_the_norm_of_a_sum():
    torch.manual_seed(0)
    layer = BertEncoder(SMALL).embeddings.eval()
    ids = torch.tensor([[3, 7, 9, 0], [5, 5, 1, 2]])
    types = torch.tensor([[0, 0, 1, 1], [0, 1, 1, 1]])
    by_hand = (
        layer.token.weight[ids] + layer.position.embedding.weight[:4] + layer.token_type.weight[types]
    )  # (2, 4, d_model)
    by_hand = F.layer_norm(by_hand, (SMALL.d_model,), layer.norm.weight, layer.norm.bias, SMALL.layer_norm_eps)
    torch.testing.assert_close(layer(ids, types), by_hand)


def test_bert_embeddings_reject_bad_token_types():
    layer = BertEncoder(SMALL).embeddings
    ids = torch.tensor([[1, 2]])
    with pytest.raises(ValueError, match="token_type_ids must be in"):
        layer(ids, torch.tensor([[0, 2]]))
    with pytest.raises(ValueError, match="shape of input_ids"):
        layer(ids, torch.tensor([[0]]))


def test_encoder_rejects_bad_input():
    model = BertEncoder(SMALL)
    with pytest.raises(ValueError, match="batch, len"):
        model(torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="max_len=20"):
        model(torch.ones(1, 21, dtype=torch.long))
    with pytest.raises(ValueError, match="attention_mask"):
        model(torch.ones(1, 3, dtype=torch.long), torch.ones(1, 4))


def test_encoder_ignores_padded_keys():
    torch.manual_seed(0)
    model = BertEncoder(SMALL).eval()
    ids = torch.tensor([[4, 8, 15, 16]])
    padded = torch.tensor([[4, 8, 15, 16, 0, 0]])
    torch.testing.assert_close(model(padded)[:, :4], model(ids), atol=1e-5, rtol=0)


def test_attention_maps_shape_and_rows(encoder):
    with pytest.raises(ValueError, match="has not run"):
        attention_maps(BertEncoder(SMALL))
    with torch.inference_mode():
        _, batch = encoder.token_states(SENTENCES[:2])
    maps = attention_maps(encoder.model)
    length = batch["input_ids"].shape[1]
    assert maps.shape == (6, 2, 12, length, length)
    torch.testing.assert_close(maps.sum(-1), torch.ones(6, 2, 12, length))
    real = batch["attention_mask"][0].bool()
    assert maps[:, 0][..., ~real].abs().max() == 0  # nobody attends to padding


# --------------------------------------------------------------------------------------- pooling, tokenizer
def test_mean_pool_leaves_out_padding():
    states = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    mask = torch.tensor([[1, 1, 0], [0, 0, 0]])
    pooled = mean_pool(states, mask)
    torch.testing.assert_close(pooled[0], states[0, :2].mean(0))
    torch.testing.assert_close(pooled[1], torch.zeros(4))  # no real token: zeros, not NaN
    with pytest.raises(ValueError, match="attention_mask"):
        mean_pool(states, mask[:, :2])


def test_l2_normalize():
    x = torch.tensor([[3.0, 4.0], [0.0, 0.0]])
    torch.testing.assert_close(l2_normalize(x), torch.tensor([[0.6, 0.8], [0.0, 0.0]]))


def test_tokenizer_special_tokens_pairs_and_truncation(folder):
    tokenizer = WordPieceTokenizer(folder, max_len=8)
    assert tokenizer.tokens("Hello world")[0] == "[CLS]" and tokenizer.tokens("Hello world")[-1] == "[SEP]"
    batch = tokenizer([("A cat.", "It sleeps."), "Only one sentence here, and a long one at that."])
    assert batch["input_ids"].shape == (2, 8)
    assert batch["token_type_ids"][0].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert batch["token_type_ids"][1].sum() == 0
    with pytest.raises(ValueError, match="non-empty list"):
        tokenizer("a string, not a list")
    with pytest.raises(ValueError, match="each item"):
        tokenizer(["fine", 3])
    with pytest.raises(ValueError, match="max_len"):
        WordPieceTokenizer(folder, max_len=1)


def test_sentence_encoder_needs_a_folder(tmp_path):
    with pytest.raises(ValueError, match="directory"):
        SentenceEncoder.from_folder(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="config.json"):
        SentenceEncoder.from_folder(tmp_path)


def test_encode_rejects_bad_arguments(encoder):
    with pytest.raises(ValueError, match="batch_size"):
        encoder.encode(["a"], batch_size=0)
    with pytest.raises(ValueError, match="non-empty list"):
        encoder.encode("a")

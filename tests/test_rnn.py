"""The hand-built recurrent cells equal PyTorch's, BPTT by hand equals autograd, and the helpers of
notebook 01 (long-range task, receptive fields) do what they say."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from transformer_course.prelude.rnn import (
    NONLINEARITIES,
    AttentionClassifier,
    LSTMCell,
    RecurrentClassifier,
    RNNCell,
    autograd_state_jacobians,
    chain_jacobians,
    conv_layers_to_connect,
    recall_batch,
    receptive_field,
    rnn_step_jacobians,
    scaled_recurrent_weight,
    spectral_norms,
    train_recall,
    unroll,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def test_rnn_cell_equals_torch_with_copied_weights():
    torch.manual_seed(0)
    for nonlinearity in ("tanh", "relu"):
        ours = RNNCell(5, 7, nonlinearity)
        theirs = nn.RNNCell(5, 7, nonlinearity=nonlinearity)
        theirs.load_state_dict(ours.state_dict())
        x, h = torch.randn(3, 5), torch.randn(3, 7)
        torch.testing.assert_close(ours(x, h), theirs(x, h))
        torch.testing.assert_close(ours(x), theirs(x))  # h = None means zeros in both


def test_lstm_cell_equals_torch_with_copied_weights_and_has_four_times_the_parameters():
    torch.manual_seed(0)
    ours, theirs = LSTMCell(5, 7), nn.LSTMCell(5, 7)
    theirs.load_state_dict(ours.state_dict())
    x, state = torch.randn(3, 5), (torch.randn(3, 7), torch.randn(3, 7))
    for a, b in zip(ours(x, state), theirs(x, state)):
        torch.testing.assert_close(a, b)
    rnn_params = sum(p.numel() for p in RNNCell(5, 7).parameters())
    assert sum(p.numel() for p in ours.parameters()) == 4 * rnn_params


def test_unroll_equals_torch_rnn_and_lstm():
    torch.manual_seed(1)
    x = torch.randn(2, 9, 4)
    cell, net = RNNCell(4, 6), nn.RNN(4, 6, batch_first=True)
    net.load_state_dict({f"{k}_l0": v for k, v in cell.state_dict().items()})
    states, last = unroll(cell, x)
    torch.testing.assert_close(states, net(x)[0])
    torch.testing.assert_close(last, states[:, -1])
    cell, net = LSTMCell(4, 6), nn.LSTM(4, 6, batch_first=True)
    net.load_state_dict({f"{k}_l0": v for k, v in cell.state_dict().items()})
    states, (h, c) = unroll(cell, x)
    out, (h_t, c_t) = net(x)
    torch.testing.assert_close(states, out)
    torch.testing.assert_close(c, c_t[0])


def test_gates_are_in_torch_order_and_forget_bias_opens_the_forget_gate():
    cell = LSTMCell(3, 4)
    cell.set_forget_bias(20.0)
    gates = cell.gates(torch.zeros(2, 3))
    assert set(gates) == {"i", "f", "g", "o"}
    assert torch.allclose(gates["f"], torch.ones(2, 4))
    theirs = nn.LSTMCell(3, 4)
    theirs.load_state_dict(cell.state_dict())
    c0 = torch.randn(2, 4)
    _, c = theirs(torch.zeros(2, 3), (torch.zeros(2, 4), c0))
    torch.testing.assert_close(c, c0 + gates["i"] * gates["g"])  # f = 1 keeps c0 whole


@pytest.mark.parametrize("nonlinearity", NONLINEARITIES)
def test_product_of_jacobians_equals_autograd(nonlinearity):
    torch.manual_seed(2)
    cell = RNNCell(3, 5, nonlinearity).double()
    x = torch.randn(2, 8, 3, dtype=torch.float64)
    h0 = torch.randn(2, 5, dtype=torch.float64)
    states, jacobians = rnn_step_jacobians(cell, x, h0)
    assert jacobians.shape == (2, 8, 5, 5)
    by_hand = chain_jacobians(jacobians)
    assert by_hand.shape == (2, 9, 5, 5)
    torch.testing.assert_close(by_hand[:, -1], torch.eye(5, dtype=torch.float64).expand(2, 5, 5))
    torch.testing.assert_close(by_hand, autograd_state_jacobians(cell, x, h0))


def test_linear_rnn_with_scaled_orthogonal_weight_decays_exactly_as_a_power():
    g = torch.Generator().manual_seed(3)
    W = scaled_recurrent_weight(6, 0.8, g).double()
    torch.testing.assert_close(torch.linalg.svdvals(W), torch.full((6,), 0.8, dtype=torch.float64), rtol=1e-5, atol=0)
    cell = RNNCell(2, 6, "identity").double()
    with torch.no_grad():
        cell.weight_hh.copy_(W)
    _, jacobians = rnn_step_jacobians(cell, torch.randn(1, 10, 2, dtype=torch.float64))
    norms = spectral_norms(chain_jacobians(jacobians))[0]
    expected = torch.tensor([0.8 ** (10 - k) for k in range(11)], dtype=torch.float64)
    torch.testing.assert_close(norms, expected, rtol=1e-5, atol=0)  # W is orthogonal to float32 precision


def test_lstm_cell_state_jacobian_is_the_product_of_forget_gates_without_recurrent_weights():
    torch.manual_seed(4)
    cell = LSTMCell(3, 4).double()
    with torch.no_grad():
        cell.weight_hh.zero_()  # no path through h: only the direct path c_{t-1} -> c_t remains
    x = torch.randn(1, 6, 3, dtype=torch.float64)
    jac = autograd_state_jacobians(cell, x, which="c")
    forget = torch.stack([cell.gates(x[:, t])["f"][0] for t in range(6)])  # (T, hidden)
    for k in range(7):
        torch.testing.assert_close(jac[0, k], torch.diag(forget[k:].prod(0)))


def test_autograd_jacobians_work_for_torch_cells_and_reject_bad_requests():
    torch.manual_seed(5)
    x = torch.randn(1, 4, 3)
    out = autograd_state_jacobians(nn.LSTMCell(3, 2), x, which="h")
    assert out.shape == (1, 5, 2, 2)
    with pytest.raises(ValueError, match="which"):
        autograd_state_jacobians(RNNCell(3, 2), x, which="c")
    with pytest.raises(ValueError, match="RNNCell"):
        rnn_step_jacobians(nn.RNNCell(3, 2), x)


def test_recall_batch_targets_the_first_token():
    g = torch.Generator().manual_seed(0)
    tokens, targets = recall_batch(16, 7, 5, g)
    assert tokens.shape == (16, 8)
    assert torch.equal(targets, tokens[:, 0])
    assert int(tokens.min()) >= 0 and int(tokens.max()) < 5


def test_models_give_logits_and_attention_learns_a_long_recall_quickly():
    torch.manual_seed(0)
    tokens, _ = recall_batch(3, 12, 6)
    for model in (RecurrentClassifier("rnn", 6, 8, 6), RecurrentClassifier("lstm", 6, 8, 6, forget_bias=2.0)):
        assert model(tokens).shape == (3, 6)
    model = AttentionClassifier(6, 16, 6, max_len=41)
    accuracy, losses = train_recall(model, 40, 6, steps=100, lr=1e-2)
    assert len(losses) == 100
    assert accuracy > 0.9


def test_train_recall_is_adam_with_clipping_at_norm_1():
    """The numbers of the plain loop train_recall was before it went through the one training loop."""
    torch.manual_seed(0)
    model = RecurrentClassifier("lstm", 5, 8, 5, forget_bias=1.0)
    by_hand = RecurrentClassifier("lstm", 5, 8, 5)
    by_hand.load_state_dict(model.state_dict())
    accuracy, losses = train_recall(model, 6, 5, steps=5, batch_size=16, lr=1e-2, eval_size=50, seed=4)
    g = torch.Generator().manual_seed(4)
    optimizer = torch.optim.Adam(by_hand.parameters(), lr=1e-2)
    expected = []
    for _ in range(5):
        tokens, targets = recall_batch(16, 6, 5, g)
        loss = torch.nn.functional.cross_entropy(by_hand(tokens), targets)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(by_hand.parameters(), 1.0)
        optimizer.step()
        expected.append(loss.item())
    assert losses == expected and not model.training
    for a, b in zip(model.parameters(), by_hand.parameters()):
        assert torch.equal(a, b)
    tokens, targets = recall_batch(50, 6, 5, g)  # the evaluation draws after the training batches
    with torch.no_grad():
        assert accuracy == (by_hand(tokens).argmax(-1) == targets).float().mean().item()


def test_recurrent_classifier_forget_bias_lands_in_the_forget_rows():
    model = RecurrentClassifier("lstm", 4, 3, 4, forget_bias=2.5)
    assert torch.all(model.recurrent.bias_ih_l0[3:6] == 2.5)
    assert torch.all(model.recurrent.bias_hh_l0[3:6] == 0.0)


def test_receptive_field_matches_a_real_convolution_stack():
    torch.manual_seed(6)
    n = 23
    for dilated in (False, True):
        needed = conv_layers_to_connect(n, 3, dilated)
        for layers, connected in ((needed, True), (needed - 1, False)):
            dilations = [2**i if dilated else 1 for i in range(layers)]
            # causal: pad on the left only, so each output looks back (kernel_size - 1) * dilation positions
            convs = nn.Sequential(
                *[nn.Sequential(nn.ConstantPad1d((2 * d, 0), 0.0), nn.Conv1d(1, 1, 3)) for d in dilations]
            )
            x = torch.randn(1, 1, n, requires_grad=True)
            convs(x)[0, 0, n - 1].backward()
            assert (x.grad[0, 0, 0] != 0).item() is connected, (dilated, layers)
    assert receptive_field(4, 3) == 9 and receptive_field(4, 3, dilated=True) == 31
    assert [conv_layers_to_connect(n) for n in (1, 2, 3, 4, 5)] == [0, 1, 1, 2, 2]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: RNNCell(0, 3), "input_size"),
        (lambda: RNNCell(2, 3, "sigmoid"), "nonlinearity"),
        (lambda: LSTMCell(2, -1), "hidden_size"),
        (lambda: RNNCell(2, 3)(torch.zeros(4, 5)), r"\(batch, 2\)"),
        (lambda: LSTMCell(2, 3)(torch.zeros(4, 2), (torch.zeros(4, 3), torch.zeros(4, 7))), "c must"),
        (lambda: LSTMCell(2, 3, bias=False).set_forget_bias(1.0), "bias=False"),
        (lambda: unroll(RNNCell(2, 3), torch.zeros(4, 2)), "batch, len, input"),
        (lambda: chain_jacobians(torch.zeros(2, 3, 4)), "jacobians"),
        (lambda: recall_batch(4, 0, 5), "distance"),
        (lambda: recall_batch(4, 3, 1), "num_symbols"),
        (lambda: RecurrentClassifier("gru", 4, 4, 4), "kind"),
        (lambda: RecurrentClassifier("rnn", 4, 4, 4, forget_bias=1.0), "forget_bias"),
        (lambda: receptive_field(-1), "num_layers"),
        (lambda: receptive_field(2, 1), "kernel_size"),
        (lambda: conv_layers_to_connect(0), "n must"),
        (lambda: scaled_recurrent_weight(0, 1.0), "hidden_size"),
        (lambda: train_recall(RecurrentClassifier("rnn", 4, 4, 4), 3, 4, steps=0), "steps"),
    ],
)
def test_bad_input_raises_a_clear_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()

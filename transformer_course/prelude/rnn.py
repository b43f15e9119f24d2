"""Recurrent networks written out by hand, the tools to measure their gradients, and a long-range task.

Notebook 01 uses this module to show *why* the Transformer drops recurrence:

* :class:`RNNCell` (S_t = f(U x_t + W S_{t-1} + b)) and :class:`LSTMCell` (forget, input and output gates and
  a cell state), laid out like ``nn.RNNCell`` / ``nn.LSTMCell`` so their weights can be copied across;
* :func:`unroll` runs a cell over a sequence: one step after another, which is the serial cost;
* :func:`rnn_step_jacobians` and :func:`chain_jacobians` compute dS_T/dS_k as a product of per-step
  Jacobians by hand; :func:`autograd_state_jacobians` gets the same matrices from autograd;
* :func:`recall_batch` makes the long-range task (name the token seen ``distance`` steps ago) and
  :class:`RecurrentClassifier` / :class:`AttentionClassifier` are the three small models compared on it;
* :func:`receptive_field` and :func:`conv_layers_to_connect` count what a stack of convolutions can see.

A loop over time steps appears here on purpose: a recurrent network cannot compute step t before step t-1.
Everything inside one step is batched.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .. import checks
from ..core.attention import MultiHeadAttention
from ..core.positional import LearnedPositionalEncoding
from ..training.loop import BatchLoss, constant_lr, run_training
from ..training.schedules import make_optimizer

NONLINEARITIES = ("tanh", "relu", "identity")


def _activation(name: str, a: Tensor) -> Tensor:
    if name == "tanh":
        return torch.tanh(a)
    if name == "relu":
        return torch.relu(a)
    return a


def _check_input(x: Tensor, size: int, what: str = "x") -> None:
    if x.dim() != 2 or x.shape[-1] != size:
        raise ValueError(f"{what} must have shape (batch, {size}), got {tuple(x.shape)}")


class RNNCell(nn.Module):
    """One step of a vanilla (Elman) RNN: S_t = f(U x_t + b_ih + W S_{t-1} + b_hh).

    ``weight_ih`` is U (hidden, input), ``weight_hh`` is W (hidden, hidden): the same names, shapes and
    initialisation (uniform in +-1/sqrt(hidden)) as ``nn.RNNCell``. ``nonlinearity`` is "tanh", "relu" or
    "identity" (a linear RNN, useful to see the pure product of Jacobians).
    """

    def __init__(self, input_size: int, hidden_size: int, nonlinearity: str = "tanh", bias: bool = True) -> None:
        super().__init__()
        for name, value in (("input_size", input_size), ("hidden_size", hidden_size)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if nonlinearity not in NONLINEARITIES:
            raise ValueError(f"nonlinearity must be one of {NONLINEARITIES}, got {nonlinearity!r}")
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.nonlinearity = nonlinearity
        self.weight_ih = nn.Parameter(torch.empty(hidden_size, input_size))  # U
        self.weight_hh = nn.Parameter(torch.empty(hidden_size, hidden_size))  # W
        self.bias_ih = nn.Parameter(torch.empty(hidden_size)) if bias else None
        self.bias_hh = nn.Parameter(torch.empty(hidden_size)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def init_state(self, batch: int, device: torch.device | None = None) -> Tensor:
        """S_0 = 0: (batch, hidden)."""
        w = self.weight_hh
        return torch.zeros(batch, self.hidden_size, device=device or w.device, dtype=w.dtype)

    def preactivation(self, x: Tensor, h: Tensor) -> Tensor:
        """a_t = U x_t + b_ih + W S_{t-1} + b_hh. x: (batch, input), h: (batch, hidden) -> (batch, hidden)."""
        a = x @ self.weight_ih.T + h @ self.weight_hh.T
        if self.bias_ih is not None:
            a = a + self.bias_ih + self.bias_hh
        return a

    def forward(self, x: Tensor, h: Tensor | None = None) -> Tensor:
        """x: (batch, input), h: (batch, hidden) or None (zeros) -> S_t: (batch, hidden)."""
        _check_input(x, self.input_size)
        h = self.init_state(x.shape[0], x.device) if h is None else h
        _check_input(h, self.hidden_size, "h")
        return _activation(self.nonlinearity, self.preactivation(x, h))


class LSTMCell(nn.Module):
    """One step of an LSTM, gates in PyTorch's order (input i, forget f, candidate g, output o):

        i, f, o = sigmoid(...), g = tanh(...), each (W_* h_{t-1} + U_* x_t + b_*)
        c_t = f * c_{t-1} + i * g,    h_t = o * tanh(c_t)

    ``weight_ih`` (4 hidden, input) and ``weight_hh`` (4 hidden, hidden) stack the four gates' matrices, as in
    ``nn.LSTMCell``: four times the parameters of an RNN cell of the same size.
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True) -> None:
        super().__init__()
        for name, value in (("input_size", input_size), ("hidden_size", hidden_size)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.weight_ih = nn.Parameter(torch.empty(4 * hidden_size, input_size))
        self.weight_hh = nn.Parameter(torch.empty(4 * hidden_size, hidden_size))
        self.bias_ih = nn.Parameter(torch.empty(4 * hidden_size)) if bias else None
        self.bias_hh = nn.Parameter(torch.empty(4 * hidden_size)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def set_forget_bias(self, value: float) -> None:
        """Set the forget gate's bias (b_ih + b_hh of the f rows) to ``value``; sigmoid(value) is then its
        typical opening. A positive value (1 or more) is a common start: the cell remembers by default."""
        if self.bias_ih is None:
            raise ValueError("this LSTMCell was built with bias=False, so it has no forget bias to set")
        h = self.hidden_size
        with torch.no_grad():
            self.bias_ih[h : 2 * h] = value
            self.bias_hh[h : 2 * h] = 0.0

    def init_state(self, batch: int, device: torch.device | None = None) -> tuple[Tensor, Tensor]:
        """(h_0, c_0) = zeros, each (batch, hidden)."""
        w = self.weight_hh
        zeros = torch.zeros(batch, self.hidden_size, device=device or w.device, dtype=w.dtype)
        return zeros, zeros.clone()

    def gates(self, x: Tensor, state: tuple[Tensor, Tensor] | None = None) -> dict[str, Tensor]:
        """The four gates at this step: {"i", "f", "g", "o"}, each (batch, hidden)."""
        _check_input(x, self.input_size)
        h, _ = self.init_state(x.shape[0], x.device) if state is None else state
        _check_input(h, self.hidden_size, "h")
        z = x @ self.weight_ih.T + h @ self.weight_hh.T  # (batch, 4 hidden), all gates in one product
        if self.bias_ih is not None:
            z = z + self.bias_ih + self.bias_hh
        zi, zf, zg, zo = z.chunk(4, dim=-1)
        return {"i": torch.sigmoid(zi), "f": torch.sigmoid(zf), "g": torch.tanh(zg), "o": torch.sigmoid(zo)}

    def forward(self, x: Tensor, state: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        """x: (batch, input), state: (h, c) each (batch, hidden), or None -> (h_t, c_t)."""
        state = self.init_state(x.shape[0], x.device) if state is None else state
        _check_input(state[1], self.hidden_size, "c")
        g = self.gates(x, state)
        c = g["f"] * state[1] + g["i"] * g["g"]  # forget part of the old memory, write part of the new
        h = g["o"] * torch.tanh(c)
        return h, c


Cell = RNNCell | LSTMCell | nn.RNNCell | nn.LSTMCell


def unroll(cell: Cell, x: Tensor, state: Tensor | tuple[Tensor, Tensor] | None = None):
    """Run ``cell`` over a sequence, one step after the other.

    x: (batch, len, input). Returns the hidden states (batch, len, hidden) and the final state (S_T for an
    RNN cell, (h_T, c_T) for an LSTM cell). Works with this module's cells and with ``nn.RNNCell`` /
    ``nn.LSTMCell``.
    """
    if x.dim() != 3:
        raise ValueError(f"x must have shape (batch, len, input), got {tuple(x.shape)}")
    if x.shape[1] < 1:
        raise ValueError("x must have at least one time step")
    outputs = []
    for t in range(x.shape[1]):  # serial: step t needs the state of step t-1
        state = cell(x[:, t], state)
        outputs.append(state[0] if isinstance(state, tuple) else state)
    return torch.stack(outputs, dim=1), state


# ------------------------------------------------------------------------------------------ BPTT, by hand
def rnn_step_jacobians(cell: RNNCell, x: Tensor, h0: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """The per-step Jacobians of an RNN, J_t = dS_t/dS_{t-1} = diag(f'(a_t)) W, for t = 1..T.

    x: (batch, T, input), h0: (batch, hidden) or None. Returns the states S_1..S_T (batch, T, hidden) and the
    Jacobians (batch, T, hidden, hidden). f' is 1 - S_t^2 for tanh, 1[a_t > 0] for relu, 1 for identity.
    """
    if not isinstance(cell, RNNCell):
        raise ValueError(f"cell must be a transformer_course.prelude.rnn.RNNCell, got {type(cell).__name__}")
    h0 = cell.init_state(x.shape[0], x.device) if h0 is None else h0
    with torch.no_grad():
        states, _ = unroll(cell, x, h0)
        previous = torch.cat([h0.unsqueeze(1), states[:, :-1]], dim=1)  # S_0..S_{T-1}
        if cell.nonlinearity == "tanh":
            slope = 1.0 - states**2
        elif cell.nonlinearity == "relu":
            slope = (cell.preactivation(x.flatten(0, 1), previous.flatten(0, 1)) > 0).float().view_as(states)
        else:
            slope = torch.ones_like(states)
        jacobians = slope.unsqueeze(-1) * cell.weight_hh  # row i of W scaled by f'(a_t)_i
    return states, jacobians


def chain_jacobians(jacobians: Tensor) -> Tensor:
    """BPTT's product of Jacobians: dS_T/dS_k = J_T J_{T-1} ... J_{k+1} for k = 0..T (the identity at k = T).

    jacobians: (batch, T, hidden, hidden) with jacobians[:, t-1] = J_t. Returns (batch, T + 1, hidden, hidden),
    entry k = dS_T/dS_k. Built from the end backwards, one matrix product per step, as backprop does.
    """
    if jacobians.dim() != 4 or jacobians.shape[-1] != jacobians.shape[-2]:
        raise ValueError(f"jacobians must have shape (batch, T, hidden, hidden), got {tuple(jacobians.shape)}")
    batch, steps, hidden, _ = jacobians.shape
    product = torch.eye(hidden, dtype=jacobians.dtype, device=jacobians.device).expand(batch, hidden, hidden)
    products = [product]
    for t in range(steps - 1, -1, -1):
        product = product @ jacobians[:, t]  # dS_T/dS_{t} = dS_T/dS_{t+1} . J_{t+1}
        products.append(product)
    return torch.stack(products[::-1], dim=1)


def autograd_state_jacobians(cell: Cell, x: Tensor, state0=None, which: str = "h") -> Tensor:
    """dS_T/dS_k for k = 0..T from autograd, for checking :func:`chain_jacobians` and for LSTMs.

    x: (batch, T, input). ``which`` = "h" uses the hidden state h (or S) on both sides, "c" the LSTM's cell
    state. Each derivative is total: it follows every path from S_k to S_T. Returns
    (batch, T + 1, hidden, hidden). Uses one backward pass: the sequence is repeated ``hidden`` times along
    the batch and copy i back-propagates from component i of S_T only, which yields row i of every Jacobian.
    """
    is_lstm = isinstance(cell, (LSTMCell, nn.LSTMCell))
    if which not in ("h", "c") or (which == "c" and not is_lstm):
        raise ValueError(f"which must be 'h', or 'c' for an LSTM cell, got {which!r} for {type(cell).__name__}")
    if x.dim() != 3:
        raise ValueError(f"x must have shape (batch, len, input), got {tuple(x.shape)}")
    batch, steps, _ = x.shape
    hidden = cell.hidden_size
    xs = x.repeat_interleave(hidden, dim=0)  # (batch * hidden, T, input)
    if state0 is None:
        zeros = torch.zeros(batch, hidden, device=x.device, dtype=x.dtype)
        state0 = (zeros, zeros.clone()) if is_lstm else zeros
    if is_lstm:
        state = tuple(s.detach().repeat_interleave(hidden, dim=0).requires_grad_() for s in state0)
    else:
        state = state0.detach().repeat_interleave(hidden, dim=0).requires_grad_()
    pick = (lambda s: s[0] if which == "h" else s[1]) if is_lstm else (lambda s: s)
    tracked = [pick(state)]
    for t in range(steps):
        state = cell(xs[:, t], state)
        tracked.append(pick(state))
    eye = torch.eye(hidden, device=x.device, dtype=x.dtype).repeat(batch, 1)  # copy i selects component i
    grads = torch.autograd.grad((tracked[-1] * eye).sum(), tracked, allow_unused=True)
    rows = [torch.zeros_like(tracked[0]) if g is None else g for g in grads]
    return torch.stack(rows, dim=1).view(batch, hidden, steps + 1, hidden).transpose(1, 2)


def spectral_norms(matrices: Tensor) -> Tensor:
    """Largest singular value of each matrix: (..., n, n) -> (...). The most a vector can grow through it."""
    return torch.linalg.matrix_norm(matrices, ord=2)


def scaled_recurrent_weight(hidden_size: int, scale: float, generator: torch.Generator | None = None) -> Tensor:
    """A random orthogonal matrix times ``scale``: every singular value equals ``scale``. (hidden, hidden).

    For a linear RNN this makes ||dS_T/dS_k|| exactly scale^(T-k): below 1 it vanishes, above 1 it explodes.
    """
    checks.positive_int("hidden_size", hidden_size)
    q, r = torch.linalg.qr(torch.randn(hidden_size, hidden_size, generator=generator))
    return q * torch.sign(torch.diagonal(r)) * scale


# ---------------------------------------------------------------------------------- the long-range task
def recall_batch(
    batch: int, distance: int, num_symbols: int, generator: torch.Generator | None = None
) -> tuple[Tensor, Tensor]:
    """The recall task: a sequence of ``distance + 1`` random symbols; the answer is the first one, the
    symbol seen ``distance`` steps before the last.

    Returns tokens (batch, distance + 1) with values in [0, num_symbols) and targets (batch,). Chance level
    is 1 / num_symbols.
    """
    checks.positive_int("distance", distance)
    if not isinstance(num_symbols, int) or num_symbols < 2:
        raise ValueError(f"num_symbols must be an int >= 2, got {num_symbols!r}")
    checks.positive_int("batch", batch)
    tokens = torch.randint(0, num_symbols, (batch, distance + 1), generator=generator)
    return tokens, tokens[:, 0].clone()


class RecurrentClassifier(nn.Module):
    """Embedding -> a one-layer recurrent network over the sequence -> a linear read-out of the last state
    (O = V S_T).

    kind: "rnn" (tanh) or "lstm". The recurrence runs in PyTorch's ``nn.RNN`` / ``nn.LSTM``, which compute the
    same cell equations as :class:`RNNCell` / :class:`LSTMCell` (the notebook checks it) with the time loop
    in C++, about three times faster than a Python loop. ``forget_bias`` (LSTM only) sets the forget gate's
    starting bias. tokens (batch, len) -> logits (batch, num_classes).
    """

    def __init__(
        self, kind: str, vocab_size: int, hidden_size: int, num_classes: int, forget_bias: float | None = None
    ) -> None:
        super().__init__()
        if kind not in ("rnn", "lstm"):
            raise ValueError(f"kind must be 'rnn' or 'lstm', got {kind!r}")
        if forget_bias is not None and kind != "lstm":
            raise ValueError(f"forget_bias applies to an LSTM only, got kind={kind!r}")
        self.kind = kind
        self.embedding = nn.Embedding(vocab_size, hidden_size)
        network = nn.RNN if kind == "rnn" else nn.LSTM
        self.recurrent = network(hidden_size, hidden_size, batch_first=True)
        if forget_bias is not None:
            with torch.no_grad():  # rows hidden..2 hidden of the stacked biases belong to the forget gate
                self.recurrent.bias_ih_l0[hidden_size : 2 * hidden_size] = forget_bias
                self.recurrent.bias_hh_l0[hidden_size : 2 * hidden_size] = 0.0
        self.readout = nn.Linear(hidden_size, num_classes)  # V

    def forward(self, tokens: Tensor) -> Tensor:
        """tokens: (batch, len) -> logits (batch, num_classes)."""
        if tokens.dim() != 2:
            raise ValueError(f"tokens must have shape (batch, len), got {tuple(tokens.shape)}")
        states, _ = self.recurrent(self.embedding(tokens))  # (batch, len, hidden)
        return self.readout(states[:, -1])


class AttentionClassifier(nn.Module):
    """Embedding + learned positions -> one multi-head self-attention layer -> read-out at the last position.

    Every position reaches every other in one step, however far apart. tokens (batch, len) -> logits
    (batch, num_classes); len <= max_len.
    """

    def __init__(self, vocab_size: int, d_model: int, num_classes: int, max_len: int, num_heads: int = 1) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.positions = LearnedPositionalEncoding(d_model, max_len)
        self.attention = MultiHeadAttention(d_model, num_heads)
        self.readout = nn.Linear(d_model, num_classes)

    def forward(self, tokens: Tensor) -> Tensor:
        """tokens: (batch, len) -> logits (batch, num_classes)."""
        if tokens.dim() != 2:
            raise ValueError(f"tokens must have shape (batch, len), got {tuple(tokens.shape)}")
        x = self.positions(self.embedding(tokens))  # (batch, len, d_model)
        last = x[:, -1:]  # the query: the last position asks the whole sequence
        return self.readout(self.attention(last, x, x)[:, 0])


def train_recall(
    model: nn.Module,
    distance: int,
    num_symbols: int,
    steps: int,
    batch_size: int = 64,
    lr: float = 3e-3,
    eval_size: int = 1000,
    seed: int = 0,
) -> tuple[float, list[float]]:
    """Train ``model`` on :func:`recall_batch` (tokens (batch_size, distance + 1) -> class logits (batch_size,
    num_symbols)) for a fixed number of Adam steps with :func:`~transformer_course.training.loop.run_training`;
    returns the accuracy on ``eval_size`` fresh sequences and the training loss of every step. Gradients are clipped at
    norm 1."""
    checks.positive_int("steps", steps)
    g = torch.Generator().manual_seed(seed)
    optimizer = make_optimizer(model, lr, betas=(0.9, 0.999), eps=1e-8)  # torch's Adam defaults

    def batch_loss() -> BatchLoss:
        tokens, targets = recall_batch(batch_size, distance, num_symbols, g)
        return BatchLoss(nn.functional.cross_entropy(model(tokens), targets))

    history = run_training(model, optimizer, batch_loss, constant_lr(lr), steps, clip_norm=1.0, progress=False)
    tokens, targets = recall_batch(eval_size, distance, num_symbols, g)
    with torch.no_grad():
        accuracy = (model(tokens).argmax(-1) == targets).float().mean().item()
    return accuracy, history.loss


# ------------------------------------------------------------------------------------------------ CNNs
def receptive_field(num_layers: int, kernel_size: int = 3, dilated: bool = False) -> int:
    """How many input positions one output of a stack of causal 1-D convolutions sees.

    A causal convolution looks back only: with kernel size k and dilation r an output at position t reads
    t, t - r, ..., t - (k - 1) r. Plain (r = 1): 1 + L (k - 1). Dilated with r = 1, 2, 4, ..., 2^(L-1)
    (WaveNet-style): 1 + (k - 1)(2^L - 1). A centred convolution splits its reach between both sides, so it
    needs about twice as many layers to reach the same distance back.
    """
    checks.non_negative_int("num_layers", num_layers)
    if not isinstance(kernel_size, int) or kernel_size < 2:
        raise ValueError(f"kernel_size must be an int >= 2, got {kernel_size!r}")
    growth = (2**num_layers - 1) if dilated else num_layers
    return 1 + (kernel_size - 1) * growth


def conv_layers_to_connect(n: int, kernel_size: int = 3, dilated: bool = False) -> int:
    """The fewest causal convolution layers after which position n's output depends on position 1 (1-based).

    Two positions n - 1 apart need a receptive field of at least n (see :func:`receptive_field`).
    """
    checks.positive_int("n", n)
    layers = 0
    while receptive_field(layers, kernel_size, dilated) < n:
        layers += 1
    return layers

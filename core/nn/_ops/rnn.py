"""Recurrent layers from differentiable hookgrad ops: one vectorised step per time step.

As torch's CPU kernels do, the input-to-hidden product of a whole sequence is one ``linear``
per layer and direction; only the hidden-to-hidden product and the gates run per step, each
over the whole batch at once. Gate order and formulas are torch's: LSTM ``(i, f, g, o)``,
GRU ``(r, z, n)`` with ``n = tanh(x_n + r * (h W_hn + b_hn))``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..._ops import shape as _shape
from ..._ops import unary as _unary
from ..._tensor import Tensor
from .dropout import dropout
from .linear import linear

__all__ = ["gru_cell", "lstm_cell", "rnn_layers", "rnn_relu_cell", "rnn_tanh_cell"]

# (input projection at one step, hidden state, w_hh, b_hh, w_hr) -> new hidden state; the LSTM
# state is the pair (h, c).
State = Tensor | tuple[Tensor, Tensor]
Step = Callable[[Tensor, State, Tensor, Tensor | None, Tensor | None], State]


def _tanh_step(gi: Tensor, h: State, w_hh: Tensor, b_hh: Tensor | None, _: object) -> State:
    return _unary.tanh(gi + linear(h, w_hh, b_hh))  # type: ignore[arg-type]


def _relu_step(gi: Tensor, h: State, w_hh: Tensor, b_hh: Tensor | None, _: object) -> State:
    return _unary.relu(gi + linear(h, w_hh, b_hh))  # type: ignore[arg-type]


def _lstm_step(
    gi: Tensor, state: State, w_hh: Tensor, b_hh: Tensor | None, w_hr: Tensor | None
) -> State:
    h, c = state
    i, f, g, o = (gi + linear(h, w_hh, b_hh)).chunk(4, 1)
    c = _unary.sigmoid(f) * c + _unary.sigmoid(i) * _unary.tanh(g)
    h = _unary.sigmoid(o) * _unary.tanh(c)
    if w_hr is not None:
        h = linear(h, w_hr)
    return h, c


def _gru_step(gi: Tensor, h: State, w_hh: Tensor, b_hh: Tensor | None, _: object) -> State:
    i_r, i_z, i_n = gi.chunk(3, 1)
    h_r, h_z, h_n = linear(h, w_hh, b_hh).chunk(3, 1)  # type: ignore[arg-type]
    r = _unary.sigmoid(i_r + h_r)
    z = _unary.sigmoid(i_z + h_z)
    n = _unary.tanh(i_n + r * h_n)
    return n + z * (h - n)


STEPS: dict[str, Step] = {
    "RNN_TANH": _tanh_step,
    "RNN_RELU": _relu_step,
    "LSTM": _lstm_step,
    "GRU": _gru_step,
}


def _hidden(state: State) -> Tensor:
    return state[0] if isinstance(state, tuple) else state


def _rows(state: State, size: int) -> State:
    """The first ``size`` rows of a state (the sequences still running at a packed step)."""
    if size == _hidden(state).shape[0]:
        return state
    if isinstance(state, tuple):
        return state[0][:size], state[1][:size]
    return state[:size]


def _merge(new: State, old: State, size: int) -> State:
    """``new`` for the running rows on top of the finished (or not yet started) rows of
    ``old``, so each sequence keeps the state of its own last step."""
    if size == _hidden(old).shape[0]:
        return new
    if isinstance(new, tuple) and isinstance(old, tuple):
        return _shape.cat([new[0], old[0][size:]]), _shape.cat([new[1], old[1][size:]])
    return _shape.cat([new, old[size:]])


def _direction(
    step: Step,
    x: Tensor,
    state: State,
    weights: Sequence[Tensor | None],
    reverse: bool,
    batch_sizes: list[int] | None,
) -> tuple[Tensor, State]:
    """Run one layer in one direction: time-major ``x`` (T, B, F) gives outputs (T, B, H);
    packed rows ``x`` (sum of batch_sizes, F) give packed outputs. Returns the final state."""
    w_ih, w_hh, b_ih, b_hh, w_hr = weights
    projected = linear(x, w_ih, b_ih)  # type: ignore[arg-type]
    inputs = projected.unbind(0) if batch_sizes is None else projected.split(batch_sizes, 0)
    order = range(len(inputs) - 1, -1, -1) if reverse else range(len(inputs))
    outputs: list[Tensor] = [None] * len(inputs)  # type: ignore[list-item]
    for t in order:
        size = inputs[t].shape[0]
        new = step(inputs[t], _rows(state, size), w_hh, b_hh, w_hr)  # type: ignore[arg-type]
        outputs[t] = _hidden(new)
        state = _merge(new, state, size)
    joined = _shape.stack(outputs) if batch_sizes is None else _shape.cat(outputs)
    return joined, state


def rnn_layers(
    mode: str,
    x: Tensor,
    hx: State,
    weights: Sequence[Sequence[Tensor | None]],
    num_layers: int,
    dropout_p: float,
    training: bool,
    bidirectional: bool,
    batch_sizes: list[int] | None = None,
) -> tuple[Tensor, State]:
    """A stacked (optionally bidirectional) recurrent network over time-major ``x``, or over
    the rows of a packed sequence with ``batch_sizes``.

    ``weights`` holds ``(w_ih, w_hh, b_ih, b_hh, w_hr)`` per layer and direction, in torch's
    order; ``hx`` is ``h0`` (or ``(h0, c0)``) of shape ``(layers * directions, B, H)``.
    Returns the last layer's outputs and the final states stacked as ``hx``.
    """
    step = STEPS[mode]
    directions = 2 if bidirectional else 1
    h0 = hx[0].unbind(0) if isinstance(hx, tuple) else hx.unbind(0)
    c0 = hx[1].unbind(0) if isinstance(hx, tuple) else None
    finals: list[State] = []
    for layer in range(num_layers):
        outs = []
        for d in range(directions):
            k = layer * directions + d
            state: State = h0[k] if c0 is None else (h0[k], c0[k])
            out, state = _direction(step, x, state, weights[k], d == 1, batch_sizes)
            outs.append(out)
            finals.append(state)
        x = outs[0] if directions == 1 else _shape.cat(outs, -1)
        if dropout_p > 0 and training and layer < num_layers - 1:
            x = dropout(x, dropout_p, True)
    if c0 is None:
        return x, _shape.stack(finals)
    return x, (
        _shape.stack([s[0] for s in finals]),
        _shape.stack([s[1] for s in finals]),
    )


def _cell(
    mode: str,
    input: Tensor,
    hx: State,
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor | None,
    b_hh: Tensor | None,
) -> State:
    return STEPS[mode](linear(input, w_ih, b_ih), hx, w_hh, b_hh, None)


def rnn_tanh_cell(
    input: Tensor,
    hx: Tensor,
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor | None = None,
    b_hh: Tensor | None = None,
) -> Tensor:
    """One Elman step: ``tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)``."""
    return _cell("RNN_TANH", input, hx, w_ih, w_hh, b_ih, b_hh)  # type: ignore[return-value]


def rnn_relu_cell(
    input: Tensor,
    hx: Tensor,
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor | None = None,
    b_hh: Tensor | None = None,
) -> Tensor:
    """One Elman step with ReLU: ``relu(x W_ih^T + b_ih + h W_hh^T + b_hh)``."""
    return _cell("RNN_RELU", input, hx, w_ih, w_hh, b_ih, b_hh)  # type: ignore[return-value]


def lstm_cell(
    input: Tensor,
    hx: tuple[Tensor, Tensor],
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor | None = None,
    b_hh: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """One LSTM step: ``(h', c')`` from ``(h, c)``."""
    return _cell("LSTM", input, hx, w_ih, w_hh, b_ih, b_hh)  # type: ignore[return-value]


def gru_cell(
    input: Tensor,
    hx: Tensor,
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor | None = None,
    b_hh: Tensor | None = None,
) -> Tensor:
    """One GRU step: ``h' = (1 - z) * n + z * h``."""
    return _cell("GRU", input, hx, w_ih, w_hh, b_ih, b_hh)  # type: ignore[return-value]

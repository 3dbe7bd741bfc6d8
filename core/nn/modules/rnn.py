"""``RNN``, ``LSTM``, ``GRU`` and their cells, with torch's parameter names, shapes and checks.

Parameters are ``weight_ih_l{k}``, ``weight_hh_l{k}``, ``bias_ih_l{k}``, ``bias_hh_l{k}`` (and
``weight_hr_l{k}`` for an LSTM with ``proj_size``), with ``_reverse`` for the backward
direction, all drawn from ``U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))`` as torch draws
them. A ``PackedSequence`` input gives a ``PackedSequence`` output, as in torch.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

from ..._creation import empty, zeros
from ..._tensor import Tensor
from .. import init
from .._ops.rnn import State, gru_cell, lstm_cell, rnn_layers, rnn_relu_cell, rnn_tanh_cell
from ..parameter import Parameter
from ..utils.rnn import PackedSequence
from .module import Module

__all__ = ["GRU", "LSTM", "RNN", "GRUCell", "LSTMCell", "RNNBase", "RNNCell", "RNNCellBase"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _check_sizes(
    input_size: Any, hidden_size: Any, num_layers: int, bias: Any, batch_first: Any
) -> None:
    """torch's TypeErrors and ValueErrors for the constructor's size arguments."""
    for name, value, kind in (
        ("bias", bias, bool),
        ("batch_first", batch_first, bool),
        ("input_size", input_size, int),
        ("hidden_size", hidden_size, int),
    ):
        if not isinstance(value, kind):
            raise TypeError(
                f"{name} should be of type {kind.__name__}, got: {type(value).__name__}"
            )
        if kind is int and value <= 0:
            raise ValueError(f"{name} must be greater than zero")
    if num_layers <= 0:
        raise ValueError("num_layers must be greater than zero")


def _permute(state: State, indices: Tensor | None) -> State:
    """``state`` with its batch dim (1) reordered by ``indices`` (None: as it is)."""
    if indices is None:
        return state
    if isinstance(state, tuple):
        return state[0].index_select(1, indices), state[1].index_select(1, indices)
    return state.index_select(1, indices)


class RNNBase(Module):
    """What the three recurrent layers share: parameters, checks and the layer loop."""

    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if (
            not isinstance(dropout, numbers.Number)
            or isinstance(dropout, bool)
            or not 0 <= dropout <= 1
        ):
            raise ValueError(
                "dropout should be a number in range [0, 1] representing the probability of "
                "an element being zeroed"
            )
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero "
                "dropout expects num_layers greater than 1, but got "
                f"dropout={dropout} and num_layers={num_layers}",
                UserWarning,
                stacklevel=3,
            )
        _check_sizes(input_size, hidden_size, num_layers, bias, batch_first)
        if proj_size < 0:
            raise ValueError(
                "proj_size should be a positive integer or zero to disable projections"
            )
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        self._all_weights: list[list[str]] = []
        self._build_parameters(_GATES[mode] * hidden_size, device, dtype)
        self.reset_parameters()

    def _build_parameters(self, gate_size: int, device: Any, dtype: Any) -> None:
        directions = 2 if self.bidirectional else 1
        real_hidden = self.proj_size or self.hidden_size
        factory = {"device": device, "dtype": dtype}
        for layer in range(self.num_layers):
            layer_input = self.input_size if layer == 0 else real_hidden * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                shapes: dict[str, tuple[int, ...]] = {
                    "weight_ih": (gate_size, layer_input),
                    "weight_hh": (gate_size, real_hidden),
                }
                if self.bias:
                    shapes.update(bias_ih=(gate_size,), bias_hh=(gate_size,))
                if self.proj_size > 0:
                    shapes["weight_hr"] = (self.proj_size, self.hidden_size)
                names = [name + suffix for name in shapes]
                for name, shape in zip(names, shapes.values(), strict=True):
                    setattr(self, name, Parameter(empty(shape, **factory)))
                self._all_weights.append(names)

    def reset_parameters(self) -> None:
        """Every parameter from ``U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))``."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self) -> None:
        """Nothing to do: torch packs weights for cuDNN here, and does nothing on a CPU."""

    @property
    def all_weights(self) -> list[list[Parameter]]:
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def _layer_weights(self) -> list[tuple[Tensor | None, ...]]:
        """``(w_ih, w_hh, b_ih, b_hh, w_hr)`` per layer and direction (None where absent)."""
        out = []
        for names in self._all_weights:
            suffix = names[0][len("weight_ih") :]
            out.append(
                tuple(
                    getattr(self, base + suffix, None)
                    for base in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")
                )
            )
        return out

    def check_input(self, input: Tensor, batch_sizes: list[int] | None = None) -> None:
        weight_dtype = f"hookgrad.{self.weight_ih_l0.dtype}"
        if input.dtype != self.weight_ih_l0.dtype:
            got = f"hookgrad.{input.dtype}"
            raise ValueError(
                f"RNN input dtype ({got}) does not match weight dtype ({weight_dtype}). "
                f"Convert input: input.to({weight_dtype}), or convert model: model.to({got})"
            )
        expected_dim = 2 if batch_sizes is not None else 3
        if input.ndim != expected_dim:
            raise RuntimeError(f"input must have {expected_dim} dimensions, got {input.ndim}")
        if self.input_size != input.shape[-1]:
            raise RuntimeError(
                "input.size(-1) must be equal to input_size. Expected "
                f"{self.input_size}, got {input.shape[-1]}"
            )

    def _expected_size(
        self, input: Tensor, size: int, batch_sizes: list[int] | None
    ) -> tuple[int, int, int]:
        if batch_sizes is not None:
            batch = batch_sizes[0]
        else:
            batch = input.shape[0] if self.batch_first else input.shape[1]
        return (self.num_layers * (2 if self.bidirectional else 1), batch, size)

    def get_expected_hidden_size(
        self, input: Tensor, batch_sizes: list[int] | None = None
    ) -> tuple[int, int, int]:
        return self._expected_size(input, self.proj_size or self.hidden_size, batch_sizes)

    def get_expected_cell_size(
        self, input: Tensor, batch_sizes: list[int] | None = None
    ) -> tuple[int, int, int]:
        return self._expected_size(input, self.hidden_size, batch_sizes)

    @staticmethod
    def check_hidden_size(
        hx: Tensor, expected: tuple[int, int, int], msg: str = "Expected hidden size {}, got {}"
    ) -> None:
        if tuple(hx.shape) != expected:
            raise RuntimeError(msg.format(expected, list(hx.shape)))

    def check_forward_args(
        self, input: Tensor, hidden: State, batch_sizes: list[int] | None = None
    ) -> None:
        """torch's checks of the input and of ``h0`` (or ``(h0, c0)``) against it."""
        self.check_input(input, batch_sizes)
        expected = self.get_expected_hidden_size(input, batch_sizes)
        if isinstance(hidden, tuple):
            self.check_hidden_size(hidden[0], expected, "Expected hidden[0] size {}, got {}")
            self.check_hidden_size(
                hidden[1],
                self.get_expected_cell_size(input, batch_sizes),
                "Expected hidden[1] size {}, got {}",
            )
        else:
            self.check_hidden_size(hidden, expected)

    def _initial_state(self, input: Tensor, batch_sizes: list[int] | None = None) -> State:
        """Zeros for ``h0`` (and ``c0``)."""
        h = zeros(*self.get_expected_hidden_size(input, batch_sizes), dtype=input.dtype)
        if self.mode != "LSTM":
            return h
        return h, zeros(*self.get_expected_cell_size(input, batch_sizes), dtype=input.dtype)

    def _run(
        self, input: Tensor, hx: State, batch_sizes: list[int] | None = None
    ) -> tuple[Tensor, State]:
        """The checked core every recurrent layer's forward ends in."""
        time_major = self.batch_first and batch_sizes is None
        x = input.transpose(0, 1) if time_major else input
        out, hidden = rnn_layers(
            self.mode,
            x,
            hx,
            self._layer_weights(),
            self.num_layers,
            self.dropout,
            self.training,
            self.bidirectional,
            batch_sizes,
        )
        return (out.transpose(0, 1) if time_major else out), hidden

    def _run_packed(self, input: PackedSequence, hx: State | None) -> tuple[PackedSequence, State]:
        """Forward on a PackedSequence: states in sorted order inside, the caller's order out."""
        data, batch_sizes, sorted_indices, unsorted_indices = input
        sizes = [int(b) for b in batch_sizes._data]
        hx = self._initial_state(data, sizes) if hx is None else _permute(hx, sorted_indices)
        self.check_forward_args(data, hx, sizes)
        out, hidden = self._run(data, hx, sizes)
        packed = PackedSequence(out, batch_sizes, sorted_indices, unsorted_indices)
        return packed, _permute(hidden, unsorted_indices)

    def _batched(self, input: Tensor, name: str) -> tuple[Tensor, bool, int]:
        """``input`` with a batch dim (unbatched 2-D input gets one), whether it had one."""
        if input.ndim not in (2, 3):
            got = f"{input.ndim}D tensor instead" if name != "LSTM" else f"{input.ndim}D instead"
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {got}")
        batch_dim = 0 if self.batch_first else 1
        if input.ndim == 2:
            return input.unsqueeze(batch_dim), False, batch_dim
        return input, True, batch_dim

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class _SingleStateRNN(RNNBase):
    """RNN and GRU: one hidden state ``h``."""

    def forward(self, input: Any, hx: Tensor | None = None) -> tuple[Any, Tensor]:
        """``(output, h_n)``: the last layer's outputs and each layer's final hidden state."""
        if isinstance(input, PackedSequence):
            return self._run_packed(input, hx)  # type: ignore[return-value]
        name = "RNN" if self.mode.startswith("RNN") else "GRU"
        input, batched, batch_dim = self._batched(input, name)
        if hx is not None:
            expect = 3 if batched else 2
            if hx.ndim != expect:
                kind = "batched 3-D" if batched else "unbatched 2-D"
                raise RuntimeError(
                    f"For {kind} input, hx should also be {expect}-D but got {hx.ndim}-D tensor"
                )
            hx = hx if batched else hx.unsqueeze(1)
        else:
            hx = self._initial_state(input)  # type: ignore[assignment]
        self.check_forward_args(input, hx)  # type: ignore[arg-type]
        output, hidden = self._run(input, hx)  # type: ignore[arg-type]
        if not batched:
            return output.squeeze(batch_dim), hidden.squeeze(1)  # type: ignore[union-attr]
        return output, hidden  # type: ignore[return-value]


class RNN(_SingleStateRNN):
    """Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` (or ReLU)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            nonlinearity = kwargs.pop("nonlinearity", "tanh")
        modes = {"tanh": "RNN_TANH", "relu": "RNN_RELU"}
        if nonlinearity not in modes:
            raise ValueError(
                f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'."
            )
        super().__init__(modes[nonlinearity], *args, **kwargs)
        self.nonlinearity = nonlinearity


class GRU(_SingleStateRNN):
    """Gated recurrent unit, gates ``(r, z, n)`` as torch's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


class LSTM(RNNBase):
    """Long short-term memory, gates ``(i, f, g, o)``; ``proj_size`` projects ``h``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__("LSTM", *args, **kwargs)

    def forward(
        self, input: Any, hx: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Any, tuple[Tensor, Tensor]]:
        """``(output, (h_n, c_n))``."""
        if isinstance(input, PackedSequence):
            return self._run_packed(input, hx)  # type: ignore[return-value]
        input, batched, batch_dim = self._batched(input, "LSTM")
        if hx is None:
            hx = self._initial_state(input)  # type: ignore[assignment]
        else:
            expect = 3 if batched else 2
            if hx[0].ndim != expect or hx[1].ndim != expect:
                kind = "batched 3-D" if batched else "unbatched 2-D"
                raise RuntimeError(
                    f"For {kind} input, hx and cx should also be {expect}-D but got "
                    f"({hx[0].ndim}-D, {hx[1].ndim}-D) tensors"
                )
            if not batched:
                hx = (hx[0].unsqueeze(1), hx[1].unsqueeze(1))
        self.check_forward_args(input, hx)  # type: ignore[arg-type]
        output, (h, c) = self._run(input, hx)  # type: ignore[arg-type]
        if not batched:
            return output.squeeze(batch_dim), (h.squeeze(1), c.squeeze(1))
        return output, (h, c)


class RNNCellBase(Module):
    """What the three cells share: ``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool,
        num_chunks: int,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(empty((num_chunks * hidden_size, input_size), **factory))
        self.weight_hh = Parameter(empty((num_chunks * hidden_size, hidden_size), **factory))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, **factory))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, **factory))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every parameter from ``U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))``."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _batched(self, input: Tensor, hx: Tensor | None, what: str) -> tuple[Tensor, bool]:
        name = type(self).__name__
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        if hx is not None and hx.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected {what} to be 1D or 2D, got {hx.ndim}D instead")
        return (input, True) if input.ndim == 2 else (input.unsqueeze(0), False)

    def _zeros(self, input: Tensor) -> Tensor:
        return zeros(input.shape[0], self.hidden_size, dtype=input.dtype)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nonlinearity = self.__dict__.get("nonlinearity", "tanh")
        if nonlinearity != "tanh":
            s += f", nonlinearity={nonlinearity}"
        return s


class RNNCell(RNNCellBase):
    """One Elman step (``nonlinearity`` 'tanh' or 'relu')."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        input, batched = self._batched(input, hx, "hidden")
        if hx is None:
            hx = self._zeros(input)
        elif not batched:
            hx = hx.unsqueeze(0)
        cells = {"tanh": rnn_tanh_cell, "relu": rnn_relu_cell}
        if self.nonlinearity not in cells:
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        ret = cells[self.nonlinearity](
            input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh
        )
        return ret if batched else ret.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step: ``(h', c')`` from ``(h, c)``."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(
        self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, Tensor]:
        if hx is not None:
            for idx, value in enumerate(hx):
                self._batched(input, value, f"hx[{idx}]")
        input, batched = self._batched(input, None, "")
        if hx is None:
            zero = self._zeros(input)
            hx = (zero, zero)
        elif not batched:
            hx = (hx[0].unsqueeze(0), hx[1].unsqueeze(0))
        h, c = lstm_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        input, batched = self._batched(input, hx, "hidden")
        if hx is None:
            hx = self._zeros(input)
        elif not batched:
            hx = hx.unsqueeze(0)
        ret = gru_cell(input, hx, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return ret if batched else ret.squeeze(0)

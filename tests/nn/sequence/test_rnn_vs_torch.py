"""Differential tests: RNN, LSTM, GRU and their cells against torch 2.13."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import hookgrad  # noqa: E402
import hookgrad.nn as nn  # noqa: E402

from .conftest import array, compare_module, hook_trace, sync_from_torch  # noqa: E402

IN, HID = 3, 4


def _state(cls: str, layers: int, batch: tuple[int, ...], hidden: int = HID, proj: int = 0):
    h = array(layers, *batch, proj or hidden, seed=7)
    return (h, array(layers, *batch, hidden, seed=8)) if cls == "LSTM" else h


@settings(max_examples=40, deadline=None)
@given(
    cls=st.sampled_from(["RNN", "LSTM", "GRU"]),
    num_layers=st.integers(1, 3),
    bidirectional=st.booleans(),
    batch_first=st.booleans(),
    bias=st.booleans(),
    steps=st.integers(1, 4),
    batch=st.integers(1, 3),
    with_state=st.booleans(),
    relu=st.booleans(),
)
def test_recurrent_layers_match_torch(
    cls, num_layers, bidirectional, batch_first, bias, steps, batch, with_state, relu
):
    """Outputs, final states, input/state gradients and every parameter gradient equal
    torch's, for any depth, direction, layout, bias, length, batch and initial state."""
    kwargs = {"num_layers": num_layers, "bidirectional": bidirectional,
              "batch_first": batch_first, "bias": bias}  # fmt: skip
    if cls == "RNN" and relu:
        kwargs["nonlinearity"] = "relu"
    x = array(batch, steps, IN) if batch_first else array(steps, batch, IN)
    state = _state(cls, num_layers * (2 if bidirectional else 1), (batch,))
    args = (x, state) if with_state else (x,)
    compare_module(
        getattr(nn, cls)(IN, HID, **kwargs), getattr(torch.nn, cls)(IN, HID, **kwargs), *args
    )


@pytest.mark.parametrize("cls", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("with_state", [False, True])
def test_unbatched_input(cls, with_state):
    """2-D (steps, features) input with a 2-D state: outputs without a batch dim, as torch."""
    x = array(5, IN)
    args = (x, _state(cls, 2, ())) if with_state else (x,)
    compare_module(getattr(nn, cls)(IN, HID, 2), getattr(torch.nn, cls)(IN, HID, 2), *args)


@pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")
@pytest.mark.parametrize("bidirectional", [False, True])
def test_lstm_projection(bidirectional):
    """LSTM with proj_size: weight_hr parameters, projected h, full-size c."""
    kw = {"num_layers": 2, "proj_size": 2, "bidirectional": bidirectional}
    layers = 4 if bidirectional else 2
    compare_module(
        nn.LSTM(IN, HID, **kw), torch.nn.LSTM(IN, HID, **kw), array(4, 2, IN),
        _state("LSTM", layers, (2,), proj=2),
    )  # fmt: skip


@pytest.mark.parametrize("cls", ["RNNCell", "LSTMCell", "GRUCell"])
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("bias", [True, False])
def test_cells_match_torch(cls, batched, with_state, bias):
    """The cells on batched and 1-D input, with and without a state, with and without bias."""
    batch = (2,) if batched else ()
    args = (array(*batch, IN),)
    if with_state:
        state = _state("LSTM" if cls == "LSTMCell" else cls, 1, batch)
        args += (tuple(s[0] for s in state) if isinstance(state, tuple) else state[0],)
    compare_module(getattr(nn, cls)(IN, HID, bias), getattr(torch.nn, cls)(IN, HID, bias), *args)


def test_rnn_cell_relu():
    """RNNCell with nonlinearity='relu'."""
    compare_module(
        nn.RNNCell(IN, HID, nonlinearity="relu"),
        torch.nn.RNNCell(IN, HID, nonlinearity="relu"),
        array(2, IN),
    )


@pytest.mark.parametrize(
    ("cls", "kwargs"),
    [
        ("RNN", {"num_layers": 2, "bidirectional": True, "nonlinearity": "relu"}),
        ("LSTM", {"num_layers": 2, "proj_size": 2, "bias": False}),
        ("GRU", {"batch_first": True, "dropout": 0.5, "num_layers": 2}),
        ("LSTMCell", {}),
        ("GRUCell", {"bias": False}),
    ],
)
def test_parameters_state_dict_and_repr_are_torchs(cls, kwargs):
    """Parameter names, order and shapes, all_weights, repr equal torch's; state dicts load
    both ways; every initial value lies in U(-1/sqrt(hidden), 1/sqrt(hidden))."""
    hg, tm = getattr(nn, cls)(IN, HID, **kwargs), getattr(torch.nn, cls)(IN, HID, **kwargs)
    h_named = [(n, tuple(p.shape)) for n, p in hg.named_parameters()]
    assert h_named == [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    assert repr(hg) == repr(tm)
    bound = 1 / np.sqrt(HID)
    assert all(np.abs(p.detach().numpy()).max() <= bound for p in hg.parameters())
    if hasattr(tm, "all_weights"):
        assert [[tuple(w.shape) for w in ws] for ws in hg.all_weights] == [
            [tuple(w.shape) for w in ws] for ws in tm.all_weights
        ]
    sync_from_torch(hg, tm)
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in hg.state_dict().items()})


def test_initialisation_follows_hookgrads_seed():
    """The uniform initial weights come from hookgrad's generator: same seed, same weights."""
    hookgrad.manual_seed(5)
    first = nn.LSTM(IN, HID).weight_hh_l0.detach().numpy()
    hookgrad.manual_seed(5)
    assert np.array_equal(first, nn.LSTM(IN, HID).weight_hh_l0.detach().numpy())


def test_dropout_between_layers():
    """dropout applies between stacked layers in training only: eval gives torch's numbers,
    training is seeded and differs from eval."""
    hg, tm = nn.GRU(IN, HID, 3, dropout=0.5), torch.nn.GRU(IN, HID, 3, dropout=0.5)
    hg.eval()
    tm.eval()
    compare_module(hg, tm, array(4, 2, IN))
    hg.train()
    x = hookgrad.tensor(array(4, 2, IN))
    hookgrad.manual_seed(1)
    first = hg(x)[0]
    hookgrad.manual_seed(1)
    assert hookgrad.equal(first, hg(x)[0])
    hg.eval()
    assert not hookgrad.allclose(first, hg(x)[0])


def test_single_layer_dropout_warns_like_torch():
    """Dropout with one layer warns with torch's text."""
    with pytest.warns(UserWarning) as expected:
        torch.nn.LSTM(IN, HID, dropout=0.2)
    with pytest.warns(UserWarning) as got:
        nn.LSTM(IN, HID, dropout=0.2)
    assert str(got[0].message) == str(expected[0].message)


@pytest.mark.parametrize(
    "action",
    [
        lambda lib: lib.nn.LSTM(IN, HID)(lib.zeros(2, 1, IN + 1)),
        lambda lib: lib.nn.GRU(IN, HID)(lib.zeros(2, 1, IN), lib.zeros(2, 1, HID)),
        lambda lib: lib.nn.LSTM(IN, HID)(
            lib.zeros(2, 1, IN), (lib.zeros(1, 1, HID), lib.zeros(1, 2, HID))
        ),
        lambda lib: lib.nn.RNN(IN, HID)(lib.zeros(2, 1, 1, IN)),
        lambda lib: lib.nn.RNN(IN, HID)(lib.zeros(2, 1, IN), lib.zeros(1, HID)),
        lambda lib: lib.nn.LSTM(IN, HID)(
            lib.zeros(2, IN), (lib.zeros(1, 1, HID), lib.zeros(1, HID))
        ),
        lambda lib: lib.nn.RNN(IN, HID, nonlinearity="sigmoid"),
        lambda lib: lib.nn.GRU(IN, HID, proj_size=2),
        lambda lib: lib.nn.LSTM(IN, HID, proj_size=HID),
        lambda lib: lib.nn.LSTM(IN, HID, dropout=2),
        lambda lib: lib.nn.LSTM(IN, 0),
        lambda lib: lib.nn.LSTM(IN, HID)(lib.zeros(2, 1, IN, dtype=lib.float64)),
        lambda lib: lib.nn.GRUCell(IN, HID)(lib.zeros(1, 2, IN)),
        lambda lib: lib.nn.LSTMCell(IN, HID)(
            lib.zeros(2, IN), (lib.zeros(2, HID), lib.zeros(1, 2, HID))
        ),
    ],
)
def test_errors_match_torch(fails_like_torch, action):
    """Wrong feature count, state shapes and ranks, bad constructor arguments and dtypes raise
    torch's exception class with torch's text."""
    fails_like_torch(action)


@pytest.mark.parametrize("cls", ["LSTM", "GRU"])
def test_module_hooks_see_torchs_gradients(cls):
    """A full backward hook on the layer fires once, with grad_input for the input and
    grad_output for the output tensor, equal to torch's (tuple-valued state is not a Tensor
    output, for hookgrad as for torch)."""
    seen = []
    torch_layer = getattr(torch.nn, cls)(IN, HID, 2)
    for lib, layer in ((hookgrad, getattr(nn, cls)(IN, HID, 2)), (torch, torch_layer)):
        if lib is hookgrad:
            sync_from_torch(layer, torch_layer)
        record = []
        layer.register_full_backward_hook(lambda m, gi, go, record=record: record.append((gi, go)))
        x = lib.tensor(array(3, 2, IN), requires_grad=True)
        out, _ = layer(x)
        (out * lib.tensor(array(3, 2, HID, seed=3))).sum().backward()
        seen.append(record)
    assert len(seen[0]) == len(seen[1]) == 1
    (h_gi, h_go), (t_gi, t_go) = seen[0][0], seen[1][0]
    assert len(h_gi) == len(t_gi)
    assert len(h_go) == len(t_go)
    for h, t in zip(h_gi + h_go, t_gi + t_go, strict=True):
        assert (h is None) == (t is None)
        if h is not None:
            np.testing.assert_allclose(h.numpy(), t.numpy(), 1e-5, 1e-5)


def test_hook_trace_of_a_recurrent_layer_is_torchs():
    """The forward / backward hook events of an LSTM inside a Sequential-like parent are
    torch's (the recurrent layer has no submodules that run)."""
    traces = []
    for lib, mod in ((hookgrad, nn), (torch, torch.nn)):
        layer = mod.LSTM(IN, HID, 2, bidirectional=True)
        x = lib.tensor(array(3, 2, IN), requires_grad=True)
        traces.append(hook_trace(layer, lambda layer=layer, x=x: layer(x)[0]))
    assert traces[0] == traces[1]


def test_flatten_parameters_is_accepted_and_changes_nothing():
    """flatten_parameters() (called by many scripts before each forward) leaves the
    parameters as they are, as torch's does on a CPU."""
    lstm = nn.LSTM(IN, HID, 2)
    before = [p.detach().numpy().copy() for p in lstm.parameters()]
    assert lstm.flatten_parameters() is None
    assert all(np.array_equal(a, p.detach().numpy()) for a, p in zip(before, lstm.parameters()))

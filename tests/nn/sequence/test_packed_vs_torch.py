"""Differential tests: torch.nn.utils.rnn (padding, packing) and recurrent layers on packed
sequences, against torch 2.13."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import hookgrad  # noqa: E402
from hookgrad.nn.utils import rnn as hrnn  # noqa: E402

from .conftest import array, compare_call, sync_from_torch  # noqa: E402

trnn = torch.nn.utils.rnn
IN, HID = 3, 4


def _packed_run(lib, utils, layer, x, lengths, batch_first, enforce_sorted, state):
    """Pack ``x``, run ``layer``, pad the output back: the program torch users write."""
    packed = utils.pack_padded_sequence(x, lengths, batch_first, enforce_sorted)
    out, hidden = layer(packed, state) if state is not None else layer(packed)
    padded, out_lengths = utils.pad_packed_sequence(out, batch_first=batch_first)
    return padded, hidden, out_lengths


@settings(max_examples=30, deadline=None)
@given(
    cls=st.sampled_from(["RNN", "LSTM", "GRU"]),
    lengths=st.lists(st.integers(1, 5), min_size=1, max_size=4),
    num_layers=st.integers(1, 2),
    bidirectional=st.booleans(),
    batch_first=st.booleans(),
    with_state=st.booleans(),
)
def test_layers_on_packed_sequences_match_torch(
    cls, lengths, num_layers, bidirectional, batch_first, with_state
):
    """pack_padded_sequence -> RNN/LSTM/GRU -> pad_packed_sequence: padded outputs, final
    states (in the caller's batch order), lengths and every gradient equal torch's."""
    enforce_sorted = lengths == sorted(lengths, reverse=True)
    steps, batch = max(lengths), len(lengths)
    kw = {"num_layers": num_layers, "bidirectional": bidirectional}
    t_layer = getattr(torch.nn, cls)(IN, HID, **kw)
    h_layer = getattr(hookgrad.nn, cls)(IN, HID, **kw)
    sync_from_torch(h_layer, t_layer)
    x = array(batch, steps, IN) if batch_first else array(steps, batch, IN)
    state = None
    if with_state:
        layers = num_layers * (2 if bidirectional else 1)
        h0 = array(layers, batch, HID, seed=4)
        state = (h0, array(layers, batch, HID, seed=5)) if cls == "LSTM" else h0

    def run(lib, utils, layer):
        def call(x, state):
            return _packed_run(lib, utils, layer, x, lengths, batch_first, enforce_sorted, state)

        return call

    compare_call(run(hookgrad, hrnn, h_layer), run(torch, trnn, t_layer), x, state)
    for (name, tp), hp in zip(t_layer.named_parameters(), h_layer.parameters(), strict=True):
        np.testing.assert_allclose(hp.grad.numpy(), tp.grad.numpy(), 1e-5, 1e-5, err_msg=name)


@pytest.mark.parametrize("enforce_sorted", [True, False])
@pytest.mark.parametrize("batch_first", [False, True])
def test_packing_matches_torch(enforce_sorted, batch_first):
    """PackedSequence fields (data, batch_sizes, sorted/unsorted indices) and the round trip
    through pad_packed_sequence (with total_length) equal torch's; gradients reach the input."""
    lengths = [4, 2, 1] if enforce_sorted else [2, 4, 1]
    x = array(3, 4, 2) if batch_first else array(4, 3, 2)
    packs = []
    for lib, utils in ((hookgrad, hrnn), (torch, trnn)):
        packs.append(
            utils.pack_padded_sequence(
                lib.tensor(x), lib.tensor(lengths), batch_first, enforce_sorted
            )
        )
    h, t = packs
    np.testing.assert_array_equal(h.data.numpy(), t.data.numpy())
    assert h.batch_sizes.tolist() == t.batch_sizes.tolist()
    for name in ("sorted_indices", "unsorted_indices"):
        hv, tv = getattr(h, name), getattr(t, name)
        assert (hv is None) == (tv is None)
        if tv is not None:
            assert hv.tolist() == tv.tolist()

    def round_trip(lib, utils):
        def call(x):
            packed = utils.pack_padded_sequence(x, lengths, batch_first, enforce_sorted)
            return utils.pad_packed_sequence(packed, batch_first, -1.0, total_length=6)

        return call

    compare_call(round_trip(hookgrad, hrnn), round_trip(torch, trnn), x)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_sequence_and_pack_sequence_match_torch(batch_first, padding_side):
    """pad_sequence (batch_first, padding_value, padding_side) and pack_sequence as torch's."""
    seqs = [array(3, 2), array(1, 2, seed=2), array(4, 2, seed=3)]

    def pad(utils):
        return lambda *s: utils.pad_sequence(list(s), batch_first, 7.0, padding_side)

    compare_call(pad(hrnn), pad(trnn), *seqs)
    h = hrnn.pack_sequence([hookgrad.tensor(s) for s in seqs], enforce_sorted=False)
    t = trnn.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=False)
    np.testing.assert_array_equal(h.data.numpy(), t.data.numpy())
    assert h.batch_sizes.tolist() == t.batch_sizes.tolist()


@pytest.mark.parametrize(
    "action",
    [
        lambda lib: lib.nn.utils.rnn.pack_padded_sequence(lib.zeros(3, 2, 1), [1, 3]),
        lambda lib: lib.nn.utils.rnn.pack_padded_sequence(
            lib.zeros(3, 2, 1), [0, 3], enforce_sorted=False
        ),
        lambda lib: lib.nn.utils.rnn.pad_packed_sequence(
            lib.nn.utils.rnn.pack_padded_sequence(lib.zeros(3, 2, 1), [3, 2]), total_length=2
        ),
        lambda lib: lib.nn.GRU(1, 2)(
            lib.nn.utils.rnn.pack_padded_sequence(lib.zeros(3, 2, 1), [3, 2]), lib.zeros(1, 3, 2)
        ),
    ],
)
def test_packing_errors_match_torch(fails_like_torch, action):
    """Unsorted lengths, a zero length, a short total_length and a state of the wrong batch
    size raise torch's errors."""
    fails_like_torch(action)

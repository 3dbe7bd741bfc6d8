"""Dropout1d/Dropout2d and F.dropout1d/F.dropout2d as torch 2.13: whole channels dropped,
survivors scaled by 1/(1-p), identity in eval, torch's warnings and errors. (Which channels
fall follows hookgrad's generator, not torch's.)"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import hookgrad

torch = pytest.importorskip("torch")


@pytest.mark.parametrize(
    ("name", "shape"),
    [("dropout2d", (4, 5, 3, 2)), ("dropout1d", (4, 5, 6)), ("dropout1d", (5, 6))],
)
def test_whole_channels_drop_and_the_rest_scale(lib, name, shape):
    """Each channel is all zeros or all x/(1-p), in value and in gradient; both kinds occur."""
    x = lib.tensor(np.random.default_rng(0).uniform(1, 2, shape).astype(np.float32))
    x.requires_grad_()
    out = getattr(lib.nn.functional, name)(x * 1.0, p=0.4)
    out.sum().backward()
    channels = shape[:-2] if name == "dropout2d" else shape[:-1]
    ratio = (out.detach() / x.detach()).numpy().reshape(*channels, -1)
    grad = x.grad.numpy().reshape(ratio.shape)
    per_channel = ratio[..., 0]
    assert np.allclose(ratio, per_channel[..., None]) and np.allclose(grad, ratio)
    assert {round(float(v), 5) for v in per_channel.ravel()} == {0.0, round(1 / 0.6, 5)}
    assert out.grad_fn.name() in ("MulBackward0", "SqueezeBackward1")


def test_inplace_unbatched_dropout1d_drops_whole_channels(lib):
    """In place on (C, L) input: the input itself changes, channel by channel."""
    x = lib.ones(6, 5) * 1.0
    out = lib.nn.functional.dropout1d(x, 0.5, inplace=True)
    assert out is x
    rows = {tuple(np.round(row, 5)) for row in x.numpy().tolist()}
    assert rows <= {(0.0,) * 5, (2.0,) * 5}


def test_eval_and_p_zero_return_the_input(lib):
    """Not training: the input itself comes back."""
    x = lib.ones(2, 3, 4, 4)
    assert lib.nn.functional.dropout2d(x, training=False) is x
    assert lib.nn.Dropout2d().eval()(x) is x


def test_p_one_zeroes_everything(lib):
    """p=1 drops every channel."""
    out = lib.nn.functional.dropout2d(lib.ones(2, 3, 2, 2), p=1.0)
    assert out.sum().item() == 0.0


def test_masks_repeat_per_seed():
    """The same seed draws the same channels."""
    runs = []
    for _ in range(2):
        hookgrad.manual_seed(7)
        runs.append(hookgrad.nn.Dropout2d(0.5)(hookgrad.ones(4, 8, 2, 2)).numpy())
    np.testing.assert_array_equal(runs[0], runs[1])


def test_reprs_match_torch():
    """Dropout1d/Dropout2d print as torch's."""
    for build in (lambda lib: lib.nn.Dropout2d(), lambda lib: lib.nn.Dropout1d(0.3, True)):
        assert repr(build(hookgrad)) == repr(build(torch))


@pytest.mark.parametrize("shape", [(3, 4, 4), (4, 4), (1, 2, 3, 4, 4)])
def test_dropout2d_warnings_are_torchs(shape):
    """dropout2d on 3-D, 2-D or 5-D input warns torch's texts."""
    texts = []
    for lib in (hookgrad, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lib.nn.functional.dropout2d(lib.ones(*shape))
        texts.append([str(w.message) for w in caught])
    assert texts[0] == texts[1] and texts[0]


@pytest.mark.parametrize(
    "action",
    [
        lambda lib: lib.nn.functional.dropout1d(lib.ones(2, 3, 4, 4)),
        lambda lib: lib.nn.functional.dropout2d(lib.ones(2, 3, 4, 4), p=1.5),
        lambda lib: lib.nn.Dropout1d(-0.1),
    ],
)
def test_misuse_raises_torchs_error(fails_like_torch, action):
    """A 4-D input to dropout1d and p outside [0, 1] fail as in torch."""
    fails_like_torch(action)

"""Module reprs and error texts compared with torch 2.13 for the same architecture."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hookgrad  # noqa: E402
import hookgrad.nn as nn  # noqa: E402


def _every_layer(lib):
    """One instance of each layer and loss, several with non-default options."""
    n = lib.nn
    return n.Sequential(
        n.Conv2d(3, 8, 3),
        n.Conv2d(3, 8, (3, 5), stride=2, padding=1, dilation=2, groups=1, bias=False),
        n.Conv2d(4, 8, 3, padding="same", groups=2),
        n.LayerNorm(4),
        n.LayerNorm((2, 3), eps=1e-3, elementwise_affine=False),
        n.LayerNorm(5, bias=False),
        n.Embedding(10, 3),
        n.Embedding(10, 3, padding_idx=0, max_norm=2.0),
        n.Dropout(),
        n.Dropout(0.1, inplace=True),
        n.Flatten(),
        n.Flatten(0, 2),
        n.GELU(),
        n.GELU("tanh"),
        n.Softmax(dim=1),
        n.Softmax(),
        n.LogSoftmax(-1),
        n.LeakyReLU(),
        n.LeakyReLU(0.2, inplace=True),
        n.ReLU(),
        n.ReLU(True),
        n.Tanh(),
        n.Sigmoid(),
        n.Identity(),
        n.Linear(2, 3),
        n.Linear(3, 1, bias=False),
        n.MSELoss(),
        n.L1Loss(reduction="sum"),
        n.CrossEntropyLoss(label_smoothing=0.1),
        n.NLLLoss(),
        n.BCEWithLogitsLoss(),
    )


def _nested(lib):
    n = lib.nn
    return n.Sequential(
        OrderedDict(
            [
                (
                    "encoder",
                    n.ModuleList([n.Linear(4, 4), n.Linear(4, 4), n.Tanh(), n.Linear(4, 4)]),
                ),
                (
                    "heads",
                    n.ModuleDict({"cls": n.Linear(4, 2), "reg": n.Sequential(n.Linear(4, 1))}),
                ),
                ("empty", n.ModuleList()),
                ("blank", n.Sequential()),
            ]
        )
    )


@pytest.mark.parametrize("build", [_every_layer, _nested], ids=["every_layer", "nested"])
def test_repr_matches_torch(build):
    """repr of the same architecture is character-for-character torch's."""
    assert repr(build(hookgrad)) == repr(build(torch))


def test_sequential_repr_literal():
    """The Sequential repr example from the spec, literally."""
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    assert repr(model) == (
        "Sequential(\n  (0): Linear(in_features=2, out_features=3, bias=True)\n  (1): ReLU()\n)"
    )
    assert repr(model) == repr(torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU()))


def test_named_modules_and_parameters_match_torch():
    """named_modules/named_parameters give torch's names in torch's order."""
    hg, tm = _nested(hookgrad), _nested(torch)
    assert [n for n, _ in hg.named_modules()] == [n for n, _ in tm.named_modules()]
    assert [n for n, _ in hg.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert [tuple(p.shape) for p in hg.parameters()] == [tuple(p.shape) for p in tm.parameters()]


def _load_error(lib, state):
    with pytest.raises(RuntimeError) as info:
        lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.Linear(3, 1)).load_state_dict(state)
    return str(info.value)


def test_load_state_dict_error_text_matches_torch():
    """The strict-load error lists the same problems in the same words (torch -> hookgrad)."""
    arrays = {
        "0.weight": np.ones((3, 3), np.float32),
        "1.bias": np.ones(1, np.float32),
        "1.gamma": np.ones(1, np.float32),
        "2.weight": np.ones(1, np.float32),
    }
    expected = _load_error(torch, {k: torch.tensor(v) for k, v in arrays.items()})
    got = _load_error(hookgrad, {k: hookgrad.tensor(v) for k, v in arrays.items()})
    assert got == expected.replace("torch.", "hookgrad.")
    assert 'Missing key(s) in state_dict: "0.bias", "1.weight".' in got


def test_incompatible_keys_repr_matches_torch():
    """strict=False returns the same _IncompatibleKeys (repr included) as torch."""
    h = nn.Linear(2, 2).load_state_dict(
        {"weight": hookgrad.ones(2, 2), "x": hookgrad.ones(1)}, strict=False
    )
    t = torch.nn.Linear(2, 2).load_state_dict(
        {"weight": torch.ones(2, 2), "x": torch.ones(1)}, strict=False
    )
    assert repr(h) == repr(t) and h == tuple(t)


@pytest.mark.parametrize("shape", [(4, 5), (7, 4, 5), (5,)])
def test_linear_wrong_features_error_names_both_shapes(shape):
    """Linear with the wrong input feature count raises torch's RuntimeError text."""
    x = np.ones(shape, np.float32)
    with pytest.raises(RuntimeError) as expected:
        torch.nn.Linear(3, 2)(torch.tensor(x))
    with pytest.raises(RuntimeError) as got:
        nn.Linear(3, 2)(hookgrad.tensor(x))
    assert str(got.value) == str(expected.value)
    assert "x5 and 3x2" in str(got.value)


@pytest.mark.parametrize(
    "action",
    [
        lambda lib: setattr(lib.nn.Linear(2, 2), "weight", lib.ones(2, 2)),
        lambda lib: lib.nn.Linear(2, 2).register_buffer("weight", lib.ones(1)),
        lambda lib: lib.nn.Linear(2, 2).add_module("a.b", lib.nn.ReLU()),
        lambda lib: lib.nn.Linear(2, 2).get_submodule("a.b"),
        lambda lib: lib.nn.Sequential(lib.nn.ReLU())[2],
        lambda lib: lib.nn.Dropout(1.5),
        lambda lib: lib.nn.Linear(2, 2).train("no"),
        lambda lib: lib.nn.Module()(1),
        lambda lib: lib.nn.MSELoss(reduction="x")(lib.ones(1), lib.ones(1)),
        lambda lib: lib.nn.LayerNorm(3)(lib.ones(2, 4)),
    ],
)
def test_error_types_and_texts_match_torch(action, fails_like_torch):
    """Misuse raises the same exception class as torch, with the same text (torch -> hookgrad)."""
    fails_like_torch(action)

"""Differential tests: the Transformer modules against torch 2.13 (numbers, structure, hooks)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hookgrad  # noqa: E402
import hookgrad.nn as nn  # noqa: E402

from .conftest import array, compare_module, hook_trace, sync_from_torch  # noqa: E402

D, HEADS, FF = 8, 2, 16


def _activation(lib, kind):
    return {
        "relu": "relu",
        "gelu": "gelu",
        "module": lib.nn.GELU(),
        "callable": lib.nn.functional.gelu,
        "lambda": lambda x: lib.tanh(x),
    }[kind]


def _both(name, *args, **kwargs):
    """The class ``name`` built in both libraries with the same arguments (library objects
    given per library through the callable ``activation``)."""
    made = []
    for lib in (hookgrad, torch):
        kw = dict(kwargs)
        if "activation" in kw:
            kw["activation"] = _activation(lib, kw["activation"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the nested-tensor notice, tested on its own
            made.append(getattr(lib.nn, name)(*args, **kw))
    return made


def _seq(n, length, batch_first, seed=1):
    return array(n, length, D, seed=seed) if batch_first else array(length, n, D, seed=seed)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu", "module", "callable", "lambda"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_encoder_layer_matches_torch(norm_first, activation, batch_first):
    """TransformerEncoderLayer: output, input and parameter gradients, for post- and pre-norm,
    every activation form and both layouts."""
    hg, tm = _both(
        "TransformerEncoderLayer", D, HEADS, FF, 0.0, activation=activation,
        batch_first=batch_first, norm_first=norm_first,
    )  # fmt: skip
    compare_module(hg, tm, _seq(3, 5, batch_first))


@pytest.mark.parametrize(
    "masks",
    ["causal_float", "causal_bool", "padding", "both", "causal_hint"],
)
def test_encoder_layer_masks(masks):
    """Encoder layer with a causal (float or bool) mask, a padding mask, both, and is_causal."""
    L, N = 5, 3
    pad = np.zeros((N, L), dtype=bool)
    pad[1, -2:] = True
    causal = np.triu(np.ones((L, L), dtype=bool), 1)
    kwargs = {
        "causal_float": {"src_mask": np.where(causal, -np.inf, 0).astype(np.float32)},
        "causal_bool": {"src_mask": causal},
        "padding": {"src_key_padding_mask": pad},
        "both": {"src_mask": causal, "src_key_padding_mask": pad},
        "causal_hint": {"src_mask": causal, "is_causal": True},
    }[masks]
    hg, tm = _both("TransformerEncoderLayer", D, HEADS, FF, 0.0)
    compare_module(hg, tm, _seq(N, L, False), **kwargs)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_decoder_layer_matches_torch(norm_first, batch_first):
    """TransformerDecoderLayer with target and memory masks, both layouts, pre- and post-norm."""
    T, S, N = 4, 5, 2
    causal = np.triu(np.ones((T, T), dtype=bool), 1)
    mem_pad = np.zeros((N, S), dtype=bool)
    mem_pad[0, -1] = True
    hg, tm = _both(
        "TransformerDecoderLayer", D, HEADS, FF, 0.0, activation="gelu",
        batch_first=batch_first, norm_first=norm_first,
    )  # fmt: skip
    compare_module(
        hg, tm, _seq(N, T, batch_first), _seq(N, S, batch_first, seed=2),
        tgt_mask=causal, memory_key_padding_mask=mem_pad,
    )  # fmt: skip


def test_encoder_and_decoder_stacks_match_torch():
    """TransformerEncoder and TransformerDecoder: deep-copied layers, final norm, the causal
    mask detected from its values (as torch's is_causal=None)."""
    L = 5
    enc_h, enc_t = (
        lib.nn.TransformerEncoder(layer, 2, lib.nn.LayerNorm(D), enable_nested_tensor=False)
        for lib, layer in zip(
            (hookgrad, torch), _both("TransformerEncoderLayer", D, HEADS, FF, 0.0), strict=True
        )
    )
    mask = torch.nn.Transformer.generate_square_subsequent_mask(L).numpy()
    compare_module(enc_h, enc_t, _seq(2, L, False), mask=mask)
    dec_h, dec_t = (
        lib.nn.TransformerDecoder(layer, 2, lib.nn.LayerNorm(D))
        for lib, layer in zip(
            (hookgrad, torch), _both("TransformerDecoderLayer", D, HEADS, FF, 0.0), strict=True
        )
    )
    compare_module(dec_h, dec_t, _seq(2, 4, False), _seq(2, L, False, seed=3))
    assert enc_h.layers[0].linear1.weight is not enc_h.layers[1].linear1.weight


@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_matches_torch(batch_first):
    """nn.Transformer end to end with a causal target mask and source padding."""
    hg, tm = _both(
        "Transformer", D, HEADS, 2, 2, FF, 0.0, batch_first=batch_first,
    )  # fmt: skip
    pad = np.zeros((2, 5), dtype=bool)
    pad[1, -1] = True
    compare_module(
        hg, tm, _seq(2, 5, batch_first), _seq(2, 4, batch_first, seed=2),
        tgt_mask=np.triu(np.ones((4, 4), dtype=bool), 1), src_key_padding_mask=pad,
    )  # fmt: skip


def test_generate_square_subsequent_mask_is_torchs():
    """The causal mask: -inf above the diagonal, float32, and its repr, as torch's."""
    h = nn.Transformer.generate_square_subsequent_mask(4)
    t = torch.nn.Transformer.generate_square_subsequent_mask(4)
    np.testing.assert_array_equal(h.numpy(), t.numpy())
    assert repr(h) == repr(t)
    h64 = nn.Transformer.generate_square_subsequent_mask(2, dtype=hookgrad.float64)
    assert h64.dtype == hookgrad.float64


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("TransformerEncoderLayer", (D, HEADS, FF)),
        ("TransformerDecoderLayer", (D, HEADS, FF)),
        ("Transformer", (D, HEADS, 1, 1, FF)),
    ],
)
def test_structure_and_state_dict_are_torchs(name, args):
    """Submodule names, parameter names and shapes, and repr equal torch's; state dicts load
    both ways."""
    hg, tm = _both(name, *args)
    assert [n for n, _ in hg.named_modules()] == [n for n, _ in tm.named_modules()]
    h_state, t_state = hg.state_dict(), tm.state_dict()
    assert list(h_state) == list(t_state)
    assert [tuple(v.shape) for v in h_state.values()] == [tuple(v.shape) for v in t_state.values()]
    sync_from_torch(hg, tm)
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in hg.state_dict().items()})
    assert repr(hg) == repr(tm)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor")
def test_transformer_initialises_matrices_xavier_uniform():
    """Transformer resets every parameter with more than one dim from xavier_uniform_."""
    model = nn.Transformer(D, HEADS, 1, 1, FF)
    w = model.encoder.layers[0].linear1.weight.detach().numpy()
    bound = np.sqrt(6 / (D + FF))
    assert np.abs(w).max() <= bound
    assert np.abs(w).max() > 0.8 * bound


@pytest.mark.parametrize(
    ("name", "args", "inputs"),
    [
        ("TransformerEncoderLayer", (D, HEADS, FF, 0.1), 1),
        ("TransformerDecoderLayer", (D, HEADS, FF, 0.1), 2),
        ("Transformer", (D, HEADS, 1, 1, FF, 0.1), 2),
    ],
)
@pytest.mark.parametrize("activation", ["relu", "module"])
def test_hooks_fire_on_torchs_submodules_in_torchs_order(name, args, inputs, activation):
    """The sequence of (forward / backward pre / backward hook, submodule) events of one forward
    and backward equals torch's: same submodules (out_proj never runs as a module), same order."""
    traces = []
    for lib, module in zip(
        (hookgrad, torch), _both(name, *args, activation=activation), strict=True
    ):
        module.eval()  # dropout off, grad on: torch takes its ordinary path
        xs = [lib.tensor(_seq(2, 3, False, seed=i), requires_grad=True) for i in range(inputs)]
        traces.append(hook_trace(module, lambda m=module, xs=xs: m(*xs)))
    assert traces[0] == traces[1]
    assert ("fwd", "self_attn.out_proj") not in traces[0]


def test_nested_tensor_notice_is_torchs():
    """enable_nested_tensor with a layer torch cannot nest warns with torch's text; the
    argument is kept (the ordinary path always runs)."""
    messages = []
    for lib in (hookgrad, torch):
        layer = lib.nn.TransformerEncoderLayer(D, HEADS, FF)
        with pytest.warns(UserWarning) as record:
            encoder = lib.nn.TransformerEncoder(layer, 1)
        messages.append(str(record[0].message))
        assert encoder.enable_nested_tensor is True
        assert encoder.use_nested_tensor is False
    assert messages[0] == messages[1]


def test_eval_without_grad_matches_torchs_fast_path():
    """In eval mode without grad torch runs its fused encoder kernel; hookgrad's ordinary path
    gives the same numbers."""
    layers = _both("TransformerEncoderLayer", D, HEADS, FF, 0.1, batch_first=True)
    hg = nn.TransformerEncoder(layers[0], 2)
    tm = torch.nn.TransformerEncoder(layers[1], 2)
    sync_from_torch(hg, tm)
    hg.eval()
    tm.eval()
    x = _seq(2, 5, True)
    with hookgrad.no_grad(), torch.no_grad():
        np.testing.assert_allclose(
            hg(hookgrad.tensor(x)).numpy(), tm(torch.tensor(x)).numpy(), 1e-5, 1e-5
        )


def test_activation_string_errors_like_torch(fails_like_torch):
    """An unknown activation name raises torch's RuntimeError."""
    fails_like_torch(lambda lib: lib.nn.TransformerEncoderLayer(D, HEADS, activation="tanh"))


def test_dropout_in_training_is_seeded():
    """With dropout in training mode the output is reproducible under manual_seed and differs
    from eval mode's."""
    layer = nn.TransformerEncoderLayer(D, HEADS, FF, dropout=0.5)
    x = hookgrad.tensor(_seq(2, 3, False))
    hookgrad.manual_seed(3)
    first = layer(x)
    hookgrad.manual_seed(3)
    assert hookgrad.equal(first, layer(x))
    layer.eval()
    assert not hookgrad.allclose(first, layer(x))


def test_decoder_stack_with_a_module_activation_runs_relu_as_torch():
    """torch's TransformerDecoderLayer.__setstate__ gives each deep-copied layer F.relu in
    place of a module activation (which stays listed as a submodule); hookgrad does the same,
    so a TransformerDecoder built with nn.GELU() gives torch's numbers."""
    layers = _both("TransformerDecoderLayer", D, HEADS, FF, 0.0, activation="module")
    hg, tm = (
        lib.nn.TransformerDecoder(layer, 1)
        for lib, layer in zip((hookgrad, torch), layers, strict=True)
    )
    assert hg.layers[0].activation is nn.functional.relu
    assert "layers.0.activation" in dict(hg.named_modules())
    compare_module(hg, tm, _seq(2, 4, False), _seq(2, 3, False, seed=2))


def test_padded_positions_keep_their_values_unlike_torchs_nested_path():
    """In eval mode without grad, torch's nested-tensor path writes zeros at padded positions
    of TransformerEncoder's output; hookgrad runs the ordinary path (the values torch computes
    with grad on) and equals torch everywhere else."""
    layers = _both("TransformerEncoderLayer", D, HEADS, FF, 0.1, batch_first=True)
    hg, tm = nn.TransformerEncoder(layers[0], 1), torch.nn.TransformerEncoder(layers[1], 1)
    sync_from_torch(hg, tm)
    hg.eval()
    tm.eval()
    x = _seq(2, 5, True)
    pad = np.zeros((2, 5), dtype=bool)
    pad[1, 3:] = True
    h = hg(hookgrad.tensor(x), src_key_padding_mask=hookgrad.tensor(pad)).detach().numpy()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's nested-tensor prototype notice
        t_nested = tm(torch.tensor(x), src_key_padding_mask=torch.tensor(pad)).numpy()
    t_plain = tm(torch.tensor(x), src_key_padding_mask=torch.tensor(pad)).detach().numpy()
    assert not t_nested[1, 3:].any()
    np.testing.assert_allclose(h, t_plain, 1e-5, 1e-5)
    np.testing.assert_allclose(h[~pad], t_nested[~pad], 1e-5, 1e-5)

"""nn.init and the layers' default initialisation: bounds, statistics, reproducibility."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hookgrad
import hookgrad.nn as nn
from hookgrad.nn import init


def test_linear_default_init_bounds():
    """Linear(64, 32): kaiming_uniform_(a=sqrt(5)) gives |w| <= 1/sqrt(64); bias the same."""
    layer = nn.Linear(64, 32)
    w, b = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    bound = math.sqrt(3) * math.sqrt(2 / (1 + 5)) / math.sqrt(64)
    assert bound == pytest.approx(0.125)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    assert np.abs(b).max() <= bound and w.dtype == np.float32


def test_linear_weight_is_uniform_with_the_right_variance():
    """A large Linear weight has mean ~0 and variance bound**2 / 3."""
    w = nn.Linear(400, 500).weight.detach().numpy()
    bound = 1 / math.sqrt(400)
    assert abs(w.mean()) < 0.01 * bound
    assert w.var() == pytest.approx(bound**2 / 3, rel=0.02)


def test_conv2d_default_init_uses_receptive_field():
    """Conv2d(3, 8, 3): fan_in = 3*3*3 = 27, so weights and bias lie within 1/sqrt(27)."""
    conv = nn.Conv2d(3, 8, 3)
    bound = 1 / math.sqrt(27)
    assert np.abs(conv.weight.detach().numpy()).max() <= bound
    assert np.abs(conv.bias.detach().numpy()).max() <= bound
    assert conv.weight.shape == (8, 3, 3, 3)


def test_embedding_default_init_is_standard_normal_with_zero_padding_row():
    """Embedding weights are N(0, 1); the padding row is zeros."""
    emb = nn.Embedding(1000, 64, padding_idx=3)
    w = emb.weight.detach().numpy()
    assert w[3].tolist() == [0.0] * 64
    rest = np.delete(w, 3, axis=0)
    assert abs(rest.mean()) < 0.02 and rest.std() == pytest.approx(1.0, rel=0.02)


def test_layernorm_default_init_ones_and_zeros():
    """LayerNorm starts with weight ones and bias zeros."""
    ln = nn.LayerNorm((2, 3))
    assert ln.weight.tolist() == [[1.0] * 3] * 2 and ln.bias.tolist() == [[0.0] * 3] * 2


def test_manual_seed_makes_init_reproducible():
    """The same seed gives identical weights; another seed gives different ones."""
    hookgrad.manual_seed(123)
    first = nn.Linear(5, 4).weight.tolist()
    hookgrad.manual_seed(123)
    second = nn.Linear(5, 4).weight.tolist()
    hookgrad.manual_seed(124)
    third = nn.Linear(5, 4).weight.tolist()
    assert first == second and first != third


def test_explicit_generator_is_used():
    """A generator argument draws from that generator, not the default one."""
    a = init.uniform_(hookgrad.empty(3), generator=hookgrad.Generator().manual_seed(7))
    b = init.uniform_(hookgrad.empty(3), generator=hookgrad.Generator().manual_seed(7))
    assert a.tolist() == b.tolist()


@pytest.mark.parametrize(
    ("name", "param", "expected"),
    [
        ("linear", None, 1.0),
        ("conv2d", None, 1.0),
        ("sigmoid", None, 1.0),
        ("tanh", None, 5 / 3),
        ("relu", None, math.sqrt(2)),
        ("leaky_relu", None, math.sqrt(2 / (1 + 0.01**2))),
        ("leaky_relu", math.sqrt(5), math.sqrt(1 / 3)),
        ("selu", None, 0.75),
    ],
)
def test_calculate_gain(name, param, expected):
    """calculate_gain returns torch's recommended gains."""
    assert init.calculate_gain(name, param) == pytest.approx(expected)


def test_calculate_gain_errors():
    """Unknown nonlinearities and bool slopes raise ValueError."""
    with pytest.raises(ValueError, match="Unsupported nonlinearity softplus"):
        init.calculate_gain("softplus")
    with pytest.raises(ValueError, match="negative_slope True not a valid number"):
        init.calculate_gain("leaky_relu", True)


def test_fan_in_and_fan_out():
    """Fans multiply the channel dims by the receptive field size."""
    assert init._calculate_fan_in_and_fan_out(hookgrad.empty(8, 3, 5, 5)) == (75, 200)
    assert init._calculate_fan_in_and_fan_out(hookgrad.empty(4, 6)) == (6, 4)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init._calculate_fan_in_and_fan_out(hookgrad.empty(3))


def test_kaiming_normal_std_and_mode():
    """kaiming_normal_(relu, fan_out) has std sqrt(2 / fan_out)."""
    w = init.kaiming_normal_(hookgrad.empty(300, 600), mode="fan_out", nonlinearity="relu")
    assert float(w.std()) == pytest.approx(math.sqrt(2 / 300), rel=0.02)
    with pytest.raises(ValueError, match="Mode fan_avg not supported"):
        init.kaiming_uniform_(hookgrad.empty(2, 2), mode="fan_avg")


def test_xavier_uniform_bound_and_xavier_normal_std():
    """xavier_uniform_ stays within gain*sqrt(6/(in+out)); xavier_normal_ has std gain*sqrt(2/(in+out))."""
    u = init.xavier_uniform_(hookgrad.empty(200, 300), gain=2.0).detach().numpy()
    bound = 2.0 * math.sqrt(6 / 500)
    assert np.abs(u).max() <= bound and np.abs(u).max() > 0.99 * bound
    n = init.xavier_normal_(hookgrad.empty(400, 600)).detach().numpy()
    assert n.std() == pytest.approx(math.sqrt(2 / 1000), rel=0.02)


def test_trunc_normal_stays_in_bounds():
    """trunc_normal_ draws lie within [a, b]."""
    t = init.trunc_normal_(hookgrad.empty(10000), std=1.0, a=-0.5, b=0.5).detach().numpy()
    assert t.min() >= -0.5 and t.max() <= 0.5 and t.std() > 0.25


def test_init_functions_are_in_place_and_bump_version():
    """Init functions return the same tensor, write it unrecorded, and bump its version."""
    p = nn.Parameter(hookgrad.empty(2, 2))
    before = p._version
    assert init.constant_(p, 0.5) is p
    assert p.tolist() == [[0.5, 0.5], [0.5, 0.5]] and p._version == before + 1
    assert p.grad_fn is None and p.requires_grad
    init.ones_(p)
    init.zeros_(p)
    init.normal_(p, mean=3.0, std=0.0)
    assert p.tolist() == [[3.0, 3.0], [3.0, 3.0]] and p._version == before + 4


def test_init_after_forward_invalidates_saved_weight():
    """Re-initialising a weight used by a recorded graph makes backward raise (version check)."""
    layer = nn.Linear(2, 2)
    out = layer(hookgrad.ones(1, 2, requires_grad=True)).sum()
    init.zeros_(layer.weight)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()


def test_zero_element_kaiming_warns():
    """Kaiming init of an empty tensor is a no-op with a UserWarning."""
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        init.kaiming_uniform_(hookgrad.empty(0, 3))


@given(
    shape=st.sampled_from([(3, 5), (5, 3), (6, 6), (4, 2, 3, 3), (1, 7), (8, 1)]),
    gain=st.sampled_from([1.0, 0.5, 2**0.5]),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=20, deadline=None)
def test_orthogonal_matches_torch(shape: tuple[int, ...], gain: float, seed: int) -> None:
    """orthogonal_ draws torch's normal matrix and gives torch's Q (signs fixed by R), times
    the gain, for tall, wide and conv-shaped weights; rows (or columns) are orthonormal."""
    torch = pytest.importorskip("torch")
    made = []
    for lib in (hookgrad, torch):
        lib.manual_seed(seed)
        w = lib.empty(shape)
        assert lib.nn.init.orthogonal_(w, gain) is w
        made.append(w.numpy())
    np.testing.assert_allclose(made[0], made[1], rtol=1e-4, atol=2e-6)
    flat = made[0].reshape(shape[0], -1) / gain
    small = flat @ flat.T if flat.shape[0] <= flat.shape[1] else flat.T @ flat
    np.testing.assert_allclose(small, np.eye(len(small)), atol=1e-5)


def test_orthogonal_refuses_vectors_as_torch() -> None:
    """A 1-dim tensor is torch's ValueError."""
    with pytest.raises(ValueError, match="Only tensors with 2 or more dimensions are supported"):
        hookgrad.nn.init.orthogonal_(hookgrad.empty(3))

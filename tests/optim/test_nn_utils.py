"""hookgrad.nn.utils against torch.nn.utils: gradient clipping and parameter vectors."""

from __future__ import annotations

import math
import re
import warnings
from typing import Any

import numpy as np
import pytest

import hookgrad
import hookgrad.nn.utils as hg_utils

torch = pytest.importorskip("torch")

SHAPES = [(3, 4), (5,), (2, 2, 2)]
NORM_TYPES = [2.0, 1.0, 3.0, 0.5, math.inf, -math.inf, 0.0]


def _params(lib: Any, scale: float, none_at: int | None = None) -> list[Any]:
    """Parameters with seeded gradients times ``scale``; the one at ``none_at`` has no grad."""
    rng = np.random.default_rng(7)
    params = []
    for i, shape in enumerate(SHAPES):
        p = lib.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
        grad = (rng.standard_normal(shape) * scale).astype(np.float32)
        if i != none_at:
            p.grad = lib.tensor(grad)
        params.append(p)
    return params


def _grads(params: list[Any]) -> list[np.ndarray | None]:
    return [None if p.grad is None else p.grad.numpy().copy() for p in params]


def _assert_grads_close(h: list[Any], t: list[Any]) -> None:
    for hg, tg in zip(_grads(h), _grads(t)):
        assert (hg is None) == (tg is None)
        if hg is not None:
            np.testing.assert_allclose(hg, tg, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("norm_type", NORM_TYPES, ids=str)
@pytest.mark.parametrize("scale", [3.0, 0.01], ids=["clipped", "below_max"])
def test_clip_grad_norm_matches_torch(norm_type, scale):
    """Clipped grads and the returned pre-clip total norm equal torch's, for each norm type."""
    h, t = _params(hookgrad, scale, none_at=1), _params(torch, scale, none_at=1)
    h_norm = hg_utils.clip_grad_norm_(h, max_norm=1.5, norm_type=norm_type)
    t_norm = torch.nn.utils.clip_grad_norm_(t, max_norm=1.5, norm_type=norm_type)
    assert isinstance(h_norm, hookgrad.Tensor)
    assert h_norm.shape == ()
    assert h_norm.dtype == np.float32
    assert not h_norm.requires_grad
    np.testing.assert_allclose(h_norm.item(), t_norm.item(), rtol=1e-6)
    _assert_grads_close(h, t)


def test_clip_grad_norm_scales_by_max_over_norm():
    """Grads (3, 4) have norm 5; max_norm=1 scales them by 1/(5 + 1e-6)."""
    p = hookgrad.tensor([0.0, 0.0], requires_grad=True)
    p.grad = hookgrad.tensor([3.0, 4.0])
    norm = hg_utils.clip_grad_norm_(p, 1.0)
    assert norm.item() == 5.0
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8], rtol=1e-6)


def test_clip_grad_norm_below_max_multiplies_by_one():
    """Below max_norm the coefficient clamps to 1.0: values unchanged, grad still written."""
    p = hookgrad.tensor([0.0, 0.0], requires_grad=True)
    p.grad = hookgrad.tensor([0.3, 0.4])
    version = p.grad._version
    hg_utils.clip_grad_norm_([p], 10.0)
    assert p.grad.numpy().tolist() == np.array([0.3, 0.4], dtype=np.float32).tolist()
    assert p.grad._version == version + 1


def test_get_total_norm_and_clip_with_norm_compose_like_torch():
    """get_total_norm then clip_grads_with_norm_ equals torch's pair (and clip_grad_norm_)."""
    h, t = _params(hookgrad, 2.0), _params(torch, 2.0)
    h_norm = hg_utils.get_total_norm([p.grad for p in h], norm_type=3.0)
    t_norm = torch.nn.utils.get_total_norm([p.grad for p in t], norm_type=3.0)
    np.testing.assert_allclose(h_norm.item(), t_norm.item(), rtol=1e-6)
    hg_utils.clip_grads_with_norm_(h, 2.0, h_norm)
    torch.nn.utils.clip_grads_with_norm_(t, 2.0, t_norm)
    _assert_grads_close(h, t)


def test_total_norm_of_nothing_is_zero():
    """No gradients at all: the norm is tensor(0.) and nothing is scaled, as in torch."""
    p = hookgrad.tensor([1.0], requires_grad=True)
    assert hg_utils.clip_grad_norm_([p], 1.0).item() == 0.0
    assert hg_utils.get_total_norm([]).item() == torch.nn.utils.get_total_norm([]).item() == 0.0


def test_empty_generator_warns():
    """An empty generator of parameters warns that nothing will be clipped."""
    with pytest.warns(UserWarning, match="`parameters` is an empty generator"):
        hg_utils.clip_grad_norm_((p for p in []), 1.0)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
@pytest.mark.parametrize("norm_type", [2.0, math.inf])
def test_nonfinite_norm_raises_when_asked(bad, norm_type):
    """error_if_nonfinite=True raises torch's RuntimeError (same text) on a nan or inf norm."""
    messages = []
    for lib, clip in (
        (hookgrad, hg_utils.clip_grad_norm_),
        (torch, torch.nn.utils.clip_grad_norm_),
    ):
        p = lib.tensor([1.0, 2.0], requires_grad=True)
        p.grad = lib.tensor([1.0, bad])
        with pytest.raises(RuntimeError) as info:
            clip([p], 1.0, norm_type=norm_type, error_if_nonfinite=True)
        messages.append(str(info.value))
        assert p.grad.tolist()[0] == 1.0  # nothing was scaled
    assert messages[0] == messages[1]
    assert messages[0].startswith(
        f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
        "so it cannot be clipped."
    )


def test_nonfinite_norm_scales_when_not_asked():
    """Without error_if_nonfinite an inf norm scales the grads by 1/inf = 0, as torch does."""
    h = hookgrad.tensor([1.0, 2.0], requires_grad=True)
    t = torch.tensor([1.0, 2.0], requires_grad=True)
    h.grad, t.grad = hookgrad.tensor([1.0, math.inf]), torch.tensor([1.0, math.inf])
    h_norm = hg_utils.clip_grad_norm_(h, 1.0)
    t_norm = torch.nn.utils.clip_grad_norm_(t, 1.0)
    assert h_norm.item() == t_norm.item() == math.inf
    np.testing.assert_array_equal(h.grad.numpy(), t.grad.numpy())


def test_deprecated_clip_grad_norm_warns_and_clips():
    """clip_grad_norm (no underscore) is a deprecated alias warning with FutureWarning."""
    p = hookgrad.tensor([0.0, 0.0], requires_grad=True)
    p.grad = hookgrad.tensor([3.0, 4.0])
    with pytest.warns(FutureWarning, match="deprecated"):
        norm = hg_utils.clip_grad_norm(p, 1.0)
    assert norm.item() == 5.0


@pytest.mark.parametrize("clip_value", [0.5, 1.0, 3.0])
def test_clip_grad_value_matches_torch(clip_value):
    """Grads are clamped to [-clip_value, clip_value]; None grads are skipped."""
    h, t = _params(hookgrad, 2.0, none_at=0), _params(torch, 2.0, none_at=0)
    assert hg_utils.clip_grad_value_(h, clip_value) is None
    torch.nn.utils.clip_grad_value_(t, clip_value)
    _assert_grads_close(h, t)
    assert max(float(np.abs(g).max()) for g in _grads(h) if g is not None) == clip_value


def test_clip_grad_value_single_tensor_exact():
    """A single tensor is accepted; [-3, 0.5, 2] clamped at 1 is [-1, 0.5, 1]."""
    p = hookgrad.tensor([0.0, 0.0, 0.0], requires_grad=True)
    p.grad = hookgrad.tensor([-3.0, 0.5, 2.0])
    hg_utils.clip_grad_value_(p, 1)
    assert p.grad.tolist() == [-1.0, 0.5, 1.0]


def test_parameters_to_vector_round_trip():
    """Flatten to one vector (same as torch's), change it, write it back into the params."""
    h, t = _params(hookgrad, 1.0), _params(torch, 1.0)
    vec = hg_utils.parameters_to_vector(h)
    t_vec = torch.nn.utils.parameters_to_vector(t)
    assert vec.shape == (12 + 5 + 8,)
    np.testing.assert_array_equal(vec.detach().numpy(), t_vec.detach().numpy())
    new = hookgrad.arange(25, dtype=hookgrad.float32)
    hg_utils.vector_to_parameters(new, h)
    assert [tuple(p.shape) for p in h] == SHAPES
    assert h[1].tolist() == [12.0, 13.0, 14.0, 15.0, 16.0]
    assert h[2].tolist()[1][1] == [23.0, 24.0]
    assert np.array_equal(hg_utils.parameters_to_vector(h).detach().numpy(), new.numpy())


def test_parameters_to_vector_is_differentiable():
    """The vector keeps the graph: the gradient of its weighted sum reaches each parameter."""
    a = hookgrad.tensor([[1.0, 2.0]], requires_grad=True)
    b = hookgrad.tensor([3.0], requires_grad=True)
    vec = hg_utils.parameters_to_vector([a, b])
    (vec * hookgrad.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert a.grad.tolist() == [[1.0, 2.0]]
    assert b.grad.tolist() == [3.0]


def test_vector_to_parameters_requires_a_tensor():
    """A non-Tensor vector is a TypeError naming its type."""
    p = hookgrad.tensor([1.0], requires_grad=True)
    with pytest.raises(TypeError, match=re.escape("expected Tensor, but got: list")):
        hg_utils.vector_to_parameters([1.0], [p])


def test_public_names_match_torch():
    """Every clipping/vector helper hookgrad exports exists in torch.nn.utils too."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in hg_utils.__all__:
            assert hasattr(torch.nn.utils, name), name

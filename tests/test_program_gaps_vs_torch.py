"""What a blind holdout of real training programs (pytorch/examples gat, gcn and
mnist_forward_forward, karpathy/makemore, rasbt/LLMs-from-scratch, MorvanZhou's tutorials)
reached first and hookgrad lacked, each pinned against torch 2.13: factory spellings
(``size=`` keywords, ``randint(high, size=...)``), linspace's float32 points,
``torch.inference_mode``, ``torch.spmm`` on dense operands and the math constants."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hookgrad

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name", ["empty", "zeros", "ones", "rand", "randn"])
def test_factories_take_size_as_a_keyword(name: str) -> None:
    """torch.<factory>(size=(2, 3)) makes a 2x3 tensor (gat's torch.empty(size=...))."""
    ours = getattr(hookgrad, name)(size=(2, 3))
    theirs = getattr(torch, name)(size=(2, 3))
    assert tuple(ours.shape) == tuple(theirs.shape) == (2, 3)
    assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")


def test_randint_with_high_and_a_size_keyword_draws_torchs_numbers() -> None:
    """randint(9, size=(5,)) draws from [0, 9) as torch does, the same numbers from one seed."""
    hookgrad.manual_seed(3)
    torch.manual_seed(3)
    ours = hookgrad.randint(9, size=(5,))
    theirs = torch.randint(9, size=(5,))
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


# Ends of ordinary size: near FLT_MIN torch's step is an ulp off the float32 quotient (not
# pinned; no program draws a grid ending at 1e-38).
ends = st.floats(-1e3, 1e3, width=32).filter(lambda v: v == 0 or abs(v) > 1e-6)


@settings(max_examples=60, deadline=None)
@given(start=ends, end=ends, steps=st.integers(0, 3000))
def test_linspace_gives_torchs_points(start: float, end: float, steps: int) -> None:
    """linspace's float32 points equal torch's to the last bit (MorvanZhou's x axis) and
    float64's within an ulp (torch counts each half from its own end, one rounding a point)."""
    np.testing.assert_array_equal(
        hookgrad.linspace(start, end, steps).numpy(), torch.linspace(start, end, steps).numpy()
    )
    np.testing.assert_array_max_ulp(
        hookgrad.linspace(start, end, steps, dtype=hookgrad.float64).numpy(),
        torch.linspace(start, end, steps, dtype=torch.float64).numpy(),
    )


def test_inference_mode_records_no_graph_as_context_and_decorator() -> None:
    """inference_mode() and @inference_mode() record no graph; inference_mode(False) changes
    nothing; is_inference_mode_enabled() tells which, as in torch."""
    for lib in (hookgrad, torch):
        w = lib.ones(2, requires_grad=True)
        with lib.inference_mode():
            assert lib.is_inference_mode_enabled()
            assert not (w * 2).requires_grad
        assert not lib.is_inference_mode_enabled()
        with lib.inference_mode(False):
            assert (w * 2).requires_grad
            assert not lib.is_inference_mode_enabled()

        @lib.inference_mode()
        def twice(x: object) -> object:
            return x * 2  # type: ignore[operator]

        @lib.inference_mode
        def thrice(x: object) -> object:
            return x * 3  # type: ignore[operator]

        assert not twice(w).requires_grad and not thrice(w).requires_grad
        assert (w * 2).requires_grad


def test_spmm_of_dense_operands_is_mm() -> None:
    """torch.spmm(a, b) with a dense a multiplies as mm, gradients included."""
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    grads = []
    for lib in (hookgrad, torch):
        a = lib.tensor(values, requires_grad=True)
        out = lib.spmm(a, lib.tensor(values.T.copy()))
        out.sum().backward()
        grads.append((out.detach().numpy(), a.grad.numpy()))
    np.testing.assert_array_equal(grads[0][0], grads[1][0])
    np.testing.assert_array_equal(grads[0][1], grads[1][1])


def test_math_constants_are_torchs() -> None:
    """torch.inf, nan, pi, e and newaxis exist and equal torch's."""
    assert hookgrad.inf == torch.inf == math.inf
    assert math.isnan(hookgrad.nan) and math.isnan(torch.nan)
    assert hookgrad.pi == torch.pi and hookgrad.e == torch.e
    assert hookgrad.newaxis is torch.newaxis is None


@pytest.mark.parametrize("grad", [False, True])
def test_masked_fill_in_place_broadcasts_the_mask(grad: bool) -> None:
    """x.masked_fill_(mask, -inf) with a (4, 4) causal mask on (2, 3, 4, 4) scores fills every
    head, recording or not, and the gradient skips the filled entries (LLMs-from-scratch's
    MultiHeadAttention)."""
    scores = np.linspace(-1, 1, 96, dtype=np.float32).reshape(2, 3, 4, 4)
    results = []
    for lib in (hookgrad, torch):
        w = lib.tensor(scores, requires_grad=grad)
        x = w * 2
        mask = lib.triu(lib.ones(4, 4), diagonal=1).bool()
        x.masked_fill_(mask, -lib.inf)
        out = lib.softmax(x, dim=-1)
        if grad:
            (out * lib.arange(4.0)).sum().backward()
        results.append((out.detach().numpy(), w.grad.numpy() if grad else None))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-6)
    if grad:
        np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(
    ("mask_shape", "dtype"), [((3, 3), "bool"), ((2, 2, 3), "bool"), ((3,), "float32")]
)
def test_masked_fill_in_place_refuses_what_torch_refuses(
    mask_shape: tuple[int, ...], dtype: str
) -> None:
    """A mask that does not broadcast to x, would grow x, or is not boolean raises torch's
    RuntimeError and text."""
    messages = []
    for lib in (hookgrad, torch):
        x = lib.zeros(2, 3)
        mask = lib.ones(*mask_shape, dtype=getattr(lib, dtype))
        with pytest.raises(RuntimeError) as info:
            x.masked_fill_(mask, 1.0)
        messages.append(str(info.value))
    assert messages[0] == messages[1]

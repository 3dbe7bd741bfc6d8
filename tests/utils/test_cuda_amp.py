"""torch.cuda.amp's deprecated autocast and GradScaler, as torch without CUDA keeps them."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

torch = pytest.importorskip("torch")


def test_cuda_amp_imports_as_in_scripts(lib: Any) -> None:
    """`from torch.cuda.amp import autocast, GradScaler` works, as scripts write it."""
    module = __import__(f"{lib.__name__}.cuda.amp", fromlist=["autocast", "GradScaler"])
    assert module.autocast is lib.cuda.amp.autocast
    assert module.GradScaler is lib.cuda.amp.GradScaler


def test_deprecated_autocast_warns_and_stays_disabled(lib: Any) -> None:
    """torch.cuda.amp.autocast warns torch's FutureWarning, then (enabled) the CUDA warning,
    and computes in float32."""
    with pytest.warns(FutureWarning, match=r"Please use `torch\.amp\.autocast\('cuda'"):
        off = lib.cuda.amp.autocast(enabled=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        on = lib.cuda.amp.autocast()
    messages = [str(w.message) for w in caught]
    assert any("CUDA is not available" in m for m in messages), messages
    for ctx in (off, on):
        with ctx:
            assert (lib.ones(2, 2) @ lib.ones(2, 2)).dtype == lib.float32


def test_deprecated_grad_scaler_is_a_disabled_scaler(lib: Any) -> None:
    """torch.cuda.amp.GradScaler warns torch's FutureWarning and is disabled: scale() returns
    the loss unchanged and step() is the optimizer's step."""
    with pytest.warns(FutureWarning, match=r"torch\.cuda\.amp\.GradScaler\(args\.\.\.\)"):
        scaler = lib.cuda.amp.GradScaler(enabled=False)
    w = lib.ones(2, requires_grad=True)
    opt = lib.optim.SGD([w], lr=0.5)
    loss = (w * 3).sum()
    assert scaler.scale(loss) is loss and not scaler.is_enabled()
    loss.backward()
    scaler.step(opt)
    scaler.update()
    assert w.tolist() == [-0.5, -0.5]

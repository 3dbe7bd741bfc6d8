"""The autocast API around the casts against torch 2.13: torch.cpu and its deprecated
torch.cpu.amp, device-string validation of autocast and its queries, what ``with ... as``
binds, and a dtype given by name."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

import hookgrad

torch = pytest.importorskip("torch")
pytest.importorskip("ml_dtypes")


def _caught(action: Any) -> tuple[Any, list[tuple[type[Warning], str]]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = action()
    return result, [(w.category, str(w.message)) for w in caught]


def test_cpu_amp_autocast_warns_as_torch_and_casts(lib: Any) -> None:
    """torch.cpu.amp.autocast() (also imported from torch.cpu.amp) warns torch's
    FutureWarning, then computes matmuls in bfloat16, or in the dtype given."""
    from_import = __import__(f"{lib.__name__}.cpu.amp", fromlist=["autocast"]).autocast
    assert from_import is lib.cpu.amp.autocast
    ctx, warned = _caught(lambda: lib.cpu.amp.autocast())
    assert warned == [
        (
            FutureWarning,
            "`torch.cpu.amp.autocast(args...)` is deprecated. Please use "
            "`torch.amp.autocast('cpu', args...)` instead.",
        )
    ]
    x = lib.ones(2, 2)
    with ctx:
        assert (x @ x).dtype == lib.bfloat16
    with _caught(lambda: lib.cpu.amp.autocast(dtype=lib.float16))[0]:
        assert (x @ x).dtype == lib.float16
    assert (x @ x).dtype == lib.float32


def test_cpu_amp_grad_scaler_warns_as_torch() -> None:
    """torch.cpu.amp.GradScaler() warns torch's FutureWarning text (hookgrad then refuses a
    CPU loss scaler, as its amp.GradScaler("cpu") does)."""
    _, expected = _caught(lambda: torch.cpu.amp.GradScaler())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(NotImplementedError, match="grad_scale plugin"):
            hookgrad.cpu.amp.GradScaler()
    assert [(w.category, str(w.message)) for w in caught] == expected
    with pytest.warns(FutureWarning):
        assert hookgrad.cpu.amp.GradScaler(enabled=False).is_enabled() is False


def test_cpu_device_module_answers_as_torch() -> None:
    """torch.cpu's device queries give torch's answers."""
    for name in ("is_available", "is_initialized", "device_count", "current_device"):
        assert getattr(hookgrad.cpu, name)() == getattr(torch.cpu, name)(), name
    assert hookgrad.cpu.synchronize() is torch.cpu.synchronize() is None
    assert hookgrad.cpu.set_device("cpu") is torch.cpu.set_device("cpu") is None


@pytest.mark.parametrize("device", ["xyz", "CPU", "gpu"])
@pytest.mark.parametrize(
    "call",
    [
        lambda L, d: L.autocast(d),
        lambda L, d: L.amp.autocast(d),
        lambda L, d: L.amp.is_autocast_available(d),
        lambda L, d: L.is_autocast_enabled(d),
        lambda L, d: L.get_autocast_dtype(d),
    ],
    ids=[
        "autocast",
        "amp.autocast",
        "is_autocast_available",
        "is_autocast_enabled",
        "get_autocast_dtype",
    ],
)
def test_unknown_device_types_fail_as_torch(fails_like_torch: Any, call: Any, device: str) -> None:
    """A device string torch cannot parse is refused with torch's RuntimeError text."""
    fails_like_torch(lambda lib: call(lib, device))


@pytest.mark.parametrize("dtype", [None, "float16"])
def test_device_without_autocast_is_refused_as_torch(fails_like_torch: Any, dtype: Any) -> None:
    """A device type torch knows but has no autocast for is refused: without a dtype by the
    dtype query ("unsupported scalarType"), with one as an unsupported device_type."""
    fails_like_torch(lambda lib: lib.autocast("vulkan", dtype=dtype and getattr(lib, dtype)))


@pytest.mark.parametrize("device", ["mps", "xpu", "hpu"])
def test_autocast_of_an_absent_device_changes_nothing(lib: Any, device: str) -> None:
    """An autocast for another device torch supports is accepted without a warning and leaves
    CPU computation in float32, as torch on a machine without that device."""
    ctx, warned = _caught(lambda: lib.autocast(device))
    assert warned == []
    with ctx:
        assert (lib.ones(2, 2) @ lib.ones(2, 2)).dtype == lib.float32
    assert lib.amp.is_autocast_available(device) is True


def test_with_autocast_as_binds_the_autocast(lib: Any) -> None:
    """``with torch.autocast("cpu") as ac`` binds the autocast object itself."""
    ctx = lib.autocast("cpu")
    with ctx as bound:
        assert bound is ctx


def test_dtype_given_by_name_disables_as_torch(lib: Any) -> None:
    """A dtype given as a string is not a dtype: the CPU autocast warns torch's message, and
    entering it raises torch's TypeError."""
    ctx, warned = _caught(lambda: lib.autocast("cpu", dtype="bfloat16"))
    assert [c for c, _ in warned] == [UserWarning]
    assert "CPU Autocast only supports dtypes of torch.bfloat16, torch.float16" in warned[0][1]
    with pytest.raises(TypeError, match=r"must be torch\.dtype, not str"):
        ctx.__enter__()
    assert lib.is_autocast_enabled("cpu") is False

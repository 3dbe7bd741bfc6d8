"""The modules programs touch even on a CPU: torch.cuda, torch.backends, torch.jit, torch.amp,
torch.distributed and torch.onnx answer as torch 2.13 built without CUDA does, or refuse with an
error naming what is missing."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import hookgrad

torch = pytest.importorskip("torch")
if torch.cuda.is_available():  # the comparison is with a CPU-only torch
    pytest.skip("torch sees a GPU here", allow_module_level=True)


def probe(lib: Any) -> dict[str, Any]:
    """What a training script asks before it picks a device and seeds."""
    lib.cuda.manual_seed(0)
    lib.cuda.manual_seed_all(0)
    lib.cuda.empty_cache()
    return {
        "available": lib.cuda.is_available(),
        "count": lib.cuda.device_count(),
        "initialized": lib.cuda.is_initialized(),
        "device": "cuda" if lib.cuda.is_available() else "cpu",
        "cudnn": (
            lib.backends.cudnn.enabled,
            lib.backends.cudnn.benchmark,
            lib.backends.cudnn.deterministic,
            lib.backends.cudnn.allow_tf32,
            lib.backends.cudnn.is_available(),
        ),
        "mps": lib.backends.mps.is_available(),
        "tf32": lib.backends.cuda.matmul.allow_tf32,
        "scripting": lib.jit.is_scripting(),
    }


def test_probes_answer_as_cpu_only_torch() -> None:
    """Availability, counts, seeding and backend flags equal torch's on a CPU-only build."""
    assert probe(hookgrad) == probe(torch)


@pytest.mark.parametrize("name", ["current_device", "synchronize", "get_device_name"])
def test_using_a_device_fails_as_in_torch(name: str) -> None:
    """What needs a CUDA device raises torch's AssertionError and message."""
    messages = []
    for lib in (hookgrad, torch):
        with pytest.raises(AssertionError) as caught:
            getattr(lib.cuda, name)()
        messages.append(str(caught.value))
    assert messages[0] == messages[1] == "Torch not compiled with CUDA enabled"


def test_accelerator_answers_as_cpu_only_torch() -> None:
    """``torch.accelerator`` (pytorch/examples pick their device with it): nothing available,
    no current accelerator, and what needs a device is torch's RuntimeError and message."""
    for lib in (hookgrad, torch):
        acc = lib.accelerator
        assert (acc.is_available(), acc.device_count(), acc.current_accelerator()) == (
            False,
            0,
            None,
        )
        device = acc.current_accelerator() if acc.is_available() else lib.device("cpu")
        assert str(device) == "cpu"
        for name in ("current_device_index", "synchronize", "memory_allocated", "empty_cache"):
            with pytest.raises(RuntimeError, match="Cannot access accelerator device when none"):
                getattr(acc, name)()


def test_tensor_cuda_is_refused_naming_the_cpu() -> None:
    """``tensor.cuda()`` gives hookgrad's error for a CUDA device, as ``.to("cuda")`` does."""
    with pytest.raises(RuntimeError, match="CPU only; got device 'cuda'"):
        hookgrad.ones(2).cuda()


def test_jit_decorators_pass_the_code_through() -> None:
    """A scripted or ignored function computes what the plain one does, as in eager torch;
    scripting warns that it is deprecated, as torch 2.13 does."""
    for lib in (hookgrad, torch):
        # No annotation: TorchScript takes x for a Tensor (it would refuse typing.Any).
        def double(x):
            return x * 2

        with pytest.warns(DeprecationWarning, match="`torch.jit.script` is deprecated"):
            double = lib.jit.script(double)

        @lib.jit.ignore
        def plus_one(x: Any) -> Any:
            return x + 1

        @lib.jit.unused
        def minus_one(x: Any) -> Any:
            return x - 1

        x = lib.tensor([1.0, 2.0])
        assert [double(x).tolist(), plus_one(x).tolist(), minus_one(x).tolist()] == [
            [2.0, 4.0],
            [2.0, 3.0],
            [0.0, 1.0],
        ]


def test_a_cuda_grad_scaler_disables_itself_and_passes_the_step_through() -> None:
    """GradScaler() without CUDA: torch's warning, then scale/unscale_/step/update change
    nothing, so a mixed-precision loop trains as the plain one, to the same weights."""
    weights = []
    for lib in (hookgrad, torch):
        lib.manual_seed(0)
        model = lib.nn.Linear(3, 1)
        model.weight.data = lib.tensor([[0.5, -0.25, 1.0]])
        model.bias.data = lib.tensor([0.1])
        optimizer = lib.optim.SGD(model.parameters(), lr=0.1)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            scaler = lib.amp.GradScaler()
        assert [str(w.message) for w in caught] == [
            "torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling."
        ]
        for _ in range(3):
            optimizer.zero_grad()
            loss = (model(lib.ones(2, 3)) ** 2).mean()
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            scaler.step(optimizer)
            scaler.update()
        assert (scaler.is_enabled(), scaler.get_scale(), scaler.state_dict()) == (False, 1.0, {})
        weights.append(model.weight.detach().numpy().copy())
    np.testing.assert_allclose(weights[0], weights[1], rtol=1e-6)


def test_what_hookgrad_cannot_do_is_refused_by_name() -> None:
    """No CPU loss scaling through GradScaler (the grad_scale plugin does it), no ONNX, no
    process groups: each error names what to use instead or what is missing."""
    with pytest.raises(NotImplementedError, match="grad_scale plugin"):
        hookgrad.amp.GradScaler("cpu")
    with pytest.raises(NotImplementedError, match="ONNX"):
        hookgrad.onnx.export(hookgrad.nn.Linear(1, 1), hookgrad.ones(1), "model.onnx")
    assert not hookgrad.distributed.is_available()
    assert not hookgrad.distributed.is_initialized()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        hookgrad.distributed.get_rank()

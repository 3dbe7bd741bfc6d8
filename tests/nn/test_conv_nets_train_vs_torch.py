"""Small convolutional networks built from the layers of issue #16 train as in torch 2.13:
the same losses step by step, the same running statistics, and module hooks seeing the same
gradients (a classifier with batch norm and pooling, a DCGAN-style generator, a 1-D net)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hookgrad  # noqa: E402


def _classifier(lib: Any) -> Any:
    nn = lib.nn
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3, padding="same"),
        nn.GroupNorm(2, 8),
        nn.SiLU(),
        nn.AvgPool2d(2, ceil_mode=True),
        nn.AdaptiveAvgPool2d((2, 2)),
        nn.Flatten(),
        nn.Linear(32, 4),
    )


def _generator(lib: Any) -> Any:
    nn = lib.nn
    return nn.Sequential(
        nn.ConvTranspose2d(6, 8, 4, 1, 0, bias=False),
        nn.BatchNorm2d(8),
        nn.ReLU(True),
        nn.ConvTranspose2d(8, 4, 4, 2, 1, bias=False),
        nn.InstanceNorm2d(4, affine=True),
        nn.LeakyReLU(0.2, True),
        nn.Upsample(scale_factor=2),
        nn.Conv2d(4, 3, 3, padding=1),
        nn.Tanh(),
    )


def _sequence_net(lib: Any) -> Any:
    nn = lib.nn
    return nn.Sequential(
        nn.Conv1d(2, 6, 5, padding=2),
        nn.BatchNorm1d(6, momentum=None),
        nn.Mish(),
        nn.MaxPool1d(2),
        nn.Conv1d(6, 6, 3, dilation=2),
        nn.ELU(),
        nn.AdaptiveAvgPool1d(3),
        nn.Flatten(),
        nn.Linear(18, 3),
        nn.Hardtanh(-2, 2),
    )


NETS = {
    "classifier": (_classifier, (6, 3, 8, 8), "cross_entropy", 4),
    "generator": (_generator, (4, 6, 1, 1), "mse", None),
    "sequence": (_sequence_net, (5, 2, 16), "cross_entropy", 3),
}


def _train(lib: Any, model: Any, x: np.ndarray, target: np.ndarray, loss_name: str) -> Any:
    """Five SGD steps with momentum; a full backward hook on every convolution and linear
    layer (a hooked module's output must not feed an in-place layer, in torch as here)."""
    grad_norms: list[float] = []
    for layer in model:
        if type(layer).__name__.startswith(("Conv", "Linear")):
            layer.register_full_backward_hook(
                lambda m, gin, gout: grad_norms.append(float(gout[0].norm()))
            )
    optimizer = lib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(5):
        optimizer.zero_grad()
        out = model(lib.tensor(x))
        if loss_name == "cross_entropy":
            loss = lib.nn.functional.cross_entropy(out, lib.tensor(target))
        else:
            loss = lib.nn.functional.mse_loss(out, lib.tensor(target))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    buffers = {k: v.numpy().copy() for k, v in model.state_dict().items() if "running" in k}
    return losses, grad_norms, buffers


@pytest.mark.filterwarnings("ignore:Full backward hook is firing:UserWarning")
@pytest.mark.parametrize("name", list(NETS))
def test_network_trains_like_torch(copy_torch_state, name):
    """Five training steps from torch's weights: torch's losses, hook gradient norms and
    running statistics, within float32 tolerance."""
    build, shape, loss_name, classes = NETS[name]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    reference = build(torch)
    model = build(hookgrad)
    copy_torch_state(model, reference)
    with torch.no_grad():
        out_shape = tuple(reference(torch.tensor(x)).shape)
    reference.load_state_dict({k: torch.tensor(v.numpy()) for k, v in model.state_dict().items()})
    if classes is None:
        target = rng.uniform(-1, 1, out_shape).astype(np.float32)
    else:
        target = rng.integers(0, classes, size=shape[0])
    got = _train(hookgrad, model, x, target, loss_name)
    expected = _train(torch, reference, x, target, loss_name)
    np.testing.assert_allclose(got[0], expected[0], rtol=2e-4, atol=1e-5)
    np.testing.assert_allclose(got[1], expected[1], rtol=2e-3, atol=1e-5)
    assert list(got[2]) == list(expected[2])
    for key in expected[2]:
        np.testing.assert_allclose(got[2][key], expected[2][key], rtol=1e-4, atol=1e-5)

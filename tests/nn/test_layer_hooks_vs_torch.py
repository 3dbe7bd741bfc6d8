"""Module hooks on the layers of issue #16 fire as on torch's: forward pre/post hooks and a full
backward hook on each layer see torch's inputs, outputs, grad_input and grad_output."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hookgrad  # noqa: E402

LAYERS: dict[str, tuple[Any, tuple[int, ...]]] = {
    "BatchNorm1d": (lambda lib: lib.nn.BatchNorm1d(3), (4, 3, 5)),
    "BatchNorm2d": (lambda lib: lib.nn.BatchNorm2d(3), (2, 3, 4, 4)),
    "GroupNorm": (lambda lib: lib.nn.GroupNorm(3, 6), (2, 6, 4)),
    "InstanceNorm2d": (lambda lib: lib.nn.InstanceNorm2d(3, affine=True), (2, 3, 4, 4)),
    "MaxPool2d": (lambda lib: lib.nn.MaxPool2d(2), (2, 3, 4, 4)),
    "AvgPool2d": (lambda lib: lib.nn.AvgPool2d(3, 1, 1), (2, 3, 4, 4)),
    "AdaptiveAvgPool2d": (lambda lib: lib.nn.AdaptiveAvgPool2d(3), (2, 3, 5, 5)),
    "MaxPool1d": (lambda lib: lib.nn.MaxPool1d(2), (2, 3, 6)),
    "AvgPool1d": (lambda lib: lib.nn.AvgPool1d(2), (2, 3, 6)),
    "AdaptiveAvgPool1d": (lambda lib: lib.nn.AdaptiveAvgPool1d(4), (2, 3, 6)),
    "Conv1d": (lambda lib: lib.nn.Conv1d(3, 4, 3, padding=1), (2, 3, 6)),
    "ConvTranspose2d": (lambda lib: lib.nn.ConvTranspose2d(3, 2, 3, stride=2), (2, 3, 4, 4)),
    "SiLU": (lambda lib: lib.nn.SiLU(), (3, 5)),
    "Softplus": (lambda lib: lib.nn.Softplus(), (3, 5)),
    "Softmin": (lambda lib: lib.nn.Softmin(1), (3, 5)),
    "Mish": (lambda lib: lib.nn.Mish(), (3, 5)),
    "Hardtanh": (lambda lib: lib.nn.Hardtanh(), (3, 5)),
    "ReLU6": (lambda lib: lib.nn.ReLU6(), (3, 5)),
    "ELU": (lambda lib: lib.nn.ELU(), (3, 5)),
    "Hardswish": (lambda lib: lib.nn.Hardswish(), (3, 5)),
    "PReLU": (lambda lib: lib.nn.PReLU(3), (2, 3, 4)),
    "Upsample": (lambda lib: lib.nn.Upsample(scale_factor=1.5), (2, 3, 4, 4)),
    "LayerNorm": (lambda lib: lib.nn.LayerNorm(4), (2, 3, 4)),
}


def _run(lib: Any, layer: Any, x: np.ndarray) -> list[tuple[str, list[Any]]]:
    """Forward and backward through ``layer`` with every hook kind recording values."""
    seen: list[tuple[str, list[Any]]] = []

    def values(ts: Any) -> list[Any]:
        return [None if t is None else t.detach().numpy().copy() for t in ts]

    layer.register_forward_pre_hook(lambda m, args: seen.append(("pre", values(args))))
    layer.register_forward_hook(lambda m, args, out: seen.append(("forward", values([out]))))
    layer.register_full_backward_pre_hook(lambda m, gout: seen.append(("bw_pre", values(gout))))
    layer.register_full_backward_hook(
        lambda m, gin, gout: seen.append(("backward", values(gin) + values(gout)))
    )
    inp = lib.tensor(x, requires_grad=True)
    out = layer(inp * 1.0)
    g = np.random.default_rng(7).standard_normal(tuple(out.shape)).astype(np.float32)
    out.backward(lib.tensor(g))
    return seen


@pytest.mark.parametrize("name", list(LAYERS))
def test_module_hooks_fire_with_torchs_values(copy_torch_state, name):
    """Forward pre/post hooks, a full backward pre-hook and a full backward hook on the layer
    fire once each, in torch's order, with torch's tensors."""
    build, shape = LAYERS[name]
    x = (np.random.default_rng(3).standard_normal(shape) * 2).astype(np.float32)
    layer, reference = build(hookgrad), build(torch)
    copy_torch_state(layer, reference)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's warning for a hook on an in-place module
        got = _run(hookgrad, layer, x)
        expected = _run(torch, reference, x)
    assert [kind for kind, _ in got] == [kind for kind, _ in expected]
    for (kind, g_values), (_, e_values) in zip(got, expected):
        assert len(g_values) == len(e_values), kind
        for g, e in zip(g_values, e_values):
            assert (g is None) == (e is None), kind
            if e is not None:
                np.testing.assert_allclose(g, e, 1e-4, 1e-5, err_msg=kind)

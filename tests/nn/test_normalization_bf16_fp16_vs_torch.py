"""F.batch_norm and F.group_norm (and their modules under CPU autocast) on bfloat16 and
float16 input against torch 2.13: normalized in float32 and rounded once, parameters and
running statistics of the input's dtype or all float32, every result in torch's dtype."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ml_dtypes")

import hookgrad  # noqa: E402

_ULP = {"bfloat16": 2.0**-7, "float16": 2.0**-10}
_rng = np.random.default_rng(0)
_X = (_rng.standard_normal((8, 6, 5)) * 2 + 1).astype(np.float32)
_G = _rng.standard_normal((8, 6, 5)).astype(np.float32)


def _name(dtype: Any) -> str:
    return str(dtype).rsplit(".", 1)[-1]


def _norm(lib: Any, kind: str, x: Any, params: list[Any]) -> Any:
    w, b, running_mean, running_var = params
    if kind == "group_norm":
        return lib.nn.functional.group_norm(x, 3, w, b)
    training = kind == "batch_norm-train"
    return lib.nn.functional.batch_norm(x, running_mean, running_var, w, b, training=training)


def _run(lib: Any, kind: str, dtype: str, pdtype: str) -> list[Any]:
    """``[out, x.grad, w.grad, b.grad, running_mean, running_var]`` of one normalization."""
    x = lib.tensor(_X).to(getattr(lib, dtype)).requires_grad_()
    cast = getattr(lib, pdtype)
    params = [
        lib.tensor(np.linspace(0.5, 1.5, 6, dtype=np.float32)).to(cast).requires_grad_(),
        lib.tensor(np.linspace(-1, 1, 6, dtype=np.float32)).to(cast).requires_grad_(),
        lib.tensor(np.linspace(-0.2, 0.2, 6, dtype=np.float32)).to(cast),
        lib.tensor(np.linspace(0.8, 1.2, 6, dtype=np.float32)).to(cast),
    ]
    out = _norm(lib, kind, x, params)
    out.backward(lib.tensor(_G).to(getattr(lib, dtype)))
    return [out, x.grad, params[0].grad, params[1].grad, params[2], params[3]]


@pytest.mark.parametrize("pdtype", ["same", "float32"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("kind", ["group_norm", "batch_norm-train", "batch_norm-eval"])
def test_reduced_precision_normalization_matches_torch(kind: str, dtype: str, pdtype: str) -> None:
    """Output, input/weight/bias gradients and updated running statistics: torch's dtypes
    (the output bfloat16/float16 even with float32 parameters) and torch's values within a
    unit in the last place of each tensor's largest element."""
    pd = dtype if pdtype == "same" else pdtype
    got, expected = _run(hookgrad, kind, dtype, pd), _run(torch, kind, dtype, pd)
    names = ["output", "input grad", "weight grad", "bias grad", "running_mean", "running_var"]
    for what, g, e in zip(names, got, expected):
        assert _name(g.dtype) == _name(e.dtype), what
        mine, theirs = g.detach().float().numpy(), e.detach().float().numpy()
        largest = float(np.abs(theirs).max())
        np.testing.assert_allclose(mine, theirs, rtol=0, atol=_ULP[dtype] * largest, err_msg=what)


@pytest.mark.parametrize("kind", ["group_norm", "batch_norm-train"])
def test_refused_parameter_dtypes_fail_as_torch(fails_like_torch: Any, kind: str) -> None:
    """bfloat16 input with float32 weight and bfloat16 bias is refused with torch's text."""

    def action(lib: Any) -> object:
        x = lib.ones(2, 6, 3, dtype=lib.bfloat16)
        params = [lib.ones(6), lib.zeros(6, dtype=lib.bfloat16), lib.zeros(6), lib.ones(6)]
        return _norm(lib, kind, x, params)

    fails_like_torch(action)


def _cnn(lib: Any) -> Any:
    nn = lib.nn
    return nn.Sequential(
        nn.Conv2d(3, 6, 3, padding=1, bias=False),  # a bias before BatchNorm gets 0 + noise
        nn.BatchNorm2d(6),
        nn.ReLU(),
        nn.Conv2d(6, 6, 3, padding=1),
        nn.GroupNorm(2, 6),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(6, 4),
    )


@pytest.mark.parametrize("build", [_cnn], ids=["conv-batchnorm-groupnorm"])
def test_normalized_cnn_trains_under_autocast_as_torch(build: Callable[[Any], Any]) -> None:
    """Conv -> BatchNorm2d and Conv -> GroupNorm under bfloat16 autocast: each module returns
    torch's dtype (the norms bfloat16 on bfloat16 input with float32 parameters), the loss
    and float32 gradients and running statistics are torch's within bfloat16 precision."""
    torch.manual_seed(0)
    theirs = build(torch)
    mine = build(hookgrad)
    mine.load_state_dict({k: hookgrad.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    x = _rng.standard_normal((4, 3, 6, 6)).astype(np.float32)
    target = np.array([0, 1, 2, 3])
    results = []
    for lib, model in ((hookgrad, mine), (torch, theirs)):
        seen: list[str] = []
        for module in model:
            module.register_forward_hook(lambda m, i, out, seen=seen: seen.append(_name(out.dtype)))
        with lib.autocast("cpu", dtype=lib.bfloat16):
            loss = lib.nn.functional.cross_entropy(model(lib.tensor(x)), lib.tensor(target))
        loss.backward()
        results.append((seen, loss))
    (seen_mine, loss_mine), (seen_theirs, loss_theirs) = results
    assert seen_mine == seen_theirs
    assert seen_theirs[1] == seen_theirs[4] == "bfloat16"
    np.testing.assert_allclose(loss_mine.item(), loss_theirs.item(), rtol=1e-2)
    for (name, p), (_, q) in zip(mine.named_parameters(), theirs.named_parameters()):
        assert p.grad.dtype == hookgrad.float32, name
        scale = float(np.abs(q.grad.numpy()).max())
        np.testing.assert_allclose(
            p.grad.numpy(), q.grad.numpy(), rtol=0.05, atol=0.03 * scale, err_msg=name
        )
    for (name, b), (_, c) in zip(mine.named_buffers(), theirs.named_buffers()):
        np.testing.assert_allclose(b.numpy(), c.numpy(), rtol=1e-2, atol=1e-3, err_msg=name)

"""The torch adapter on a device: CPU here, CUDA where it exists (skipped cleanly elsewhere).

On CUDA, torch runs backward in a device thread, and summaries must not sync per tensor: these
tests pin that the adapter's results there equal the CPU ones. The CPU runs check the tests.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from hookgrad.engines import engine_named  # noqa: E402

DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here"),
    ),
]


@pytest.mark.parametrize("device", DEVICES)
def test_summaries_on_a_device_equal_the_cpu_ones(device: str) -> None:
    """Summaries of device tensors (NaN, inf, zeros, float16) equal those of CPU copies."""
    engine = engine_named("torch")
    cpu = [
        torch.tensor([1.0, float("nan"), 0.0, -float("inf"), 3.0]),
        torch.randn(64, 32),
        torch.tensor([0.5, -0.25], dtype=torch.float16),
    ]
    on_cpu = engine.summaries(cpu)
    on_gpu = engine.summaries([t.to(device) for t in cpu])
    for mine, theirs in zip(on_gpu, on_cpu):
        for key, value in theirs.items():
            assert mine[key] == (pytest.approx(value) if isinstance(value, float) else value)


@pytest.mark.parametrize("device", DEVICES)
def test_loop_points_and_module_events_on_a_device(device: str) -> None:
    """Backward end sees the final gradients, a veto holds, module events fire (on CUDA from
    torch's device thread)."""
    engine = engine_named("torch")
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(inplace=True)).to(device)
    names = {m: n or "root" for n, m in model.named_modules()}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ends: list[Any] = []
    events: list[str] = []

    class Call:
        def __init__(self, name: str) -> None:
            self.name = name

        def backward_pre(self, grad_output: Any) -> None:
            events.append(f"pre {self.name}")

        def full_backward(self, grad_input: Any, grad_output: Any) -> None:
            events.append(f"full {self.name}")

    class Hooks:
        def forward_pre(self, module: Any, args: Any) -> Any:
            return Call(names[module]), None

        def forward(self, module: Any, args: Any, kwargs: Any, output: Any) -> None:
            return None

        def forward_failed(self, module: Any) -> None:
            return None

    handles = [
        engine.observe_backward(None, lambda root: ends.append(model[0].weight.grad.clone())),
        engine.gate_optimizer_steps(lambda opt: False),
        engine.install_module_hooks(Hooks(), backward=True),  # type: ignore[attr-defined]
    ]
    try:
        model(torch.ones(2, 3, device=device)).sum().backward()
        before = model[0].weight.detach().clone()
        optimizer.step()
    finally:
        for handle in handles:
            handle.remove()
    assert len(ends) == 1 and torch.equal(ends[0], model[0].weight.grad)
    assert torch.equal(model[0].weight, before)
    assert events == ["pre root", "full root", "pre 1", "full 1", "pre 0", "full 0"]

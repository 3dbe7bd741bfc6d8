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


@pytest.mark.parametrize("device", DEVICES)
def test_finiteness_and_unscale_kernels_on_a_device_equal_the_cpu_ones(device: str) -> None:
    """first_nonfinite, nonfinite_counts, zero_nonfinite_ and unscale_ on device tensors
    (mixed with CPU ones, float16 and float64 among them) give the CPU results."""
    engine = engine_named("torch")
    nan, inf = float("nan"), float("inf")

    def batch() -> list[Any]:
        return [
            torch.full((4, 4), 1e30),
            torch.tensor([1.0, 2.0], dtype=torch.float64),
            torch.tensor([0.5, inf, nan], dtype=torch.float16),
            torch.tensor([[nan, -inf], [3.0, 4.0]]).t(),
        ]

    cpu = batch()
    mixed = [t if i == 1 else t.to(device) for i, t in enumerate(batch())]
    assert engine.first_nonfinite(mixed) == engine.first_nonfinite(cpu) == 2
    assert engine.first_nonfinite(mixed[:2]) is None
    assert engine.nonfinite_counts(mixed) == engine.nonfinite_counts(cpu)
    assert engine.zero_nonfinite_(mixed) == engine.zero_nonfinite_(cpu) == 4
    cpu, mixed = cpu[:2], mixed[:2]  # float32 and float64: what GradScaler unscales
    mixed[0][0, 0] = cpu[0][0, 0] = inf
    assert engine.unscale_(mixed, 0.25) is engine.unscale_(cpu, 0.25) is True
    for mine, theirs in zip(mixed, cpu):
        assert torch.equal(mine.cpu(), theirs)

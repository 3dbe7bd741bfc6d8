"""The runtime's payload tensors are read-only aliases: a plugin cannot write into the
caller's tensors or backward's gradients by accident, and computes from them as before."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import hookgrad
from hookgrad.hookspecs import hookimpl
from hookgrad.testing import capture_events

Reach = Callable[[Any], hookgrad.Tensor]

# hook -> where in its event the tensor sits
REACHES: dict[str, Reach] = {
    "hookgrad_forward_pre": lambda event: event.args[0],
    "hookgrad_forward": lambda event: event.output,
    "hookgrad_backward_pre": lambda event: event.grad_output[0],
    "hookgrad_full_backward": lambda event: event.grad_input[0],
    "hookgrad_backward_begin": lambda event: event.loss,
    "hookgrad_backward_end": lambda event: event.loss,
}

# how a careless plugin writes: an in-place op, or straight into the array
WRITES: dict[str, Callable[[hookgrad.Tensor], object]] = {
    "add_": lambda t: t.detach().add_(1.0),
    "numpy": lambda t: t.detach().numpy().__setitem__(Ellipsis, 0.0),
    "asarray": lambda t: np.asarray(t).__iadd__(1.0),
}


class Writer:
    """Implements one hook; writes into the payload tensor after noting its values."""

    def __init__(self, hook: str, write: Callable[[hookgrad.Tensor], object]) -> None:
        self.before: np.ndarray | None = None
        self.target: hookgrad.Tensor | None = None

        def routine(event: Any) -> None:
            self.target = REACHES[hook](event)
            self.before = np.array(self.target.detach().numpy())
            write(self.target)

        setattr(self, hook, hookimpl(specname=hook)(routine))


@pytest.mark.parametrize("write", list(WRITES))
@pytest.mark.parametrize("hook", list(REACHES))
def test_a_write_into_a_payload_tensor_raises_and_changes_nothing(hook: str, write: str) -> None:
    """Writing into event.args[0], .output, .grad_output[0], .grad_input[0] or .loss raises
    numpy's read-only ValueError; the memory it shares with the caller is unchanged."""
    model = hookgrad.nn.Linear(3, 2)
    x = hookgrad.randn(4, 3, requires_grad=True)
    x_before = x.detach().numpy().copy()
    writer = Writer(hook, WRITES[write])
    with capture_events(("writer", writer)), pytest.raises(ValueError, match="read-only"):
        model(x).sum().backward()
    assert writer.target is not None and writer.before is not None
    np.testing.assert_array_equal(writer.target.detach().numpy(), writer.before)
    np.testing.assert_array_equal(x.detach().numpy(), x_before)


class Doubler:
    """Replacements computed from the payload: args and output doubled, grad_input halved."""

    @hookimpl
    def hookgrad_forward_pre(self, event: Any) -> tuple[Any, ...]:
        return (event.args[0] * 2,)

    @hookimpl
    def hookgrad_forward(self, event: Any) -> Any:
        return event.output * 2

    @hookimpl
    def hookgrad_full_backward(self, event: Any) -> tuple[Any, ...]:
        return tuple(None if g is None else g / 2 for g in event.grad_input)


def test_replacements_computed_from_payload_tensors_differentiate_as_before() -> None:
    """A plugin computing from the read-only aliases (a leaf input, an output, a gradient)
    gives the gradients global module hooks computing from the originals give."""
    registry = hookgrad.nn.modules.module
    results = []
    for use_plugin in (False, True):
        hookgrad.manual_seed(0)
        model = hookgrad.nn.Linear(3, 2)
        x = hookgrad.randn(4, 3, requires_grad=True)
        if use_plugin:
            with capture_events(("doubler", Doubler())):
                model(x).sum().backward()
        else:
            handles = [
                registry.register_module_forward_pre_hook(lambda m, a: (a[0] * 2,)),
                registry.register_module_forward_hook(lambda m, a, o: o * 2),
                registry.register_module_full_backward_hook(lambda m, gi, go: (gi[0] / 2,)),
            ]
            model(x).sum().backward()
            for handle in handles:
                handle.remove()
        results.append((x.grad.numpy().copy(), model.weight.grad.numpy().copy()))
    (x_plain, w_plain), (x_got, w_got) = results
    np.testing.assert_array_equal(x_got, x_plain)
    np.testing.assert_array_equal(w_got, w_plain)
    assert np.allclose(x_got, np.ones((4, 1)) @ model.weight.detach().numpy().sum(0)[None] * 2)


class Replacer:
    """Returns fresh args and a fresh output, keeping them to compare."""

    def __init__(self) -> None:
        self.returned: list[hookgrad.Tensor] = []

    @hookimpl
    def hookgrad_forward_pre(self, event: Any) -> tuple[Any, ...]:
        self.returned.append(event.args[0] + 1)
        return (self.returned[-1],)

    @hookimpl
    def hookgrad_forward(self, event: Any) -> Any:
        self.returned.append(event.output * 2)
        return self.returned[-1]


class Recorder(hookgrad.nn.Module):
    """Identity that keeps the argument forward received."""

    def forward(self, x: hookgrad.Tensor) -> hookgrad.Tensor:
        self.received = x
        return x * 1


def test_replacements_reach_forward_and_the_caller_as_returned() -> None:
    """A replacement is the plugin's own tensor: forward and the caller get that very
    object, writable (only what the engine hands to plugins is read-only)."""
    replacer, module = Replacer(), Recorder()
    with capture_events(("replacer", replacer)):
        out = module(hookgrad.zeros(2))
    assert module.received is replacer.returned[0]
    assert out is replacer.returned[1]
    out.add_(1.0)
    assert out.tolist() == [3.0, 3.0]

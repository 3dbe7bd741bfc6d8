"""The runtime drives torch models as it drives hookgrad's: the same events, names, replacements.

A recording plugin implementing every module and loop spec trains a torch MLP and the
same-structure hookgrad MLP with the same weights; the two event streams are equal, values to
float32 tolerance.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import hookgrad  # noqa: E402
from hookgrad.hookspecs import PluginConfig, hookimpl  # noqa: E402
from hookgrad.runtime import PluginHookWarning, Runtime  # noqa: E402

Entry = tuple[tuple[Any, ...], list[Any]]


def _array(value: Any) -> Any:
    """A tensor as a float64 numpy array (None stays None)."""
    if value is None:
        return None
    return np.array(value.detach().numpy(), dtype=np.float64)


class Recording:
    """Implements every module and loop spec; records each event's identity and tensors."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []

    def _module(self, event: Any, *tensors: Any) -> None:
        key = (event.phase, event.module_name, event.module_type, event.call_index, event.step)
        self.entries.append((key, [_array(t) for t in tensors]))

    @hookimpl
    def hookgrad_forward_pre(self, event: Any) -> None:
        self._module(event, *event.args)
        assert event.kwargs == {}

    @hookimpl
    def hookgrad_forward(self, event: Any) -> None:
        self._module(event, *event.args, event.output)

    @hookimpl
    def hookgrad_backward_pre(self, event: Any) -> None:
        self._module(event, *event.grad_output)

    @hookimpl
    def hookgrad_full_backward(self, event: Any) -> None:
        self._module(event, *event.grad_input, *event.grad_output)

    @hookimpl
    def hookgrad_backward_begin(self, event: Any) -> None:
        self.entries.append((("backward_begin", event.step), [_array(event.loss)]))

    @hookimpl
    def hookgrad_backward_end(self, event: Any) -> None:
        self.entries.append((("backward_end", event.step), [_array(event.loss)]))

    @hookimpl
    def hookgrad_optimizer_step_pre(self, event: Any) -> None:
        self._step(event)

    @hookimpl
    def hookgrad_optimizer_step_post(self, event: Any) -> None:
        self._step(event)

    def _step(self, event: Any) -> None:
        names = tuple(name for name, _ in event.parameters)
        key = (event.phase, event.step, event.optimizer_type, names)
        self.entries.append((key, [_array(p.grad) for _, p in event.parameters]))


def net(lib: Any, *, relu: bool | None = None) -> Any:
    """fc1 -> act -> fc2 in ``lib`` (hookgrad or torch), weights from a torch seed; act is
    Tanh, or ReLU (``relu=True``: in place)."""

    class Net(lib.nn.Module):  # type: ignore[name-defined, misc]
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = lib.nn.Linear(3, 4)
            self.act = lib.nn.Tanh() if relu is None else lib.nn.ReLU(inplace=relu)
            self.fc2 = lib.nn.Linear(4, 2)

        def forward(self, x: Any) -> Any:
            return self.fc2(self.act(self.fc1(x)))

    model = Net()
    torch.manual_seed(0)
    for p in model.parameters():
        value = torch.randn(tuple(p.shape)).numpy()
        with lib.no_grad():
            p.copy_(lib.tensor(value))
    return model


def batch(lib: Any) -> tuple[Any, Any]:
    generator = np.random.default_rng(1)
    x = generator.standard_normal((5, 3)).astype(np.float32)
    y = generator.standard_normal((5, 2)).astype(np.float32)
    return lib.tensor(x), lib.tensor(y)


def train(lib: Any, model: Any, steps: int = 2) -> None:
    optimizer = lib.optim.SGD(model.parameters(), lr=0.1)
    x, y = batch(lib)
    for _ in range(steps):
        optimizer.zero_grad()
        lib.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()


def run(lib: Any, *plugins: object, engine: str = "torch", **options: Any) -> Any:
    """Train ``net(lib)`` under a runtime with ``plugins``; returns the model."""
    model = net(lib, **options)
    choice = engine if lib is torch else "hookgrad"
    with Runtime({}, environ={}, engine=choice) as runtime:
        for plugin in plugins:
            runtime.register(plugin)
        train(lib, model)
    return model


def assert_same_stream(ours: list[Entry], theirs: list[Entry]) -> None:
    assert [key for key, _ in ours] == [key for key, _ in theirs]
    for (key, arrays), (_, expected) in zip(ours, theirs, strict=True):
        assert len(arrays) == len(expected), key
        for a, b in zip(arrays, expected, strict=True):
            if a is None or b is None:
                assert a is None and b is None, key
            else:
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=str(key))


def test_a_torch_mlp_gives_the_events_of_the_same_hookgrad_mlp() -> None:
    """Every module and loop event, name, call index, step and tensor matches hookgrad's."""
    on_torch, on_hookgrad = Recording(), Recording()
    run(torch, on_torch)
    run(hookgrad, on_hookgrad)
    assert len(on_torch.entries) == 2 * (4 * 4 + 4)
    assert on_torch.entries[0][0] == ("forward_pre", "", "Net", 0, 0)
    assert on_torch.entries[-1][0][:2] == ("optimizer_step_post", 1)
    assert on_torch.entries[-1][0][3] == ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")
    assert_same_stream(on_torch.entries, on_hookgrad.entries)


class ScaleFc2GradOutput:
    """Halves the gradient flowing into fc2 (a backward_pre replacement)."""

    @hookimpl
    def hookgrad_backward_pre(self, event: Any) -> tuple[Any, ...] | None:
        if event.module_name != "fc2":
            return None
        return tuple(g * 0.5 for g in event.grad_output)


def grads_after_one_backward(lib: Any, *plugins: object) -> dict[str, Any]:
    model = net(lib)
    x, y = batch(lib)
    with Runtime({}, environ={}, engine="torch" if lib is torch else "hookgrad") as runtime:
        for plugin in plugins:
            runtime.register(plugin)
        lib.nn.functional.mse_loss(model(x), y).backward()
    return {name: _array(p.grad) for name, p in model.named_parameters()}


def test_a_backward_pre_replacement_changes_torch_grads_as_hookgrads() -> None:
    """A scaled grad_output changes the torch parameter grads exactly as on hookgrad."""
    plain = grads_after_one_backward(torch)
    scaled = grads_after_one_backward(torch, ScaleFc2GradOutput())
    expected = grads_after_one_backward(hookgrad, ScaleFc2GradOutput())
    for name, grad in scaled.items():
        np.testing.assert_allclose(grad, expected[name], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(grad, plain[name] * 0.5, rtol=1e-5, atol=1e-6)


def test_threads_starter_ignores_another_threads_torch_work() -> None:
    """A runtime started in this thread records nothing of a torch model another thread trains."""
    recording = Recording()
    with Runtime({}, environ={}, engine="torch") as runtime:
        runtime.register(recording)
        worker = threading.Thread(target=train, args=(torch, net(torch)))
        worker.start()
        worker.join()
    assert recording.entries == []


def test_module_backward_events_follow_the_graph_into_another_thread() -> None:
    """A graph built in the starter thread and walked backward by another thread (as torch's
    device threads walk CUDA graphs) still gives its module backward events, once each."""
    recording = Recording()
    model = net(torch)
    x, y = batch(torch)
    with Runtime({}, environ={}, engine="torch") as runtime:
        runtime.register(recording)
        loss = torch.nn.functional.mse_loss(model(x), y)
        worker = threading.Thread(target=loss.backward)
        worker.start()
        worker.join()
    backward = [key[:2] for key, _ in recording.entries if key[0] == "backward"]
    assert backward == [
        ("backward", ""),
        ("backward", "fc2"),
        ("backward", "act"),
        ("backward", "fc1"),
    ]
    assert all(p.grad is not None for p in model.parameters())


class FailsInFullBackward:
    config = PluginConfig(on_error="warn")

    @hookimpl
    def hookgrad_full_backward(self, event: Any) -> tuple[Any, ...]:
        raise ValueError(f"broken at {event.module_name!r}")


def test_a_failing_plugin_with_on_error_warn_warns_and_torch_trains_on() -> None:
    """on_error="warn" on torch: a PluginHookWarning per failure, grads left as computed."""
    plain = grads_after_one_backward(torch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        grads = grads_after_one_backward(torch, FailsInFullBackward())
    modules = [re.findall(r"broken at '(\w*)'", str(w.message)) for w in caught]
    assert modules == [[""], ["fc2"], ["act"], ["fc1"]]
    assert all(w.category is PluginHookWarning for w in caught)
    for name, grad in grads.items():
        np.testing.assert_allclose(grad, plain[name])


def test_an_in_place_relu_model_gives_the_events_of_hookgrads() -> None:
    """ReLU(inplace=True) trains under every listener, full_backward included, as on hookgrad."""
    on_torch, on_hookgrad = Recording(), Recording()
    run(torch, on_torch, relu=True)
    run(hookgrad, on_hookgrad, relu=False)  # in place fails there, as with torch's own hooks
    full = [key[1] for key, _ in on_torch.entries if key[0] == "backward"]
    assert full == ["", "fc2", "act", "fc1"] * 2
    act_args, act_output = next(a for k, a in on_torch.entries if k[:2] == ("forward", "act"))
    np.testing.assert_array_equal(act_args, act_output)  # the input, changed in place

    def output_only_after_relu(entries: list[Entry]) -> list[Entry]:
        """act's forward args: in place, torch's is its output by then."""
        return [(k, a[-1:] if k[:2] == ("forward", "act") else a) for k, a in entries]

    assert_same_stream(
        output_only_after_relu(on_torch.entries), output_only_after_relu(on_hookgrad.entries)
    )


def test_parameters_are_named_on_torch_without_watch() -> None:
    """With only optimizer listeners, torch parameters are named fc1.weight (spotted roots)."""
    names: list[tuple[str, ...]] = []

    class StepNames:
        @hookimpl
        def hookgrad_optimizer_step_pre(self, event: Any) -> None:
            names.append(tuple(name for name, _ in event.parameters))

    run(torch, StepNames())
    assert names == [("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")] * 2


def test_watch_names_the_parameters_of_a_torch_model() -> None:
    """Runtime.watch(torch_model) names its parameters before any module call is seen."""
    names: list[tuple[str, ...]] = []
    model = net(torch)

    class StepNames:
        @hookimpl
        def hookgrad_optimizer_step_pre(self, event: Any) -> None:
            names.append(tuple(name for name, _ in event.parameters))

    with Runtime({}, environ={}, engine="torch") as runtime:
        runtime.register(StepNames())
        runtime.watch(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for p in model.parameters():
            p.grad = torch.zeros_like(p)
        optimizer.step()
    assert names == [("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")]


def _torch_hook_counts() -> tuple[int, ...]:
    from torch.nn.modules import module

    return (len(module._global_forward_pre_hooks), len(module._global_forward_hooks))


def test_torch_hooks_come_and_go_with_listeners() -> None:
    """No torch module hook without a module listener; registering adds, unregistering removes."""
    before = _torch_hook_counts()
    with Runtime({}, environ={}, engine="torch") as runtime:
        assert _torch_hook_counts() == before
        runtime.register(Recording(), name="recording")
        assert _torch_hook_counts() == (before[0] + 1, before[1] + 1)
        runtime.unregister("recording")
        assert _torch_hook_counts() == before


def test_tensor_hooks_only_while_a_backward_spec_is_implemented() -> None:
    """A forward-only listener puts no hook on torch tensors; a backward listener does."""

    class ForwardOnly:
        @hookimpl
        def hookgrad_forward(self, event: Any) -> None:
            return None

    model, (x, _) = net(torch), batch(torch)
    with Runtime({}, environ={}, engine="torch") as runtime:
        runtime.register(ForwardOnly())
        assert model(x)._backward_hooks is None
        runtime.register(Recording(), name="recording")
        assert model(x)._backward_hooks
        runtime.unregister("recording")
        assert model(x)._backward_hooks is None


def test_a_listener_added_during_a_torch_forward_leaves_the_call_stack_sound() -> None:
    """A plugin registered inside a forward (hooks reinstalled mid-call) breaks nothing."""
    recording = Recording()
    with Runtime({}, environ={}, engine="torch") as runtime:

        class RegistersOnFirstCall:
            @hookimpl
            def hookgrad_forward_pre(self, event: Any) -> None:
                if event.module_name == "fc1" and "recording" not in runtime.plugins:
                    runtime.register(recording, name="recording")

        runtime.register(RegistersOnFirstCall())
        train(torch, net(torch))
    backward = [key[1] for key, _ in recording.entries if key[0] == "backward"]
    # step 0: the calls begun after it registered; step 1: all
    assert backward == ["fc2", "act", "", "fc2", "act", "fc1"]


@pytest.mark.parametrize("engine_imported", [True, False])
def test_auto_drives_torch_only_if_torch_was_imported_before_start(engine_imported: bool) -> None:
    """engine="auto": a torch model is heard only when torch was imported before start()."""
    program = "\n".join(
        [
            "import hookgrad",
            "from hookgrad.hookspecs import hookimpl",
            "import torch" if engine_imported else "",
            "seen = []",
            "class Listens:",
            "    @hookimpl",
            "    def hookgrad_forward(self, event):",
            "        seen.append(event.module_type)",
            "with hookgrad.Runtime({}, environ={}) as runtime:",
            "    runtime.register(Listens())",
            "    import torch",
            "    torch.nn.Linear(2, 2)(torch.ones(1, 2))",
            "print(seen)",
        ]
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert result.stdout == ("['Linear']\n" if engine_imported else "[]\n")


# ---------------------------------------------------------------------- DDP
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def process_group() -> Iterator[None]:
    """A world-size-1 gloo process group, destroyed after."""
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", rank=0, world_size=1, init_method=f"tcp://127.0.0.1:{_free_port()}"
    )
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_ddp_wrapper_is_dropped_from_module_and_parameter_names() -> None:
    """DDP(net): the root is "" of type Net, modules fc1..., parameters fc1.weight..."""
    recording = Recording()
    with process_group():
        model = torch.nn.parallel.DistributedDataParallel(net(torch))
        with Runtime({}, environ={}, engine="torch") as runtime:
            runtime.register(recording)
            train(torch, model, steps=1)
    modules = [key[1:3] for key, _ in recording.entries if key[0] == "forward"]
    assert modules == [("fc1", "Linear"), ("act", "Tanh"), ("fc2", "Linear"), ("", "Net")]
    steps = [key for key, _ in recording.entries if key[0] == "optimizer_step_pre"]
    assert steps[0][3] == ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")


def test_data_parallel_is_dropped_from_module_names() -> None:
    """DataParallel(net) (on CPU it just calls net): modules fc1..., root "" of type Net."""
    recording = Recording()
    with Runtime({}, environ={}, engine="torch") as runtime:
        runtime.register(recording)
        train(torch, torch.nn.DataParallel(net(torch)), steps=1)
    modules = [key[1:3] for key, _ in recording.entries if key[0] == "forward"]
    assert modules == [("fc1", "Linear"), ("act", "Tanh"), ("fc2", "Linear"), ("", "Net")]


def test_ddp_parameters_are_named_through_spotting_and_watch() -> None:
    """Without module listeners, DDP(net)'s parameters are still fc1.weight, spotted or watched."""
    names: list[tuple[str, ...]] = []

    class StepNames:
        @hookimpl
        def hookgrad_optimizer_step_pre(self, event: Any) -> None:
            names.append(tuple(name for name, _ in event.parameters))

    with process_group():
        for watch in (False, True):
            model = torch.nn.parallel.DistributedDataParallel(net(torch))
            with Runtime({}, environ={}, engine="torch") as runtime:
                runtime.register(StepNames())
                if watch:
                    runtime.watch(model)
                train(torch, model, steps=1)
    assert names == [("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")] * 2

"""hookgrad.testing: capture_events on isolated runtimes, and the re-exported gradcheck."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import hookgrad
from hookgrad import nn
from hookgrad.hookspecs import PluginConfig, hookimpl
from hookgrad.nn.modules._global_hooks import GLOBAL_HOOKS
from hookgrad.testing import capture_events, gradcheck


class _NormReporter:
    """Emits the norm of every loss it sees and records the modules it hears."""

    class Config(PluginConfig):
        pass

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()
        self.runtime: Any = None
        self.modules: list[str] = []

    @hookimpl
    def hookgrad_configure(self, runtime: Any) -> None:
        self.runtime = runtime

    @hookimpl
    def hookgrad_forward(self, event: Any) -> None:
        self.modules.append(event.module_name)

    @hookimpl
    def hookgrad_backward_end(self, event: Any) -> None:
        norm = float(np.linalg.norm(event.loss.detach().numpy()))
        self.runtime.emit({"plugin": "norms", "kind": "loss_norm", "data": {"norm": norm}})


def test_capture_events_collects_what_a_plugin_emits():
    """Records a plugin emits land in capture.records, stamped with the step."""
    plugin = _NormReporter()
    x = hookgrad.tensor([3.0, 4.0], requires_grad=True)
    with capture_events(("norms", plugin)) as capture:
        (x * x).sum().backward()
        hookgrad.tensor(5.0, requires_grad=True).backward()
    assert capture.records == capture.of_plugin("norms")
    assert [(r["step"], r["data"]) for r in capture.records] == [
        (0, {"norm": 25.0}),
        (0, {"norm": 5.0}),
    ]


def test_capture_events_applies_the_given_config_and_cleans_up():
    """config[name] selects modules; after the block no global hook is left installed."""
    plugin = _NormReporter()
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    with capture_events(plugin, config={"_NormReporter": {"modules": ["0"]}}) as capture:
        model(hookgrad.tensor([[1.0, -1.0]]))
        assert capture.runtime.started
    assert plugin.modules == ["0"]
    assert capture.runtime.closed
    assert not (GLOBAL_HOOKS.forward_pre or GLOBAL_HOOKS.forward)


def test_capture_events_rejects_a_bad_config_key():
    """A typo in the config given to capture_events fails naming the key."""
    with (
        pytest.raises(ValueError, match="unknown key 'modulez'"),
        capture_events(_NormReporter(), config={"_NormReporter": {"modulez": ["0"]}}),
    ):
        pass


def test_gradcheck_is_reexported_and_checks_gradients():
    """hookgrad.testing.gradcheck is autograd's and accepts a correct float64 backward."""
    assert gradcheck is hookgrad.autograd.gradcheck
    x = hookgrad.tensor([0.5, -1.5, 2.0], dtype=hookgrad.float64, requires_grad=True)
    assert gradcheck(lambda t: (t * t * t).sum(), (x,))


def test_global_hook_counts_follow_registration_and_removal() -> None:
    """global_hook_counts counts each kind of global module hook, flags included."""
    from hookgrad.nn.modules import module as registry
    from hookgrad.testing import global_hook_counts

    assert set(global_hook_counts().values()) == {0}
    handles = [
        registry.register_module_forward_hook(lambda *a: None, with_kwargs=True),
        registry.register_module_full_backward_hook(lambda *a: None),
    ]
    assert global_hook_counts() == {
        "forward_pre": 0,
        "forward": 1,
        "forward_with_kwargs": 1,
        "forward_always_called": 0,
        "backward_pre": 0,
        "backward": 1,
    }
    for handle in handles:
        handle.remove()
    assert set(global_hook_counts().values()) == {0}


def test_as_torch_leaves_the_hookgrad_modules_their_own_spec() -> None:
    """After ``import torch.distributions`` under as_torch, hookgrad.distributions keeps its
    own ``__spec__``: a relative import inside it later raises no "__package__ !=
    __spec__.parent" ImportWarning (which broke warning-counting tests run after programs)."""
    import importlib
    import warnings

    from hookgrad.testing import as_torch

    with as_torch():
        importlib.import_module("torch.distributions")
        importlib.import_module("torch.nn.functional")
    assert hookgrad.distributions.__spec__.name == "hookgrad.distributions"
    assert hookgrad.nn.functional.__spec__.name == "hookgrad.nn.functional"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hookgrad.manual_seed(0)
        hookgrad.distributions.Distribution.sample(hookgrad.distributions.Normal(0.0, 1.0))

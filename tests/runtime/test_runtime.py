"""hookgrad.Runtime and hookgrad.configure: activation rules, lifecycle, training-loop points."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

import hookgrad
from hookgrad import nn, optim
from hookgrad.autograd._observers import BACKWARD_OBSERVERS
from hookgrad.hookspecs import PluginConfig, PluginRecord, hookimpl
from hookgrad.nn.modules._global_hooks import GLOBAL_HOOKS
from hookgrad.optim import _hooks as optim_hooks
from hookgrad.runtime import (
    ConfigError,
    PluginCatalog,
    PluginHookWarning,
    PluginImportWarning,
    PluginLoadError,
    Runtime,
    SinkWarning,
)
from hookgrad.runtime._runtime import _DEFAULT

PLUGINS = """
from hookgrad.hookspecs import PluginConfig, PluginRecord, hookimpl

CALLS = []

class Recorder:
    class Config(PluginConfig):
        tag: str = "r"

    def __init__(self, config):
        self.config = config

    @hookimpl
    def hookgrad_configure(self, runtime):
        CALLS.append(("configure", self.config.tag))

    @hookimpl
    def hookgrad_unconfigure(self, runtime):
        CALLS.append(("unconfigure", self.config.tag))

class Scaler:
    class Config(PluginConfig):
        factor: float = 2.0

    def __init__(self, config):
        self.config = config
"""


@pytest.fixture
def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fresh importable module of sample plugins (and a broken one)."""
    name = f"runtime_plugins_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(PLUGINS))
    (tmp_path / "broken_rt_plugin.py").write_text("raise ImportError('missing: scipy')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__(name)
    yield module
    sys.modules.pop(name, None)
    sys.modules.pop("broken_rt_plugin", None)


@pytest.fixture
def catalog(plugin_module: Any, entry_point: Any) -> PluginCatalog:
    """recorder and broken are third-party (gradtools); scaler ships with hookgrad."""
    name = plugin_module.__name__
    entries = [
        entry_point("recorder", f"{name}:Recorder", "gradtools", "1.4"),
        entry_point("scaler", f"{name}:Scaler", "hookgrad", "0.1.0"),
        entry_point("broken", "broken_rt_plugin:Plugin", "gradtools", "1.4"),
    ]
    return PluginCatalog(lambda: entries)  # type: ignore[arg-type,return-value]


@pytest.fixture(autouse=True)
def _no_default_runtime() -> Any:
    """Every test starts and ends without a default runtime."""
    yield
    if _DEFAULT.runtime is not None:
        _DEFAULT.runtime.close()


def _isolated(**overrides: Any) -> Runtime:
    return Runtime(overrides, environ={}, catalog=PluginCatalog(tuple))


def _hook_tables_empty() -> bool:
    tables = [
        GLOBAL_HOOKS.forward_pre,
        GLOBAL_HOOKS.forward,
        GLOBAL_HOOKS.backward_pre,
        GLOBAL_HOOKS.backward,
        optim_hooks._optimizer_step_gates,
        optim_hooks._global_optimizer_pre_hooks,
        optim_hooks._global_optimizer_post_hooks,
        BACKWARD_OBSERVERS,
    ]
    return not any(tables)


# ---------------------------------------------------------------------- activation
def test_dict_source_activates_named_plugins_in_config_order(catalog):
    """Only plugins with a table are active, in table order, each with its validated Config."""
    rt = Runtime(
        {"plugins": {"scaler": {"factor": 0.5}, "recorder": {"tag": "a"}}},
        environ={},
        catalog=catalog,
    )
    assert list(rt.plugins) == ["scaler", "recorder"]
    assert rt.plugins["scaler"].config.factor == 0.5
    assert rt.plugin_configs["recorder"].tag == "a"
    rt.close()


def test_toml_file_activates_plugin(tmp_path, catalog):
    """A [plugins.scaler] table in hookgrad.toml activates scaler with its settings."""
    (tmp_path / "hookgrad.toml").write_text("[plugins.scaler]\nfactor = 4.0\n")
    rt = Runtime(cwd=tmp_path, environ={}, catalog=catalog)
    assert rt.config.path == tmp_path / "hookgrad.toml"
    assert rt.plugins["scaler"].config.factor == 4.0
    rt.close()


def test_disable_blocks_a_plugin_enabled_by_table_and_environment(catalog):
    """disable = [...] wins over a table and over HOOKGRAD_PLUGINS."""
    rt = Runtime(
        {"disable": ["scaler"], "plugins": {"scaler": {}}},
        environ={"HOOKGRAD_PLUGINS": "recorder,scaler"},
        catalog=catalog,
    )
    assert list(rt.plugins) == ["recorder"]
    rt.close()


def test_a_name_in_disable_that_matches_nothing_is_an_error(tmp_path, catalog):
    """disable = ["scalr"] names no plugin: a ConfigError with a did-you-mean, not ignored."""
    (tmp_path / "hookgrad.toml").write_text('disable = ["recorder", "scalr"]\n')
    with pytest.raises(ConfigError) as info:
        Runtime(cwd=tmp_path, environ={}, catalog=catalog)
    assert str(info.value) == (
        "hookgrad.toml: unknown plugin 'scalr' in disable; did you mean 'scaler'? "
        "available plugins: broken, recorder, scaler"
    )
    assert (info.value.table, info.value.key) == ("", "disable[1]")


def test_a_disabled_hookgrad_plugins_name_that_matches_nothing_is_an_error(catalog):
    """HOOKGRAD_PLUGINS=scalr is an unknown plugin even when disable lists it too."""
    with pytest.raises(ConfigError, match=r"^HOOKGRAD_PLUGINS: unknown plugin 'scalr'.*'scaler'"):
        Runtime({"disable": ["scalr"]}, environ={"HOOKGRAD_PLUGINS": "scalr"}, catalog=catalog)


def test_a_class_path_name_may_be_disabled(plugin_module, catalog):
    """A table with a class_path gives a name that disable may list."""
    table = {"class_path": f"{plugin_module.__name__}:Recorder"}
    rt = Runtime({"disable": ["mine"], "plugins": {"mine": table}}, environ={}, catalog=catalog)
    assert dict(rt.plugins) == {}
    rt.close()


def test_autoload_off_skips_third_party_plugins_only(catalog):
    """With autoload off a third-party plugin is skipped with a warning; built-ins still load."""
    source = {"plugins": {"recorder": {}, "scaler": {}}}
    environ = {"HOOKGRAD_DISABLE_PLUGIN_AUTOLOAD": "1"}
    with pytest.warns(
        PluginImportWarning, match=r"'recorder'.*autoload is off \(set by env HOOKGRAD_DISABLE"
    ):
        rt = Runtime(source, environ=environ, catalog=catalog)
    assert list(rt.plugins) == ["scaler"]
    rt.close()
    with pytest.raises(PluginLoadError, match="autoload is off"):
        Runtime({**source, "strict": True, "autoload": False}, environ={}, catalog=catalog)


def test_class_path_activates_a_plugin_without_entry_point(plugin_module, catalog):
    """class_path loads a plugin that has no entry point, even with autoload off."""
    table = {"class_path": f"{plugin_module.__name__}:Recorder", "tag": "x"}
    rt = Runtime({"autoload": False, "plugins": {"mine": table}}, environ={}, catalog=catalog)
    assert rt.plugins["mine"].config.tag == "x"
    assert rt.plugin_configs["mine"].class_path == table["class_path"]
    rt.close()


def test_enabled_false_turns_a_plugin_off_without_importing_it(catalog):
    """enabled = false skips the plugin: the broken one is never imported, nothing warns."""
    source = {"plugins": {"broken": {"enabled": False}, "scaler": {"enabled": False}}}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rt = Runtime(source, environ={}, catalog=catalog)
    assert dict(rt.plugins) == {}
    rt.close()


def test_broken_plugin_warns_and_the_others_load(catalog):
    """A plugin that fails to import is skipped with a warning naming its distribution."""
    with pytest.warns(PluginImportWarning, match=r"broken_rt_plugin:Plugin in gradtools 1\.4"):
        rt = Runtime({"plugins": {"broken": {}, "scaler": {}}}, environ={}, catalog=catalog)
    assert list(rt.plugins) == ["scaler"]
    rt.close()


def test_unknown_plugin_lists_the_available_ones(tmp_path, catalog):
    """A table for an uninstalled plugin is a ConfigError naming the file and the plugins."""
    (tmp_path / "hookgrad.toml").write_text("[plugins.scalr]\nfactor = 3.0\n")
    with pytest.raises(
        ConfigError,
        match=r"^hookgrad\.toml: unknown plugin 'scalr' \(\[plugins\.scalr\]\); did you mean "
        r"'scaler'\? available plugins: broken, recorder, scaler",
    ) as info:
        Runtime(cwd=tmp_path, environ={}, catalog=catalog)
    assert (info.value.path, info.value.table, info.value.key) == (
        tmp_path / "hookgrad.toml",
        "plugins",
        "scalr",
    )
    assert info.value.valid_keys == ("broken", "recorder", "scaler")


def test_bad_key_in_a_plugin_table_names_file_table_and_key(tmp_path, catalog):
    """A typo inside [plugins.scaler] fails against the plugin's Config, naming all three."""
    (tmp_path / "hookgrad.toml").write_text("[plugins.scaler]\nfactr = 3.0\n")
    with pytest.raises(
        ConfigError,
        match=r"^hookgrad\.toml: unknown key 'factr' in \[plugins\.scaler\]; did you mean "
        r"'factor'\?",
    ) as info:
        Runtime(cwd=tmp_path, environ={}, catalog=catalog)
    assert (info.value.table, info.value.key) == ("plugins.scaler", "factr")


# ---------------------------------------------------------------------- lifecycle
class _Lifecycle:
    class Config(PluginConfig):
        pass

    def __init__(self, tag: str, calls: list[tuple[str, str]]) -> None:
        self.tag, self.calls = tag, calls

    @hookimpl
    def hookgrad_configure(self, runtime: Runtime) -> None:
        self.calls.append(("configure", self.tag))

    @hookimpl
    def hookgrad_unconfigure(self) -> None:
        self.calls.append(("unconfigure", self.tag))


class _Early(_Lifecycle):
    @hookimpl(tryfirst=True)
    def hookgrad_configure(self, runtime: Runtime) -> None:
        self.calls.append(("configure", self.tag))

    @hookimpl(tryfirst=True)
    def hookgrad_unconfigure(self) -> None:
        self.calls.append(("unconfigure", self.tag))


def test_configure_in_call_order_and_unconfigure_in_reverse():
    """Configure runs tryfirst then registration order; unconfigure the exact reverse."""
    calls: list[tuple[str, str]] = []
    rt = _isolated()
    rt.register(_Lifecycle("first", calls), name="first")
    rt.register(_Lifecycle("second", calls), name="second")
    rt.register(_Early("early", calls), name="early")
    rt.start()
    rt.start()  # idempotent
    rt.close()
    rt.close()  # idempotent
    assert calls == [
        ("configure", "early"),
        ("configure", "first"),
        ("configure", "second"),
        ("unconfigure", "second"),
        ("unconfigure", "first"),
        ("unconfigure", "early"),
    ]
    with pytest.raises(RuntimeError, match="closed"):
        rt.start()


class _Everything:
    """Implements every event hook, returning nothing."""

    class Config(PluginConfig):
        pass

    def __init__(self) -> None:
        self.phases: list[str] = []

    @hookimpl
    def hookgrad_forward_pre(self, event: Any) -> None:
        self.phases.append(event.phase)

    @hookimpl
    def hookgrad_full_backward(self, event: Any) -> None:
        self.phases.append(event.phase)

    @hookimpl
    def hookgrad_backward_begin(self, event: Any) -> None:
        self.phases.append(event.phase)

    @hookimpl
    def hookgrad_backward_end(self, event: Any) -> None:
        self.phases.append(event.phase)

    @hookimpl
    def hookgrad_optimizer_step_pre(self, event: Any) -> None:
        self.phases.append(event.phase)

    @hookimpl
    def hookgrad_optimizer_step_post(self, event: Any) -> None:
        self.phases.append(event.phase)


def test_context_manager_installs_and_then_removes_every_hook():
    """Inside `with` the hooks are installed; on exit every global table is empty again."""
    assert _hook_tables_empty()
    plugin = _Everything()
    rt = _isolated()
    rt.register(plugin, name="everything")
    model = nn.Linear(2, 1)
    opt = optim.SGD(model.parameters(), lr=0.1)
    x = hookgrad.tensor([[1.0, 2.0]], requires_grad=True)
    with rt:
        assert not _hook_tables_empty()
        model(x).sum().backward()
        opt.step()
    assert _hook_tables_empty()
    assert plugin.phases == [
        "forward_pre",
        "backward_begin",
        "backward",
        "backward_end",
        "optimizer_step_pre",
        "optimizer_step_post",
    ]
    model(x).sum().backward()
    assert len(plugin.phases) == 6  # nothing after close
    assert rt.closed


def test_exception_in_the_block_is_logged_then_the_runtime_closes():
    """An exception leaving `with` is written as an error record and the runtime is closed."""
    rt = _isolated(events={"memory": True})
    with pytest.raises(ValueError, match="boom"), rt:
        raise ValueError("boom")
    assert rt.closed and _hook_tables_empty()
    assert rt.memory is not None
    (record,) = rt.memory.records
    assert (record["event"], record["level"], record["error"]) == (
        "exception",
        "error",
        "ValueError('boom')",
    )
    assert "Traceback" in record["exception"]


# ---------------------------------------------------------------------- training loop
class _SeedScaler:
    class Config(PluginConfig):
        factor: float = 2.0

    def __init__(self, config: Config) -> None:
        self.config = config
        self.ended: list[list[float]] = []

    @hookimpl
    def hookgrad_backward_begin(self, event: Any) -> Any:
        if event.gradient is None:
            return hookgrad.full_like(event.loss, self.config.factor)
        return event.gradient * self.config.factor

    @hookimpl
    def hookgrad_backward_end(self, event: Any) -> None:
        self.ended.append(event.loss.detach().numpy().tolist())


def test_backward_begin_replacing_the_seed_doubles_the_gradients():
    """A seed of 2 instead of 1 doubles every gradient; an explicit seed is doubled too."""
    plugin = _SeedScaler(_SeedScaler.Config())
    x = hookgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with _isolated() as rt:
        rt.register(plugin, name="scaler")
        (x * x).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), [4.0, 8.0, 12.0])
        x.grad = None
        (x * 3.0).backward(hookgrad.tensor([1.0, 0.0, 2.0]))
        np.testing.assert_allclose(x.grad.numpy(), [6.0, 0.0, 12.0])
    x.grad = None
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 6.0])


class _SeedWatcher:
    """Notes the seed it is shown, after every other backward_begin implementation."""

    class Config(PluginConfig):
        pass

    def __init__(self) -> None:
        self.seen: list[Any] = []

    @hookimpl(trylast=True)
    def hookgrad_backward_begin(self, event: Any) -> None:
        self.seen.append(None if event.gradient is None else event.gradient.tolist())


def test_backward_begin_replacements_compose_and_later_listeners_see_them():
    """Two seed scalers (2 and 3) make the gradients 6 times larger; a listener after them
    sees the seed as they left it, and its None keeps their replacement."""
    watcher = _SeedWatcher()
    x = hookgrad.tensor([1.0, 2.0], requires_grad=True)
    with _isolated() as rt:
        rt.register(_SeedScaler(_SeedScaler.Config(factor=2.0)), name="double")
        rt.register(_SeedScaler(_SeedScaler.Config(factor=3.0)), name="triple")
        rt.register(watcher, name="watcher")
        (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [12.0, 24.0])
    assert watcher.seen == [6.0]


def test_backward_end_fires_once_per_backward_but_not_for_autograd_grad():
    """backward_end fires after each backward; autograd.grad notifies nobody."""
    plugin = _SeedScaler(_SeedScaler.Config(factor=1.0))
    x = hookgrad.tensor([1.0, 2.0], requires_grad=True)
    with _isolated() as rt:
        rt.register(plugin, name="scaler")
        (x * x).sum().backward()
        (g,) = hookgrad.autograd.grad((x * x).sum(), x)
    assert plugin.ended == [5.0]
    np.testing.assert_allclose(g.numpy(), [2.0, 4.0])


class _Veto:
    class Config(PluginConfig):
        pass

    def __init__(self) -> None:
        self.pre: list[tuple[int, list[str]]] = []
        self.post: list[tuple[int, bool, str | None]] = []

    @hookimpl
    def hookgrad_optimizer_step_pre(self, event: Any) -> Any:
        self.pre.append((event.step, [name for name, _ in event.parameters]))
        return False if event.step == 0 else None

    @hookimpl
    def hookgrad_optimizer_step_post(self, event: Any) -> None:
        self.post.append((event.step, event.skipped, event.vetoed_by))


def test_optimizer_step_pre_veto_skips_the_update_and_the_step_still_advances():
    """A False from step_pre leaves the parameters alone; step counts vetoed steps too."""
    model = nn.Sequential(nn.Linear(2, 1))
    model[0].weight = nn.Parameter(hookgrad.tensor([[1.0, -1.0]]))
    model[0].bias = nn.Parameter(hookgrad.tensor([0.5]))
    opt = optim.SGD(model.parameters(), lr=0.1)
    plugin = _Veto()
    with _isolated() as rt:
        rt.register(plugin, name="veto")
        rt.watch(model)
        model(hookgrad.tensor([[2.0, 3.0]])).sum().backward()  # d/dw = [2, 3], d/db = 1
        opt.step()
        np.testing.assert_allclose(model[0].weight.detach().numpy(), [[1.0, -1.0]])
        assert rt.step == 1
        opt.step()
        np.testing.assert_allclose(model[0].weight.detach().numpy(), [[0.8, -1.3]])
        np.testing.assert_allclose(model[0].bias.detach().numpy(), [0.4])
        assert rt.step == 2
    assert plugin.pre == [(0, ["0.weight", "0.bias"]), (1, ["0.weight", "0.bias"])]
    assert plugin.post == [(0, True, "veto"), (1, False, None)]


class _StepNames:
    """Records the parameter names of its step events; ``pre=False``: post only."""

    class Config(PluginConfig):
        pass

    def __init__(self, pre: bool = True) -> None:
        self.seen: list[tuple[str, list[str]]] = []
        if not pre:
            self.hookgrad_optimizer_step_pre = None

    @hookimpl
    def hookgrad_optimizer_step_pre(self, event: Any) -> None:
        self.seen.append(("pre", [name for name, _ in event.parameters]))

    @hookimpl
    def hookgrad_optimizer_step_post(self, event: Any) -> None:
        self.seen.append(("post", [name for name, _ in event.parameters]))


def test_step_events_carry_the_optimizer_and_logs_leave_it_out():
    """event.optimizer is the optimizer stepping (its state within reach of a plugin); the
    JSON form of the event, which sinks write, does not carry it."""
    seen: list[Any] = []

    class Keeper:
        class Config(PluginConfig):
            pass

        @hookimpl
        def hookgrad_optimizer_step_pre(self, event: Any) -> None:
            seen.append((event.optimizer, event.summary()))

        @hookimpl
        def hookgrad_optimizer_step_post(self, event: Any) -> None:
            seen.append((event.optimizer, event.summary()))

    model = nn.Linear(2, 1)
    opt = optim.SGD(model.parameters(), lr=0.1)
    with _isolated() as rt:
        rt.register(Keeper(), name="keeper")
        rt.watch(model)
        opt.step()
    assert [optimizer for optimizer, _ in seen] == [opt, opt]
    assert all("optimizer" not in summary for _, summary in seen)
    assert [summary["optimizer_type"] for _, summary in seen] == ["SGD", "SGD"]


def test_step_events_carry_each_plugins_own_selection_before_and_after_the_step():
    """Each plugin's selectors pick its parameters once per step, the same for step_pre and
    step_post; a plugin listening to step_post only gets its own selection too."""
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    opt = optim.SGD(model.parameters(), lr=0.1)
    first, second, post_only = _StepNames(), _StepNames(), _StepNames(pre=False)
    with _isolated() as rt:
        rt.register(first, name="first", config={"modules": ["0"]})
        rt.register(second, name="second", config={"modules": ["1"]})
        rt.register(post_only, name="post_only", config={"exclude": ["0"]})
        rt.watch(model)
        model(hookgrad.ones(1, 2)).sum().backward()
        opt.step()
        opt.step()
    assert first.seen == [("pre", ["0.weight", "0.bias"]), ("post", ["0.weight", "0.bias"])] * 2
    assert second.seen == [("pre", ["1.weight", "1.bias"]), ("post", ["1.weight", "1.bias"])] * 2
    assert post_only.seen == [("post", ["1.weight", "1.bias"])] * 2
    alone = _StepNames(pre=False)  # no step_pre listener at all: no gate runs
    with _isolated() as rt:
        rt.register(alone, name="alone", config={"modules": ["0"]})
        rt.watch(model)
        opt.step()
    assert alone.seen == [("post", ["0.weight", "0.bias"])]


def test_parameters_are_named_from_named_parameters_or_by_index():
    """Without a watched model, names come from the optimizer's param_names, else param{i}."""
    model = nn.Linear(2, 1)
    plugin = _Veto()
    with _isolated() as rt:
        rt.register(plugin, name="veto")
        optim.SGD(model.named_parameters(), lr=0.1).step()
        optim.SGD(model.parameters(), lr=0.1).step()
    assert plugin.pre == [(0, ["weight", "bias"]), (1, ["param0", "param1"])]


def test_parameters_are_named_after_the_model_called_before_the_first_step():
    """No module hook, no watch: the model called before the first step names the parameters,
    and the global hooks that spotted it are gone after that step."""
    from hookgrad.nn.modules import module as registry

    model = nn.Sequential(nn.Linear(2, 2), nn.Tanh(), nn.Linear(2, 1))
    plugin = _Veto()
    with _isolated() as rt:
        rt.register(plugin, name="veto")
        opt = optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            nn.MSELoss()(model(hookgrad.ones(3, 2)), hookgrad.zeros(3, 1)).backward()
            opt.step()
        assert not registry._global_forward_pre_hooks and not registry._global_forward_hooks
    names = ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert plugin.pre == [(0, names), (1, names)]


def test_parameter_names_follow_changes_to_the_model():
    """Names are cached across steps but follow a parameter moved to another module."""
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    plugin = _Veto()
    with _isolated() as rt:
        rt.register(plugin, name="veto")
        rt.watch(model)
        opt = optim.SGD(model.parameters(), lr=0.1)
        opt.step()
        shared = model[0].weight
        del model[0].weight  # the first layer's weight now lives in a new module
        model.add_module("extra", nn.Module())
        model.extra.w = shared
        opt.step()
    assert plugin.pre == [
        (0, ["0.weight", "0.bias", "1.weight", "1.bias"]),
        (1, ["extra.w", "0.bias", "1.weight", "1.bias"]),
    ]


def test_names_are_worked_out_once_while_the_model_and_optimizer_stay(monkeypatch):
    """The parameters are named at the first step and reused at the next ones; a group added
    is named again once."""
    from hookgrad.runtime._loop import LoopHooks

    named: list[int] = []
    real = LoopHooks._name

    def counting(self, optimizer):
        named.append(len(optimizer.param_groups))
        return real(self, optimizer)

    monkeypatch.setattr(LoopHooks, "_name", counting)
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    plugin = _Veto()
    with _isolated() as rt:
        rt.register(plugin, name="veto")
        rt.watch(model)
        opt = optim.SGD(model[0].parameters(), lr=0.1)
        for _ in range(5):
            opt.step()
        opt.add_param_group({"params": list(model[1].parameters())})
        for _ in range(5):
            opt.step()
    assert named == [1, 2]
    assert plugin.pre[-1] == (9, ["0.weight", "0.bias", "1.weight", "1.bias"])


def test_names_follow_the_optimizers_parameter_lists_between_steps():
    """The names kept from the last step follow a group added, a parameter swapped in a
    group's list and one replaced in its module."""
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    plugin = _Veto()
    with _isolated() as rt:
        rt.register(plugin, name="veto")
        rt.watch(model)
        opt = optim.SGD(model[0].parameters(), lr=0.1)
        opt.step()
        opt.add_param_group({"params": [model[1].weight]})
        opt.step()
        opt.param_groups[1]["params"][0] = model[1].bias
        opt.step()
        model[0].weight = nn.Parameter(hookgrad.zeros(2, 2))  # the optimizer keeps the old one
        opt.step()
    assert plugin.pre == [
        (0, ["0.weight", "0.bias"]),
        (1, ["0.weight", "0.bias", "1.weight"]),
        (2, ["0.weight", "0.bias", "1.bias"]),
        (3, ["param0", "0.bias", "1.bias"]),
    ]


def test_a_model_watched_after_some_steps_names_its_parameters_from_then_on():
    """The owner table is rebuilt when a naming root is added (or dies), not every step."""
    first, second = nn.Linear(2, 1), nn.Sequential(nn.Linear(2, 1))
    plugin = _Veto()
    with _isolated() as rt:
        rt.register(plugin, name="veto")
        rt.watch(first)
        opt = optim.SGD([*first.parameters(), *second.parameters()], lr=0.1)
        opt.step()
        rt.watch(second)
        opt.step()
        del first
        gc.collect()
        opt.step()
    assert plugin.pre == [
        (0, ["weight", "bias", "param2", "param3"]),
        (1, ["weight", "bias", "0.weight", "0.bias"]),
        (2, ["param0", "param1", "0.weight", "0.bias"]),
    ]


class _Faulty:
    class Config(PluginConfig):
        pass

    def __init__(self, config: Config) -> None:
        self.config = config

    @hookimpl
    def hookgrad_forward(self, event: Any) -> None:
        raise ValueError("bad forward")

    @hookimpl
    def hookgrad_backward_end(self, event: Any) -> None:
        raise ZeroDivisionError("bad end")


def test_a_warn_plugin_error_is_written_to_the_jsonl_sink(tmp_path):
    """on_error="warn": training goes on and events.jsonl keeps one error record per raise."""
    path = tmp_path / "logs" / "events.jsonl"
    x = hookgrad.tensor([[1.0, 2.0]])
    model = nn.Linear(2, 1)
    with _isolated(events={"jsonl": str(path)}) as rt:
        rt.register(_Faulty(_Faulty.Config(on_error="warn")), name="faulty")
        with pytest.warns(PluginHookWarning):
            model(x).sum().backward()
    assert model.weight.grad is not None
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["event"], r["level"], r["plugin"], r["hook"], r["phase"]) for r in records] == [
        ("plugin_error", "error", "faulty", "hookgrad_forward", "forward"),
        ("plugin_error", "error", "faulty", "hookgrad_backward_end", "backward_end"),
    ]
    assert records[1]["error"] == "ZeroDivisionError('bad end')"


def test_emit_writes_a_plugin_record_stamped_with_the_step_and_rank():
    """runtime.emit validates a PluginRecord-shaped dict and writes its JSON form, with the
    runtime's step and rank (0 outside a distributed run)."""
    with _isolated(events={"memory": True}) as rt:
        rt.emit({"plugin": "grad_clip", "kind": "clip", "data": {"pre_norm": 3.0}})
    assert rt.memory is not None
    assert rt.memory.records == [
        {
            "plugin": "grad_clip",
            "kind": "clip",
            "step": 0,
            "module_name": None,
            "data": {"pre_norm": 3.0},
            "rank": 0,
        }
    ]


@pytest.mark.parametrize("given", ["dict", "trusted", "model"])
def test_every_record_carries_the_rank_of_its_writer(
    given: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under torchrun's RANK=3 WORLD_SIZE=4 a record says rank 3, however emitted and whatever
    rank the plugin put in it."""
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    record = {"plugin": "p", "kind": "k", "step": 1, "module_name": None, "data": {}, "rank": 0}
    with _isolated(events={"memory": True}) as rt:
        if given == "model":
            rt.emit(PluginRecord.model_validate(record))
        else:
            rt.emit(record, trusted=given == "trusted")
    assert rt.memory is not None
    assert rt.memory.records == [{**record, "rank": 3}]


def test_trusted_emit_writes_the_record_as_given(tmp_path):
    """trusted=True skips validation: the sinks get the caller's record plus its rank (a
    JSON-form record passes unchanged; a bad one is not caught by emit but by the JSON sink)."""
    path = tmp_path / "events.jsonl"
    record = {"plugin": "p", "kind": "k", "step": 7, "module_name": "0", "data": {"x": 1.5}}
    with _isolated(events={"memory": True, "jsonl": str(path)}) as rt:
        rt.emit(record, trusted=True)
        with pytest.raises(ValidationError):
            rt.emit({**record, "data": {"x": object()}})
        with pytest.warns(SinkWarning, match="data.x"):
            rt.emit({**record, "data": {"x": object()}}, trusted=True)
    assert rt.memory is not None
    written = {**record, "rank": 0}
    assert rt.memory.records[0] == written and len(rt.memory.records) == 2
    assert [json.loads(line) for line in path.read_text().splitlines()] == [written]


# ---------------------------------------------------------------------- the default runtime
def test_configure_replaces_the_previous_default_runtime(plugin_module):
    """hookgrad.configure closes the previous default runtime (unconfiguring its plugins)."""
    table = {"class_path": f"{plugin_module.__name__}:Recorder"}
    first = hookgrad.configure({"plugins": {"mine": {**table, "tag": "1"}}})
    second = hookgrad.configure({"plugins": {"mine": {**table, "tag": "2"}}})
    assert first.closed and second.started and _DEFAULT.runtime is second
    assert plugin_module.CALLS == [("configure", "1"), ("unconfigure", "1"), ("configure", "2")]
    with hookgrad.configure({}, log_level="info") as third:
        assert second.closed and third.config.config.log_level == "info"
    assert _DEFAULT.runtime is None and _hook_tables_empty()


def test_a_failing_configure_keeps_the_previous_default_runtime():
    """If the new config is bad, the running default runtime is left as it was."""
    first = hookgrad.configure({})
    with pytest.raises(ConfigError, match="autoload"):
        hookgrad.configure({}, autoload="yes")
    assert first.started and _DEFAULT.runtime is first


def test_import_hookgrad_does_not_import_the_runtime():
    """import hookgrad leaves hookgrad.runtime unimported; hookgrad.Runtime imports it."""
    probe = (
        "import sys, hookgrad; a = 'hookgrad.runtime' in sys.modules; hookgrad.Runtime; "
        "print(a, 'hookgrad.runtime' in sys.modules, 'hookgrad.hookspecs' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["False", "True", "True"]
